"""KL kinds, loss aggregation modes and reward-normalisation methods are registries that validation reads."""

import pytest
import torch

from roll.algorithms import (
    KL_KINDS,
    LOSS_AGG_MODES,
    NORM_METHODS,
    agg_loss,
    kl_penalty,
    normalize_rewards,
    register_kl_kind,
    register_loss_agg_mode,
    register_norm_method,
)
from roll.configs import ConfigError
from roll.launch.loader import load_agentic_config

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


@pytest.fixture(autouse=True)
def restore_registries(monkeypatch):
    for registry in (KL_KINDS, LOSS_AGG_MODES, NORM_METHODS):
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))


def test_registered_kl_kind_is_used_and_validates():
    register_kl_kind("quartic_test")(lambda log_ratio: log_ratio**4)
    assert kl_penalty(torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -1.0]), "quartic_test").tolist() == [1.0, 16.0]
    assert load_agentic_config(*CPU, overrides=["kl_penalty=quartic_test"]).kl_penalty == "quartic_test"


def test_registered_loss_agg_mode_is_used_and_validates():
    register_loss_agg_mode("max_row_test")(lambda selected, mask, n_tokens, n_seqs, length: selected.sum(-1).max())
    loss = torch.tensor([[1.0, 2.0, 9.0], [3.0, 4.0, 5.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert agg_loss(loss, mask, "max_row_test").item() == 12.0  # row sums 3 (9 is masked out) and 12
    assert load_agentic_config(*CPU, overrides=["loss_agg_mode=max_row_test"]).loss_agg_mode == "max_row_test"


def test_registered_norm_method_is_used_and_validates():
    register_norm_method("minus_batch_min_test")(lambda scores, groups, eps: scores - scores.min())
    assert normalize_rewards(torch.tensor([3.0, 5.0, 4.0]), [0, 0, 1], "minus_batch_min_test").tolist() == [0.0, 2.0, 1.0]
    config = load_agentic_config(*CPU, overrides=["reward_normalization.method=minus_batch_min_test"])
    assert config.reward_normalization.method == "minus_batch_min_test"


@pytest.mark.parametrize("key, registry", [("kl_penalty", KL_KINDS), ("loss_agg_mode", LOSS_AGG_MODES),
                                           ("reward_normalization.method", NORM_METHODS)])
def test_unknown_choice_names_every_registered_one(key, registry):
    with pytest.raises(ConfigError) as info:
        load_agentic_config(*CPU, overrides=[f"{key}=no_such_choice"])
    message = str(info.value)
    assert key in message and "'no_such_choice'" in message
    assert all(f"'{name}'" in message for name in registry)
    assert {"kl", "k3"} <= set(KL_KINDS) and {"token-mean", "seq-mean-token-sum-norm"} <= set(LOSS_AGG_MODES)
    assert set(NORM_METHODS) >= {"identity", "mean", "mean_std"}
