"""Does the agent learn to use its tool? SmolLM2-135M-Instruct multiplying two 5-digit numbers with a
sandboxed Python tool, GRPO on CPU, after an SFT warm-up on the scripted tool user (policy: tool).

Runs the CPU example (examples/smollm2-135M-agentic_cpu/agent_val_tool_use.yaml) through the real
launcher, then reads the run's metrics.jsonl and prints, at every validation (step 0 is before the
warm-up, step 1 after it), the agent's success and tool-use rate with the tool beside its success on
the same validation tasks with no tool (the NoToolMultiplyCPU tag: same tasks, because the example sets
val_env_manager.seeds_per_tag). Extra arguments are Hydra overrides:

    python benchmarks/learning_tool_use.py max_steps=20 eval_steps=5
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIG = ("examples/smollm2-135M-agentic_cpu", "agent_val_tool_use")
TOOL_TAG, BASELINE_TAG = "ToolMultiplyCPU", "NoToolMultiplyCPU"
COLUMNS = (("success", TOOL_TAG, "success"), ("used tool", TOOL_TAG, "used_tool"),
           ("tool errors", TOOL_TAG, "tool_errors"), ("valid", TOOL_TAG, "action_is_valid"),
           ("no-tool succ", BASELINE_TAG, "success"), ("no-tool valid", BASELINE_TAG, "action_is_valid"))


def read_validations(metrics_file: Path) -> list[dict]:
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    return [r for r in rows if any(k.startswith("val/env/") for k in r)]


def validation_table(rows: list[dict]) -> str:
    """One line per validation: with the tool (success, share of episodes that called it, tool runs
    that failed per episode, valid turns) beside the no-tool baseline on the same tasks."""
    lines = [f"{'before step':>11} " + " ".join(f"{label:>14}" for label, _, _ in COLUMNS)]
    for row in rows:
        values = [row.get(f"val/env/{tag}/{metric}", float("nan")) for _, tag, metric in COLUMNS]
        lines.append(f"{row['step']:>11} " + " ".join(f"{v:>14.3f}" for v in values))
    return "\n".join(lines)


def logging_dir(overrides: list[str], exp: str) -> Path:
    given = [o.split("=", 1)[1] for o in overrides if o.startswith("logging_dir=")]
    return Path(given[-1]) if given else ROOT / "output" / exp / "logs"


def main(overrides: list[str]) -> int:
    from benchmarks.train_throughput import matmul_flops
    from roll.launch.cli import main as launch

    gflops = matmul_flops() / 1e9  # the machine's speed beside the wall time (shared cores vary)
    exp = f"learning_tool_use_{int(time.time())}"
    overrides = [f"exp_name={exp}", *overrides]
    start = time.time()
    code = launch(["--config-path", CONFIG[0], "--config-name", CONFIG[1], *overrides],
                  default_pipeline="roll.pipeline.agentic.agentic_pipeline.AgenticPipeline")
    minutes = (time.time() - start) / 60
    if code:
        return code
    rows = read_validations(logging_dir(overrides, exp) / "metrics.jsonl")
    print(f"\n{CONFIG[0]} ({CONFIG[1]}), GRPO, CPU: {minutes:.1f} min, "
          f"matmul {gflops:.0f} GFLOP/s fp32 at start, overrides {overrides}")
    print(f"with the tool: {TOOL_TAG}; no-tool baseline on the same tasks: {BASELINE_TAG}")
    print(validation_table(rows))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sys.exit(main(sys.argv[1:]))
