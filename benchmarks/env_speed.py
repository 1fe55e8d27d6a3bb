"""How fast the bundled envs step and reset, against the budget that keeps rollouts model-bound.

    .venv/bin/python benchmarks/env_speed.py [--repeats N]

Prints one row per measurement: the median (and 90th percentile) of N single calls, and the ratio
of the median to its reference: a budget (1 ms a step, 10 ms a reset: one generated token of a
0.5B model costs more than either on a GPU, and far more on a CPU), or gymnasium's own FrozenLake
step (the peer; it takes an int, we parse model text) where gymnasium is installed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from typing import Callable

from roll.agentic.env import make_env
from roll.agentic.env.policies import scripted_action

STEP_BUDGET_S = 1e-3
RESET_BUDGET_S = 10e-3


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_resets(env_type: str, config: dict, repeats: int) -> list[float]:
    env = make_env(env_type, **config)
    return [timed(lambda s=seed: env.reset(seed=s)) for seed in range(repeats)]


def measure_steps(env_type: str, config: dict, repeats: int, kind: str = "random", text: str | None = None) -> list[float]:
    """Time env.step alone (resets and the policy's choice are outside the timed call)."""
    env = make_env(env_type, **config)
    rng = random.Random(0)
    seed, times = 0, []
    env.reset(seed=seed)
    while len(times) < repeats:
        action = text if text is not None else scripted_action(env, kind, rng)
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        times.append(time.perf_counter() - start)
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
    return times


def measure_gymnasium_step(repeats: int) -> list[float] | None:
    try:
        import gymnasium
    except ImportError:
        return None
    env = gymnasium.make("FrozenLake-v1", is_slippery=False)
    rng = random.Random(0)
    env.reset(seed=0)
    times = []
    while len(times) < repeats:
        action = rng.randrange(4)
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        times.append(time.perf_counter() - start)
        if terminated or truncated:
            env.reset()
    return times


def measure_unsandboxed_python(repeats: int) -> list[float]:
    """The peer of a tool call: `python -c` with no sandbox (what GEM's PythonCodeTool runs)."""
    code = "print(2 ** 64)"
    return [timed(lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)) for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2000, help="calls per row (median of these)")
    args = parser.parse_args()
    n = args.repeats

    sokoban_small = {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 10}
    gym_times = measure_gymnasium_step(n)
    gym_median = statistics.median(gym_times) if gym_times else None
    rows = [
        ("sokoban step 6x6/1 box (random legal move)", measure_steps("sokoban", sokoban_small, n), STEP_BUDGET_S, "1 ms budget"),
        ("sokoban step 6x6/1 box (invalid text, 10k chars)",
         measure_steps("sokoban", {**sokoban_small, "max_steps": 10**9}, n, text="<answer>" + "x" * 10_000), STEP_BUDGET_S, "1 ms budget"),
        ("sokoban room generation 6x6/1 box, max_steps 10", measure_resets("sokoban", sokoban_small, n), RESET_BUDGET_S, "10 ms budget"),
        ("sokoban room generation 6x6/1 box, max_steps 100",
         measure_resets("sokoban", {**sokoban_small, "max_steps": 100}, n), RESET_BUDGET_S, "10 ms budget"),
        ("sokoban room generation 10x10/2 boxes, max_steps 10",
         measure_resets("sokoban", {"dim_room": [10, 10], "num_boxes": 2, "max_steps": 10}, max(n // 10, 20)),
         RESET_BUDGET_S, "10 ms budget"),
        ("sokoban room generation 10x10/2 boxes, max_steps 100",
         measure_resets("sokoban", {"dim_room": [10, 10], "num_boxes": 2, "max_steps": 100}, max(n // 20, 20)),
         RESET_BUDGET_S, "10 ms budget"),
        ("frozen_lake step 4x4 (random legal move)",
         measure_steps("frozen_lake", {"is_slippery": False}, n), gym_median or STEP_BUDGET_S,
         "gymnasium step" if gym_median else "1 ms budget"),
        ("frozen_lake reset 4x4 (map generation)", measure_resets("frozen_lake", {}, n), RESET_BUDGET_S, "10 ms budget"),
        ("frozen_lake reset 8x8 (map generation)", measure_resets("frozen_lake", {"size": 8}, n), RESET_BUDGET_S, "10 ms budget"),
        ("countdown step (random expression)", measure_steps("countdown", {}, n), STEP_BUDGET_S, "1 ms budget"),
        ("guess_number step (random guess)", measure_steps("guess_number", {}, n), STEP_BUDGET_S, "1 ms budget"),
    ]
    tool_repeats = max(n // 100, 10)
    unsandboxed = measure_unsandboxed_python(tool_repeats)
    rows += [
        ("tool_use step (answer)", measure_steps("tool_use", {}, n, text="<answer>12</answer>"), STEP_BUDGET_S, "1 ms budget"),
        ("tool_use step (python tool call in the sandbox)",
         measure_steps("tool_use", {"max_steps": 10**9, "tool_wrapper": {"wrapper_args": {"max_tool_uses": 10**9}}},
                       tool_repeats, text="<python>print(2 ** 64)</python>"),
         statistics.median(unsandboxed), "python -c, no sandbox"),
        ("python -c subprocess, no sandbox", unsandboxed, statistics.median(unsandboxed), "itself"),
    ]
    try:
        import gem  # noqa: F401  (optional dependency)
    except ImportError:
        print("gem rows skipped: GEM is not installed (pip install 'roll[gem]')")
    else:
        hanoi = {"gem_id": "game:TowerofHanoi-v0-easy", "max_steps": 10**9}
        rows += [
            ("gem TowerofHanoi step (random boxed move)", measure_steps("gem", hanoi, n), STEP_BUDGET_S, "1 ms budget"),
            ("gem TowerofHanoi reset", measure_resets("gem", hanoi, n), RESET_BUDGET_S, "10 ms budget"),
        ]
    try:
        import textworld  # noqa: F401  (optional dependency)
    except ImportError:
        print("textworld rows skipped: textworld is not installed (pip install 'roll[textworld]')")
    else:
        small = {"num_games": 1, "max_steps": 10**9}  # one game: generated once, then cached
        rows.append(("textworld step (random admissible command)", measure_steps("textworld", small, max(n // 10, 20)),
                     STEP_BUDGET_S, "1 ms budget"))
    if gym_times:
        rows.append(("gymnasium FrozenLake-v1 step 4x4 (int action)", gym_times, gym_median, "itself"))

    print(f"{'measurement':<56} {'median':>10} {'p90':>10} {'ratio':>8}  reference")
    for name, times, reference, label in rows:
        median, p90 = statistics.median(times), statistics.quantiles(times, n=10)[-1]
        print(f"{name:<56} {median * 1e6:>8.1f}us {p90 * 1e6:>8.1f}us {median / reference:>8.3f}  {label}")


if __name__ == "__main__":
    main()
