"""Chaos: one launcher run of 5 steps on a tiny model in which an env worker, the inference worker and a
training worker are each killed with SIGKILL, at steps 2, 3 and 4. The run reaches max_steps with the
step numbering unchanged, every kill is counted in metrics.jsonl, and the last checkpoint loads.
Part of the default test run (and so of CI).

Timing: the envs (ControlledFrozenLake) leave a file naming their process at each reset and then sleep
2 s, so "a reset file written after checkpoint-(k-1) was committed" means step k's rollout has
episodes in flight in that env worker. That is when each kill lands."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.pipeline.test_end_to_end import _kill_group, launch, overrides, read_metrics, work  # noqa: F401 (fixture)

WAIT_S = 600


def wait_for(what: str, found, process) -> object:
    deadline = time.monotonic() + WAIT_S
    while not (value := found()):
        assert process.poll() is None, f"the run ended while waiting for {what}"
        assert time.monotonic() < deadline, f"waited {WAIT_S} s for {what}"
        time.sleep(0.05)
    return value


def reset_in_step(step: int, work: Path, control: Path, process) -> int:
    """Waits until step `step`'s rollout has an env resetting in a worker; returns that worker's pid.
    Step `step`'s resets are the ones after checkpoint-(step-1) was written, not the ones after this test
    saw it: the rollout starts at once, so its first resets can come before the test looks."""
    checkpoint = work / "out" / "checkpoints" / f"checkpoint-{step - 1}" / "pipeline_state.pt"
    wait_for(f"checkpoint-{step - 1}", checkpoint.is_file, process)
    written_ns = checkpoint.stat().st_mtime_ns

    def worker_reset_after_checkpoint() -> int | None:
        resets = [name.split("-") for name in os.listdir(control) if name.startswith("reset-")]
        # the driver resets an env once while checking the config: only worker processes count
        return next((int(pid) for _, pid, ns in resets if int(ns) > written_ns and int(pid) != process.pid), None)

    return wait_for(f"an env reset in step {step}", worker_reset_after_checkpoint, process)


def role_pid(role: str, log: str) -> int:
    (pid,) = re.findall(rf"cluster {role}: ranks' pids \[(\d+)\]", log)
    return int(pid)


@pytest.mark.timeout(1200)  # a launcher run of many steps: past the suite's 600 s on a loaded machine
def test_a_run_survives_kill_9_of_an_env_an_inference_and_a_training_worker(tiny_model_dir, work):
    control = work / "control"
    control.mkdir()
    extra = {
        "sft_warmup.steps": "0", "report.map_blind_baselines": "false", "max_infer_worker_restarts": "1",
        "train_env_manager.max_env_num_per_worker": "4",  # two env workers: one is killed, one is not
        "custom_envs.FrozenLakeCPU.env_type": "tests.rollout.faulty_envs.ControlledFrozenLake",
        "+custom_envs.FrozenLakeCPU.env_config.control_dir": str(control),
        "+custom_envs.FrozenLakeCPU.env_config.reset_sleep_s": "2",
    }
    start = time.monotonic()
    process = launch(overrides(tiny_model_dir, work, max_steps=5, eval_steps="0", extra=extra), work)
    log = lambda: sorted(work.glob("launch_*.log"))[-1].read_text()  # noqa: E731
    killed: dict[str, int] = {}
    try:
        killed["env worker"] = reset_in_step(2, work, control, process)
        os.kill(killed["env worker"], signal.SIGKILL)
        reset_in_step(3, work, control, process)
        killed["actor_infer"] = role_pid("actor_infer", log())
        os.kill(killed["actor_infer"], signal.SIGKILL)
        reset_in_step(4, work, control, process)
        killed["actor_train"] = role_pid("actor_train", log())
        os.kill(killed["actor_train"], signal.SIGKILL)
        process.wait(timeout=WAIT_S)
    finally:
        _kill_group(process)
    print(f"chaos run: {time.monotonic() - start:.0f} s, killed {killed}")
    output = log()
    assert process.returncode == 0, output[-4000:]
    for what, pid in killed.items():
        assert not Path(f"/proc/{pid}").exists(), f"the killed {what} (pid {pid}) still runs"

    rows = {r["step"]: r for r in read_metrics(work) if "actor/pg_loss" in r}
    assert [r["step"] for r in read_metrics(work) if "actor/pg_loss" in r] == [1, 2, 3, 4, 5]
    # step 2: the env worker was replaced by Ray, its episodes lost and re-run
    assert rows[2]["rollout/env_worker_restarts"] == 1 and rows[2]["rollout/failures/worker_died"] >= 1
    # step 3: the inference worker was restarted and given the step's weights again
    assert rows[3]["rollout/infer_worker_restarts"] == 1 and rows[3]["rollout/failures/infer_worker_died"] >= 1
    for step in (1, 3, 4, 5):
        assert rows[step]["rollout/env_worker_restarts"] == 0
    # step 4: the training worker's death restarted the run from checkpoint-3 (step 4 ran again)
    assert "resuming from the last checkpoint (1 of max_auto_resumes=2)" in output
    assert "continuing at step 4" in output
    assert [rows[s]["system/auto_resumes"] for s in range(1, 6)] == [0, 0, 0, 1, 1]

    import torch
    from transformers import AutoModelForCausalLM

    from roll.pipeline.agentic.checkpoints import latest_checkpoint, load_state

    final = latest_checkpoint(work / "out" / "checkpoints")
    assert final is not None and final.name == "checkpoint-5" and load_state(final)["step"] == 5
    (weights,) = {p.parent for p in (final / "actor_train").rglob("*.safetensors")}
    model = AutoModelForCausalLM.from_pretrained(weights)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    assert {n: p.shape for n, p in model.state_dict().items()} == {n: p.shape for n, p in initial.items()}
    with torch.no_grad():
        assert torch.isfinite(model(torch.tensor([[1, 2, 3, 4]])).logits).all()
