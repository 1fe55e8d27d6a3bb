"""Does a user's own agent learn? The agent in examples/agents/grid_agent.py (the official `openai` client
with a `move` tool, no roll imports) trained with GRPO on the embedded SmolLM2-135M-Instruct, on CPU.

Runs examples/agents/agent_grid.yaml through the real launcher, then prints the agent's validation success
at every validation (before step 1 is the untrained model), with the share of its moves that go toward
the goal, beside the random-move baseline: the same
agent code, on the same validation seeds, talking to a roll OpenAI server whose policy answers every call
with a `move` tool call in a uniformly random direction (8 plays per seed), and the best of the four
policies that make the same move every turn. Neither reads the board. Extra arguments are Hydra overrides:

    python benchmarks/learning_grid_agent.py max_steps=10 eval_steps=5
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.agents.grid_agent import MOVES  # noqa: E402
from roll.viewer.records import trajectory_file  # noqa: E402

CONFIG = ("examples/agents", "agent_grid")
TAG = "GridAgent"
RANDOM_PLAYS_PER_SEED = 8
# every validation episode is saved, so the baseline reads the seeds the agent was validated on
SAVE_ALL_VAL = "report.val_trajectories=100000"
MOVE_CALL = '<tool_call>\n{{"name": "move", "arguments": {{"direction": "{answer}"}}}}\n</tool_call>'


class MoveAnswers:
    """An engine for roll's OpenAI server: each call answered by roll's random proxy with a `move` tool call
    in a direction drawn from `directions` (one direction: a policy that always makes that move)."""

    def __init__(self, tokenizer, directions: list[str], seed: int) -> None:
        from roll.pipeline.agentic.llm_proxy.random_proxy import RandomProxy

        self.proxy = RandomProxy(tokenizer, answers=directions, template=MOVE_CALL, seed=seed)

    def generate(self, requests):
        return [self.proxy.generate(request) for request in requests]


def moves_success(seeds: list[int], tokenizer, env_config: SimpleNamespace, directions: list[str],
                  plays: int) -> float:
    """Mean success of the agent's own code on `seeds` when every reply is a move drawn from `directions`."""
    from examples.agents.grid_agent import GridAgent
    from roll.pipeline.agentic.llm_proxy.openai_server import OpenAIServer

    server = OpenAIServer(tokenizer, engine=MoveAnswers(tokenizer, directions, seed=0)).start()
    try:
        wins = [GridAgent().run_episode(seed, server.base_url, env_config)["metrics"]["success"]
                for _ in range(plays) for seed in seeds]
    finally:
        server.stop()
    return sum(wins) / len(wins)


def random_move_success(seeds: list[int], tokenizer, env_config: SimpleNamespace,
                        plays: int = RANDOM_PLAYS_PER_SEED) -> float:
    """Random moves: a policy that never reads the board."""
    return moves_success(seeds, tokenizer, env_config, list(MOVES), plays)


def best_fixed_move_success(seeds: list[int], tokenizer, env_config: SimpleNamespace) -> tuple[str, float]:
    """The best of the four policies that always make the same move (blind too; deterministic, one play)."""
    scores = {d: moves_success(seeds, tokenizer, env_config, [d], plays=1) for d in MOVES}
    best = max(scores, key=scores.get)
    return best, scores[best]


def read_validations(logs: Path) -> list[dict]:
    rows = [json.loads(line) for line in (logs / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if f"val/env/{TAG}/success" in r]


def moves_toward_goal(rows: list[dict]) -> float:
    """Of the `move` calls in saved validation episodes (one row per sample; an episode's samples share its
    traj_id and its whole chat is on each), the share whose direction the preceding hint line names
    (`G is 2 Down and 1 Right.`): about chance for a policy that ignores it. NaN without calls."""
    chats = {row["traj_id"]: row["messages"] for row in rows}
    toward = total = 0
    for messages in chats.values():
        hint = ""
        for message in messages:
            if message["role"] in ("user", "tool") and "G is " in message["content"]:
                hint = message["content"].rsplit("G is ", 1)[1]
            for call in message.get("tool_calls") or []:
                arguments = call["function"]["arguments"]
                direction = (json.loads(arguments) if isinstance(arguments, str) else arguments).get("direction")
                total += 1
                toward += direction in MOVES and direction in hint
    return toward / total if total else float("nan")


def validation_seeds(logs: Path) -> list[int]:
    first = sorted((logs / "trajectories").glob("val_*.json"))[0]
    return sorted({row["env_seed"] for row in json.loads(first.read_text())})


def logging_dir(overrides: list[str], exp: str) -> Path:
    given = [o.split("=", 1)[1] for o in overrides if o.startswith("logging_dir=")]
    return Path(given[-1]) if given else ROOT / "output" / exp / "logs"


def main(overrides: list[str]) -> int:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from benchmarks.train_throughput import matmul_flops
    from roll.launch.cli import main as launch
    from roll.models.resolve import resolve_model_path

    gflops = matmul_flops() / 1e9  # the machine's speed beside the wall time (shared cores vary)
    exp = f"learning_grid_agent_{int(time.time())}"
    overrides = [f"exp_name={exp}", SAVE_ALL_VAL, *overrides]
    start = time.time()
    code = launch(["--config-path", CONFIG[0], "--config-name", CONFIG[1], *overrides],
                  default_pipeline="roll.pipeline.agentic.agentic_pipeline.AgenticPipeline")
    minutes = (time.time() - start) / 60
    if code:
        return code
    logs = logging_dir(overrides, exp)
    seeds = validation_seeds(logs)
    yaml = OmegaConf.load(ROOT / CONFIG[0] / f"{CONFIG[1]}.yaml")
    env_config = SimpleNamespace(**OmegaConf.to_container(yaml.custom_envs[TAG]))
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("SmolLM2-135M-Instruct"))
    baseline = random_move_success(seeds, tokenizer, env_config)
    fixed_move, fixed = best_fixed_move_success(seeds, tokenizer, env_config)
    print(f"\n{CONFIG[0]}/{CONFIG[1]}.yaml, GRPO, CPU: {minutes:.1f} min, matmul {gflops:.0f} GFLOP/s fp32 at start, "
          f"overrides {overrides}")
    print(f"{len(seeds)} validation seeds; random moves through the same agent code: {baseline:.3f} "
          f"({RANDOM_PLAYS_PER_SEED} plays per seed); the best fixed move ({fixed_move} every turn): {fixed:.3f}")
    print(f"{'before step':>11} {'success':>8} {'moved':>10} {'calls':>6} {'toward G':>9} {'random moves':>13} "
          f"{'best fixed move':>16}")
    for row in read_validations(logs):
        toward = moves_toward_goal(json.loads(trajectory_file(logs, "val", row["step"]).read_text()))
        print(f"{row['step']:>11} {row[f'val/env/{TAG}/success']:>8.3f} "
              f"{row.get(f'val/env/{TAG}/moved', float('nan')):>10.3f} "
              f"{row.get(f'val/env/{TAG}/agent/calls', float('nan')):>6.2f} {toward:>9.3f} {baseline:>13.3f} {fixed:>16.3f}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sys.exit(main(sys.argv[1:]))
