"""Checks that need more than one field, and the defaults that depend on other fields.

`validate(config)` runs at load time and only looks at the config itself. `check_runnable(config)`
runs in the launcher before any worker starts: it asks whether this machine can run the strategies
and find the models.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from roll.agentic.env import get_env_cls
from roll.agentic.env.base import draws_images
from roll.agentic.env.policies import SFT_POLICIES, TOOL_POLICY
from roll.algorithms import ADV_ESTIMATORS, CORRECTION_LEVELS, KL_KINDS, LOSS_AGG_MODES, NORM_METHODS, NORM_TYPES, PG_VARIANTS
from roll.configs.errors import ConfigError, did_you_mean
from roll.configs.worker_config import WorkerConfig
from roll.pipeline.agentic.batch_adjust import BATCH_ADJUST_MODES
from roll.pipeline.agentic.env_manager.proxy_env_manager import ProxyEnvManager
from roll.strategies.deepspeed_train import roll_deepspeed_config
from roll.strategies.engine_budget import CONFIG_PREFIX, budget_for_run
from roll.strategies.fsdp2_train import fsdp2_options
from roll.strategies.registry import allowed_strategies, strategy_facts
from roll.utils.tracking import TRACKERS, tracker_names

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig, CustomEnvConfig, EnvManagerConfig

PROXY_ENV_MANAGER = "roll.pipeline.agentic.env_manager.proxy_env_manager.ProxyEnvManager"
VL_ENV_MANAGER = "roll.pipeline.agentic.env_manager.vl_traj_env_manager.VLTrajEnvManager"

# A registry (roll.utils.registry) is read when the check runs, so names a user registered count.
CHOICES = {
    "adv_estimator": ADV_ESTIMATORS,
    "kl_penalty": KL_KINDS,
    "loss_agg_mode": LOSS_AGG_MODES,
    "reward_normalization.method": NORM_METHODS,
    "reward_normalization.norm_mean_type": NORM_TYPES,
    "reward_normalization.norm_std_type": NORM_TYPES,
    "actor_train.pg_variant": PG_VARIANTS,
    "train_infer_correction.is_weight.weight_type": CORRECTION_LEVELS,
}
LR_SCHEDULERS = ("constant", "linear", "cosine")
DTYPES = ("fp32", "bf16", "fp16")
logger = logging.getLogger("roll.config")


def validate(config: "AgenticConfig") -> None:
    """Raises ConfigError naming the first problem and its fix; fills derived defaults in place."""
    # envs first: importing their class paths runs the user's modules, whose registrations (an advantage
    # estimator, a KL kind, ...) the choice checks then accept like built-in names
    _check_custom_envs(config)
    _check_choices(config)
    _check_step_credit(config)
    _check_ranges(config)
    _check_deepspeed(config)
    _check_fsdp2(config)
    _fill_worker_defaults(config)
    _check_image_envs(config)
    _check_engine_budget(config)
    for name in ("train_env_manager", "val_env_manager"):
        _check_env_manager(config, name, getattr(config, name))
    _check_sft_warmup(config)  # after the env managers: their tag errors name the defined envs
    batch_checks = (("rollout_batch_size", config.rollout_batch_size, config.train_env_manager),
                    ("val_batch_size", config.val_batch_size, config.val_env_manager))
    for key, size, manager in batch_checks:
        if size is not None and size % manager.group_size:
            env_manager = "train_env_manager" if key == "rollout_batch_size" else "val_env_manager"
            lower = size - size % manager.group_size
            sizes = f"{lower} or {lower + manager.group_size}" if lower else str(manager.group_size)
            raise ConfigError(
                f"{key}={size} is not a multiple of {env_manager}.group_size={manager.group_size}: only whole "
                f"groups enter a batch. Use {key}={sizes}, or change group_size."
            )


def _check_choices(config: "AgenticConfig") -> None:
    for dotted, allowed in CHOICES.items():
        value = config
        for part in dotted.split("."):
            value = getattr(value, part)
        if value not in allowed:
            shown = [a for a in allowed if a is not None]
            raise ConfigError(f"{dotted}: {value!r} is not one of {shown}.{did_you_mean(str(value), shown)}")
    for i, f in enumerate(config.train_infer_correction.filters):
        if f.agg_type not in CORRECTION_LEVELS:
            raise ConfigError(f"train_infer_correction.filters[{i}].agg_type: {f.agg_type!r} is not one of "
                              f"{CORRECTION_LEVELS.names()}.{did_you_mean(f.agg_type, CORRECTION_LEVELS)}")
    for tracker in tracker_names(config.track_with):
        if tracker not in TRACKERS:
            raise ConfigError(f"track_with: unknown tracker {tracker!r}; use one or more of {TRACKERS.names()} joined by commas.{did_you_mean(tracker, TRACKERS)}")
    for role, worker in _workers(config):
        strategy = worker.strategy_args.strategy_name
        allowed = allowed_strategies(role)
        if strategy not in allowed:
            raise ConfigError(
                f"{role}.strategy_args.strategy_name: unknown strategy {strategy!r} for {role}; use one of "
                f"{list(allowed)}.{did_you_mean(strategy, allowed)}"
            )
        if worker.model_args.lora_rank and role in ("actor_train", "critic") and not strategy_facts(strategy).lora:
            lora_names = [name for name in allowed if strategy_facts(name).lora]
            raise ConfigError(f"{role}.model_args.lora_rank: strategy {strategy!r} does not train LoRA adapters; use strategy_name: one of {lora_names}, or drop lora_rank.")
        if worker.model_args.dtype not in DTYPES:
            raise ConfigError(f"{role}.model_args.dtype: {worker.model_args.dtype!r} is not one of {list(DTYPES)}.")
        if worker.training_args.lr_scheduler_type not in LR_SCHEDULERS:
            raise ConfigError(
                f"{role}.training_args.lr_scheduler_type: {worker.training_args.lr_scheduler_type!r} is not one of "
                f"{list(LR_SCHEDULERS)}.{did_you_mean(worker.training_args.lr_scheduler_type, LR_SCHEDULERS)}"
            )


def _check_step_credit(config: "AgenticConfig") -> None:
    """An estimator registered with needs_step_samples (gigpo, step_reinforce) gets one sample per turn
    from every training env, one with needs_episode_samples (traj_gigpo) one per episode, and the
    step-credit settings are in range."""
    from hydra.utils import get_class

    if config.batch_adjust_mode not in BATCH_ADJUST_MODES:
        raise ConfigError(f"batch_adjust_mode: {config.batch_adjust_mode!r} is not one of {list(BATCH_ADJUST_MODES)}."
                          f"{did_you_mean(str(config.batch_adjust_mode), [m for m in BATCH_ADJUST_MODES if m])}")
    _require(0.0 <= config.step_reward_gamma <= 1.0, f"step_reward_gamma must be in [0, 1], got {config.step_reward_gamma}")
    _require(not config.cap_idle_turn_advantage or config.adv_estimator in ("gigpo", "traj_gigpo"),
             f"cap_idle_turn_advantage caps GiGPO's per-turn advantages, but adv_estimator is "
             f"{config.adv_estimator!r}; use adv_estimator: gigpo (step samples) or traj_gigpo, or drop the key")
    estimator = ADV_ESTIMATORS.get(config.adv_estimator)
    if not (estimator.needs_step_samples or estimator.needs_episode_samples):
        return
    _require(not config.whiten_rewards, f"whiten_rewards rescales the episode reward that adv_estimator: "
             f"{config.adv_estimator} replaces with its own step-level reward; set whiten_rewards: false "
             f"(whiten_advantages still applies)")
    for tag in config.train_env_manager.tags:
        spec = config.custom_envs.get(tag)
        if spec is None:
            continue
        step_samples = getattr(get_class(spec.env_manager_cls), "step_samples", False)
        if estimator.needs_episode_samples and step_samples:
            raise ConfigError(
                f"adv_estimator: {config.adv_estimator} gives each turn of a whole-episode sample its own "
                f"advantage, but custom_envs.{tag}.env_manager_cls is {spec.env_manager_cls}, which makes one "
                f"sample per turn. Use roll.pipeline.agentic.env_manager.traj_env_manager.TrajEnvManager, or "
                f"adv_estimator: gigpo for step samples.")
        if estimator.needs_step_samples and not step_samples:
            raise ConfigError(
                f"adv_estimator: {config.adv_estimator} trains on step samples (one per turn), but "
                f"custom_envs.{tag}.env_manager_cls is {spec.env_manager_cls}, which makes one sample per episode. "
                f"Set it to roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager, or use adv_estimator: "
                f"grpo or agentic_reinforce.")


def _check_fsdp2(config: "AgenticConfig") -> None:
    """fsdp2_train roles: their strategy_config keys and values, before any worker starts."""
    for role, worker in _workers(config):
        if worker.strategy_args.strategy_name == "fsdp2_train":
            try:
                fsdp2_options(worker.strategy_args.strategy_config)
            except ValueError as error:
                raise ConfigError(f"{role}.strategy_args.{error}") from None


def _check_deepspeed(config: "AgenticConfig") -> None:
    """deepspeed_train roles: their strategy_config against roll's own settings, before any worker starts."""
    for role, worker in _workers(config):
        if worker.strategy_args.strategy_name != "deepspeed_train":
            continue
        try:
            roll_deepspeed_config(worker.strategy_args.strategy_config, worker.training_args, worker.model_args, worker.num_workers)
        except ValueError as error:
            raise ConfigError(f"{role}.strategy_args.{error}") from None
        if role == "actor_train" and config.sft_warmup.steps:
            raise ConfigError(
                "sft_warmup.steps: the SFT warm-up steps its own AdamW beside the training strategy, which a DeepSpeed "
                "engine does not allow (ZeRO holds the gradients); set sft_warmup.steps=0 or use fsdp2_train/hf_train."
            )
        if role == "reference" and config.sft_warmup.steps:
            raise ConfigError(
                "reference.strategy_args.strategy_name: after the SFT warm-up the reference takes the warmed-up weights "
                "(the KL term measures drift from the model RL starts from), which a DeepSpeed engine cannot load in "
                "place; use hf_infer (the default), hf_train or fsdp2_train for the reference, or set sft_warmup.steps=0."
            )


