"""The SFT warm-up's steps on a real worker: they learn, they leave the RL optimizer untouched, and
end_sft_warmup frees their own optimizer's moments (twice the weights' size) for the rest of the run."""

from __future__ import annotations

import gc
import weakref

import torch

from roll.distributed.cluster import Cluster
from roll.workers.actor_worker import ActorWorker
from tests.workers.helpers import actor_config, make_batch


def test_sft_steps_learn_and_end_sft_warmup_frees_their_optimizer(tiny_model_dir):
    batch = make_batch().select(["input_ids", "attention_mask", "position_ids", "response_mask"])
    actor = Cluster("sft", ActorWorker, actor_config(tiny_model_dir), executor="local")
    try:
        worker = actor.hosts[0].worker
        losses = [actor.execute_rank0("sft_step", batch, learning_rate=1e-3)["sft/loss"] for _ in range(4)]
        moment = next(iter(worker._sft_optimizer.state.values()))["exp_avg"]
        moment_alive = weakref.ref(moment)
        del moment
        rl_state_before = len(worker.strategy.optimizer.state)

        actor.execute_all("end_sft_warmup")
        gc.collect()
        # a later warm-up step still works: it builds a fresh optimizer
        again = actor.execute_rank0("sft_step", batch, learning_rate=1e-3)["sft/loss"]
    finally:
        actor.shutdown()

    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < losses[0] - 0.3, losses
    assert rl_state_before == 0  # the warm-up never touched the RL optimizer's moments
    assert moment_alive() is None, "the warm-up optimizer's moments are still referenced after end_sft_warmup"
    assert again < losses[0]


def test_every_reference_rank_takes_the_warmed_up_weights(tiny_model_dir):
    """The pipeline's reference_from_actor: hf_train reference ranks each hold the whole model, so each
    loads the warmed-up weights; both halves of a batch then score as the warmed-up policy does."""
    from roll.pipeline.agentic.builders import forward_only

    batch = make_batch()
    sft_batch = batch.select(["input_ids", "attention_mask", "position_ids", "response_mask"])
    actor = Cluster("sft", ActorWorker, actor_config(tiny_model_dir), executor="local")
    reference = Cluster("reference", ActorWorker, forward_only(actor_config(tiny_model_dir)), num_workers=2,
                        executor="local")
    try:
        base = reference.dispatch_batch("compute_log_probs", batch)
        actor.execute_rank0("sft_step", sft_batch, learning_rate=1e-3)
        reference.execute_all("load_model_weights", actor.execute_rank0("get_state_dict"))
        warmed = actor.dispatch_batch("compute_log_probs", batch)
        scored = reference.dispatch_batch("compute_log_probs", batch)
    finally:
        actor.shutdown()
        reference.shutdown()
    mask = batch["response_mask"].bool()
    assert (warmed["logprobs"] - base["logprobs"])[mask].abs().max() > 1e-3, "the warm-up step moved nothing"
    assert torch.allclose(scored["logprobs"][mask], warmed["logprobs"][mask], atol=1e-5)
