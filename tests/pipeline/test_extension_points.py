"""Out-of-tree extensions end to end: a user's module (on PYTHONPATH, outside roll) with a new env, a
new env manager and a new advantage estimator, named in a config by class path and registered name,
runs a training step through Ray; a class path that does not import fails before any worker starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from roll.configs.errors import ConfigError
from roll.launch.loader import load_agentic_config
from tests.conftest import REPO_ROOT

USER_MODULE = '''
"""A user's extensions, written outside roll."""
import os
import random
from dataclasses import dataclass

import torch

from roll.agentic.env import BaseEnv, BaseEnvConfig, StepOutcome
from roll.algorithms import register_adv_estimator
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager


@dataclass
class CoinConfig(BaseEnvConfig):
    lucky_side: str = "Heads"

    def __post_init__(self):
        super().__post_init__()
        if self.lucky_side not in ("Heads", "Tails"):
            raise ValueError(f"env_config.lucky_side: must be Heads or Tails, got {self.lucky_side!r}")


class CoinEnv(BaseEnv):
    config_cls = CoinConfig
    extra_metrics_agg_mode = {"coin_env_ran": "max"}

    def _reset(self, rng: random.Random) -> None:
        self.coin, self.called = rng.choice(["Heads", "Tails"]), None

    def action_names(self):
        return ["Heads", "Tails"]

    def _apply(self, action):
        self.called = action
        return StepOutcome(reward=float(action == self.coin), terminated=True, effective=True)

    def render(self) -> str:
        return "Call the coin." if self.called is None else f"It was {self.coin}."

    def is_success(self) -> bool:
        return self.called == self.coin

    def default_instruction(self) -> str:
        return f"Guess how the coin landed; {self.config.lucky_side} is lucky."

    def state_metrics(self):
        return {"coin_env_ran": 1.0}


class MarkingManager(TrajEnvManager):
    """Plays like TrajEnvManager and marks every sample with who played it, and where."""

    def run_episode(self, seed, episode_key="0"):
        samples = super().run_episode(seed, episode_key)
        for sample in samples:
            sample.env_metrics["custom_manager_ran"] = 1.0
            sample.extras.update(marked_by="MarkingManager", manager_pid=os.getpid())
        return samples


@register_adv_estimator("marked_constant")
def marked_constant(inputs):
    """0.25 on every response token of a sample the custom manager marked, -1 otherwise."""
    marked = torch.tensor([0.25 if m == "MarkingManager" else -1.0 for m in inputs.meta["marked_by"]])
    advantages = marked[:, None] * inputs.response_mask
    return advantages, advantages
'''

CONFIG = '''
hydra:
  run:
    dir: .
  output_subdir: null
exp_name: extension_points
seed: 1
track_with: stdout
max_steps: 1
save_steps: 100
logging_steps: 1
eval_steps: 0
rollout_batch_size: 4
sequence_length: 256
adv_estimator: marked_constant
ppo_epochs: 1
init_kl_coef: 0.0
whiten_advantages: false
reward_normalization:
  grouping: traj_group_id
  method: mean_std
actor_train:
  training_args:
    learning_rate: 1.0e-5
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
  tags: [Coin]
val_env_manager:
  num_env_groups: 1
  group_size: 1
  tags: [Coin]
custom_envs:
  Coin:
    env_type: coin_ext.CoinEnv
    env_manager_cls: coin_ext.MarkingManager
    max_steps: 2
    max_tokens_per_step: 6
    env_config:
      lucky_side: Tails
      max_steps: 2
