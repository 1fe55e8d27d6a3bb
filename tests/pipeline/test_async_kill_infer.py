"""Async training when the inference worker dies mid-run: the trainer's next batch fails within a
bounded time, naming the step and the cause, instead of waiting forever (real Ray, tiny model)."""

from __future__ import annotations

import time

import pytest
import ray
from transformers import AutoModelForCausalLM

from roll.configs.agentic_config import EnvManagerConfig
from roll.pipeline.agentic.async_rollout import AsyncRollout
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from roll.workers.infer_worker import InferWorker
from tests.rollout.helpers import FROZEN_LAKE_SPEC, greedy, infer_config


def test_a_killed_inference_worker_ends_the_async_run_with_the_reason(ray_session, tiny_model_dir):
    infer = ray.remote(InferWorker).options(num_cpus=1, **InferWorker.RAY_ACTOR_OPTIONS).remote(
        infer_config(tiny_model_dir), num_threads=1)
    weights = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).state_dict()
    cfg = EnvManagerConfig(num_env_groups=2, group_size=2, tags=["FrozenLake"], generating_args=greedy(8))
    scheduler = RolloutScheduler(cfg, {"FrozenLake": FROZEN_LAKE_SPEC}, sequence_length=700, seed=3,
                                 tokenizer_path=str(tiny_model_dir), infer=[infer])
    rollout = AsyncRollout(scheduler, lambda w, v: ray.get(infer.update_weights.remote(w, v)), ratio=1, batch_size=4,
                           first_step=1, last_step=4, timeout_s=300.0)
    try:
        rollout.publish(1, weights)
        first = rollout.get_batch(4, 1)
        assert first.meta["weight_version"] == [1, 1, 1, 1]  # generated with the weights pushed as version 1
        ray.kill(infer)
        start = time.perf_counter()
        with pytest.raises(RuntimeError, match=r"async training: the rollout for step [234] failed: .*"
                                               r"(failed episodes|Actor|actor)"):
            for step in (2, 3, 4):
                rollout.publish(step, weights)
                rollout.get_batch(4, step)
        assert time.perf_counter() - start < 120
    finally:
        rollout.shutdown()
