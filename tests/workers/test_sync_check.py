"""Verified weight sync: the inference side proves, by a checksum per weight, that it holds what the
trainer sent; a weight corrupted on the way, or a LoRA update that never reached it, stops the run."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModelForCausalLM

from roll.configs.worker_config import ModelArgs, TrainingArgs, WorkerConfig
from roll.distributed import Cluster
from roll.pipeline.agentic.sync_check import SyncVerifier
from roll.pipeline.agentic.weight_sync import plan_buckets, stream_weights
from roll.utils.shared_weights import SharedWeights
from roll.utils.weight_checksum import WeightSyncMismatch, fold_checksums, state_checksums, tensor_checksum
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from roll.workers.infer_worker import InferWorker
from tests.workers.helpers import actor_config
from tests.workers.test_weight_sync import target_batch

CORRUPTED = "model.layers.0.self_attn.q_proj.weight"


class CorruptingLink:
    """actor_train seen through a faulty transfer: one weight of the bucket that holds it arrives with
    one element changed; the trainer itself is untouched."""

    def __init__(self, actor: Cluster, name: str) -> None:
        self.actor, self.name = actor, name

    def execute_rank0_ref(self, method: str, names=None):
        import ray

        part = self.actor.execute_rank0(method, names)
        shared = isinstance(part, SharedWeights)  # views of the trainer's live weights: change a copy
        state = {k: v.clone() for k, v in part.tensors().items()} if shared else part
        if self.name in state:
            state[self.name].view(-1)[7] += 0.5
        return ray.put(SharedWeights.of(state) if shared else state)


def test_the_checksum_changes_with_any_one_element_and_folds_like_a_fused_tensor():
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(64, 32, generator=g)
    before = tensor_checksum(weight)
    for index in (0, 1000, 2047):
        changed = weight.clone()
        changed.view(-1)[index] = torch.nextafter(changed.view(-1)[index], torch.tensor(1e9))  # the least change
        assert tensor_checksum(changed) != before
    # the sum over parts equals the checksum of the tensor a fused engine stores (vLLM's qkv_proj)
    q, k, v = (torch.randn(8, 16, generator=g) for _ in range(3))
    parts = state_checksums({"l.q_proj.w": q, "l.k_proj.w": k, "l.v_proj.w": v, "l.o_proj.w": q})
    folded = fold_checksums(parts, lambda n: "l.qkv_proj.w" if n[2] in "qkv" and n[3] == "_" else n)
    assert folded == {"l.qkv_proj.w": tensor_checksum(torch.cat([q, k, v])), "l.o_proj.w": tensor_checksum(q)}
    # cast to bf16 on the trainer side = what copying an fp32 weight into a bf16 model stores
    held = torch.empty(64, 32, dtype=torch.bfloat16)
    held.copy_(weight)
    assert tensor_checksum(weight, torch.bfloat16) == tensor_checksum(held)


def test_a_weight_corrupted_in_flight_stops_the_sync_naming_it(tiny_model_dir, ray_session):
    actor = Cluster("actor_train", ActorWorker, actor_config(tiny_model_dir), executor="local")
    infer = Cluster("actor_infer", InferWorker, WorkerConfig(model_args=ModelArgs(model_name_or_path=str(tiny_model_dir))),
                    threads_per_worker=1)
    verifier = SyncVerifier(actor, infer, "fp32")
    try:
        buckets = plan_buckets(actor.execute_rank0("inference_weight_bytes"), 4096)
        stream_weights(actor, infer, buckets, version=1)
        verifier.verify(verifier.trainer_checksums(), version=1)  # an honest sync passes
        assert verifier.take_metrics()["sync/verified"] == 1.0

        stream_weights(CorruptingLink(actor, CORRUPTED), infer, buckets, version=2)
        expected = verifier.trainer_checksums()
        with pytest.raises(WeightSyncMismatch, match=CORRUPTED) as caught:
            verifier.verify(expected, version=2)
        (mismatch,) = caught.value.mismatches  # only the corrupted weight differs
        assert mismatch.name == CORRUPTED and mismatch.trainer == expected[CORRUPTED]
        assert mismatch.inference is not None and mismatch.inference != mismatch.trainer
        assert f"trainer checksum {mismatch.trainer}" in str(caught.value)
        assert f"inference checksum {mismatch.inference}" in str(caught.value)
        assert caught.value.version == 2 and caught.value.rank == 0
    finally:
        infer.shutdown()
        actor.shutdown()


def test_a_lora_update_that_never_reached_the_engine_is_caught_and_a_merged_one_verifies(tiny_model_dir, ray_session):
    """verl#7495's failure: the engine kept the base weights while the trainer trained an adapter. Here
    the trainer is fp32 with LoRA and the engine bf16: the merged weights, rounded, must match."""
    lora = dataclasses.replace(
        actor_config(tiny_model_dir),
        model_args=ModelArgs(model_name_or_path=str(tiny_model_dir), lora_rank=4, lora_alpha=8),
        training_args=TrainingArgs(learning_rate=3e-2, per_device_train_batch_size=4))
    actor = Cluster("actor_train", ActorWorker, lora, executor="local")
    infer = Cluster("actor_infer", InferWorker,
                    WorkerConfig(model_args=ModelArgs(model_name_or_path=str(tiny_model_dir), dtype="bf16")),
                    threads_per_worker=1)
    verifier = SyncVerifier(actor, infer, "bf16")
    try:
        batch = target_batch()
        batch.tensors["old_logprobs"] = actor.execute_rank0("compute_log_probs", batch)["logprobs"]
        actor.execute_rank0("train_step", batch, LossConfig(pg_clip_low=10.0, pg_clip_high=100.0))
        with pytest.raises(WeightSyncMismatch, match="proj") as caught:  # the adapter's layers differ
            verifier.verify(verifier.trainer_checksums(), version=1)
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
        assert all(m.name in base for m in caught.value.mismatches)
        assert not any("embed" in m.name or "norm" in m.name for m in caught.value.mismatches)  # not LoRA targets

        stream_weights(actor, infer, plan_buckets(actor.execute_rank0("inference_weight_bytes"), 4096), version=1)
        verifier.verify(verifier.trainer_checksums(), version=1)
    finally:
        infer.shutdown()
        actor.shutdown()
