"""After the SFT warm-up the reference is the warmed-up policy, so a KL term measures drift from the
model RL starts from; a checkpoint keeps that reference, and a resumed run (which skips the warm-up)
gets it back."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.pipeline.test_end_to_end import CPU, overrides, read_metrics, work  # noqa: F401 (fixture)

REINFORCE_PP = "agent_reinforce_pp_frozen_lake"  # a k3 KL loss against the reference


def launch(model_dir: Path, folder: Path, max_steps: int, **named: str) -> subprocess.CompletedProcess:
    # Two warm-up steps at a high rate: the warmed-up policy is far from the base model. The tiny random
    # model may score every episode alike (no advantage, and the KL term's gradient is 0 where the policy
    # is the reference): an entropy bonus makes step 1's update move the policy whatever it drew.
    extra = {"sft_warmup.steps": "2", "sft_warmup.learning_rate": "1e-3", "entropy_loss_coef": "0.01", **named}
    args = overrides(model_dir, folder, max_steps=max_steps, extra=extra, eval_steps="0", save_steps="1")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(folder / "ray")}
    return subprocess.run([sys.executable, "examples/start_agentic_pipeline.py", "--config-path", CPU[0],
                           "--config-name", REINFORCE_PP, *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=420)


def run(model_dir: Path, folder: Path, max_steps: int, **named: str) -> None:
    result = launch(model_dir, folder, max_steps, **named)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def kl_by_step(folder: Path) -> dict[int, float]:
    return {r["step"]: r["critic/kl"] for r in read_metrics(folder) if "critic/kl" in r}


def test_the_reference_is_the_warmed_up_policy_and_a_resumed_run_keeps_it(tiny_model_dir, work):
    whole, resumed = work / "whole", work / "resumed"
    run(tiny_model_dir, whole, max_steps=2)
    warmup = next(r for r in read_metrics(whole) if "sft/loss" in r)
    assert warmup["sft/loss"] < 0.97 * warmup["sft/first_loss"], "the warm-up did not move the policy"
    kl = kl_by_step(whole)
    assert all("actor/kl_loss" in r for r in read_metrics(whole) if "actor/pg_loss" in r)  # Reinforce++'s KL loss
    # Step 1's old log-probs come from the warmed-up policy before any RL update: the same weights
    # as the reference, so their KL is zero up to float noise (the base model's would not be).
    assert abs(kl[1]) < 1e-6, kl
    # step 2's KL is an estimate over the sampled tokens (its sign is theirs): not 0 once the policy moved
    assert abs(kl[2]) > 1e-6, "one RL update moved the policy away from the reference"
    assert any((whole / "out" / "checkpoints" / "checkpoint-1" / "reference").rglob("*.safetensors"))

    # A run resumed from step 1 skips the warm-up: step 2's KL is the same only if the reference came back.
    checkpoint = whole / "out" / "checkpoints" / "checkpoint-1"
    run(tiny_model_dir, resumed, max_steps=2, resume_from_checkpoint=str(checkpoint))
    resumed_kl = kl_by_step(resumed)
    assert list(resumed_kl) == [2] and "sft/loss" not in {k for r in read_metrics(resumed) for k in r}
    assert math.isclose(resumed_kl[2], kl[2], rel_tol=1e-3), (resumed_kl, kl)

    # A checkpoint saved before the reference was kept (or by a run without the warm-up) has no
    # reference/: resuming it fails before any worker starts, and names the way to go on with it.
    old = work / "old" / "checkpoint-1"
    shutil.copytree(checkpoint, old, ignore=shutil.ignore_patterns("reference"))
    refused = launch(tiny_model_dir, work / "old_run", max_steps=2, resume_from_checkpoint=str(old))
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "has no reference/ folder" in output and "sft_warmup.steps=0" in output, output[-3000:]
    assert "ranks' pids" not in output, "workers started before the checkpoint was checked"
    run(tiny_model_dir, work / "old_run", max_steps=2, resume_from_checkpoint=str(old), **{"sft_warmup.steps": "0"})
    assert [r["step"] for r in read_metrics(work / "old_run") if "critic/kl" in r] == [2]
