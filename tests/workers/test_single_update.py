"""In a single update (one epoch, one mini-batch) the actor may take old log-probs from its own forward
pass: the result equals training with old log-probs scored beforehand."""

import pytest

from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig

from .helpers import actor_config, make_batch, max_abs_diff


def updated_weights(model_dir, with_old_logprobs: bool):
    worker = ActorWorker(actor_config(model_dir))
    batch = make_batch()
    del batch.tensors["old_logprobs"]
    if with_old_logprobs:
        batch.tensors["old_logprobs"] = worker.compute_log_probs(batch)["logprobs"]
    metrics = worker.train_step(batch, LossConfig(ppo_epochs=1, mini_batch_size=len(batch)))
    return worker.strategy.full_state_dict(), metrics


def test_single_update_without_old_logprobs_matches_scored_ones(tiny_model_dir):
    skipped, skipped_metrics = updated_weights(tiny_model_dir, with_old_logprobs=False)
    scored, scored_metrics = updated_weights(tiny_model_dir, with_old_logprobs=True)
    assert max_abs_diff(skipped, scored) < 1e-6
    assert skipped_metrics["actor/pg_loss"] == pytest.approx(scored_metrics["actor/pg_loss"], abs=1e-6)
    assert skipped_metrics["actor/clipfrac"] == 0.0


def test_several_updates_still_require_old_logprobs(tiny_model_dir):
    worker = ActorWorker(actor_config(tiny_model_dir))
    batch = make_batch()
    del batch.tensors["old_logprobs"]
    with pytest.raises(ValueError, match="needs old_logprobs unless it makes a single update"):
        worker.train_step(batch, LossConfig(ppo_epochs=2, mini_batch_size=len(batch)))


def test_single_update_rule_and_mini_batch_size():
    from roll.configs.worker_config import TrainingArgs
    from roll.workers.train_worker import is_single_update

    mini = TrainingArgs(per_device_train_batch_size=2, gradient_accumulation_steps=4).mini_batch_size
    assert mini == 8
    assert is_single_update(8, ppo_epochs=1, mini_batch_size=mini)
    assert not is_single_update(9, ppo_epochs=1, mini_batch_size=mini)  # two mini-batches: the policy moves in between
    assert not is_single_update(4, ppo_epochs=2, mini_batch_size=mini)  # the second epoch sees a moved policy
