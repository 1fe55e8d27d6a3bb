"""ROLL's vision-language Sokoban, as a ROLL user runs it: ROLL's Sokoban config with its `defaults`
pointed at ROLL's VL env file (config/vl_traj_envs.yaml: Sokoban and FrozenLake with `render_mode:
rgb_array`, played by VLTrajEnvManager) and a Qwen2.5-VL model, trains two steps through the real
launcher and a real Ray under `--cpu`, which swaps the model for the tiny random Qwen2.5-VL (the
embedded CPU model reads text only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.conftest import REPO_ROOT, roll_examples

ROLL_CONFIGS = roll_examples()
# two training steps through Ray: minutes on a busy 2-core machine, more than the suite's 600 s default
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture()
def work():
    path = Path(tempfile.mkdtemp(prefix="rollvl", dir="/tmp"))  # Ray's socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def vl_sokoban_config(root: Path) -> Path:
    """ROLL's layout: an example folder beside config/ (a link to ROLL's), holding ROLL's Sokoban config
    on the VL env file with ROLL's VL model."""
    (root / "config").symlink_to(ROLL_CONFIGS / "config", target_is_directory=True)
    config = OmegaConf.load(ROLL_CONFIGS / "qwen2.5-0.5B-agentic" / "agentic_val_sokoban.yaml")
    config.defaults = ["../config/vl_traj_envs@_here_"]
    config.pretrain = config.reward_pretrain = "Qwen/Qwen2.5-VL-3B-Instruct"
    folder = root / "qwen2.5-vl-3B-agentic"
    folder.mkdir()
    (folder / "agentic_val_sokoban.yaml").write_text(OmegaConf.to_yaml(config))
    return folder


def test_rolls_vl_sokoban_config_trains_two_steps_on_cpu(work):
    # In its own process, as a user runs it: the Ray it starts ends with it, before its temp dir is removed.
    out = work / "out"
    args = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", str(vl_sokoban_config(work)),
            "--config-name", "agentic_val_sokoban", "--cpu",
            "max_steps=2", "eval_steps=0", f"output_dir={out}", f"logging_dir={out / 'logs'}"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray"),
           "ROLL_CACHE_DIR": str(work / "cache"), "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1100)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "pretrain: 'Qwen/Qwen2.5-VL-3B-Instruct' -> 'tiny-random-qwen2.5-vl'" in log
    metrics = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [m for m in metrics if "actor/pg_loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for step in steps:
        assert step["system/samples"] == 8  # --cpu: 2 groups of 4 episodes
        assert "env/SimpleSokoban/success" in step and step["env/SimpleSokoban/num_actions"] >= 1
    # the saved trajectories count each episode's images (one per turn) and replay its boards as text
    saved = json.loads(next((out / "logs" / "trajectories").glob("step_*.json")).read_text())
    assert all(row["images"] == len(row["actions"]) for row in saved)
    assert isinstance(saved[0]["turns"][0]["board"], str)