def _check_engine_budget(config: "AgenticConfig") -> None:
    """hf_infer's KV budget (roll/strategies/engine_budget.py): known keys, and slots long enough for
    the longest request an episode can make (sequence_length), or that episode would be refused."""
    if config.actor_infer.strategy_args.strategy_name != "hf_infer":
        return
    try:
        budget = budget_for_run(config)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    _require(budget.max_model_len >= config.sequence_length,
             f"{CONFIG_PREFIX}.max_model_len={budget.max_model_len} is below sequence_length={config.sequence_length}: "
             f"a request of a long episode could not fit one KV slot. Remove the key (it defaults to sequence_length) "
             f"or raise it.")


def _check_sft_warmup(config: "AgenticConfig") -> None:
    """The warm-up's policy and tags (roll/pipeline/agentic/sft_warmup.py), checked before any worker starts."""
    warmup = config.sft_warmup
    if not warmup.steps:
        return
    _require(warmup.policy in SFT_POLICIES, f"sft_warmup.policy: {warmup.policy!r} is not one of {list(SFT_POLICIES)}."
                                            f"{did_you_mean(str(warmup.policy), SFT_POLICIES)}")
    tags = warmup.tags or config.train_env_manager.tags
    for tag in tags:
        _require(tag in config.custom_envs, f"sft_warmup.tags: {tag!r} is not in custom_envs (has {sorted(config.custom_envs)})")
        if config.custom_envs[tag].agent_runner_cls is not None:
            _require(warmup.policy == "random",
                     f"sft_warmup.policy: {warmup.policy!r} plays a roll env, and {tag!r} is played by an agent runner, "
                     "whose warm-up answers its calls with random calls of its own tools; use policy random")
            continue
        env_type = config.custom_envs[tag].env_type
        if warmup.policy == TOOL_POLICY:
            _require(callable(getattr(get_env_cls(env_type), "solver_call", None)),
                     f"sft_warmup.policy: {TOOL_POLICY!r} calls a Python tool, which env {tag!r} ({env_type}) does not "
                     "have; use it with env_type tool_use, or policy random/optimal")


