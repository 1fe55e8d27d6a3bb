"""entropy_floor: an entropy bonus weighted by how far each micro-batch's mean token entropy is below
the floor. Checked on a real (tiny) model through ActorWorker.train_step with every advantage 0, so the
floor's term is the only thing that can move the weights."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from roll.distributed import Cluster
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.workers.helpers import actor_config, make_batch, max_abs_diff


def one_update(model_dir, floor: float, coef: float = 2.0):
    """(mean response-token entropy before, after, train metrics, weights moved by) for one update of one
    micro-batch (all 8 samples) with zero advantages."""
    batch = make_batch()
    batch.tensors["advantages"].zero_()
    config = actor_config(model_dir)
    # a plain AdamW step (eps 1e-8, lr 1e-3): with lr 0.1 the step would overshoot the uniform distribution
    config.training_args = dataclasses.replace(config.training_args, learning_rate=1e-3, adam_epsilon=1e-8,
                                               per_device_train_batch_size=8, gradient_accumulation_steps=1)
    cfg = LossConfig(mini_batch_size=8, entropy_floor=floor, entropy_floor_coef=coef, max_grad_norm=None, shuffle=False)
    cluster = Cluster("floor", ActorWorker, config, executor="local")
    try:
        def mean_entropy() -> float:
            ent = cluster.execute_rank0("compute_log_probs", batch, True)["entropy"]
            mask = batch.tensors["response_mask"].bool()
            return float(ent[mask].mean())

        before_weights, before = cluster.execute_rank0("get_state_dict"), mean_entropy()
        metrics = cluster.execute_rank0("train_step", batch, cfg)
        moved = max_abs_diff(before_weights, cluster.execute_rank0("get_state_dict"))
        return before, mean_entropy(), metrics, moved
    finally:
        cluster.shutdown()


def test_a_floor_above_the_entropy_raises_it_with_a_weight_proportional_to_the_shortfall(tiny_model_dir):
    floor = 10.0  # above log(vocab) of the tiny model: every micro-batch is below it
    before, after, metrics, moved = one_update(tiny_model_dir, floor)
    assert metrics["actor/entropy"] == pytest.approx(before, abs=1e-4)
    assert metrics["actor/entropy_floor_coef"] == pytest.approx(2.0 * (floor - before), rel=1e-4)
    assert moved > 1e-4 and after > before + 1e-4


def test_a_floor_below_the_entropy_leaves_the_weights_alone(tiny_model_dir):
    before, after, metrics, moved = one_update(tiny_model_dir, floor=0.01)
    assert before > 1.0  # a random model is far above the floor
    assert metrics["actor/entropy_floor_coef"] == 0.0
    assert moved == 0.0 and after == pytest.approx(before, abs=1e-6)
