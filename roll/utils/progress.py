"""Progress a user can follow in a terminal or in any log.

In a terminal: tqdm bars over steps and over the episodes of the running rollout. Without one (a
script, CI, `> run.log`): a line when a rollout starts and ends, and a line at least every
`interval_s` during any long phase (worker start, validation, rollout, log-probs, training) with the
phase, its elapsed time, episodes done / total and generated tokens per second.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from tqdm import tqdm

logger = logging.getLogger("roll.progress")

# The pipeline's timer keys -> what the user reads
PHASE_NAMES = {
    "time/step_model_update": "weight sync", "time/step_val": "validation", "time/step_rollout": "rollout",
    "time/step_logprobs": "log-probs", "time/step_train": "training", "time/step_total": "step",
}
ROLLOUT_PHASES = ("validation", "rollout")


class RunProgress:
    def __init__(self, total_steps: int, interval_s: float = 30.0, interactive: bool | None = None) -> None:
        """Starts the heartbeat at once, so worker start-up is covered too; `begin` starts the step bar."""
        self.total_steps, self.interval_s = total_steps, interval_s
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self.step = 1
        self.phases: list[tuple[str, float]] = []  # (name, start) innermost last
        self.episodes = (0, 0)
        self.tokens = 0
        self.rollout_start = time.monotonic()
        self.last_line = time.monotonic()
        self.step_bar: tqdm | None = None
        self.episode_bar: tqdm | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="roll-progress", daemon=True)
        self._thread.start()

    # --- what the pipeline calls -------------------------------------------------------------

    def begin(self, first_step: int) -> None:
        self.step = first_step
        self.step_bar = tqdm(total=self.total_steps, initial=first_step - 1, desc="steps", unit="step",
                             disable=not self.interactive, dynamic_ncols=True)

    @contextmanager
    def phase(self, key: str) -> Iterator[None]:
        """A named phase (a timer key of the pipeline or a free name); rollout phases get start/end lines."""
        name = PHASE_NAMES.get(key, key)
        self.phases.append((name, time.monotonic()))
        if name in ROLLOUT_PHASES:
            self._rollout_begins(name)
        try:
            yield
        finally:
            if name in ROLLOUT_PHASES:
                self._rollout_ends(name)
            self.phases.pop()

    def episodes_done(self, done: int, total: int, generated_tokens: int) -> None:
        """The RolloutScheduler's progress hook: episodes accepted so far, of how many, tokens generated."""
        self.episodes, self.tokens = (done, total), generated_tokens
        if self.episode_bar is not None:
            self.episode_bar.total = total
            self.episode_bar.update(done - self.episode_bar.n)

    def step_done(self, step: int, summary: str) -> None:
        self.step = step + 1
        if self.step_bar is not None:
            self.step_bar.update(1)
            self.step_bar.set_postfix_str(summary, refresh=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.step_bar is not None:
            self.step_bar.close()

    # --- lines -------------------------------------------------------------------------------

    def status_line(self) -> str:
        """`step 3/20 | rollout 41 s | episodes 12/32 | 85 tok/s` (the innermost phase)."""
        parts = [f"step {min(self.step, self.total_steps)}/{self.total_steps}"]
        phases = self.phases[:]  # the heartbeat thread reads while the pipeline pushes and pops
        if phases:
            name, start = phases[-1]
            parts.append(f"{name} {time.monotonic() - start:.0f} s")
            if name in ROLLOUT_PHASES:
                done, total = self.episodes
                rate = self.tokens / max(time.monotonic() - self.rollout_start, 1e-9)
                parts.append(f"episodes {done}/{total} | {rate:.0f} tok/s")
        return " | ".join(parts)

    def _emit(self, line: str) -> None:
        self.last_line = time.monotonic()
        if not self.interactive:
            logger.info("progress: %s", line)

    def _rollout_begins(self, name: str) -> None:
        self.episodes, self.tokens, self.rollout_start = (0, 0), 0, time.monotonic()
        if self.interactive:
            self.episode_bar = tqdm(desc=name, unit="episode", leave=False, dynamic_ncols=True)
        self._emit(f"step {min(self.step, self.total_steps)}/{self.total_steps} | {name} started")

    def _rollout_ends(self, name: str) -> None:
        if self.episode_bar is not None:
            self.episode_bar.close()
            self.episode_bar = None
        elapsed = time.monotonic() - self.rollout_start
        done, total = self.episodes
        self._emit(f"step {min(self.step, self.total_steps)}/{self.total_steps} | {name} done in {elapsed:.1f} s | "
                   f"episodes {done}/{total} | {self.tokens / max(elapsed, 1e-9):.0f} tok/s")

    def _beat(self) -> None:
        tick = min(0.5, self.interval_s / 4)
        while not self._stop.wait(tick):
            # one tick early, so that no gap between lines exceeds interval_s
            if self.phases and time.monotonic() - self.last_line >= self.interval_s - tick:
                self._emit(self.status_line())
