"""Lossless async resume: with async_generation_ratio 1, kill -9 of the driver during step 3, then a
resume, trains the same batches to the same weights as the run that was not interrupted (bit for bit
on CPU; the log-probs recorded at generation agree to float noise): no episode skipped, none trained
twice. The batch of step 3 was made with the weights of
version 2, which checkpoint-2 does not hold (it holds version 3), so it was saved with the checkpoint;
the batch of step 4 (version 3) was in flight at the kill and is made again by the resumed run."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.pipeline.test_end_to_end import _kill_group, launch, overrides, read_metrics, run_to_end

STEPS = 4
COMPARED = ("actor/pg_loss", "actor/approxkl", "actor/grad_norm", "critic/advantages/mean", "critic/score/mean",
            "system/samples", "async/staleness_max")


@pytest.fixture()
def runs():
    folders = [Path(tempfile.mkdtemp(prefix=f"ar{i}", dir="/tmp")) for i in range(2)]  # short: Ray's sockets
    yield folders
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def async_args(model_dir: Path, work: Path, **named: str) -> list[str]:
    extra = {"async_generation_ratio": "1", "sft_warmup.steps": "0", "report.map_blind_baselines": "false",
             "rollout_dump_dir": str(work / "dumps")}
    return overrides(model_dir, work, max_steps=STEPS, eval_steps="0", extra=extra, **named)


def final_weights(work: Path) -> dict[str, torch.Tensor]:
    (file,) = (work / "out" / "checkpoints" / f"checkpoint-{STEPS}" / "actor_train").rglob("*.safetensors")
    return load_file(str(file))


@pytest.mark.timeout(1200)  # three launcher runs (about a minute each on an idle 2-core machine)
def test_kill_9_of_the_driver_mid_step_then_resume_trains_what_the_uninterrupted_run_trains(tiny_model_dir, runs):
    straight, killed = runs
    run_to_end(async_args(tiny_model_dir, straight), straight)

    process = launch(async_args(tiny_model_dir, killed), killed)
    checkpoint_2 = killed / "out" / "checkpoints" / "checkpoint-2" / "pipeline_state.pt"
    deadline = time.monotonic() + 420
    try:
        while not checkpoint_2.is_file():
            assert process.poll() is None, sorted(killed.glob("launch_*.log"))[-1].read_text()[-4000:]
            assert time.monotonic() < deadline, "no checkpoint-2 in time"
            time.sleep(0.05)
    finally:
        _kill_group(process)  # kill -9 of the driver (and the Ray it started): step 3 is under way
    process.wait()
    assert not (killed / "out" / "checkpoints" / "checkpoint-3").exists(), "the kill came after step 3"
    saved = torch.load(checkpoint_2, weights_only=False)["async_batches"]
    assert sorted(saved) == [3]  # the batch made with version 2, which the checkpoint cannot make again
    output = run_to_end(async_args(tiny_model_dir, killed, resume_from_checkpoint="true"), killed)
    assert "continuing at step 3" in output

    # the same episodes, step by step, token for token
    for step in range(1, STEPS + 1):
        a = torch.load(straight / "dumps" / f"step_{step:06d}.pt", weights_only=False)
        b = torch.load(killed / "dumps" / f"step_{step:06d}.pt", weights_only=False)
        assert a.meta["traj_id"] == b.meta["traj_id"] and a.meta["env_seed"] == b.meta["env_seed"], step
        assert a.meta["weight_version"] == b.meta["weight_version"] == [max(step - 1, 1)] * len(a), step
        for key in ("input_ids", "response_mask", "scores"):
            assert torch.equal(a[key], b[key]), (step, key)
        # the engine batches concurrent requests as they arrive, and a CPU matmul over another batch size
        # rounds the last bits differently: generation-time log-probs agree to float noise (the same in
        # two runs that are never interrupted); the trainer recomputes its own, bit for bit
        assert torch.allclose(a["infer_logprobs"], b["infer_logprobs"], atol=1e-4), step
    assert torch.equal(saved[3]["input_ids"], torch.load(killed / "dumps" / "step_000003.pt", weights_only=False)["input_ids"])
    # every step trained once, on the same numbers, to the same weights
    rows = {name: [r for r in read_metrics(work) if "actor/pg_loss" in r] for name, work in (("a", straight), ("b", killed))}
    assert [r["step"] for r in rows["a"]] == [r["step"] for r in rows["b"]] == list(range(1, STEPS + 1))
    for a, b in zip(rows["a"], rows["b"]):
        assert {k: a[k] for k in COMPARED} == {k: b[k] for k in COMPARED}, a["step"]
    # every load was checked; the resumed process loads nothing before step 4's batch (step 3's came
    # from the checkpoint, checked by the process that made it)
    assert [r["sync/verified"] for r in rows["a"]] == [1.0] * STEPS
    assert [r["sync/verified"] for r in rows["b"]] == [1.0, 1.0, 0.0, 1.0]
    weights_a, weights_b = final_weights(straight), final_weights(killed)
    assert weights_a.keys() == weights_b.keys() and all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)
