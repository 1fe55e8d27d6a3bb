"""ROLL's two GiGPO configs (step-wise env manager, adv_estimator: gigpo, batch_adjust_mode: copy) train
two steps on this CPU with `--cpu pretrain=tiny-random-qwen2`, through the real launcher and Ray.
Episodes are cut to 3 turns of at most 16 tokens (ROLL's own YAML variables) to keep the test short
on a shared 2-core machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, roll_examples

ROLL_DIR = roll_examples("qwen2.5-0.5B-agentic")


@pytest.fixture()
def work():
    path = Path(tempfile.mkdtemp(prefix="gigpo", dir="/tmp"))  # Ray's socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("name,tag", [("agent_val_frozen_lake_gigpo", "FrozenLake"),
                                      ("agentic_val_sokoban_gigpo", "SimpleSokoban")])
def test_roll_gigpo_config_trains_two_steps_on_cpu(work, name, tag):
    out = work / "run"
    args = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", str(ROLL_DIR), "--config-name", name,
            "--cpu", "pretrain=tiny-random-qwen2", "max_steps=2", "eval_steps=0", f"output_dir={out}",
            f"logging_dir={out / 'logs'}", "max_actions_per_traj=3", "max_tokens_per_step=16"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray"),
           "ROLL_CACHE_DIR": str(work / "cache"), "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    steps = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        episodes = 8  # --cpu: 2 groups of 4
        turns = s[f"env/{tag}/num_actions"]  # per episode (each episode's step samples count once)
        assert turns <= 3
        assert s["step/samples_per_episode/mean"] == pytest.approx(turns)
        # one sample per turn, plus any copies batch_adjust_mode: copy added
        assert s["system/samples"] == pytest.approx(episodes * turns + s["system/batch_add_count"])
        assert s["system/samples"] % 8 == 0  # a multiple of actor_train's optimizer batch (2 × 4 under --cpu)
        # every turn of a group stands in some anchor state; the step-level part separates the turns
        assert 1 <= s["step/anchor_group_size/mean"] <= 4 * turns
        assert s["step/advantage/std"] > 0 and "actor/pg_loss" in s