def _workers(config: "AgenticConfig") -> list[tuple[str, WorkerConfig]]:
    roles = ("actor_train", "actor_infer", "critic", "reference")
    return [(role, getattr(config, role)) for role in roles if getattr(config, role) is not None]


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _check_ranges(config: "AgenticConfig") -> None:
    _require(config.max_steps >= 0, f"max_steps must be >= 0, got {config.max_steps}")
    _require(config.save_steps >= 1, f"save_steps must be >= 1, got {config.save_steps}")
    _require(config.max_auto_resumes >= 0, f"max_auto_resumes must be >= 0 (0 = stop at the first lost worker), "
                                           f"got {config.max_auto_resumes}")
    _require(config.model_update_buffer_size_mb >= 1,
             f"model_update_buffer_size_mb must be >= 1 (MB per bucket of a weight sync), "
             f"got {config.model_update_buffer_size_mb}")
    _require(config.max_infer_worker_restarts >= -1, f"max_infer_worker_restarts must be >= 0 (or -1 for no limit), "
                                                     f"got {config.max_infer_worker_restarts}")
    _require(config.logging_steps >= 1, f"logging_steps must be >= 1, got {config.logging_steps}")
    _require(config.rollout_batch_size >= 1, f"rollout_batch_size must be >= 1, got {config.rollout_batch_size}")
    _require(config.sequence_length >= 16, f"sequence_length must be >= 16 tokens, got {config.sequence_length}")
    _require(config.ppo_epochs >= 1, f"ppo_epochs must be >= 1, got {config.ppo_epochs}")
    _require(0.0 <= config.gamma <= 1.0, f"gamma must be in [0, 1], got {config.gamma}")
    _require(0.0 <= config.lambd <= 1.0, f"lambd must be in [0, 1], got {config.lambd}")
    _require(config.pg_clip > 0, f"pg_clip must be > 0, got {config.pg_clip}")
    _require(config.max_grad_norm > 0, f"max_grad_norm must be > 0, got {config.max_grad_norm}")
    _require(config.entropy_floor >= 0 and config.entropy_floor_coef >= 0,
             f"entropy_floor (a mean token entropy in nats, 0 = off) and entropy_floor_coef must be >= 0, "
             f"got {config.entropy_floor} and {config.entropy_floor_coef}")
    _require(config.entropy_floor_min_token_entropy >= 0,
             f"entropy_floor_min_token_entropy (nats; 0 = the floor's bonus covers every response token) must be "
             f">= 0, got {config.entropy_floor_min_token_entropy}")
    _require(config.pg_min_token_entropy >= 0,
             f"pg_min_token_entropy (nats; 0 = every response token takes the policy gradient) must be >= 0, "
             f"got {config.pg_min_token_entropy}")
    _require(config.critic_warmup >= 0, f"critic_warmup must be >= 0, got {config.critic_warmup}")
    ratio = config.async_generation_ratio
    _require(ratio >= 0 and float(ratio).is_integer(),
             f"async_generation_ratio is how many weight versions a trained sample may lag behind the trainer: "
             f"0 (synchronous) or a whole number >= 1, got {ratio}")
    _require(config.async_wait_timeout_s > 0, f"async_wait_timeout_s must be > 0, got {config.async_wait_timeout_s}")
    for role, worker in _workers(config):
        args = worker.training_args
        _require(args.learning_rate > 0, f"{role}.training_args.learning_rate must be > 0, got {args.learning_rate}")
        _require(args.per_device_train_batch_size >= 1, f"{role}.training_args.per_device_train_batch_size must be >= 1")
        _require(args.gradient_accumulation_steps >= 1, f"{role}.training_args.gradient_accumulation_steps must be >= 1")
        gen = worker.generating_args
        _require(gen.max_new_tokens >= 1, f"{role}.generating_args.max_new_tokens must be >= 1, got {gen.max_new_tokens}")
        _require(gen.temperature >= 0, f"{role}.generating_args.temperature must be >= 0, got {gen.temperature}")
        _require(0 < gen.top_p <= 1, f"{role}.generating_args.top_p must be in (0, 1], got {gen.top_p}")


