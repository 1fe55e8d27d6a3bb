"""FrozenLake variants that misbehave on some seeds, for the failure-isolation test (imported by
dotted path inside Ray workers)."""

from __future__ import annotations

import time

from roll.agentic.env.frozen_lake.env import FrozenLakeEnv


class RaisingFrozenLake(FrozenLakeEnv):
    """Raises in step on every third seed."""

    def step(self, action_text: str):
        if self.seed % 3 == 0:
            raise RuntimeError(f"simulated env crash (seed {self.seed})")
        return super().step(action_text)


class HangingFrozenLake(FrozenLakeEnv):
    """Hangs in step on every third seed (longer than the test's env timeout)."""

    def step(self, action_text: str):
        if self.seed % 3 == 1:
            time.sleep(60)
        return super().step(action_text)


class SlowFrozenLake(FrozenLakeEnv):
    """Takes 2 s to reset, so a test can kill its worker process in the middle of an episode."""

    def reset(self, seed=None):
        time.sleep(2.0)
        return super().reset(seed)
