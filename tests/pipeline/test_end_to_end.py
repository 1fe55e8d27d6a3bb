"""The launcher runs the whole pipeline on a tiny model through a real Ray: metrics, TensorBoard,
checkpoints, resume, and recovery from kill -9."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
REQUIRED_METRICS = (
    "env/FrozenLakeCPU/success", "env/FrozenLakeCPU/action_is_valid", "env/FrozenLakeCPU/num_actions",
    "critic/score/mean", "critic/advantages/mean", "actor/pg_loss", "actor/clipfrac", "actor/approxkl",
    "actor/entropy", "time/step_rollout", "time/step_train", "system/tps", "sync/verified", "time/sync_verify_s",
)


def overrides(model_dir: Path, work: Path, max_steps: int, extra: dict[str, str] | None = None, **named: str) -> list[str]:
    values = {
        "pretrain": str(model_dir), "exp_name": "e2e", "max_steps": str(max_steps), "save_steps": "1", "eval_steps": "2",
        "output_dir": str(work / "out"), "logging_dir": str(work / "logs"), "tracker_kwargs.log_dir": str(work / "tb"),
        "track_with": "'stdout,tensorboard'", "rollout_batch_size": "8", "val_batch_size": "4", "sequence_length": "512",
        "train_env_manager.num_env_groups": "2", "train_env_manager.group_size": "4",
        "val_env_manager.num_env_groups": "4", "custom_envs.FrozenLakeCPU.max_steps": "3",
        "custom_envs.FrozenLakeCPU.max_tokens_per_step": "8", "actor_infer.generating_args.max_new_tokens": "8",
        "actor_train.training_args.per_device_train_batch_size": "4", "actor_train.training_args.gradient_accumulation_steps": "2",
        "sft_warmup.steps": "1", "sft_warmup.episodes_per_step": "4",
        # A tiny random model scores every episode alike, so every group would be dropped as carrying
        # no gradient; these tests exercise the training path (test_zero_gradient_groups_skip_training).
        "drop_zero_gradient_groups": "false",
    }
    values.update(named)
    values.update(extra or {})
    return [f"{k}={v}" for k, v in values.items()]


def launch(args: list[str], work: Path, config: tuple[str, str] = CPU) -> subprocess.Popen:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray"), "PYTHONUNBUFFERED": "1"}
    log = open(work / f"launch_{time.monotonic_ns()}.log", "w")
    return subprocess.Popen([sys.executable, "examples/start_agentic_pipeline.py", "--config-path", config[0],
                             "--config-name", config[1], *args], cwd=REPO_ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def read_metrics(work: Path) -> list[dict]:
    return [json.loads(line) for line in (work / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture()
def work():
    # Ray's socket paths must stay short: a folder directly under /tmp.
    path = Path(tempfile.mkdtemp(prefix="e2e", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_to_end(args: list[str], work: Path, config: tuple[str, str] = CPU) -> str:
    process = launch(args, work, config)
    process.wait(timeout=420)
    _kill_group(process)
    logs = sorted(work.glob("launch_*.log"))
    output = logs[-1].read_text()
    assert process.returncode == 0, output[-4000:]
    return output


def test_two_steps_then_resume_for_a_third(tiny_model_dir, work):
    run_to_end(overrides(tiny_model_dir, work, max_steps=2), work)
    rows = read_metrics(work)
    train_rows = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in train_rows] == [1, 2]
    for row in train_rows:
        missing = [k for k in REQUIRED_METRICS if k not in row]
        assert not missing, f"step {row['step']} lacks {missing}"
        assert all(math.isfinite(v) for v in row.values())
    assert any(k.startswith("val/") for k in rows[0]), "validation runs before the first step"
    checkpoint = work / "out" / "checkpoints" / "checkpoint-2"
    assert (checkpoint / "pipeline_state.pt").is_file()
    assert (checkpoint / "actor_train").is_dir()
    assert any((checkpoint / "actor_train").rglob("*.safetensors")), "actor weights saved in Hugging Face format"

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(work / "tb"))
    events.Reload()
    scalars = events.Tags()["scalars"]
    assert "actor/pg_loss" in scalars and "env/FrozenLakeCPU/success" in scalars
    assert [e.step for e in events.Scalars("actor/pg_loss")] == [1, 2]

    output = run_to_end(overrides(tiny_model_dir, work, max_steps=3, resume_from_checkpoint="true"), work)
    assert "continuing at step 3" in output
    steps = [r["step"] for r in read_metrics(work) if "actor/pg_loss" in r]
    assert steps == [1, 2, 3]
    assert (work / "out" / "checkpoints" / "checkpoint-3" / "pipeline_state.pt").is_file()


def test_kill_during_step_three_then_resume(tiny_model_dir, work):
    args = overrides(tiny_model_dir, work, max_steps=4, eval_steps="0")
    process = launch(args, work)
    checkpoint_2 = work / "out" / "checkpoints" / "checkpoint-2" / "pipeline_state.pt"
    deadline = time.monotonic() + 420
    while not checkpoint_2.is_file():
        assert process.poll() is None, sorted(work.glob("launch_*.log"))[-1].read_text()[-4000:]
        assert time.monotonic() < deadline, "no checkpoint-2 in time"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # step 3 starts as soon as checkpoint-2 is committed
    process.wait()
    assert not (work / "out" / "checkpoints" / "checkpoint-3").exists(), "the kill came after step 3"

    output = run_to_end(overrides(tiny_model_dir, work, max_steps=4, eval_steps="0", resume_from_checkpoint="true"), work)
    assert "continuing at step 3" in output
    steps = [r["step"] for r in read_metrics(work) if "actor/pg_loss" in r]
    assert steps == [1, 2, 3, 4]


def test_the_ppo_example_trains_a_step_with_a_critic_and_a_reference(tiny_model_dir, work):
    """The PPO example trains a critic and uses a reference (token-level KL). The Reinforce++ example's KL
    loss trains in test_warmed_reference.py."""
    extra = {"sft_warmup.steps": "0", "critic_warmup": "0",
             # one env per group: the critic is the baseline
             "train_env_manager.num_env_groups": "8", "train_env_manager.group_size": "1",
             "critic.training_args.per_device_train_batch_size": "4",
             "critic.training_args.gradient_accumulation_steps": "2"}
    args = overrides(tiny_model_dir, work, max_steps=1, extra=extra, eval_steps="0")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray")}
    result = subprocess.run([sys.executable, "examples/start_agentic_pipeline.py", "--config-path", CPU[0],
                             "--config-name", "agent_ppo_frozen_lake", *args], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=420)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (row,) = [r for r in read_metrics(work) if "actor/pg_loss" in r]
    assert "actor/kl_loss" in row and "critic/kl" in row
    assert "critic/vf_loss" in row and "critic/values/mean" in row
    assert (work / "out" / "checkpoints" / "checkpoint-1" / "critic").is_dir()


def test_zero_gradient_groups_skip_training_and_validation_shows_map_blind_baselines(tiny_model_dir, work):
    args = overrides(tiny_model_dir, work, max_steps=1, drop_zero_gradient_groups="true", save_steps="10",
                     **{"report.trajectories_per_step": "8"})
    output = run_to_end(args, work)
    rows = read_metrics(work)
    (step,) = [r for r in rows if "system/samples" in r]
    # the saved episodes of the step (all 8) say which of its 2 groups scored alike
    episodes = json.loads((work / "logs" / "trajectories" / "step_00001.json").read_text())
    scores: dict[str, set] = {}
    for episode in episodes:
        scores.setdefault(episode["traj_group_id"], set()).add(episode["score"])
    alike = sum(len(s) == 1 for s in scores.values())
    assert len(episodes) == 8 and len(scores) == 2
    assert (step["batch/groups_dropped"], step["batch/groups_kept"], step["batch/samples_trained"]) == (alike, 2 - alike, 4 * (2 - alike))
    assert ("actor/pg_loss" in step) == (alike < 2) and ("time/step_train" in step) == (alike < 2)
    # 3 moves per episode cannot reach a goal 6 moves away: every map-blind baseline is 0
    val = [r for r in rows if "val/blind/FrozenLakeCPU/best" in r]
    assert val and all(r["val/blind/FrozenLakeCPU/fixed_sequence"] == 0.0 for r in val)
    # nor is any move a losing one then: no decision point, so no losing-move metrics
    assert not any("losing_moves" in key for r in val for key in r)
    assert "map-blind best 0.000" in output
