"""ROLL's vision-language Sokoban, as a ROLL user runs it: ROLL's Sokoban config with its `defaults`
pointed at ROLL's VL env file (config/vl_traj_envs.yaml: Sokoban and FrozenLake with `render_mode:
rgb_array`, played by VLTrajEnvManager) and a Qwen2.5-VL model, trains two steps through the real
launcher and a real Ray under `--cpu`, which swaps the model for the tiny random Qwen2.5-VL (the
embedded CPU model reads text only)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from roll.launch.cli import main
from tests.conftest import roll_examples

ROLL_CONFIGS = roll_examples()
TRAIN = "roll.pipeline.agentic.agentic_pipeline.AgenticPipeline"
# two training steps through Ray: minutes on a busy 2-core machine, more than the suite's 600 s default.
# Marked slow (run with -m slow): in the whole suite the next module that uses the session's Ray
# (test_thread_budget.py) failed after it with SystemExit 1, which is not yet understood.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200), pytest.mark.usefixtures("no_ray")]


@pytest.fixture()
def work(monkeypatch):
    path = Path(tempfile.mkdtemp(prefix="rollvl", dir="/tmp"))  # Ray's socket paths must stay short
    monkeypatch.setenv("ROLL_CACHE_DIR", str(path / "cache"))
    monkeypatch.setenv("ROLL_RAY_TEMP_DIR", str(path / "ray"))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
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


def test_rolls_vl_sokoban_config_trains_two_steps_on_cpu(work, capsys):
    out = work / "out"
    argv = ["--config-path", str(vl_sokoban_config(work)), "--config-name", "agentic_val_sokoban", "--cpu",
            "max_steps=2", "eval_steps=0", f"output_dir={out}", f"logging_dir={out / 'logs'}"]
    rc = main(argv, default_pipeline=TRAIN)
    captured = capsys.readouterr()
    log = captured.out + captured.err
    assert rc == 0, log[-4000:]
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
