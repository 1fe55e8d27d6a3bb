"""Does the agent get better? SmolLM2-135M-Instruct on non-slippery 4x4 FrozenLake, GRPO, on CPU.

Runs the CPU example (examples/smollm2-135M-agentic_cpu) through the real launcher, then reads the
run's metrics.jsonl and prints validation success and action validity at step 0 (before any RL, after
the SFT warm-up) and at every validation, each beside the map-blind baselines measured on the same
validation maps in the same run (val/blind/*: the best fixed move sequence, the best biased random
policy, uniform random moves; see roll/agentic/env/map_blind.py), and the share of the maps the agent
solved on which the best fixed sequence fails ("beyond seq") and the largest share of them one fixed
sequence, any, also solves ("one seq": at 1.0 they need no reading); and, at the turns where one move
loses the map and another does not, the share of the agent's moves that lost it ("losing moves")
beside the share its own move mix would lose without reading ("by mix"). Extra arguments are Hydra
overrides:

    python benchmarks/learning_frozen_lake.py max_steps=40 eval_steps=5

Any config of the CPU example's shape works, e.g. a Sokoban run: --config-name NAME as first arguments.
To go on with a run: the same arguments with exp_name=<its name> resume_from_checkpoint=true and a
larger max_steps.
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


COLUMNS = (("val success", "val/env/{tag}/success"), ("action valid", "val/env/{tag}/action_is_valid"),
           ("fixed seq", "val/blind/{tag}/fixed_sequence"), ("biased rand", "val/blind/{tag}/biased_random"),
           ("uniform", "val/blind/{tag}/uniform_random"), ("beyond seq", "val/blind/{tag}/agent_solved_beyond_sequence"),
           ("one seq", "val/blind/{tag}/agent_solved_by_one_sequence"),
           ("losing moves", "val/blind/{tag}/agent_losing_moves"), ("by mix", "val/blind/{tag}/losing_moves_by_move_mix"))


def validation_table(rows: list[dict]) -> str:
    """One line per validation and env tag: the agent's numbers beside the map-blind baselines."""
    tags = sorted({k.split("/")[2] for r in rows for k in r if k.startswith("val/env/") and k.endswith("/success")})
    lines = [f"{'before step':>11} {'tag':>14} " + " ".join(f"{label:>12}" for label, _ in COLUMNS)]
    for row in rows:
        for tag in tags:
            values = [row.get(key.format(tag=tag), float("nan")) for _, key in COLUMNS]
            lines.append(f"{row['step']:>11} {tag:>14} " + " ".join(f"{v:>12.3f}" for v in values))
    return "\n".join(lines)


def mean_of(row: dict, suffix: str) -> float:
    values = [v for k, v in row.items() if k.startswith("val/env/") and k.endswith(suffix)]
    return sum(values) / len(values) if values else float("nan")


def main(overrides: list[str]) -> int:
    from roll.launch.cli import main as launch

    config_name = CONFIG[1]
    if overrides[:1] == ["--config-name"]:
        config_name, overrides = overrides[1], overrides[2:]

    from benchmarks.train_throughput import matmul_flops

    gflops = matmul_flops() / 1e9  # the machine's speed beside the wall time (shared cores vary)
    # A run of its own under output/, unless exp_name is given (with resume_from_checkpoint=true it
    # continues that run: its metrics.jsonl keeps the earlier validations, so the table shows them all).
    named = [o.split("=", 1)[1] for o in overrides if o.startswith("exp_name=")]
    exp = named[-1] if named else f"learning_frozen_lake_{int(time.time())}"
    overrides = [f"exp_name={exp}", *(o for o in overrides if not o.startswith("exp_name="))]
    start = time.time()
    code = launch(["--config-path", CONFIG[0], "--config-name", config_name, *overrides],
                  default_pipeline="roll.pipeline.agentic.agentic_pipeline.AgenticPipeline")
    minutes = (time.time() - start) / 60
    if code:
        return code
    metrics_file = ROOT / "output" / exp / "logs" / "metrics.jsonl"
    rows = read_validations(metrics_file)
    estimator = ([o.split("=", 1)[1] for o in overrides if o.startswith("adv_estimator=")] or ["the config's estimator"])[-1]
    print(f"\n{CONFIG[0]} ({config_name}), {estimator}, CPU: {minutes:.1f} min, "
          f"matmul {gflops:.0f} GFLOP/s fp32 at start, overrides {overrides}")
    print(validation_table(rows))
    if len(rows) >= 2:
        gain = mean_of(rows[-1], "/success") - mean_of(rows[0], "/success")
        print(f"val success change: {gain * 100:+.1f} points")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sys.exit(main(sys.argv[1:]))
