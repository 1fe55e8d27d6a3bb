"""ROLL's agent-runner config (ProxyEnvManager + GEMRunner: the policy plays Sokoban through roll's
OpenAI server, its calls recorded) trains two steps on this CPU with `--cpu pretrain=tiny-random-qwen2`,
through the real launcher and a real Ray."""

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


@pytest.mark.timeout(900)
def test_roll_agent_runner_config_trains_two_steps_on_cpu():
    work = Path(tempfile.mkdtemp(prefix="rollagent", dir="/tmp"))  # Ray's socket paths must stay short
    out = work / "run"
    # shorter episodes than ROLL's 10 turns keep the test's rollout within minutes on a shared CPU
    args = [sys.executable, "examples/start_agentic_pipeline.py",
            "--config-path", str(ROLL_DIR), "--config-name", "agentic_val_sokoban_agent_runner",
            "--cpu", "pretrain=tiny-random-qwen2", "max_steps=2", "eval_steps=0", "max_actions_per_traj=3",
            f"output_dir={out}", f"logging_dir={out / 'logs'}"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray"),
           "ROLL_CACHE_DIR": str(work / "cache"), "PYTHONUNBUFFERED": "1"}
    try:
        result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=840)
        log = result.stdout + result.stderr
        assert result.returncode == 0, log[-4000:]
        steps = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert [s["step"] for s in steps] == [1, 2]
    for step in steps:
        assert step["system/samples"] == 8  # --cpu: 2 groups of 4 episodes, one sample each
        calls = step["env/SimpleSokoban/agent/calls"]
        assert calls == step["env/SimpleSokoban/num_actions"] >= 1  # every turn of the agent was one recorded call
        assert step["env/SimpleSokoban/agent/unattributed_calls"] == 0 and step["env/SimpleSokoban/agent/samples"] == 1
        assert "actor/pg_loss" in step