def _check_custom_envs(config: "AgenticConfig") -> None:
    """Each env resolves (a registered name or a BaseEnv class path, imported here so a user's module
    that does not import fails now), its env_config keys and values fit its config dataclass, and its
    env manager (and agent runner) class paths import. An entry without a roll env (env_type null) is
    an agent runner's own game: only its manager and runner are checked."""
    for tag, spec in config.custom_envs.items():
        where = f"custom_envs.{tag}"
        if spec.env_type is None:  # an agent that plays its own game: no roll env to check
            _check_agent_runner(where, spec, _check_env_manager_cls(where, spec.env_manager_cls))
            continue
        try:
            env_cls = get_env_cls(spec.env_type)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{where}.env_type: {error}") from None
        _require(spec.max_steps >= 1, f"{where}.max_steps must be >= 1, got {spec.max_steps}")
        _require(spec.history_length >= 0, f"{where}.history_length must be >= 0, got {spec.history_length}")
        _require(spec.max_tokens_per_step >= 1, f"{where}.max_tokens_per_step must be >= 1, got {spec.max_tokens_per_step}")
        _require(isinstance(spec.agent_template, str) and bool(spec.agent_template),
                 f"{where}.agent_template must be a non-empty string, got {spec.agent_template!r}")
        config_cls = env_cls.config_cls
        valid = set(getattr(config_cls, "__dataclass_fields__", {}))
        for key in spec.env_config:
            if key not in valid:
                raise ConfigError(
                    f"{where}.env_config.{key}: unknown key for env_type {spec.env_type!r} "
                    f"({config_cls.__name__}).{did_you_mean(key, valid)} Valid keys: {', '.join(sorted(valid))}."
                )
        env_values = dict(spec.env_config)
        if spec.tool_wrapper is not None:
            _require("tool_wrapper" in valid and "tool_wrapper" not in env_values,
                     f"{where}.tool_wrapper: env_type {spec.env_type!r} takes no tool_wrapper (tool_use does), or it is "
                     "also set inside env_config; keep one")
            env_values["tool_wrapper"] = spec.tool_wrapper
        try:  # values too: ranges, symbol tables, action regexes
            env_config = config_cls.from_values(env_values, spec.env_type)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{where}.env_config: {error}") from None
        _warn_if_a_broken_reply_pays(where, env_cls.idle_move_reward, env_config)
        manager_cls = _check_env_manager_cls(where, spec.env_manager_cls)
        _check_agent_runner(where, spec, manager_cls)
        if env_config.render_mode == "rgb_array":
            _require(draws_images(env_cls), f"{where}.env_config.render_mode: env_type {spec.env_type!r} renders text "
                                            "only; rgb_array needs an env that draws its board (sokoban, frozen_lake)")
            _require(getattr(manager_cls, "image_observations", False),
                     f"{where}.env_config.render_mode: rgb_array observations are images, and env_manager_cls "
                     f"{spec.env_manager_cls} shows text; use env_manager_cls {VL_ENV_MANAGER} (a vision-language "
                     "model) or render_mode: text")


