"""GRPO (trajectory-wise) against GiGPO (step-wise) on the same env, model, seeds and step budget, on CPU.

Runs the CPU example (examples/smollm2-135M-agentic_cpu, SmolLM2-135M-Instruct on non-slippery 4x4
FrozenLake, with its SFT warm-up) twice through the real launcher:

- grpo:  the example as it is (TrajEnvManager, one sample per episode, adv_estimator: grpo);
- gigpo: the same run with StepEnvManager (one sample per turn, the last `history_length` turns in
  each prompt) and adv_estimator: gigpo, batch_adjust_mode: copy.

Both use the same seed, so the warm-up, the training seeds and the validation episodes are the same.
Then it prints validation success and action validity at each validation, side by side, with each
run's wall-clock minutes. Extra arguments are Hydra overrides given to both runs:

    python benchmarks/learning_gigpo.py max_steps=20 eval_steps=5

Wall-clock time depends on the machine's load: say the matmul rate (printed first) beside any time.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.train_throughput import matmul_flops  # noqa: E402

CONFIG = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
TAG = "FrozenLakeCPU"
STEP_MANAGER = "roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager"
VARIANTS = {
    "grpo": [],
    "gigpo": ["adv_estimator=gigpo", f"custom_envs.{TAG}.env_manager_cls={STEP_MANAGER}",
              f"++custom_envs.{TAG}.history_length=2", "batch_adjust_mode=copy", "step_reward_gamma=0.95"],
}


def validations(metrics_file: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    return {r["step"]: r for r in rows if any(k.startswith("val/") for k in r)}


def mean_of(row: dict | None, suffix: str) -> float:
    if row is None:
        return float("nan")
    values = [v for k, v in row.items() if k.startswith("val/env/") and k.endswith(suffix)]
    return sum(values) / len(values) if values else float("nan")


def blind_of(row: dict | None, baseline: str) -> float:
    if row is None:
        return float("nan")
    values = [v for k, v in row.items() if k.startswith("val/blind/") and k.endswith("/" + baseline)]
    return sum(values) / len(values) if values else float("nan")


def run(variant: str, overrides: list[str]) -> tuple[dict[int, dict], float]:
    from roll.launch.cli import main as launch

    exp = f"learning_{variant}_{int(time.time())}"
    start = time.time()
    code = launch(["--config-path", CONFIG[0], "--config-name", CONFIG[1], f"exp_name={exp}",
                   *VARIANTS[variant], *overrides],
                  default_pipeline="roll.pipeline.agentic.agentic_pipeline.AgenticPipeline")
    if code:
        raise SystemExit(f"the {variant} run failed (exit {code})")
    return validations(ROOT / "output" / exp / "logs" / "metrics.jsonl"), (time.time() - start) / 60


def main(overrides: list[str]) -> int:
    print(f"matmul 2048x2048 fp32: {matmul_flops() / 1e9:.1f} GFLOP/s")
    results = {variant: run(variant, overrides) for variant in VARIANTS}
    steps = sorted({s for rows, _ in results.values() for s in rows})
    print(f"\nFrozenLake 4x4 (non-slippery), SmolLM2-135M-Instruct, CPU, overrides {overrides}")
    print("  ".join(f"{v}: {minutes:.1f} min" for v, (_, minutes) in results.items()))
    # The map-blind baselines are measured on the validation maps, which both runs share (same seed).
    header = f"{'before step':>12}" + "".join(f" {v + ' success':>14} {v + ' valid':>12}" for v in VARIANTS)
    print(header + f" {'fixed seq':>10} {'biased rand':>12}")
    for step in steps:
        rows_at = [rows.get(step) for rows, _ in results.values()]
        cells = "".join(f" {mean_of(row, '/success'):>14.3f} {mean_of(row, '/action_is_valid'):>12.3f}"
                        for row in rows_at)
        blind = next((row for row in rows_at if row is not None), None)
        print(f"{step:>12}{cells} {blind_of(blind, 'fixed_sequence'):>10.3f} {blind_of(blind, 'biased_random'):>12.3f}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sys.exit(main(sys.argv[1:]))
