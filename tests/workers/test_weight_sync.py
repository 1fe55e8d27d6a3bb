"""Weights flow actor_train → actor_infer: after training, greedy generation changes and the
infer worker's version counter says which weights it holds."""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import pytest
import torch
from transformers import AutoModelForCausalLM

from roll.configs.worker_config import ModelArgs, TrainingArgs, WorkerConfig
from roll.data.batch import Batch
from roll.distributed import Cluster
from roll.pipeline.agentic.weight_sync import ALL_WEIGHTS, plan_buckets, stream_weights
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from roll.strategies.generation import GenerationRequest, SamplingParams
from roll.workers.infer_worker import InferWorker
from tests.workers.helpers import actor_config

PROMPT = [11, 12, 13, 14, 15]
TARGET = [201, 202, 203, 204]


def greedy_request(i: int) -> GenerationRequest:
    sampling = SamplingParams(max_new_tokens=len(TARGET), do_sample=False, temperature=0.0, top_p=1.0, top_k=0, seed=0)
    return GenerationRequest(input_ids=PROMPT, sampling=sampling, request_id=f"r{i}")


def target_batch(n: int = 4) -> Batch:
    """n copies of PROMPT + TARGET with advantage +1 on the target tokens: the update raises their probability."""
    ids = torch.tensor([PROMPT + TARGET] * n)
    response = torch.zeros_like(ids)
    response[:, len(PROMPT):] = 1
    return Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids), "response_mask": response,
                  "advantages": response.float()})


def test_trained_weights_reach_the_infer_worker(tiny_model_dir, ray_session):
    train_config = dataclasses.replace(actor_config(tiny_model_dir), training_args=TrainingArgs(
        learning_rate=3e-2, per_device_train_batch_size=4))
    actor = Cluster("actor_train", ActorWorker, train_config, executor="local")
    infer = Cluster("actor_infer", InferWorker, WorkerConfig(model_args=ModelArgs(model_name_or_path=str(tiny_model_dir))),
                    threads_per_worker=1)
    try:
        infer.execute_all("update_weights", actor.execute_rank0("get_state_dict"), 0)
        first = infer.execute_rank0("generate", [greedy_request(0)])[0]
        assert first.output_ids != TARGET and infer.execute_rank0("get_version") == 0

        batch = target_batch()
        cfg = LossConfig(ppo_epochs=4, pg_clip_low=10.0, pg_clip_high=100.0)
        for _ in range(3):
            batch.tensors["old_logprobs"] = actor.execute_rank0("compute_log_probs", batch)["logprobs"]
            actor.execute_rank0("train_step", batch, cfg)
        # before the sync the infer worker still generates with the old weights
        assert infer.execute_rank0("generate", [greedy_request(1)])[0].output_ids == first.output_ids

        trained = actor.execute_rank0("get_state_dict")
        infer.execute_all("update_weights", trained, 1)
        after = infer.execute_rank0("generate", [greedy_request(2)])[0]
        assert infer.execute_all("get_version") == [1]
        assert after.output_ids != first.output_ids
        assert after.output_ids[0] == TARGET[0]  # the trained-for token now wins
        assert after.weight_version == 1
        # and it is exactly what the trained weights generate greedily on their own
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
        model.load_state_dict(trained)
        with torch.no_grad():
            out = model.generate(torch.tensor([PROMPT]), max_new_tokens=len(TARGET), do_sample=False)
        assert after.output_ids == out[0, len(PROMPT):].tolist()
    finally:
        infer.shutdown()
        actor.shutdown()


def test_buckets_hold_at_most_the_limit_in_order_and_a_bigger_weight_alone():
    sizes = {"embed": 100, "a": 30, "b": 30, "c": 50, "head": 120, "norm": 4}
    assert plan_buckets(sizes, 64) == [["embed"], ["a", "b"], ["c"], ["head"], ["norm"]]
    assert plan_buckets(sizes, 1000) == [list(sizes)]
    assert plan_buckets(None, 64) == [ALL_WEIGHTS]  # sizes unknown: one piece
    with pytest.raises(ValueError, match="max_bytes=0"):
        plan_buckets(sizes, 0)


def trained_actor(tiny_model_dir) -> Cluster:
    """actor_train whose weights moved away from the checkpoint the inference worker starts from."""
    train_config = dataclasses.replace(actor_config(tiny_model_dir), training_args=TrainingArgs(
        learning_rate=3e-2, per_device_train_batch_size=4))
    actor = Cluster("actor_train", ActorWorker, train_config, executor="local")
    batch = target_batch()
    batch.tensors["old_logprobs"] = actor.execute_rank0("compute_log_probs", batch)["logprobs"]
    actor.execute_rank0("train_step", batch, LossConfig(pg_clip_low=10.0, pg_clip_high=100.0))
    return actor


