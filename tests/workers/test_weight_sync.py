"""Weights flow actor_train → actor_infer: after training, greedy generation changes and the
infer worker's version counter says which weights it holds."""

from __future__ import annotations

import dataclasses

import torch
from transformers import AutoModelForCausalLM

from roll.configs.worker_config import ModelArgs, TrainingArgs, WorkerConfig
from roll.data.batch import Batch
from roll.distributed import Cluster
from roll.workers.actor_worker import ActorWorker
from roll.workers.base_worker import LossConfig
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
        assert after.get("weight_version", 1) == 1
        # and it is exactly what the trained weights generate greedily on their own
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
        model.load_state_dict(trained)
        with torch.no_grad():
            out = model.generate(torch.tensor([PROMPT]), max_new_tokens=len(TARGET), do_sample=False)
        assert after.output_ids == out[0, len(PROMPT):].tolist()
    finally:
        infer.shutdown()
        actor.shutdown()
