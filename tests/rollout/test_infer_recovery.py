"""A killed inference worker (kill -9 of its real process mid-rollout) is restarted by Ray, gets the
current weights back before it generates again, and the groups whose generation was lost are re-run."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import ray
import torch

from roll.distributed.cluster import Cluster
from roll.configs.agentic_config import EnvManagerConfig
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from roll.workers.infer_worker import InferWorker

from tests.rollout.helpers import greedy, infer_config
from tests.rollout.test_worker_recovery import SLOW_ENV


def test_a_killed_inference_worker_restarts_with_the_current_weights(ray_session, tiny_model_dir):
    infer = Cluster("actor_infer", InferWorker, infer_config(tiny_model_dir), max_restarts=1, threads_per_worker=1)
    from transformers import AutoModelForCausalLM

    trained = {k: v + 0.01 for k, v in AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict().items()}
    infer.execute_all("update_weights", ray.put(trained), 7)  # "step 7's weights"
    # long replies (128 tokens a turn) keep generation in flight long enough to kill the worker during it
    cfg = EnvManagerConfig(num_env_groups=2, group_size=2, tags=["Slow"], generating_args=greedy(128))
    long_replies = dataclasses.replace(SLOW_ENV, max_tokens_per_step=128)
    scheduler = RolloutScheduler(cfg, {"Slow": long_replies}, sequence_length=700, seed=5,
                                 tokenizer_path=str(tiny_model_dir), infer=infer)
    (victim,) = ray.get([h.__ray_call__.remote(lambda host: os.getpid()) for h in infer.hosts])
    outcome: dict = {}

    def rollout() -> None:
        try:
            outcome["batch"] = scheduler.get_batch(4, step=1)
        except Exception as exc:  # handed to the test thread
            outcome["error"] = exc

    try:
        thread = threading.Thread(target=rollout)
        thread.start()
        deadline = time.monotonic() + 300
        while infer.execute_rank0("get_stats")["decode_tokens"] == 0:  # wait until the worker is decoding
            assert time.monotonic() < deadline and thread.is_alive(), "generation never started"
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        thread.join(timeout=400)
        assert not thread.is_alive(), "the rollout never finished after the inference worker was killed"
        assert "error" not in outcome, outcome.get("error")
        version = infer.execute_rank0("get_version")
        (pid, restored), = ray.get([h.status.remote() for h in infer.hosts])
        (served,) = ray.get([h.__ray_call__.remote(lambda host: host.worker.strategy.state_dict()) for h in infer.hosts])
    finally:
        scheduler.shutdown()
        infer.shutdown()
    batch = outcome["batch"]
    assert pid != victim and restored and version == 7  # a new process, holding step 7's weights
    assert all(torch.equal(served[k], trained[k]) for k in trained)
    assert batch.info["rollout/infer_worker_restarts"] == 1
    assert batch.info["rollout/failures/infer_worker_died"] >= 1
    assert len(batch) == 4 and len(set(batch["traj_group_id"])) == 2
