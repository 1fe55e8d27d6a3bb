"""ROLL's key surface in roll: keys without effect warn once, values roll cannot honour are refused,
true unknowns still fail with a suggestion; ROLL's loader conventions; the keys roll now implements."""

from __future__ import annotations

import logging

import pytest
import torch

from roll.configs import ConfigError
from roll.launch.loader import load_agentic_config

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


def load(*overrides: str):
    return load_agentic_config(*CPU, overrides=list(overrides))


def test_a_roll_key_without_effect_loads_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="roll.config"):
        load("++rpc_timeout=10", "++actor_train.worker_cls=x.ActorWorker", "++actor_infer.worker_cls=x.ActorWorker")
    messages = [r.getMessage() for r in caplog.records]
    assert sum("rpc_timeout has no effect in roll" in m for m in messages) == 1
    assert sum("worker_cls has no effect in roll" in m for m in messages) == 1  # once, though two roles set it


@pytest.mark.parametrize("override,message", [
    ("++async_generation_ratio=0.5", "async_generation_ratio is how many weight versions .* got 0.5"),
    ("++actor_train.pg_variant=trpo", "actor_train.pg_variant: 'trpo' is not one of .*'topr'"),
    ("++train_infer_correction.filters=[{enabled:true,agg_type:turn}]", r"filters\[0\].agg_type: 'turn' is not one of"),
    ("++force_disable_old_logprobs_recompute=true", "force_disable_old_logprobs_recompute: True is not supported"),
    ("adv_estimator=gigpo", "but custom_envs.FrozenLakeCPU.env_manager_cls is roll.pipeline.agentic.env_manager."
                            "traj_env_manager.TrajEnvManager, which makes one sample per episode"),
    ("++batch_adjust_mode=copies", "batch_adjust_mode: 'copies' is not one of"),
    ("++step_reward_gamma=1.5", "step_reward_gamma must be in"),
    ("++cap_idle_turn_advantage=true", "cap_idle_turn_advantage caps GiGPO's per-turn advantages, but adv_estimator"),
    ("++actor_infer.generating_args.num_beams=4", "num_beams: 4 is not supported: beam search"),
])
def test_a_value_roll_cannot_honour_is_refused_by_name(override, message):
    with pytest.raises(ConfigError, match=message):
        load(override)


def test_inert_values_of_refusable_keys_load(caplog):
    with caplog.at_level(logging.WARNING, logger="roll.config"):
        config = load("++async_generation_ratio=0", "++actor_train.pg_variant=ppo", "++actor_infer.generating_args.num_beams=1")
    assert config.async_generation_ratio == 0 and config.actor_train.pg_variant == "ppo"
    assert "actor_infer.generating_args.num_beams has no effect in roll (roll samples)" in caplog.text


def test_a_key_neither_roll_nor_roll_knows_fails_with_the_closest_one():
    with pytest.raises(ConfigError, match="rpc_timeot: unknown key .*Did you mean 'rpc_timeout'"):
        load("++rpc_timeot=3")
    with pytest.raises(ConfigError, match="seeed: unknown key .*Did you mean 'seed'"):
        load("++seeed=3")
    with pytest.raises(ConfigError, match="warmup_ratoi: unknown key .*Did you mean 'warmup_ratio'"):
        load("++actor_train.training_args.warmup_ratoi=0.1")


def test_top_level_yaml_variables_are_accepted_and_listed_once(caplog):
    with caplog.at_level(logging.INFO, logger="roll.config"):
        load("++model_name=Qwen2.5-0.5B", "++gem_games=[a,b]")
    listed = [r.getMessage() for r in caplog.records if "top-level YAML variables" in r.getMessage()]
    assert len(listed) == 1 and "model_name" in listed[0] and "gem_games" in listed[0]


def test_null_template_means_the_default():
    from roll.configs.agentic_config import CustomEnvConfig

    config = load("custom_envs.FrozenLakeCPU.agent_system_template=null")
    assert config.custom_envs["FrozenLakeCPU"].agent_system_template == CustomEnvConfig().agent_system_template


def test_empty_val_tags_fall_back_to_the_train_envs():
    config = load("val_env_manager.tags=[]", "val_batch_size=null")
    assert config.val_env_manager.tags == config.train_env_manager.tags
    assert config.val_env_manager.group_size == config.train_env_manager.group_size


