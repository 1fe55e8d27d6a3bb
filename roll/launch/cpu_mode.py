"""`--cpu`: turn any config (ROLL's GPU configs included) into a run this machine can do.

Inference runs `hf_infer` (actor_infer keeps `vllm` where vLLM's CPU build is installed in this
Python; elsewhere the change line says how to install it), training `hf_train`, one worker per role,
`sdpa` attention, fp32; the batch becomes a few groups and the lengths shrink; the model becomes the
embedded default unless `pretrain=` was given on the command line (the tiny random Qwen2.5-VL when the
envs observe images: `render_mode: rgb_array`, played by VLTrajEnvManager; the embedded model reads text
only); paths this machine cannot write move under output_dir. Every change is
returned as one line `key: old -> new`, which the launcher prints.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roll.models.embedded import EMBEDDED_MODEL_NAME
from roll.models.tiny import TINY_VL_MODEL_NAME
from roll.strategies.registry import strategy_facts, strategy_problem

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig, EnvManagerConfig

ROLES = ("actor_train", "actor_infer", "critic", "reference")
# ROLL keys roll refuses at other values because they spread one worker's work over several devices:
# on one CPU --cpu turns each off (section, key) -> (the value that means "off", what it does). They are
# set in the YAML's data, before it becomes a config, since that is where their other values are refused.
CPU_OFF_KEYS: dict[tuple[str, str], tuple[Any, str]] = {
    ("model_args", "ulysses_size"): (1, "Ulysses sequence parallelism splits each sequence over several devices"),
}
TRAIN_GROUPS = 2  # GRPO groups per training step
MAX_GROUP_SIZE = 4
MAX_SEQUENCE_LENGTH = 2048
MAX_NEW_TOKENS = 64
MAX_TRAIN_MICRO_BATCH = 2
CPU_ATTENTION = ("sdpa", "eager")
# Generators --cpu keeps for actor_infer when their package is installed (they have a CPU build).
CPU_GENERATORS = ("vllm",)


class _Changes:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def set(self, owner: Any, attr: str, new: Any, key: str) -> None:
        old = getattr(owner, attr)
        if old != new:
            setattr(owner, attr, new)
            self.lines.append(f"{key}: {old!r} -> {new!r}")

    def note(self, line: str) -> None:
        self.lines.append(line)


def turn_off_multi_device_keys(data: dict[str, Any]) -> list[str]:
    """Sets each CPU_OFF_KEYS key of each role in the YAML's data to its "off" value, in place; returns
    one line per change (with why it cannot run here)."""
    lines = []
    for role in ROLES:
        for (section, key), (off, why) in CPU_OFF_KEYS.items():
            block = (data.get(role) or {}).get(section) if isinstance(data.get(role), dict) else None
            if isinstance(block, dict) and key in block and block[key] not in (off, None):
                lines.append(f"{role}.{section}.{key}: {block[key]!r} -> {off!r} ({why}; this run has one device)")
                block[key] = off
    return lines


def adjust_for_cpu(config: "AgenticConfig", keep_pretrain: bool) -> list[str]:
    """Changes `config` in place for a CPU run; returns one line per changed key."""
    changes = _Changes()
    if not keep_pretrain:
        changes.set(config, "pretrain", TINY_VL_MODEL_NAME if observes_images(config) else EMBEDDED_MODEL_NAME, "pretrain")
    if config.reward_pretrain is not None:
        changes.set(config, "reward_pretrain", config.pretrain, "reward_pretrain")
    _adjust_envs(config, changes)
    _adjust_workers(config, changes)
    _adjust_paths(config, changes)
    return changes.lines


def observes_images(config: "AgenticConfig") -> bool:
    """Whether an env the run plays renders images (its model must be a vision-language one)."""
    tags = set(config.train_env_manager.tags) | set(config.val_env_manager.tags)
    return any(config.custom_envs[tag].env_config.get("render_mode") == "rgb_array" for tag in tags if tag in config.custom_envs)


def _adjust_envs(config: "AgenticConfig", changes: _Changes) -> None:
    train, val = config.train_env_manager, config.val_env_manager
    _adjust_manager(train, "train_env_manager", max(len(train.tags), TRAIN_GROUPS), changes)
    changes.set(config, "rollout_batch_size", train.num_env_groups * train.group_size, "rollout_batch_size")
    if val.tags:
        _adjust_manager(val, "val_env_manager", len(val.tags), changes)
        if config.val_batch_size is not None:
            changes.set(config, "val_batch_size", val.num_env_groups * val.group_size, "val_batch_size")
    changes.set(config, "sequence_length", min(config.sequence_length, MAX_SEQUENCE_LENGTH), "sequence_length")
    for tag, spec in config.custom_envs.items():
        changes.set(spec, "max_tokens_per_step", min(spec.max_tokens_per_step, MAX_NEW_TOKENS), f"custom_envs.{tag}.max_tokens_per_step")


def _adjust_manager(manager: "EnvManagerConfig", name: str, groups: int, changes: _Changes) -> None:
    changes.set(manager, "num_env_groups", min(manager.num_env_groups, groups), f"{name}.num_env_groups")
    changes.set(manager, "group_size", min(manager.group_size, MAX_GROUP_SIZE), f"{name}.group_size")
    changes.set(manager, "num_groups_partition", None, f"{name}.num_groups_partition")
    changes.set(manager, "max_env_num_per_worker", 0, f"{name}.max_env_num_per_worker")
    if manager.generating_args is not None:
        args = manager.generating_args
        changes.set(args, "max_new_tokens", min(args.max_new_tokens, MAX_NEW_TOKENS), f"{name}.generating_args.max_new_tokens")


def _adjust_workers(config: "AgenticConfig", changes: _Changes) -> None:
    roles = {"actor_train": "hf_train", "actor_infer": "hf_infer", "critic": "hf_train", "reference": "hf_infer"}
    for role, strategy in roles.items():
        worker = getattr(config, role)
        if worker is None:
            continue
        current = worker.strategy_args.strategy_name
        if role == "actor_infer" and current in CPU_GENERATORS and not observes_images(config):  # vLLM takes no images here
            if strategy_problem(current, cuda=False) is None:
                strategy = current  # installed here: the config's own generator, with its strategy_config
            else:
                changes.note(f"{role}.strategy_args.strategy_name: {current} is not installed in this Python "
                             f"(to generate with it: {strategy_facts(current).install}); using {strategy}")
        if current != strategy:
            changes.set(worker.strategy_args, "strategy_name", strategy, f"{role}.strategy_args.strategy_name")
            changes.set(worker.strategy_args, "strategy_config", None, f"{role}.strategy_args.strategy_config")
        if worker.device_mapping is not None:
            changes.set(worker, "device_mapping", [0], f"{role}.device_mapping")
        model = worker.model_args
        if model.attn_implementation not in (None, *CPU_ATTENTION):
            changes.set(model, "attn_implementation", "sdpa", f"{role}.model_args.attn_implementation")
        changes.set(model, "dtype", "fp32", f"{role}.model_args.dtype")
        if model.model_name_or_path is not None:
            changes.set(model, "model_name_or_path", None, f"{role}.model_args.model_name_or_path")
        gen = worker.generating_args
        changes.set(gen, "max_new_tokens", min(gen.max_new_tokens, MAX_NEW_TOKENS), f"{role}.generating_args.max_new_tokens")
        if role in ("actor_train", "critic"):
            args = worker.training_args
            micro = min(args.per_device_train_batch_size, MAX_TRAIN_MICRO_BATCH)
            changes.set(args, "per_device_train_batch_size", micro, f"{role}.training_args.per_device_train_batch_size")
            steps = max(1, math.ceil(config.rollout_batch_size / micro))  # one optimizer step per batch
            changes.set(args, "gradient_accumulation_steps", steps, f"{role}.training_args.gradient_accumulation_steps")
        for kind in ("train", "infer"):
            limit = f"max_tokens_per_microbatch_in_{kind}"
            if getattr(worker, f"use_dynamic_batching_in_{kind}"):
                changes.set(worker, limit, max(getattr(worker, limit) or 0, config.sequence_length), f"{role}.{limit}")


def _adjust_paths(config: "AgenticConfig", changes: _Changes) -> None:
    """ROLL's example configs log and checkpoint to their cluster's mounts (/data/...)."""
    if not local_and_writable(config.tracker_kwargs.get("log_dir")):
        new = dict(config.tracker_kwargs, log_dir=str(Path(config.output_dir) / "tensorboard"))
        changes.set(config, "tracker_kwargs", new, "tracker_kwargs")
    if not local_and_writable(config.checkpoint_config.get("output_dir")):
        new = dict(config.checkpoint_config, output_dir=str(Path(config.output_dir) / "checkpoints"))
        changes.set(config, "checkpoint_config", new, "checkpoint_config")


def local_and_writable(path: str | None) -> bool:
    """Writable, and not on a mount this machine lacks (an absolute path whose top folder is missing,
    like a cluster's /data/...: writable by root, but not where a laptop run should write)."""
    if path and Path(path).expanduser().is_absolute():
        parts = Path(path).expanduser().parts
        if len(parts) > 1 and not Path(parts[0], parts[1]).exists():
            return False
    return writable(path)


def writable(path: str | None) -> bool:
    """Whether `path` (None: unset, fine) can be created or written by this process."""
    if not path:
        return True
    candidate = Path(path).expanduser().absolute()
    while not candidate.exists():
        candidate = candidate.parent
    return candidate.is_dir() and os.access(candidate, os.W_OK)
