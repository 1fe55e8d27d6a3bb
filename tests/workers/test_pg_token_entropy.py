"""pg_min_token_entropy and entropy_floor_min_token_entropy: response tokens whose entropy under the
policy is below the threshold take no policy-gradient term, or no entropy-floor bonus. Checked on a real
(tiny) model through ActorWorker.train_step."""

from __future__ import annotations

import dataclasses

import pytest

from roll.distributed import Cluster
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.workers.helpers import actor_config, make_batch, max_abs_diff


def one_update(model_dir, threshold: float, **loss_args):
    """(response-token entropies before the update, train metrics, weights moved by) for one update of
    one micro-batch (all 8 samples, random advantages), with LossConfig(pg_min_token_entropy=threshold,
    **loss_args)."""
    batch = make_batch()
    config = actor_config(model_dir)
    config.training_args = dataclasses.replace(config.training_args, per_device_train_batch_size=8,
                                               gradient_accumulation_steps=1)
    cfg = LossConfig(mini_batch_size=8, pg_min_token_entropy=threshold, max_grad_norm=None, shuffle=False,
                     **loss_args)
    cluster = Cluster("pg_entropy", ActorWorker, config, executor="local")
    try:
        entropy = cluster.execute_rank0("compute_log_probs", batch, True)["entropy"]
        entropies = entropy[batch.tensors["response_mask"].bool()]
        before = cluster.execute_rank0("get_state_dict")
        metrics = cluster.execute_rank0("train_step", batch, cfg)
        return entropies, metrics, max_abs_diff(before, cluster.execute_rank0("get_state_dict"))
    finally:
        cluster.shutdown()


def test_only_tokens_at_or_above_the_threshold_take_the_policy_gradient(tiny_model_dir):
    entropies, _, moved_all = one_update(tiny_model_dir, 0.0)
    assert moved_all > 1e-4  # without a threshold these advantages move the weights
    median = float(entropies.median())
    _, metrics, moved_half = one_update(tiny_model_dir, median)
    expected_share = float((entropies >= median).float().mean())
    assert 0.3 < expected_share < 0.7
    assert metrics["actor/pg_token_share"] == pytest.approx(expected_share, abs=1e-6)
    assert moved_half > 1e-4
    # above every token's entropy nothing takes the gradient, and no other term is on: nothing moves
    _, metrics, moved_none = one_update(tiny_model_dir, float(entropies.max()) + 1.0)
    assert metrics["actor/pg_token_share"] == 0.0 and metrics["actor/pg_loss"] == 0.0
    assert moved_none == 0.0


def test_the_entropy_floor_bonus_covers_only_tokens_at_or_above_its_threshold(tiny_model_dir):
    entropies, _, _ = one_update(tiny_model_dir, 0.0)
    no_pg = float(entropies.max()) + 1.0  # the policy-gradient term off on every token: the floor alone acts
    floor = dict(entropy_floor=float(entropies.mean()) + 1.0, entropy_floor_coef=1.0)  # always short of it
    _, metrics, moved_all = one_update(tiny_model_dir, no_pg, **floor)
    assert metrics["actor/entropy_floor_coef"] > 0 and moved_all > 1e-4
    median = float(entropies.median())
    _, metrics, moved_half = one_update(tiny_model_dir, no_pg, entropy_floor_min_token_entropy=median, **floor)
    assert metrics["actor/entropy_floor_token_share"] == pytest.approx(float((entropies >= median).float().mean()),
                                                                        abs=1e-6)
    assert moved_half > 1e-4
    # the floor is still measured over every token, so its weight is unchanged; with no token above the
    # threshold the bonus has nothing to act on and nothing moves
    _, metrics_none, moved_none = one_update(tiny_model_dir, no_pg, entropy_floor_min_token_entropy=no_pg, **floor)
    assert metrics_none["actor/entropy_floor_coef"] == pytest.approx(metrics["actor/entropy_floor_coef"], rel=1e-5)
    assert metrics_none["actor/entropy_floor_token_share"] == 0.0
    assert moved_none == 0.0