def served_weights(infer: Cluster) -> list[dict[str, torch.Tensor]]:
    import ray

    return ray.get([h.__ray_call__.remote(lambda host: host.worker.strategy.state_dict()) for h in infer.hosts])


def test_streamed_buckets_give_the_infer_worker_exactly_the_trained_weights(tiny_model_dir, ray_session):
    actor = trained_actor(tiny_model_dir)
    infer = Cluster("actor_infer", InferWorker, WorkerConfig(model_args=ModelArgs(model_name_or_path=str(tiny_model_dir))),
                    threads_per_worker=1)
    try:
        sizes = actor.execute_rank0("inference_weight_bytes")
        buckets = plan_buckets(sizes, max(sizes.values()))
        assert 2 < len(buckets) < len(sizes)  # several buckets, some with several weights
        stream_weights(actor, infer, buckets, version=3)
        (served,) = served_weights(infer)
        trained = actor.execute_rank0("get_state_dict")
        assert infer.execute_all("get_version") == [3]
        assert sorted(served) == sorted(trained)
        assert all(torch.equal(served[k], trained[k]) for k in trained)
        original = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
        assert any(not torch.equal(original[k], trained[k]) for k in trained)  # training moved them
    finally:
        infer.shutdown()
        actor.shutdown()


def test_a_killed_infer_worker_gets_the_streamed_weights_from_the_restore_hook(tiny_model_dir, ray_session):
    import ray

    actor = trained_actor(tiny_model_dir)
    infer = Cluster("actor_infer", InferWorker, WorkerConfig(model_args=ModelArgs(model_name_or_path=str(tiny_model_dir))),
                    threads_per_worker=1, max_restarts=1)
    try:
        buckets = plan_buckets(actor.execute_rank0("inference_weight_bytes"), 4096)
        stream_weights(actor, infer, buckets, version=5)
        restores: list[int] = []
        infer.restore_hook = lambda rank: (restores.append(rank), stream_weights(actor, infer, buckets, 5, rank=rank))
        (victim,) = ray.get([h.__ray_call__.remote(lambda host: os.getpid()) for h in infer.hosts])
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 120
        restored = 0
        while not restored:  # until Ray has noticed the death and started a new process
            assert time.monotonic() < deadline, "the inference worker was not restarted"
            try:
                restored = infer.recover(timeout_s=60)
            except RuntimeError:
                time.sleep(0.5)
        (pid, ok), = ray.get([h.status.remote() for h in infer.hosts])
        (served,) = served_weights(infer)
        trained = actor.execute_rank0("get_state_dict")
        assert pid != victim and ok and restores == [0]
        assert infer.execute_all("get_version") == [5]
        assert all(torch.equal(served[k], trained[k]) for k in trained)
    finally:
        infer.shutdown()
        actor.shutdown()


def test_a_bucket_through_rays_store_is_the_weights_as_the_trainer_returned_them(tiny_model_dir, ray_session):
    import ray

    train_config = dataclasses.replace(actor_config(tiny_model_dir), training_args=TrainingArgs(
        learning_rate=3e-2, per_device_train_batch_size=4))
    actor = Cluster("actor_train", ActorWorker, train_config, threads_per_worker=1)
    infer = Cluster("actor_infer", InferWorker, WorkerConfig(model_args=ModelArgs(model_name_or_path=str(tiny_model_dir))),
                    threads_per_worker=1)
    try:
        names = list(actor.execute_rank0("inference_weight_bytes"))
        before = actor.execute_rank0("get_state_dict")
        bucket = actor.execute_rank0_ref("get_weight_bucket", names)  # views of the live weights when it returned
        batch = target_batch()
        batch.tensors["old_logprobs"] = actor.execute_rank0("compute_log_probs", batch)["logprobs"]
        actor.execute_rank0("train_step", batch, LossConfig(pg_clip_low=10.0, pg_clip_high=100.0))  # the trainer moves on
        assert any(not torch.equal(before[k], v) for k, v in actor.execute_rank0("get_state_dict").items())
        arrays = ray.get(bucket).raw
        assert not any(array.flags.writeable for array in arrays.values())  # the reader gets views of the store
        infer.execute_all("load_weights", bucket, 1)
        (served,) = served_weights(infer)
        assert all(torch.equal(served[k], before[k]) for k in names)
    finally:
        infer.shutdown()
        actor.shutdown()
