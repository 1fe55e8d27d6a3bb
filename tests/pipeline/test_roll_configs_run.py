"""ROLL's own GPU configs train a step on this CPU with `--cpu pretrain=tiny-random-qwen2`, through the
real launcher and a real Ray; and ROLL's rollout dump/mock: a run dumps its rollout batches, a second
run replays them, and its trainer gets the same tokens (same losses, no generation)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO_ROOT, roll_examples

ROLL_DIR = roll_examples("qwen2.5-0.5B-agentic")
# The actor's losses and statistics on its first step are a function of the tokens it trains on
# (same initial weights, same seed, deterministic CPU kernels).
TRAINER_METRICS = ("actor/pg_loss", "actor/entropy", "actor/approxkl", "actor/clipfrac", "critic/score/mean")


@pytest.fixture()
def work():
    path = Path(tempfile.mkdtemp(prefix="rollcfg", dir="/tmp"))  # Ray's socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_one_step(work: Path, name: str, run: str, *overrides: str) -> list[dict]:
    out = work / run
    args = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", str(ROLL_DIR), "--config-name", name,
            "--cpu", "pretrain=tiny-random-qwen2", "max_steps=1", "eval_steps=0", f"output_dir={out}",
            f"logging_dir={out / 'logs'}", *overrides]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray"),
           "ROLL_CACHE_DIR": str(work / "cache"), "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=540)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "--cpu: actor_train.strategy_args.strategy_name: 'megatron_train' -> 'hf_train'" in log
    return [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_roll_sokoban_config_trains_a_step_on_cpu(work):
    metrics = run_one_step(work, "agentic_val_sokoban", "sokoban")
    step = metrics[-1]
    assert step["step"] == 1 and step["system/samples"] == 8  # --cpu: 2 groups of 4
    assert "env/SimpleSokoban/success" in step and "actor/pg_loss" in step


def test_roll_frozen_lake_dumps_its_rollout_and_a_mock_run_trains_on_it(work):
    dumps = work / "dumps"
    dumped = run_one_step(work, "agent_val_frozen_lake", "dump", f"rollout_dump_dir={dumps}")[-1]
    assert sorted(p.name for p in dumps.iterdir()) == ["step_000001.pt"]
    batch = torch.load(dumps / "step_000001.pt", weights_only=False)
    assert len(batch) == 8 and batch["response_mask"].sum() > 0

    mock = [f"++rollout_mock.{k}={v}" for k, v in (("enable", "true"), ("mode", "mock"), ("dump_dir", dumps))]
    replay_dumps = work / "replayed"
    replayed = run_one_step(work, "agent_val_frozen_lake", "mock", *mock, f"rollout_dump_dir={replay_dumps}")[-1]
    for key in TRAINER_METRICS:
        assert replayed[key] == pytest.approx(dumped[key], rel=1e-5, abs=1e-7), key
    again = torch.load(replay_dumps / "step_000001.pt", weights_only=False)
    assert torch.equal(again["input_ids"], batch["input_ids"])
    assert replayed["time/step_rollout"] < dumped["time/step_rollout"] / 5  # read from disk, not generated
