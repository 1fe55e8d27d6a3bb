"""resume_from_checkpoint continues the same run and refuses a checkpoint of a run that trained
differently; warm_start_from starts a new run from a checkpoint, or from an earlier stage that the
launcher runs first: a chain of runs is one command."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from roll.configs.errors import ConfigError
from roll.configs.warm_start_config import WarmStartConfig
from roll.configs.agentic_config import AgenticConfig
from roll.pipeline.agentic.warm_start import run_config, training_differences
from tests.conftest import REPO_ROOT

STAGE = '''
hydra:
  run:
    dir: .
  output_subdir: null
exp_name: {name}
output_dir: {folder}/{name}
logging_dir: {folder}/{name}/logs
pretrain: {model}
seed: 1
track_with: stdout
max_steps: {max_steps}
save_steps: 1
eval_steps: 0
rollout_batch_size: 4
sequence_length: 512
init_kl_coef: 0.0
drop_zero_gradient_groups: false
actor_train:
  training_args:
    learning_rate: {learning_rate}
    per_device_train_batch_size: 2
    gradient_accumulation_steps: 2
  strategy_args:
    strategy_name: hf_train
actor_infer:
  generating_args:
    max_new_tokens: 6
  strategy_args:
    strategy_name: hf_infer
train_env_manager:
  num_env_groups: 2
  group_size: 2
  tags: [Lake]
val_env_manager:
  num_env_groups: 1
  group_size: 1
  tags: [Lake]
custom_envs:
  Lake:
    env_type: frozen_lake
    max_steps: 2
    max_tokens_per_step: 6
    env_config:
      is_slippery: false
{extra}
'''


def test_differences_that_change_training_are_listed_and_the_others_are_not():
    saved = run_config(AgenticConfig(train_env_manager=AgenticConfig().train_env_manager))
    same = json.loads(json.dumps(saved))
    same.update(exp_name="other", max_steps=999, eval_steps=3, report={**saved["report"], "write_report": False})
    assert training_differences(saved, same) == []  # names, length (constant lr), reporting
    changed = json.loads(json.dumps(saved))
    changed["dual_clip_loss"] = True
    changed["actor_train"]["training_args"]["learning_rate"] = 0.5
    lines = training_differences(saved, changed)
    assert [line.split(":")[0] for line in lines] == ["actor_train.training_args.learning_rate", "dual_clip_loss"]
    assert "dual_clip_loss: False -> True" in lines
    # with a schedule that decays over the run, its length changes training too
    for config in (saved, same):
        config["actor_train"]["training_args"]["lr_scheduler_type"] = "cosine"
    assert [line.split(":")[0] for line in training_differences(saved, same)] == ["max_steps"]


@pytest.mark.parametrize("fields,message", [
    ({}, "neither"),
    ({"checkpoint": "/x", "config": "a", "step": 3}, "both"),
    ({"config": "a"}, "needs step"),
    ({"checkpoint": "/x", "step": 3}, "goes with config"),
])
def test_a_warm_start_names_one_checkpoint_or_one_stage_and_step(fields, message):
    with pytest.raises(ConfigError, match=message):
        WarmStartConfig(**fields)


@pytest.fixture()
def folder():
    path = Path(tempfile.mkdtemp(prefix="ws", dir="/tmp"))  # short: Ray's socket paths
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_stage(folder: Path, model: Path, name: str, max_steps: int, learning_rate: float = 1e-3, extra: str = "") -> None:
    (folder / f"{name}.yaml").write_text(STAGE.format(name=name, folder=folder, model=model, max_steps=max_steps,
                                                       learning_rate=learning_rate, extra=extra))


def launch(folder: Path, name: str, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(folder / "ray")}
    command = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", str(folder), "--config-name", name,
               *overrides]
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, output, "")


def actor_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for file in sorted((checkpoint / "actor_train").glob("*.safetensors")):
        state.update(load_file(str(file)))
    return state


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.mark.timeout(1200)  # two launcher runs of two stages (about a minute each on an idle 2-core machine)
def test_a_two_stage_chain_is_one_command(tiny_model_dir, folder):
    write_stage(folder, tiny_model_dir, "one", max_steps=2)
    # stage two changes the loss and trains with a learning rate of 1e-30: its weights stay the ones it loaded
    write_stage(folder, tiny_model_dir, "two", max_steps=1, learning_rate=1e-30,
                extra="dual_clip_loss: true\nwarm_start_from:\n  config: one\n  step: 2")
    result = launch(folder, "two")
    assert result.returncode == 0, result.stdout[-4000:]
    stage_one = folder / "one" / "checkpoints" / "checkpoint-2"
    assert "warm_start_from: running stage one first, up to its checkpoint-2" in result.stdout
    assert f"warm start from {stage_one}: weights loaded; this run starts at step 1" in result.stdout
    loaded, kept = actor_weights(stage_one), actor_weights(folder / "two" / "checkpoints" / "checkpoint-1")
    assert loaded.keys() == kept.keys() and max_abs_diff(loaded, kept) < 1e-20
    first = actor_weights(folder / "one" / "checkpoints" / "checkpoint-1")
    assert max_abs_diff(first, loaded) > 1e-6  # stage one's second step moved the weights stage two starts from
    rows = [json.loads(line) for line in (folder / "two" / "logs" / "metrics.jsonl").read_text().splitlines() if line]
    assert [r["step"] for r in rows if "actor/pg_loss" in r] == [1]

    # the same command again: stage one's checkpoint exists, so only stage two runs
    again = launch(folder, "two")
    assert again.returncode == 0, again.stdout[-4000:]
    assert "stage one's" in again.stdout and "exists; not run again" in again.stdout
    assert "running stage one first" not in again.stdout


@pytest.mark.timeout(1200)  # two launcher runs, one refused before Ray starts
def test_a_resume_under_a_config_that_trains_differently_is_refused_before_ray_starts(tiny_model_dir, folder):
    write_stage(folder, tiny_model_dir, "one", max_steps=1)
    assert launch(folder, "one").returncode == 0
    shutil.rmtree(folder / "ray", ignore_errors=True)
    refused = launch(folder, "one", "max_steps=2", "resume_from_checkpoint=true", "dual_clip_loss=true")
    assert refused.returncode == 2, refused.stdout[-4000:]
    assert "dual_clip_loss: False -> True" in refused.stdout and "warm_start_from.checkpoint=" in refused.stdout
    assert not (folder / "ray").exists()
    # a longer run alone is no difference (the unit test above); that it then continues the same run is
    # test_end_to_end.py's resume test
