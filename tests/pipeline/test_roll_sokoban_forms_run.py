"""ROLL's native and sandboxed Sokoban configs, as they are, train two steps through the real launcher
and a real Ray with `--cpu pretrain=tiny-random-qwen2` (episodes cut to 2 turns and sequences to 1024
tokens to keep it short): the
native one with its AgentNativeStepEnvManager (one sample per turn, step_reinforce), the sandboxed one
with the game served from sandboxed processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from roll.agentic.env.tool_use.sandbox import sandbox_unavailable_reason
from tests.conftest import REPO_ROOT, roll_examples

ROLL_DIR = roll_examples("qwen2.5-0.5B-agentic")
# two training steps through Ray: minutes on a busy 2-core machine, more than the suite's 600 s default
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture()
def work():
    path = Path(tempfile.mkdtemp(prefix="rollsk", dir="/tmp"))  # Ray's socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def train_two_steps(work: Path, name: str) -> tuple[list[dict], str]:
    out = work / "out"
    args = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", str(ROLL_DIR), "--config-name", name,
            "--cpu", "pretrain=tiny-random-qwen2", "max_steps=2", "eval_steps=0", "max_actions_per_traj=2",
            "sequence_length=1024",
            f"output_dir={out}", f"logging_dir={out / 'logs'}"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray"),
           "ROLL_CACHE_DIR": str(work / "cache"), "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1100)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    metrics = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return metrics, log


def test_roll_native_sokoban_config_trains_two_steps(work):
    metrics, _ = train_two_steps(work, "agentic_val_sokoban_native")
    steps = [m for m in metrics if "actor/pg_loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for step in steps:
        # step samples: one per turn played (2 groups of 4 episodes, 1 or 2 turns each)
        assert 8 <= step["system/samples"] <= 16
        assert "env/SokobanNativeEnv/success" in step


@pytest.mark.skipif(sandbox_unavailable_reason() is not None, reason=str(sandbox_unavailable_reason()))
def test_roll_sandbox_sokoban_config_trains_two_steps(work):
    metrics, _ = train_two_steps(work, "agentic_val_sokoban_sandbox")
    steps = [m for m in metrics if "actor/pg_loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(step["system/samples"] == 8 and "env/SokobanSandbox/success" in step for step in steps)
