"""Soak: many training steps of the CPU example, printing each role's resident memory after every step
and its growth per step, so a leak shows as a slope rather than as a crash at step 200.

    .venv/bin/python benchmarks/soak.py --steps 10                  # tiny random model (default), minutes
    .venv/bin/python benchmarks/soak.py --embedded --steps 50       # SmolLM2-135M, hours on 2 cores

Runs single-node (it reads /proc of each worker's pid). Resident size is sampled right after each
step's metrics are logged: actor_train, actor_infer, the env workers (summed) and this driver; each
step's line is printed (and flushed) as soon as it is sampled, so a run that dies still shows its
curve, and the table is printed again at the end. The growth is the slope of a least-squares line
through the second half of the steps (the first steps include one-off allocations: caches, optimizer
state, the decode engine's KV slots being used for the first time, up to its fixed budget).
Extra Hydra overrides follow `--`: `benchmarks/soak.py --steps 5 -- sequence_length=768`.
`--example-sizes` keeps the CPU example's own batch, episode and sequence sizes (32 episodes of up to
10 turns, 2k-token micro-batches) and only turns off validation, warm-up and checkpoints: the run whose
training and inference workers must each stay under 4 GB. The last line gives each role's peak
resident size over the whole run (VmHWM of its largest process), which falls between two samples.
`--json PATH` also writes the table ({"roles": [...], "rows": [{role: MB}, ...], "anon_rows": [...],
"peaks": {role: MB}}, one row per step; anon_rows count only anonymous pages, the process's own heap and stacks, without the
shared libraries and Ray object-store pages it maps), which tests/pipeline/test_soak.py reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from roll.launch.cli import init_ray  # noqa: E402
from roll.utils.memory import resident_bytes  # noqa: E402

MB = 2**20


def small_run_overrides(steps: int, work: Path, embedded: bool, example_sizes: bool = False) -> list[str]:
    """The CPU example cut to a short step: 8 episodes of 3 turns, no validation, no SFT warm-up
    (with `example_sizes`, only the validation, warm-up and checkpoints are cut)."""
    values = {
        "exp_name": "soak", "max_steps": steps, "save_steps": 10_000, "eval_steps": 0, "sft_warmup.steps": 0,
        "output_dir": work / "out", "logging_dir": work / "logs", "track_with": "stdout",
    }
    if not example_sizes:
        values.update(small_step_sizes())
    if not embedded:
        values["pretrain"] = "tiny-random-qwen2"
    return [f"{k}={v}" for k, v in values.items()]


def small_step_sizes() -> dict[str, int]:
    return {
        "rollout_batch_size": 8, "sequence_length": 512, "train_env_manager.num_env_groups": 2,
        "train_env_manager.group_size": 4, "custom_envs.FrozenLakeCPU.max_steps": 3,
        "custom_envs.FrozenLakeCPU.max_tokens_per_step": 8, "actor_infer.generating_args.max_new_tokens": 8,
        "actor_train.training_args.per_device_train_batch_size": 4,
        "actor_train.training_args.gradient_accumulation_steps": 2,
    }


def status_bytes(pid: int, field: str) -> int:
    """A size line of /proc/<pid>/status in bytes: RssAnon (resident private memory: heap, stacks) or
    VmHWM (the most it has been resident at any moment)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(f"{field}:"))


def slope(values: list[float]) -> float:
    """Least-squares growth per step of the second half of `values`."""
    tail = values[len(values) // 2:]
    if len(tail) < 2:
        return float("nan")
    n = len(tail)
    mean_x, mean_y = (n - 1) / 2, sum(tail) / n
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(tail))
    return num / sum((i - mean_x) ** 2 for i in range(n))


def role_pids(pipeline) -> dict[str, list[int]]:
    import ray

    def pids(cluster) -> list[int]:
        return ray.get([h.__ray_call__.remote(lambda host: os.getpid()) for h in cluster.hosts])

    return {"actor_train": pids(pipeline.actor_train), "actor_infer": pids(pipeline.actor_infer),
            "env_workers": list(pipeline.train_rollout.pool.pids), "driver": [os.getpid()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--embedded", action="store_true", help="SmolLM2-135M-Instruct instead of the tiny random model")
    parser.add_argument("--no-trim", action="store_true", help="workers keep freed heap memory (ROLL_MALLOC_TRIM=0), "
                                                               "to compare with the default")
    parser.add_argument("--example-sizes", action="store_true", help="the CPU example's own step sizes")
    parser.add_argument("--json", type=Path, help="also write the per-step table to this file")
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]

    from roll.launch.runtime_checks import check_runnable
    from roll.launch.loader import load_agentic_config
    from roll.pipeline.agentic.agentic_pipeline import AgenticPipeline

    work = Path(tempfile.mkdtemp(prefix="soak", dir="/tmp"))
    config = load_agentic_config(REPO_ROOT / "examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                                 [*small_run_overrides(args.steps, work, args.embedded, args.example_sizes), *extra,
                                  *(["system_envs.ROLL_MALLOC_TRIM='0'"] if args.no_trim else [])])
    check_runnable(config)
    os.environ.setdefault("ROLL_RAY_TEMP_DIR", str(work / "ray"))
    init_ray(config.system_envs)
    pipeline = AgenticPipeline(config)
    pids = role_pids(pipeline)
    rows: list[dict[str, float]] = []
    anon_rows: list[dict[str, float]] = []
    peaks = {role: 0.0 for role in pids}
    log_step = pipeline.tracker.log

    def log_and_sample(metrics: dict, step: int) -> None:
        log_step(metrics, step)
        if step <= config.max_steps:  # not the final validation's row
            rows.append({role: sum(resident_bytes(p) for p in ps) / MB for role, ps in pids.items()})
            anon_rows.append({role: sum(status_bytes(p, "RssAnon") for p in ps) / MB for role, ps in pids.items()})
            # read while the workers live (a finished run's exited processes have no memory lines)
            peaks.update({role: max(peaks[role], *(status_bytes(p, "VmHWM") / MB for p in ps)) for role, ps in pids.items()})
            print(f"soak step {step}: resident MB " + ", ".join(f"{r} {v:.0f}" for r, v in rows[-1].items()),
                  flush=True)

    pipeline.tracker.log = log_and_sample  # sample right after each step's metrics
    try:
        pipeline.run()
    finally:
        import ray

        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    roles = list(pids)
    if args.json is not None:
        args.json.write_text(json.dumps({"roles": roles, "rows": rows, "anon_rows": anon_rows, "peaks": peaks}))
    print(f"\nresident memory (MB) per step, {'SmolLM2-135M' if args.embedded else 'tiny random model'}, "
          f"{os.cpu_count()} cores (shared), malloc_trim {'off' if args.no_trim else 'on'}")
    print("step  " + "  ".join(f"{r:>12}" for r in roles))
    for step, row in enumerate(rows, start=1):
        print(f"{step:>4}  " + "  ".join(f"{row[r]:>12.0f}" for r in roles))
    print("MB/step" + "  ".join(f"{slope([row[r] for row in rows]):>12.2f}" for r in roles)[1:]
          + "   (slope over the second half of the steps)")
    print("peak   " + "  ".join(f"{peaks[r]:>12.0f}" for r in roles)[1:] + "   (VmHWM of the role's largest process)")


if __name__ == "__main__":
    main()
