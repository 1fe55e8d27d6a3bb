"""FrozenLake variants that misbehave on some seeds or on the test's signal, for the failure tests
(imported by dotted path inside Ray workers)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from roll.agentic.env.frozen_lake.config import FrozenLakeEnvConfig
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


@dataclass
class ControlledConfig(FrozenLakeEnvConfig):
    """control_dir: a folder the test and the env share. reset_sleep_s: how long each reset takes."""

    control_dir: str = ""
    reset_sleep_s: float = 0.0


HANG_ONCE = "hang_next_step"  # a file in control_dir: the first step to remove it hangs for ever


class ControlledFrozenLake(FrozenLakeEnv):
    """A FrozenLake the test steers through files: each reset leaves `reset-<pid>-<ns>` in control_dir
    (so the test knows an episode is in its worker process, and which process) and then sleeps
    reset_sleep_s; the one step that removes control_dir/hang_next_step never returns."""

    config_cls = ControlledConfig

    def reset(self, seed=None):
        control = Path(self.config.control_dir)
        (control / f"reset-{os.getpid()}-{time.time_ns()}").touch()
        time.sleep(self.config.reset_sleep_s)
        return super().reset(seed)

    def step(self, action_text: str):
        try:
            (Path(self.config.control_dir) / HANG_ONCE).unlink()
        except FileNotFoundError:
            return super().step(action_text)
        threading.Event().wait()  # hangs: only ending the process ends this call


CRASH_ONCE = "crash_next_step"  # a file in control_dir: the first step to remove it raises


class CrashOnceFrozenLake(FrozenLakeEnv):
    """Raises in the one step that removes control_dir/crash_next_step, leaving `crashed-<seed>` there:
    one episode of one group crashes while its group's other episodes finish."""

    config_cls = ControlledConfig

    def step(self, action_text: str):
        control = Path(self.config.control_dir)
        try:
            (control / CRASH_ONCE).unlink()
        except FileNotFoundError:
            return super().step(action_text)
        (control / f"crashed-{self.seed}").touch()
        raise RuntimeError(f"simulated env crash (seed {self.seed})")