def _check_image_envs(config: "AgenticConfig") -> None:
    """Envs that observe images (render_mode rgb_array) need an inference engine that takes images."""
    tags = sorted({*config.train_env_manager.tags, *config.val_env_manager.tags} & set(config.custom_envs))
    seeing = [t for t in tags if config.custom_envs[t].env_config.get("render_mode") == "rgb_array"]
    strategy = config.actor_infer.strategy_args.strategy_name
    _require(not seeing or strategy == "hf_infer",
             f"actor_infer.strategy_args.strategy_name: {strategy} does not take images yet, and custom_envs {seeing} "
             "observe images (render_mode rgb_array); use hf_infer (--cpu sets it)")


def _check_agent_runner(where: str, spec: "CustomEnvConfig", manager_cls: type) -> None:
    """`agent_runner_cls` is set exactly when the manager is a ProxyEnvManager, and imports here with a
    run_episode method; env_type null (the agent brings its own game) only with such a runner."""
    proxy = isinstance(manager_cls, type) and issubclass(manager_cls, ProxyEnvManager)
    if not proxy:
        _require(spec.agent_runner_cls is None,
                 f"{where}.agent_runner_cls: {spec.agent_runner_cls!r} is run only by env_manager_cls "
                 f"{PROXY_ENV_MANAGER}; set that manager, or remove agent_runner_cls")
        _require(spec.env_type is not None, f"{where}.env_type: null is only for an agent runner that plays its own "
                                            f"game (env_manager_cls {PROXY_ENV_MANAGER}); name an env")
        return
    _require(bool(spec.agent_runner_cls),
             f"{where}.agent_runner_cls: {PROXY_ENV_MANAGER} runs an agent runner; give the class path of one "
             f"(e.g. roll.pipeline.agentic.agent_runner.gem_runner.GEMRunner, docs/agents.md)")
    runner_cls = _import_class(f"{where}.agent_runner_cls", spec.agent_runner_cls,
                               "an agent runner, e.g. roll.pipeline.agentic.agent_runner.gem_runner.GEMRunner")
    _require(callable(getattr(runner_cls, "run_episode", None)),
             f"{where}.agent_runner_cls: {spec.agent_runner_cls!r} has no run_episode(seed, base_url, env_config) "
             f"method (docs/agents.md)")
    if spec.env_type is None:
        _require(not getattr(runner_cls, "plays_roll_env", False),
                 f"{where}.env_type: {spec.agent_runner_cls} plays a roll env; name one (e.g. sokoban)")
        _require(spec.max_steps >= 1, f"{where}.max_steps must be >= 1, got {spec.max_steps}")
        _require(spec.max_tokens_per_step >= 1, f"{where}.max_tokens_per_step must be >= 1, got {spec.max_tokens_per_step}")


