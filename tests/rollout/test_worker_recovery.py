"""A dead EnvironmentWorker process (kill -9 mid-rollout) is replaced and its groups re-run; a worker
whose restarts are used up fails the rollout with the key to change; a worker left running an env step
that never returns is replaced once the batch is done. Real Ray, real processes."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler, group_seed
from tests.rollout.faulty_envs import HANG_ONCE

SLOW_ENV = CustomEnvConfig(env_type="tests.rollout.faulty_envs.SlowFrozenLake", max_steps=2, max_tokens_per_step=8,
                           env_config={"max_steps": 2, "is_slippery": False})


def two_worker_scheduler(tiny_model_dir, max_worker_restarts: int) -> RolloutScheduler:
    """4 groups of 2 envs on 2 workers: groups 0 and 1 (env ids 0-3) live on worker 0."""
    cfg = EnvManagerConfig(num_env_groups=4, group_size=2, tags=["Slow"], max_env_num_per_worker=4,
                           max_worker_restarts=max_worker_restarts)
    return RolloutScheduler(cfg, {"Slow": SLOW_ENV}, sequence_length=700, seed=3,
                            tokenizer_path=str(tiny_model_dir), proxy={"type": "random"})


def batch_with_worker0_killed(scheduler: RolloutScheduler) -> tuple[dict, int]:
    """Runs get_batch(8) and kill -9s worker 0's process while its envs are resetting (resets take 2 s)."""
    outcome: dict = {}

    def rollout() -> None:
        try:
            outcome["batch"] = scheduler.get_batch(8, step=1)
        except Exception as exc:  # handed to the test thread
            outcome["error"] = exc

    victim = scheduler.pool.pids[0]
    thread = threading.Thread(target=rollout)
    thread.start()
    time.sleep(1.0)
    os.kill(victim, signal.SIGKILL)
    thread.join(timeout=400)
    assert not thread.is_alive(), "the rollout never finished after its worker was killed"
    return outcome, victim


def test_a_killed_env_worker_is_replaced_and_its_groups_rerun_with_new_seeds(ray_session, tiny_model_dir):
    scheduler = two_worker_scheduler(tiny_model_dir, max_worker_restarts=2)
    try:
        outcome, victim = batch_with_worker0_killed(scheduler)
        assert "error" not in outcome, outcome.get("error")
        batch = outcome["batch"]
        again = scheduler.get_batch(8, step=2)  # the replacement serves the next batch as any worker does
        replacement = scheduler.pool.pids[0]
    finally:
        scheduler.shutdown()
    with pytest.raises(ProcessLookupError):
        os.kill(victim, 0)  # the killed process is really gone; a new one took its place
    assert replacement != victim
    assert len(batch) == 8 and batch.info["rollout/env_worker_restarts"] == 1
    assert batch.info["rollout/failures/worker_died"] == 4  # both groups of worker 0 were in flight
    groups: dict[str, set[int]] = {}
    for group_id, seed in zip(batch["traj_group_id"], batch["env_seed"]):
        groups.setdefault(group_id, set()).add(seed)
    assert len(groups) == 4 and all(len(seeds) == 1 for seeds in groups.values())
    # tasks 0 and 1 ran on the killed worker: their seeds were replaced by fresh ones
    lost = {group_seed(scheduler.seed, "train", 1, 0), group_seed(scheduler.seed, "train", 1, 1)}
    assert lost.isdisjoint(batch["env_seed"]) and len(set(batch["env_seed"])) == 4
    assert len(again) == 8 and again.info["rollout/env_worker_restarts"] == 0
    assert again.info["rollout/failures"] == 0


def test_a_worker_with_no_restarts_left_fails_the_rollout_naming_the_key(ray_session, tiny_model_dir):
    scheduler = two_worker_scheduler(tiny_model_dir, max_worker_restarts=0)
    try:
        outcome, _ = batch_with_worker0_killed(scheduler)
    finally:
        scheduler.shutdown()
    assert isinstance(outcome.get("error"), RuntimeError)
    assert "env worker 0 died and was not replaced" in str(outcome["error"])
    assert "max_worker_restarts" in str(outcome["error"])


def test_a_worker_left_running_a_hung_env_step_is_replaced_after_the_batch(ray_session, tiny_model_dir, tmp_path):
    """One env step never returns (ControlledFrozenLake, steered by a file): its episode times out, the
    batch completes without it, and the worker process still running that step is ended and replaced."""
    env = CustomEnvConfig(env_type="tests.rollout.faulty_envs.ControlledFrozenLake", max_steps=2, max_tokens_per_step=8,
                          env_config={"max_steps": 2, "is_slippery": False, "control_dir": str(tmp_path)})
    cfg = EnvManagerConfig(num_env_groups=4, group_size=2, tags=["Hangs"], max_env_num_per_worker=4, env_timeout_s=3.0)
    scheduler = RolloutScheduler(cfg, {"Hangs": env}, sequence_length=700, seed=3,
                                 tokenizer_path=str(tiny_model_dir), proxy={"type": "random"})
    try:
        pids_before = list(scheduler.pool.pids)
        (tmp_path / HANG_ONCE).touch()
        batch = scheduler.get_batch(8, step=1)
        pids_after = list(scheduler.pool.pids)
        hung_pid = next(pid for pid, new in zip(pids_before, pids_after) if pid != new)
        again = scheduler.get_batch(8, step=2)  # the fresh process serves its envs like any other
        pids_last = list(scheduler.pool.pids)
    finally:
        scheduler.shutdown()
    assert not (tmp_path / HANG_ONCE).exists(), "no env step took the hang"
    assert len(batch) == 8 and batch.info["rollout/failures/env_timeout"] == 1
    assert batch.info["rollout/env_worker_hang_replacements"] == 1
    assert sum(a != b for a, b in zip(pids_before, pids_after)) == 1  # only the worker that held the hung step
    deadline = time.monotonic() + 60
    while _alive(hung_pid):
        assert time.monotonic() < deadline, f"the process {hung_pid} holding the hung step is still running"
        time.sleep(0.5)
    assert len(again) == 8 and again.info["rollout/failures"] == 0
    assert again.info["rollout/env_worker_hang_replacements"] == 0 and pids_last == pids_after


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
