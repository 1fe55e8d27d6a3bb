"""ROLL's config keys that roll does not implement, in one table: each is accepted with one warning
line saying why it has no effect here, or (where a value would change what is computed) refused for
that value with the reason. `from_dict` reads this table by section (the dataclass a key belongs to).

Keys roll implements are fields of roll's dataclasses and are not listed here; a key is in exactly
one of the two places. docs/configuration.md shows the whole surface: implemented / accepted without
effect / refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class RollKey:
    """`reason`: why the key has no effect in roll. `inert`: the values that are safe to ignore (None
    means every value is); any other value is refused with `refusal` as the reason and fix."""

    reason: str
    inert: Callable[[Any], bool] | None = None
    refusal: str = ""


def _is(*values: Any) -> Callable[[Any], bool]:
    return lambda v: v in values


def _falsy(value: Any) -> bool:
    return not value


_PROFILING = "roll has no profiler integration; use py-spy or torch.profiler around a run"
_OFFLOAD = "roll keeps each worker's model and optimizer where the worker runs"
_DATASET = "agentic prompts come from the environments, not a dataset"
_SCHEDULER = "roll's rollout scheduler drives generation itself (one request per env turn)"
_ENV_MANAGER_MODEL = "env managers generate with actor_infer's model and settings"

TOP_LEVEL: dict[str, RollKey] = {
    # ROLL's ScheduleConfig
    "generate_opt_level": RollKey(_SCHEDULER),
    "is_num_return_sequences_expand": RollKey(_SCHEDULER),
    "max_running_requests": RollKey(_SCHEDULER),
    "is_use_additional_prompts": RollKey(_SCHEDULER),
    "max_additional_running_prompts": RollKey(_SCHEDULER),
    "user_defined_rollout_loop_cls": RollKey(_SCHEDULER),
    # ROLL's BaseConfig
    "rpc_timeout": RollKey("roll's Ray calls wait for the worker; a worker that dies raises at once"),
    "base_dir": RollKey("roll writes under output_dir and logging_dir"),
    "max_ckpt_to_keep": RollKey("roll keeps every checkpoint it saves (save_steps sets how many)"),
    "local_rank": RollKey("roll assigns ranks to its Ray workers itself"),
    "prompt_length": RollKey("sequence_length bounds a whole multi-turn trajectory in roll"),
    "response_length": RollKey("sequence_length bounds a whole multi-turn trajectory in roll"),
    "val_prompt_length": RollKey("validation uses sequence_length too"),
    "val_sequence_length": RollKey("validation uses sequence_length too"),
    "profiler_timeline": RollKey(_PROFILING),
    "profiler_memory": RollKey(_PROFILING),
    "profiler_output_dir": RollKey(_PROFILING),
    "length_profiler_dir": RollKey(_PROFILING),
    "report_length_and_rewards": RollKey("roll always logs lengths and rewards"),
    "is_offload_states": RollKey(_OFFLOAD),
    "is_offload_optimizer_states_in_train_step": RollKey(_OFFLOAD),
    "num_nodes": RollKey("roll asks Ray for the devices in each worker's device_mapping"),
    "num_gpus_per_node": RollKey("roll asks Ray for the devices in each worker's device_mapping"),
    "model_download_type": RollKey("roll loads models from local folders or the Hugging Face hub (see pretrain)"),
    "render_save_dir": RollKey("roll saves the first trajectories of each step as text under logging_dir/trajectories"),
    # ROLL's PPOConfig
    "reward": RollKey("agentic rewards come from the environments, not a reward model"),
    "l2": RollKey("roll's optimizer takes weight decay from training_args.weight_decay", _is(0, 0.0, None),
                  "an extra L2 term is not implemented in roll; use actor_train.training_args.weight_decay"),
    "use_pg_clip_range": RollKey("roll uses pg_clip_low / pg_clip_high whenever they are set, else pg_clip"),
    "use_reward_scaling": RollKey("off in ROLL's agentic configs", _falsy,
                                  "running reward scaling is not implemented in roll; use reward_normalization"),
    "use_reward_norm": RollKey("off in ROLL's agentic configs", _falsy,
                               "running reward normalisation is not implemented in roll; use reward_normalization"),
    "add_len_reward": RollKey("off in ROLL's agentic configs", _falsy, "a length reward is not implemented in roll"),
    "norm_mean_type": RollKey("agentic runs normalise with reward_normalization", _is(None),
                              "in an agentic config set reward_normalization.norm_mean_type instead"),
    "norm_std_type": RollKey("agentic runs normalise with reward_normalization", _is(None),
                             "in an agentic config set reward_normalization.norm_std_type instead"),
    "enable_reference": RollKey("roll starts the reference exactly when a KL term needs it"),
    "force_disable_old_logprobs_recompute": RollKey(
        "roll scores old log-probs exactly when the policy moves before a sample is trained on, or when "
        "enable_old_logprobs_recompute asks for it", _falsy,
        "roll needs old log-probs whenever the policy moves during a step; remove force_disable_old_logprobs_recompute"),
    # ROLL's AgenticConfig
    "ratio_type": RollKey("roll's PPO ratio is per token", _is("token"),
                          "ratio_type: segment is not implemented in roll yet; use token"),
    "parse_tool_call_parameter_to_dict": RollKey("roll's envs receive the model's text and parse actions themselves"),
    "skip_mock_system_prompt": RollKey("roll's env managers render prompts with the tokenizer's chat template as they are"),
}

WORKER: dict[str, RollKey] = {
    "name": RollKey("roll names each worker after its role"),
    "worker_cls": RollKey("roll picks each role's worker class itself (pipeline_cls selects the pipeline)"),
    "world_size": RollKey("roll runs one worker per device_mapping entry"),
    "num_gpus_per_worker": RollKey("roll runs one worker per device_mapping entry"),
    "model_update_frequency": RollKey("roll updates actor_infer's weights every step", _is(1, None),
                                      "roll updates actor_infer every step; model_update_frequency > 1 is not implemented"),
    "backend_timeout": RollKey("roll's collectives use torch.distributed's default timeout"),
    "system_envs": RollKey("roll sets the top-level system_envs for every worker; per-role values are ignored"),
    "max_concurrency": RollKey("roll sets each Ray actor's concurrency from its role"),
    "offload_nccl": RollKey(_OFFLOAD),
    "logits_in_fp32": RollKey("roll always computes log-probs in float32"),
    "apply_loss_scale": RollKey("roll's loss aggregation already gives full-batch semantics across micro-batches"),
}

ENV_MANAGER: dict[str, RollKey] = {
    **{key: RollKey(_ENV_MANAGER_MODEL) for key in ("model_args", "training_args", "data_args", "strategy_args",
                                                    "device_mapping", "infer_batch_size", "num_gpus_per_worker")},
    "name": RollKey("roll names env managers train and val"),
    "worker_cls": RollKey("roll runs env managers in its own EnvironmentWorker"),
    "system_envs": RollKey("roll sets the top-level system_envs for every worker; per-role values are ignored"),
    "group_size_redundancy": RollKey("no redundant episodes are started", _is(0, None),
                                     "group_size_redundancy > 0 is not implemented in roll; use group_size"),
    "group_filter_cls": RollKey("roll keeps every complete group"),
    "llm_proxy": RollKey("env managers generate with the policy (actor_infer)",
                         lambda v: not v or (isinstance(v, dict) and v.get("proxy_type", "policy") == "policy"),
                         "an env manager's llm_proxy other than policy is not configurable in roll's YAML; see docs/rollout.md"),
}

MODEL: dict[str, RollKey] = {
    "model_type": RollKey("roll reads the architecture from the model folder"),
    "flash_attn": RollKey("use attn_implementation"),
    "additional_target": RollKey("roll trains only the LoRA layers", _is(None),
                                 "extra trainable modules beside LoRA are not implemented in roll"),
    "autocast_adapter_dtype": RollKey("roll keeps LoRA weights in the model's dtype"),
    "adapter_name_or_path": RollKey("no adapter is loaded", _is(None),
                                    "loading a trained adapter is not implemented in roll; merge it into the model folder"),
    "moe_aux_loss_coef": RollKey("roll's training loss has no MoE router term"),
    "gradient_checkpointing_use_reentrant": RollKey("roll uses non-reentrant checkpointing"),
    "device_map": RollKey("roll places each worker's model on its device itself"),
    "num_labels": RollKey("roll's critic has one value head"),
    "model_config_kwargs": RollKey("the model's config.json is used as it is", _falsy,
                                   "overriding the model config is not implemented in roll; edit config.json in a copy of the model folder"),
    "ulysses_size": RollKey("no sequence parallelism", _is(1, None),
                            "Ulysses sequence parallelism is not implemented in roll; use ulysses_size: 1 "
                            "(--cpu sets it)"),
    "vision_dp": RollKey("each worker runs the vision tower on its own samples' images"),
}

GENERATING: dict[str, RollKey] = {
    "max_length": RollKey("max_new_tokens bounds each turn's response"),
    "num_beams": RollKey("roll samples", _is(1, None), "beam search is not implemented in roll; use num_beams: 1"),
    "num_return_sequences": RollKey("each env turn is one request", _is(1, None),
                                    "ROLL's agentic pipeline uses one sequence per request too; use num_return_sequences: 1"),
    "repetition_penalty": RollKey("roll's sampler has no repetition penalty", _is(1, 1.0, None),
                                  "a repetition penalty is not implemented in roll's sampler; use repetition_penalty: 1.0"),
    "length_penalty": RollKey("only beam search uses it; roll samples"),
    "include_stop_str_in_output": RollKey("roll keeps a stop string in the response: the tokens trained on are the tokens generated"),
    "logprobs": RollKey("roll always returns the log-prob of each sampled token"),
    "early_stopping": RollKey("only beam search uses it; roll samples"),
}

DATA: dict[str, RollKey] = {
    "template": RollKey("roll renders prompts with the tokenizer's own chat template"),
    **{key: RollKey(_DATASET) for key in ("domain_interleave_probs", "preprocessing_num_workers", "cache_path", "file_name",
                                        "eval_file_name", "dataset_type", "tag", "id", "prompt", "response", "messages",
                                          "dataset_name")},
}

CUSTOM_ENV: dict[str, RollKey] = {
    "use_thread_lock": RollKey("roll steps each env in its own episode loop"),
    "pre_step_template": RollKey("roll's env managers render each turn with agent_template"),
    "next_step_template": RollKey("roll's env managers render each turn with agent_template"),
    "max_env_step_concurrent": RollKey("roll steps every env of a worker in its own episode loop, without a cap"),
}


def _training_args_keys() -> dict[str, RollKey]:
    """ROLL's TrainingArguments extends transformers.TrainingArguments, so every field of that class
    is a ROLL key; roll's own training loop reads only the fields of roll's TrainingArgs."""
    from transformers import TrainingArguments

    reason = "ROLL passes it to transformers' TrainingArguments; roll's training loop does not read it"
    table = {f.name: RollKey(reason) for f in dataclasses.fields(TrainingArguments)}
    table.update({
        "num_train_epochs": RollKey("ppo_epochs sets the passes over each batch"),
        "max_steps": RollKey("the top-level max_steps sets the run length"),
        "seed": RollKey("the top-level seed seeds every worker"),
        "output_dir": RollKey("the top-level output_dir is used"),
        "bf16": RollKey("model_args.dtype sets the precision"),
        "fp16": RollKey("model_args.dtype sets the precision"),
    })
    return table


SECTIONS: dict[str, dict[str, RollKey] | Callable[[], dict[str, RollKey]]] = {
    "BaseConfig": TOP_LEVEL,
    "WorkerConfig": WORKER,
    "EnvManagerConfig": ENV_MANAGER,
    "ModelArgs": MODEL,
    "TrainingArgs": _training_args_keys,
    "GeneratingArgs": GENERATING,
    "DataArgs": DATA,
    "CustomEnvConfig": CUSTOM_ENV,
}


def keys_for(cls: type) -> dict[str, RollKey]:
    """The ROLL keys of `cls`'s section (and of the sections of its base classes)."""
    table: dict[str, RollKey] = {}
    for klass in reversed(cls.__mro__):
        section = SECTIONS.get(klass.__name__)
        if section is not None:
            table.update(section() if callable(section) else section)
    # TrainingArgs' section is all of transformers' TrainingArguments, some of which roll implements
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    return {key: entry for key, entry in table.items() if key not in fields}