def _import_class(where: str, path: str, example: str) -> type:
    """A class path imported here, in the driver, before any worker starts (the Ray env workers import
    it again in their own processes)."""
    from hydra.utils import get_class

    try:
        return get_class(path)
    except Exception as error:  # ImportError, ValueError, or whatever the user's module raised on import
        lines = str(error).splitlines()  # hydra's: "Error loading 'x':", then the cause, then a hint
        reason = " ".join(lines[1:] or lines) or type(error).__name__
        raise ConfigError(f"{where}: cannot import {path!r} ({reason}). Give the class path of {example}, whose "
                          f"module is on PYTHONPATH.") from None


def _warn_if_a_broken_reply_pays(where: str, idle_move_reward: float, env_config) -> None:
    """A reply the env cannot parse changes nothing, like a move into a wall. Priced above such a move, it
    is the cheaper way to stand still, and RL learns to break the reply's format: Sokoban with a wall at
    -0.4 and no move at -0.15 went from 0.96 to 0.65 valid replies in 6 steps (sk43, the CPU example's
    README). A warning, not an error: a run may want it, and it is still a run that can learn."""
    wall = idle_move_reward + env_config.ineffective_penalty
    if wall < env_config.format_penalty:
        logger.warning(
            "%s.env_config: a valid move that changes nothing earns %.3g (the env's %.3g plus ineffective_penalty "
            "%.3g), less than a reply with no usable move (format_penalty %.3g): the policy can learn to break its "
            "reply's format rather than move into a wall. Set format_penalty to %.3g or below.",
            where, wall, idle_move_reward, env_config.ineffective_penalty, env_config.format_penalty, wall)


def _check_env_manager_cls(where: str, path: str) -> type:
    manager_cls = _import_class(f"{where}.env_manager_cls", path,
                                "an env manager, e.g. roll.pipeline.agentic.env_manager.traj_env_manager.TrajEnvManager,")
    if not callable(getattr(manager_cls, "run_episode", None)):
        raise ConfigError(f"{where}.env_manager_cls: {path!r} has no run_episode method; subclass "
                          f"roll.pipeline.agentic.env_manager.traj_env_manager.TrajEnvManager.")
    return manager_cls