def test_a_config_without_actor_train_is_rollout_only():
    from roll.launch.loader import config_from_dictconfig, compose_raw, resolve_config_dir
    from roll.configs.agentic_config import AgenticConfig

    raw = compose_raw(resolve_config_dir(CPU[0]), CPU[1], ["~actor_train"])
    with pytest.raises(ConfigError, match="no actor_train block, so it is a rollout-only config"):
        config_from_dictconfig(raw, AgenticConfig)
    config = config_from_dictconfig(raw, AgenticConfig, rollout_only=True)
    assert config.actor_infer.strategy_args.strategy_name == "hf_infer"


def test_warmup_ratio_sets_the_warmup_from_the_run_length():
    from roll.configs.worker_config import TrainingArgs
    from roll.strategies.hf_train import build_scheduler

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scheduler = build_scheduler(optimizer, TrainingArgs(learning_rate=1.0, warmup_ratio=0.25), num_training_steps=8)
    lrs = []
    for _ in range(4):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([0.0, 0.5, 1.0, 1.0])  # ceil(0.25 * 8) = 2 warm-up steps, then constant


def test_freeze_module_prefix_freezes_exactly_those_parameters(tiny_model_dir):
    from roll.configs.worker_config import ModelArgs
    from roll.strategies.hf_train import build_model

    model = build_model(str(tiny_model_dir), "causal_lm", ModelArgs(freeze_module_prefix="model.embed_tokens, lm_head"))
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {"model.embed_tokens.weight", "lm_head.weight"}
    with pytest.raises(ValueError, match="matches no parameter"):
        build_model(str(tiny_model_dir), "causal_lm", ModelArgs(freeze_module_prefix="encoder."))


def test_tiny_random_model_by_name_is_built_once(tmp_path, monkeypatch):
    from roll.models.resolve import resolve_model_path

    monkeypatch.setenv("ROLL_CACHE_DIR", str(tmp_path))
    path = resolve_model_path("tiny-random-qwen2")
    assert path == str(tmp_path / "models" / "tiny-random-qwen2")
    stamp = (tmp_path / "models" / "tiny-random-qwen2" / "config.json").stat().st_mtime_ns
    assert resolve_model_path("tiny-random-qwen2") == path
    assert (tmp_path / "models" / "tiny-random-qwen2" / "config.json").stat().st_mtime_ns == stamp


def test_pg_variant_correction_and_async_keys_load_into_typed_fields():
    config = load("++actor_train.pg_variant=topr", "++actor_train.topr_negative_weight=0.5", "++async_generation_ratio=1",
                  "++enable_old_logprobs_recompute=true",
                  "++train_infer_correction={is_weight:{enabled:true,weight_type:geometric,upper_bound:2.0},"
                  "filters:[{enabled:true,agg_type:segment,diff_enabled:true,ratio_high:1.05}]}")
    assert config.actor_train.pg_variant == "topr" and config.actor_train.topr_negative_weight == 0.5
    assert config.async_generation_ratio == 1 and config.enable_old_logprobs_recompute
    weight, (rule,) = config.train_infer_correction.is_weight, config.train_infer_correction.filters
    assert (weight.enabled, weight.weight_type, weight.upper_bound) == (True, "geometric", 2.0)
    assert (rule.agg_type, rule.diff_enabled, rule.ratio_high, rule.ratio_low) == ("segment", True, 1.05, 0.8)


def test_a_key_is_either_a_field_or_in_the_table_never_both():
    """One table for ROLL's keys without effect: a key roll implements is a dataclass field, and only then
    (TrainingArgs' section, derived from transformers' TrainingArguments, is filtered by keys_for)."""
    import dataclasses

    from roll.configs import agentic_config, base_config, worker_config
    from roll.launch.roll_keys import SECTIONS

    classes = {name: getattr(module, name) for module in (agentic_config, base_config, worker_config)
               for name in SECTIONS if hasattr(module, name)}
    assert set(classes) == set(SECTIONS), f"sections without a dataclass: {set(SECTIONS) - set(classes)}"
    for name, section in SECTIONS.items():
        if callable(section):
            continue
        both = sorted(set(section) & {f.name for f in dataclasses.fields(classes[name])})
        assert not both, f"{name}: {both} are fields and also listed as keys without effect"
