"""ROLL's pg_variant configs train two steps on this CPU with `--cpu pretrain=tiny-random-qwen2`, through
the real launcher and a real Ray: agent_val_frozen_lake-pg_var.yaml (pg_variant: topr) and
agent_val_frozen_lake-pg_var_is_correct.yaml (topr + enable_old_logprobs_recompute + a segment filter)."""

from __future__ import annotations

import pytest

from tests.pipeline.test_roll_configs_run import run_one_step, work  # noqa: F401 (fixture)


def test_pg_var_topr_config_trains_two_steps(work):  # noqa: F811
    steps = [m for m in run_one_step(work, "agent_val_frozen_lake-pg_var", "topr", "max_steps=2") if "actor/pg_loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for m in steps:
        # topr's own metric: the share of response tokens in samples with a positive episode score
        assert 0.0 <= m["actor/topr_positive_tokens"] <= 1.0
        # no correction enabled: the statistics are reported, hf_infer's log-probs match the trainer's
        assert m["actor/train_infer_ratio_token_mean"] == pytest.approx(1.0, abs=1e-3)
        assert "actor/train_infer_final_mask_mean" not in m


def test_pg_var_is_correct_config_trains_two_steps_with_the_drivers_correction(work):  # noqa: F811
    steps = [m for m in run_one_step(work, "agent_val_frozen_lake-pg_var_is_correct", "is_correct", "max_steps=2")
             if "actor/pg_loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for m in steps:
        # enable_old_logprobs_recompute: the driver scored old log-probs and filtered on segments
        assert 0.0 <= m["actor/train_infer_segment_ratio_mask_mean"] <= 1.0
        assert 0.0 <= m["actor/train_infer_segment_diff_mask_mean"] <= 1.0
        assert m["actor/train_infer_final_mask_mean"] <= min(m["actor/train_infer_segment_ratio_mask_mean"],
                                                             m["actor/train_infer_segment_diff_mask_mean"])
        assert m["actor/train_infer_kl"] == pytest.approx(0.0, abs=1e-3)
        assert "actor/topr_positive_tokens" in m
