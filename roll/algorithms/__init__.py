"""RL algorithms as pure functions: tensors and plain numbers in, tensors out (see docs/algorithms.md).

No config objects, no Ray, no I/O: the pipeline reads the config and passes the few values each
function needs, so every formula here can be tested against numbers worked out by hand.
"""

from roll.algorithms.advantages import (
    ADV_ESTIMATORS,
    AdvantageInputs,
    compute_advantages,
    compute_discounted_returns,
    compute_gae,
    estimator_needs_values,
    register_adv_estimator,
)
from roll.algorithms.kl import KL_KINDS, AdaptiveKLController, FixedKLController, kl_penalty, register_kl_kind
from roll.algorithms.logprobs import (
    entropy_for_input_ids,
    entropy_from_logits,
    logprobs_for_input_ids,
    logprobs_from_logits,
)
from roll.algorithms.losses import (
    LOSS_AGG_MODES,
    agg_denominators,
    agg_loss,
    entropy_loss,
    kl_loss,
    ppo_policy_loss,
    register_loss_agg_mode,
    value_loss,
)
from roll.algorithms.masked import masked_mean, masked_sum, masked_var, masked_whiten
from roll.algorithms.step_advantages import StepCreditOptions, step_credit_metrics
from roll.algorithms.rewards import (
    NORM_METHODS,
    NORM_TYPES,
    clip_rewards,
    last_response_index,
    normalize_rewards,
    register_norm_method,
    token_level_rewards,
)

__all__ = [
    "ADV_ESTIMATORS",
    "AdvantageInputs",
    "KL_KINDS",
    "LOSS_AGG_MODES",
    "NORM_METHODS",
    "NORM_TYPES",
    "StepCreditOptions",
    "AdaptiveKLController",
    "FixedKLController",
    "agg_denominators",
    "agg_loss",
    "clip_rewards",
    "compute_advantages",
    "compute_discounted_returns",
    "compute_gae",
    "entropy_for_input_ids",
    "estimator_needs_values",
    "entropy_from_logits",
    "entropy_loss",
    "kl_loss",
    "kl_penalty",
    "last_response_index",
    "logprobs_for_input_ids",
    "logprobs_from_logits",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "normalize_rewards",
    "ppo_policy_loss",
    "register_adv_estimator",
    "register_kl_kind",
    "register_loss_agg_mode",
    "register_norm_method",
    "step_credit_metrics",
    "token_level_rewards",
    "value_loss",
]
