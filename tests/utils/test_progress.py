"""Progress lines for logs without a terminal: start and end of a rollout, a heartbeat in long phases,
and the phase timings on every step line."""

from __future__ import annotations

import logging
import re
import time

from roll.utils.progress import RunProgress
from roll.utils.tracking import headline


def test_long_phases_print_a_line_at_least_every_interval(caplog):
    progress = RunProgress(total_steps=5, interval_s=0.3, interactive=False)
    progress.begin(2)
    with caplog.at_level(logging.INFO, logger="roll.progress"):
        with progress.phase("time/step_rollout"):
            progress.episodes_done(4, 8, generated_tokens=120)
            time.sleep(1.3)
        with progress.phase("time/step_train"):
            time.sleep(0.8)
    progress.close()
    stamped = [(r.created, r.getMessage()) for r in caplog.records]
    lines = [m for _, m in stamped]
    assert lines[0] == "progress: step 2/5 | rollout started"
    beats = [m for m in lines if re.fullmatch(r"progress: step 2/5 \| rollout \d+ s \| episodes 4/8 \| \d+ tok/s", m)]
    assert len(beats) >= 3, lines
    assert any(re.fullmatch(r"progress: step 2/5 \| rollout done in 1\.\d s \| episodes 4/8 \| \d+ tok/s", m) for m in lines), lines
    assert any(re.fullmatch(r"progress: step 2/5 \| training \d+ s", m) for m in lines), lines
    gaps = [b[0] - a[0] for a, b in zip(stamped, stamped[1:])]
    assert max(gaps) <= 0.3 + 0.2, gaps  # a line at least every interval_s (+ scheduling slack on a busy machine)


def test_a_terminal_gets_bars_not_lines(caplog):
    progress = RunProgress(total_steps=2, interval_s=0.1, interactive=True)
    progress.begin(1)
    with caplog.at_level(logging.INFO, logger="roll.progress"):
        with progress.phase("time/step_val"):
            progress.episodes_done(3, 4, generated_tokens=10)
            assert (progress.episode_bar.n, progress.episode_bar.total) == (3, 4)
            time.sleep(0.3)
    progress.step_done(1, "success 0.5")
    assert progress.step_bar.n == 1
    progress.close()
    assert caplog.records == []


def test_step_line_has_every_phase_time():
    line = headline({"time/step_model_update": 0.25, "time/step_val": 12.0, "time/step_rollout": 30.5,
                     "time/step_logprobs": 2.0, "time/step_train": 41.0, "time/step_total": 85.75})
    assert line.endswith("time s: sync 0.2 val 12.0 rollout 30.5 logp 2.0 train 41.0 step 85.8")
