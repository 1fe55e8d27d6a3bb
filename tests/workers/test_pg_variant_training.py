"""pg_variant and train_infer_correction inside ActorWorker.train_step, on a tiny model."""

import pytest
import torch

from roll.algorithms import CorrectionFilterConfig, ISWeightConfig, PGVariantArgs, TrainInferCorrectionConfig
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig

from .helpers import actor_config, make_batch, max_abs_diff

AGG = "seq-mean-token-sum"  # its denominator (rows) does not move when a filter drops some tokens of a row


def train(model_dir, batch, **loss):
    worker = ActorWorker(actor_config(model_dir))
    before = {k: v.clone() for k, v in worker.strategy.full_state_dict().items()}
    metrics = worker.train_step(batch, LossConfig(ppo_epochs=1, mini_batch_size=len(batch), loss_agg_mode=AGG, **loss))
    return before, worker.strategy.full_state_dict(), metrics


def batch_with_own_infer_logprobs(model_dir):
    batch = make_batch()
    del batch.tensors["old_logprobs"]
    batch.tensors["infer_logprobs"] = ActorWorker(actor_config(model_dir)).compute_log_probs(batch)["logprobs"]
    batch.tensors["scores"] = torch.tensor([1.0, -1.0] * (len(batch) // 2))
    return batch


def test_on_policy_every_variant_makes_the_ppo_update(tiny_model_dir):
    batch = batch_with_own_infer_logprobs(tiny_model_dir)
    _, ppo, _ = train(tiny_model_dir, batch)
    for variant in ("vanilla", "tis", "topr", "cispo", "kimi15"):
        _, other, metrics = train(tiny_model_dir, batch, pg_variant=variant)
        assert max_abs_diff(ppo, other) < 1e-6, variant
    assert metrics["actor/train_infer_ratio_token_mean"] == pytest.approx(1.0, abs=1e-5)


def test_topr_with_no_weight_on_negative_episodes_ignores_them(tiny_model_dir):
    batch = batch_with_own_infer_logprobs(tiny_model_dir)
    batch.tensors["scores"] = torch.full((len(batch),), -1.0)
    args = PGVariantArgs(topr_negative_weight=0.0)
    before, after, _ = train(tiny_model_dir, batch, pg_variant="topr", pg_variant_args=args)
    assert max_abs_diff(before, after) == 0.0  # zero gradient: Adam does not move
    _, moved, _ = train(tiny_model_dir, batch, pg_variant="vanilla")
    assert max_abs_diff(before, moved) > 1e-3


def test_identical_infer_logprobs_make_the_correction_the_identity(tiny_model_dir):
    batch = batch_with_own_infer_logprobs(tiny_model_dir)
    correction = TrainInferCorrectionConfig(
        is_weight=ISWeightConfig(enabled=True, weight_type="sequence", upper_bound=1.0),
        filters=[CorrectionFilterConfig(enabled=True, agg_type="segment", ratio_low=0.999, ratio_high=1.001)])
    _, plain, _ = train(tiny_model_dir, batch)
    _, corrected, metrics = train(tiny_model_dir, batch, train_infer_correction=correction)
    assert max_abs_diff(plain, corrected) < 1e-6
    assert metrics["actor/train_infer_final_mask_mean"] == pytest.approx(1.0)


def test_a_filter_drops_exactly_the_tokens_it_rejects(tiny_model_dir):
    batch = batch_with_own_infer_logprobs(tiny_model_dir)
    response = batch["response_mask"]
    # every other response token was "generated" with a log-prob 1 nat lower: token ratio e ≈ 2.7
    shifted = torch.zeros_like(response)
    shifted[:, 1::2] = 1
    shifted = shifted * response
    shifted[:, :3] = 0  # keep at least one token per row
    batch.tensors["infer_logprobs"] = batch["infer_logprobs"] - shifted.float()
    correction = TrainInferCorrectionConfig(filters=[CorrectionFilterConfig(enabled=True, agg_type="token")])
    _, filtered, metrics = train(tiny_model_dir, batch, train_infer_correction=correction)
    expected_batch = batch_with_own_infer_logprobs(tiny_model_dir)
    expected_batch.tensors["response_mask"] = response * (1 - shifted)
    _, expected, _ = train(tiny_model_dir, expected_batch)
    assert max_abs_diff(filtered, expected) < 1e-6
    kept = 1 - float(shifted.sum()) / float(response.sum())
    assert metrics["actor/train_infer_final_mask_mean"] == pytest.approx(kept, abs=1e-6)
