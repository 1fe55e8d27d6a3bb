"""What a FrozenLake agent did in one saved validation: its moves, and how they relate to the
surroundings line it was shown.

    python benchmarks/agent_moves.py output/<exp_name>/logs/trajectories/val_00021.json

Prints the episodes' success and move counts, then, over the turns whose board has a surroundings
line (`describe_surroundings: true`):
- the share of valid moves that the rule "Right if safe, else Down if safe, else Right" would make
  (the rule a one-board agent settled on; benchmarks/map_blind_baselines.py measures its ceiling);
- at turns where both Right and Down are safe, how often the agent picked each;
- at dead ends (neither Right nor Down is safe), what it did: backing out (a safe Left or Up) is the
  move the 0.734 rule never makes and the 0.889 reader does;
- moves into a hole or the edge, which reading the line alone avoids.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.map_blind_baselines import right_then_down_no_backing, surroundings  # noqa: E402

SAFE = ("frozen", "goal")


def surroundings_of(board: str) -> dict[str, str] | None:
    """The move -> tile of the board's last line, or None when the board has no surroundings line."""
    last = board.splitlines()[-1]
    return surroundings(last) if last.startswith("Left: ") else None


def move_report(episodes: list[dict]) -> dict[str, object]:
    """Counts over the episodes' turns (a step-wise run saves one entry per turn; step_index 0 holds the
    whole episode)."""
    whole = [episode for episode in episodes if episode.get("step_index", 0) == 0]
    moves, both_safe, dead_end = Counter(), Counter(), Counter()
    ruled = unsafe = read = 0
    for episode in whole:
        for turn in episode["turns"]:
            moves[turn["action"] if turn["valid"] else "invalid"] += 1
            around = surroundings_of(turn["board"])
            if around is None or not turn["valid"]:
                continue
            read += 1
            action = turn["action"]
            ruled += action == right_then_down_no_backing(around, rng=None)  # deterministic: no rng used
            unsafe += around[action] not in SAFE
            if around["Right"] in SAFE and around["Down"] in SAFE:
                both_safe[action] += 1
            elif around["Right"] not in SAFE and around["Down"] not in SAFE:
                dead_end["backs out" if action in ("Left", "Up") and around[action] in SAFE else action] += 1
    return {
        "episodes": len(whole),
        "success": sum(float(e["env_metrics"].get("success", 0.0)) for e in whole) / max(len(whole), 1),
        "moves": dict(moves),
        "valid moves read": read,
        "share the Right-first rule makes": ruled / max(read, 1),
        "share into a hole or the edge": unsafe / max(read, 1),
        "Right and Down both safe": dict(both_safe),
        "dead ends (neither safe)": dict(dead_end),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    report = move_report(json.loads(Path(argv[0]).read_text()))
    for key, value in report.items():
        print(f"{key:34s} {value:.3f}" if isinstance(value, float) else f"{key:34s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
