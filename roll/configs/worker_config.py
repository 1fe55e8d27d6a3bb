"""The configuration of one worker role (actor_train, actor_infer, critic, reference).

Field names follow ROLL's YAML, so a ROLL config's worker blocks load unchanged. Keys that ROLL uses
but that have no effect in roll are listed in roll/launch/roll_keys.py: they load with one warning
line instead of an error (or are refused for a value roll cannot honour).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roll.algorithms.pg_variants import PGVariantArgs


@dataclass
class ModelArgs:
    model_name_or_path: str | None = None  # defaults to `pretrain` (critic: `reward_pretrain`)
    dtype: str = "fp32"  # fp32 | bf16 | fp16
    attn_implementation: str | None = None  # sdpa | eager | fa2 / flash_attention_2 (GPU only)
    disable_gradient_checkpointing: bool = True
    lora_rank: int | None = None
    lora_alpha: int | None = None
    lora_target: Any = None  # "all-linear", a comma-separated string or a list of module names
    lora_dropout: float = 0.0
    freeze_module_prefix: Any = None  # parameters whose names start with one of these (comma-separated or a list) are frozen


@dataclass
class TrainingArgs:
    learning_rate: float = 1.0e-6
    weight_decay: float = 0.0
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 1
    warmup_steps: int = 0
    warmup_ratio: float = 0.0  # warm-up as a fraction of the run's optimizer steps, used when warmup_steps is 0
    lr_scheduler_type: str = "constant"  # constant | linear | cosine (all with linear warmup)
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1.0e-8

    @property
    def mini_batch_size(self) -> int:
        """Sequences per optimizer step on each rank: per_device_train_batch_size × gradient_accumulation_steps."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps


@dataclass
class GeneratingArgs:
    max_new_tokens: int = 128
    temperature: float = 0.99
    top_p: float = 0.99
    top_k: int = 100
    do_sample: bool = True  # False (or temperature 0) = greedy
    stop_strings: list[str] | None = None


@dataclass
class StrategyArgs:
    strategy_name: str = "hf_infer"  # a name in roll/strategies/registry.py (train or infer kind, by role)
    strategy_config: dict[str, Any] | None = None


@dataclass
class DataArgs:
    """ROLL's data_args: its keys (a dataset, a chat template name) have no effect on agentic runs, whose
    prompts come from the envs rendered with the tokenizer's own chat template (roll/launch/roll_keys.py)."""


@dataclass
class WorkerConfig:
    model_args: ModelArgs = field(default_factory=ModelArgs)
    training_args: TrainingArgs = field(default_factory=TrainingArgs)
    generating_args: GeneratingArgs = field(default_factory=GeneratingArgs)
    strategy_args: StrategyArgs = field(default_factory=StrategyArgs)
    data_args: DataArgs = field(default_factory=DataArgs)
    # GPU ids (or, with no accelerator, one CPU worker per entry); a list or a string like "list(range(0,8))".
    device_mapping: list[int] | None = None
    infer_batch_size: int = 16  # sequences per forward pass when scoring log-probs / values
    use_dynamic_batching_in_train: bool = False
    max_tokens_per_microbatch_in_train: int = 0
    sequence_length_round_in_train: int = 64
    use_dynamic_batching_in_infer: bool = False
    max_tokens_per_microbatch_in_infer: int = 0
    sequence_length_round_in_infer: int = 64
    use_sequence_packing: bool = False
    sequence_packing_args: dict[str, Any] | None = None
    # actor_train's policy loss (roll/algorithms/pg_variants.py; ROLL's keys and defaults)
    pg_variant: str = "ppo"  # vanilla | ppo | tis | topr | cispo | kimi15, or a registered name
    tis_lower_bound: float = PGVariantArgs.tis_lower_bound
    tis_upper_bound: float = PGVariantArgs.tis_upper_bound
    topr_positive_weight: float = PGVariantArgs.topr_positive_weight
    topr_negative_weight: float = PGVariantArgs.topr_negative_weight
    cispo_epsilon_low: float = PGVariantArgs.cispo_epsilon_low
    cispo_epsilon_high: float = PGVariantArgs.cispo_epsilon_high
    cispo_use_unified_mask: bool = PGVariantArgs.cispo_use_unified_mask
    kimi15_tau: float = PGVariantArgs.kimi15_tau

    @property
    def num_workers(self) -> int:
        """How many workers this role runs: one per device_mapping entry, or one when it is null."""
        return len(self.device_mapping) if self.device_mapping else 1