def _check_env_manager(config: "AgenticConfig", name: str, manager: "EnvManagerConfig") -> None:
    if manager.random_action_rate:
        runners = [t for t in manager.tags if t in config.custom_envs and config.custom_envs[t].agent_runner_cls]
        _require(not runners, f"{name}.random_action_rate: envs {runners} are played by agent runners, which own their "
                              "prompts; exploration by random answers needs roll's env managers. Set it to 0")
    _require(manager.group_size >= 1, f"{name}.group_size must be >= 1, got {manager.group_size}")
    _require(manager.num_env_groups >= 1, f"{name}.num_env_groups must be >= 1, got {manager.num_env_groups}")
    _require(manager.max_worker_restarts >= -1, f"{name}.max_worker_restarts must be >= 0 (or -1 for no limit), "
             f"got {manager.max_worker_restarts}")
    _require(len(manager.tags) >= 1, f"{name}.tags is empty: name at least one env from custom_envs ({', '.join(config.custom_envs) or 'none defined'}).")
    for tag in manager.tags:
        if tag not in config.custom_envs:
            raise ConfigError(
                f"{name}.tags: {tag!r} is not defined in custom_envs.{did_you_mean(tag, config.custom_envs)} "
                f"Defined: {', '.join(config.custom_envs) or 'none'}."
            )
    if manager.num_groups_partition is None:
        base, extra = divmod(manager.num_env_groups, len(manager.tags))
        manager.num_groups_partition = [base + (1 if i < extra else 0) for i in range(len(manager.tags))]
    partition = manager.num_groups_partition
    if len(partition) != len(manager.tags):
        raise ConfigError(f"{name}.num_groups_partition has {len(partition)} entries but tags has {len(manager.tags)}: give one group count per tag, in the order of tags.")
    if sum(partition) != manager.num_env_groups or any(p < 0 for p in partition):
        raise ConfigError(
            f"{name}.num_groups_partition {partition} sums to {sum(partition)}, but num_env_groups is "
            f"{manager.num_env_groups}: the groups per tag must add up to num_env_groups (or leave "
            f"num_groups_partition out to split evenly)."
        )
    rate = manager.random_action_rate
    _require(not isinstance(rate, bool) and isinstance(rate, (int, float)) and 0.0 <= rate < 1.0,
             f"{name}.random_action_rate must be a number in [0, 1) (the share of turns played by a random legal "
             f"answer), got {rate!r}")
    _require(name != "val_env_manager" or rate == 0.0,
             f"val_env_manager.random_action_rate is {rate}: validation measures the policy, so it must play every "
             f"turn itself; set random_action_rate on train_env_manager only")
    _require(rate == 0.0 or not config.train_infer_correction.active,
             f"{name}.random_action_rate={rate} with train_infer_correction enabled: a random turn has no generation "
             f"log-probs to correct against, so the correction would weight or filter it by chance; disable one of them")
    if manager.generating_args is None:
        manager.generating_args = copy.deepcopy(config.actor_infer.generating_args)


def _fill_worker_defaults(config: "AgenticConfig") -> None:
    if config.uses_critic and config.critic is None:
        config.critic = copy.deepcopy(config.actor_train)
        config.critic.model_args.model_name_or_path = None
    if config.uses_reference and config.reference is None:
        config.reference = copy.deepcopy(config.actor_infer)
        config.reference.strategy_args.strategy_name = "hf_infer"
        # It never trains: fresh LoRA adapters would add nothing (they start at zero) and could not take
        # the warmed-up weights, which come merged.
        config.reference.model_args.lora_rank = None
    for role, worker in _workers(config):
        if worker.model_args.model_name_or_path is None:
            default = (config.reward_pretrain or config.pretrain) if role == "critic" else config.pretrain
            if default is None:
                raise ConfigError(f"{role}.model_args.model_name_or_path is not set and neither is `pretrain`: set pretrain to a model folder, a hub id, or SmolLM2-135M-Instruct (the embedded CPU model).")
            worker.model_args.model_name_or_path = default
