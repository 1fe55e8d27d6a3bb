"""Synchronous vs asynchronous training (async_generation_ratio 0 vs 1): the same config, the same
number of steps and samples, one after the other in one run; wall time, validation success, and where
each side waited.

    .venv/bin/python benchmarks/async_speedup.py [--steps 4 --pretrain tiny-random-qwen2]

Each side is a real launcher run (`examples/start_agentic_pipeline.py`, a real Ray) of the CPU
FrozenLake example, shortened: no SFT warm-up, 16 trajectories per step and per validation (extra
overrides after the options apply to both runs). Columns: the run's wall time (launch to exit, so worker start-up is included),
the sum over steps of the step time, the rollout and train phases, the trainer's wait for batches and
the rollout's wait for weights (async only), the largest sample staleness, and the last validation's
success. On a machine whose cores both sides share, overlap can only fill the gaps where one side
idles; the two wait columns say where that was. The machine's fp32 matmul rate is printed beside the
times, because they depend on the load of the moment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.train_throughput import matmul_flops  # noqa: E402
CONFIG = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


def run(work: Path, name: str, ratio: int, steps: int, pretrain: str, extra: list[str]) -> dict[str, float]:
    out = work / name
    args = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", CONFIG[0], "--config-name", CONFIG[1],
            f"pretrain={pretrain}", f"max_steps={steps}", f"eval_steps={steps}", f"async_generation_ratio={ratio}",
            f"output_dir={out}", f"logging_dir={out / 'logs'}", "save_steps=1000", "report.write_report=false",
            "sft_warmup.steps=0", "rollout_batch_size=16", "val_batch_size=16", *extra]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / f"ray_{name}"),
           "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{name} run failed:\n{(result.stdout + result.stderr)[-3000:]}")
    logged = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [m for m in logged if "actor/pg_loss" in m]
    val = [m for m in logged if any(k.endswith("/success") and k.startswith("val/") for k in m)]
    total = lambda key: sum(m.get(key, 0.0) for m in train)  # noqa: E731
    success = [v for k, v in val[-1].items() if k.startswith("val/") and k.endswith("/success")] if val else []
    return {
        "wall s": wall, "steps s": total("time/step_total"), "rollout s": total("time/step_rollout"),
        "train s": total("time/step_train"), "trainer waited s": total("time/trainer_wait_rollout"),
        "rollout waited s": total("time/rollout_wait_weights"),
        "max staleness": max((m.get("async/staleness_max", 0.0) for m in train), default=0.0),
        "samples": total("system/samples"), "val success": sum(success) / len(success) if success else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--pretrain", default="tiny-random-qwen2")
    parser.add_argument("overrides", nargs="*", help="extra config overrides for both runs (key=value)")
    args = parser.parse_args()
    print(f"fp32 matmul 2048²: {matmul_flops() / 1e9:.1f} GFLOP/s (before)")
    with tempfile.TemporaryDirectory(prefix="asyncb", dir="/tmp") as tmp:  # Ray's socket paths must stay short
        results = {name: run(Path(tmp), name, ratio, args.steps, args.pretrain, args.overrides)
                   for name, ratio in (("sync", 0), ("async", 1))}
    print(f"fp32 matmul 2048²: {matmul_flops() / 1e9:.1f} GFLOP/s (after)")
    columns = list(results["sync"])
    print("| run | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, row in results.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:.2f}" for c in columns) + " |")
    print(f"async / sync wall time: {results['async']['wall s'] / results['sync']['wall s']:.2f}, "
          f"step time: {results['async']['steps s'] / max(results['sync']['steps s'], 1e-9):.2f}")


if __name__ == "__main__":
    main()
