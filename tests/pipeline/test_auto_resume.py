"""kill -9 of the training worker mid-run: the launcher ends the run's workers, resumes from the last
complete checkpoint by itself, and the run reaches max_steps with the same step numbering."""

from __future__ import annotations

import os
import re
import signal
import time

from tests.pipeline.test_end_to_end import _kill_group, launch, overrides, read_metrics, work  # noqa: F401 (fixture)


def test_a_killed_training_worker_resumes_the_run_from_its_last_checkpoint(tiny_model_dir, work):
    process = launch(overrides(tiny_model_dir, work, max_steps=4, eval_steps="0", extra={"sft_warmup.steps": "0"}), work)
    log = lambda: sorted(work.glob("launch_*.log"))[-1].read_text()  # noqa: E731
    checkpoint_2 = work / "out" / "checkpoints" / "checkpoint-2" / "pipeline_state.pt"
    deadline = time.monotonic() + 420
    try:
        while not checkpoint_2.is_file():
            assert process.poll() is None, log()[-4000:]
            assert time.monotonic() < deadline, "no checkpoint-2 in time"
            time.sleep(0.05)
        (pids,) = re.findall(r"cluster actor_train: ranks' pids \[(\d+)\]", log())
        os.kill(int(pids), signal.SIGKILL)  # step 3 is under way: its training worker dies
        process.wait(timeout=600)
    finally:
        _kill_group(process)
    output = log()
    assert process.returncode == 0, output[-4000:]
    assert "resuming from the last checkpoint (1 of max_auto_resumes=2)" in output
    assert "continuing at step 3" in output
    assert [r["step"] for r in read_metrics(work) if "actor/pg_loss" in r] == [1, 2, 3, 4]
    assert (work / "out" / "checkpoints" / "checkpoint-4" / "pipeline_state.pt").is_file()