'''


@pytest.fixture()
def user_folder():
    """A folder outside the repository holding the user's module and config (short path: Ray's sockets)."""
    path = Path(tempfile.mkdtemp(prefix="ext", dir="/tmp"))
    (path / "coin_ext.py").write_text(textwrap.dedent(USER_MODULE))
    (path / "coin.yaml").write_text(CONFIG)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def launch(folder: Path, model_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    """The real launcher in its own process (its pid is the result's `pid`), with the user's folder on
    PYTHONPATH (the launcher hands PYTHONPATH on to every Ray worker)."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(folder / "ray"),
           "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
    args = [f"pretrain={model_dir}", f"output_dir={folder / 'out'}", f"logging_dir={folder / 'logs'}", *overrides]
    command = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", str(folder), "--config-name", "coin", *args]
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=480)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    result.pid = process.pid
    return result


def test_a_users_env_manager_and_estimator_train_a_step_through_ray(tiny_model_dir, user_folder):
    result = launch(user_folder, tiny_model_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (user_folder / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    (row,) = [r for r in rows if "actor/pg_loss" in r]
    assert row["env/Coin/coin_env_ran"] == 1.0  # the user's env played (its own metric)
    assert row["env/Coin/custom_manager_ran"] == 1.0  # the user's manager played it
    # only the user's estimator gives 0.25, and only for samples its manager marked
    assert row["critic/advantages/min"] == row["critic/advantages/max"] == 0.25
    saved = json.loads((user_folder / "logs" / "trajectories" / "step_00001.json").read_text())
    assert saved and all(s["marked_by"] == "MarkingManager" for s in saved)
    # the manager ran in Ray env workers, not in the driver: another process than the launcher's
    assert all(isinstance(s["manager_pid"], int) and s["manager_pid"] != result.pid for s in saved)
    assert "Guess how the coin landed; Tails is lucky." in saved[0]["messages"][1]["content"]  # env_config reached it


@pytest.mark.parametrize("override,key,reason", [
    ("custom_envs.Coin.env_manager_cls=coin_ext.NoSuchManager", "custom_envs.Coin.env_manager_cls", "cannot import"),
    ("custom_envs.Coin.env_manager_cls=not_installed_pkg.Manager", "custom_envs.Coin.env_manager_cls", "cannot import"),
    ("custom_envs.Coin.env_type=not_installed_pkg.Env", "custom_envs.Coin.env_type", "does not import"),
])
def test_a_class_path_that_does_not_import_fails_before_any_worker_starts(tiny_model_dir, user_folder, override, key, reason):
    result = launch(user_folder, tiny_model_dir, override)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Config error: " in result.stderr and f"{key}: " in result.stderr and reason in result.stderr
    assert not (user_folder / "ray").exists(), "Ray was started although the config was refused"
    assert not (user_folder / "logs").exists()


def test_validation_resolves_a_users_env_by_class_path_and_checks_its_config(user_folder, monkeypatch):
    monkeypatch.syspath_prepend(str(user_folder))
    config = load_agentic_config(user_folder, "coin", ["pretrain=unused"])
    assert config.custom_envs["Coin"].env_type == "coin_ext.CoinEnv"
    with pytest.raises(ConfigError, match=r"custom_envs\.Coin\.env_config\.lucky_sid\b.*CoinConfig.*lucky_side"):
        load_agentic_config(user_folder, "coin", ["pretrain=unused", "~custom_envs.Coin.env_config.lucky_side",
                                                  "+custom_envs.Coin.env_config.lucky_sid=Heads"])
    with pytest.raises(ConfigError, match=r"custom_envs\.Coin\.env_config: .*lucky_side: must be Heads or Tails"):
        load_agentic_config(user_folder, "coin", ["pretrain=unused", "custom_envs.Coin.env_config.lucky_side=Edge"])
    with pytest.raises(ConfigError, match=r"custom_envs\.Coin\.env_type: .*needs a BaseEnv subclass"):
        load_agentic_config(user_folder, "coin", ["pretrain=unused", "custom_envs.Coin.env_type=coin_ext.CoinConfig"])
    with pytest.raises(ConfigError, match=r"custom_envs\.Coin\.env_manager_cls: .*no run_episode"):
        load_agentic_config(user_folder, "coin", ["pretrain=unused", "custom_envs.Coin.env_manager_cls=coin_ext.CoinConfig"])
