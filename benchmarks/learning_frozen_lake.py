"""Does the agent get better? SmolLM2-135M-Instruct on non-slippery 4x4 FrozenLake, GRPO, on CPU.

Runs the CPU example (examples/smollm2-135M-agentic_cpu) through the real launcher, then reads the
run's metrics.jsonl and prints validation success and action validity at step 0 (before any RL, after
the SFT warm-up) and at every validation. Extra arguments are Hydra overrides:

    python benchmarks/learning_frozen_lake.py max_steps=40 eval_steps=5
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIG = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


def read_validations(metrics_file: Path) -> list[dict]:
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    return [r for r in rows if any(k.startswith("val/") for k in r)]


def mean_of(row: dict, suffix: str) -> float:
    values = [v for k, v in row.items() if k.startswith("val/env/") and k.endswith(suffix)]
    return sum(values) / len(values) if values else float("nan")


def main(overrides: list[str]) -> int:
    from roll.launch import main as launch

    exp = f"learning_frozen_lake_{int(time.time())}"
    overrides = [f"exp_name={exp}", *overrides]
    start = time.time()
    code = launch(["--config-path", CONFIG[0], "--config-name", CONFIG[1], *overrides],
                  default_pipeline="roll.pipeline.agentic.agentic_pipeline.AgenticPipeline")
    minutes = (time.time() - start) / 60
    if code:
        return code
    metrics_file = ROOT / "output" / exp / "logs" / "metrics.jsonl"
    rows = read_validations(metrics_file)
    print(f"\nFrozenLake 4x4 (non-slippery), SmolLM2-135M-Instruct, GRPO, CPU: {minutes:.1f} min, overrides {overrides}")
    print(f"{'before step':>12} {'val success':>12} {'action valid':>13} {'val score':>10}")
    for row in rows:
        print(f"{row['step']:>12} {mean_of(row, '/success'):>12.3f} {mean_of(row, '/action_is_valid'):>13.3f} {row.get('val/score/mean', float('nan')):>10.3f}")
    if len(rows) >= 2:
        gain = mean_of(rows[-1], "/success") - mean_of(rows[0], "/success")
        print(f"val success change: {gain * 100:+.1f} points")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sys.exit(main(sys.argv[1:]))
