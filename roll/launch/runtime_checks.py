"""Checks of a loaded config against this machine, run by the launchers before any worker starts.

Each failed check raises ConfigError naming the key and the fix: a strategy this machine cannot run,
flash attention without flash-attn, more devices or CPU workers than the machine has, an output path
it cannot write, a first prompt that cannot fit sequence_length, roles whose estimated memory cannot fit
the machine (memory_estimate.py). bf16 without native CPU support warns.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import TYPE_CHECKING, Any

from roll.agentic.env import make_env
from roll.configs.errors import ConfigError
from roll.launch.cpu_mode import writable
from roll.launch.memory_estimate import check_memory
from roll.models.resolve import resolve_model_path
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.rollout_dump import MOCK_MODES, dumped_steps
from roll.strategies.registry import strategy_problem

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig
    from roll.configs.worker_config import WorkerConfig

logger = logging.getLogger("roll.config")


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def check_runnable(config: "AgenticConfig") -> None:
    """Raises ConfigError when this machine cannot run the config (see the module docstring); resolves
    every role's model_name_or_path to a local folder in place (the embedded model is converted once)."""
    cuda = has_cuda()
    roles = [(r, getattr(config, r)) for r in ("actor_train", "actor_infer", "critic", "reference") if getattr(config, r) is not None]
    for role, worker in roles:  # what cannot run at all first, then how it is asked to run
        problem = strategy_problem(worker.strategy_args.strategy_name, cuda)
        if problem:
            raise ConfigError(f"{role}.strategy_args.strategy_name: {problem}")
    for role, worker in roles:
        check_attention(role, worker)
        check_devices(role, worker, cuda)
        if not cuda and worker.model_args.dtype != "fp32":
            if worker.model_args.dtype == "bf16" and not cpu_has_native_bf16():
                logger.warning("%s.model_args.dtype is bf16 but this CPU has no native bf16 (no avx512_bf16 / amx_bf16): "
                               "bf16 would run many times slower than fp32, so roll computes in fp32.", role)
            else:
                logger.warning("%s.model_args.dtype is %s but there is no GPU: roll computes in fp32 on CPU.", role, worker.model_args.dtype)
            worker.model_args.dtype = "fp32"
    check_output_paths(config)
    check_rollout_mock(config)
    for role, worker in roles:
        try:
            worker.model_args.model_name_or_path = resolve_model_path(worker.model_args.model_name_or_path)
        except FileNotFoundError as error:
            raise ConfigError(f"{role}.model_args.model_name_or_path (from pretrain): {error}") from None
    estimates = check_memory(config, cuda)
    logger.info("memory estimate per worker: %s", "; ".join(r.describe() for r in estimates))
    check_first_prompts(config)


def check_attention(role: str, worker: "WorkerConfig") -> None:
    """fa2 / flash_attention_2 needs the flash-attn package (and a GPU); without it transformers raises
    an ImportError inside the Ray worker, long after launch."""
    if worker.model_args.attn_implementation in ("fa2", "flash_attention_2") and importlib.util.find_spec("flash_attn") is None:
        raise ConfigError(
            f"{role}.model_args.attn_implementation: {worker.model_args.attn_implementation} needs the flash-attn "
            f"package, which is not installed here. Use attn_implementation: sdpa (PyTorch's fused attention, no "
            f"extra package), or pip install flash-attn on a CUDA machine (or run with --cpu)."
        )


def check_devices(role: str, worker: "WorkerConfig", cuda: bool) -> None:
    """device_mapping may not ask for more GPUs (on CPU: worker processes) than the machine has."""
    if not worker.device_mapping:
        return
    if cuda:
        import torch

        count = torch.cuda.device_count()
        missing = [i for i in worker.device_mapping if i >= count]
        if missing:
            raise ConfigError(
                f"{role}.device_mapping asks for GPUs {worker.device_mapping} but this machine has {count} "
                f"(ids 0..{count - 1}). Use device_mapping: list(range(0,{count})) or fewer."
            )
        return
    cores = os.cpu_count() or 1
    if len(worker.device_mapping) > cores:
        raise ConfigError(
            f"{role}.device_mapping asks for {len(worker.device_mapping)} workers, but there is no GPU and this "
            f"machine has {cores} CPU cores (one worker process each at most). Use device_mapping: [0] "
            f"(or run with --cpu, which does this for every role)."
        )


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether the CPU computes bf16 natively (x86 avx512_bf16 / amx_bf16, Arm bf16); `cpuinfo`: the
    text of /proc/cpuinfo (read when None; where it is missing, assume not)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            flags.update(value.split())
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def check_output_paths(config: "AgenticConfig") -> None:
    """ROLL's examples log and checkpoint to their cluster's mounts; fail now, not at the first save."""
    for key, path in (("tracker_kwargs.log_dir", config.tracker_kwargs.get("log_dir")),
                      ("checkpoint_config.output_dir", config.checkpoint_config.get("output_dir")),
                      ("output_dir", config.output_dir), ("logging_dir", config.logging_dir)):
        if not writable(path):
            raise ConfigError(f"{key}: {path!r} cannot be written on this machine. Point it at a folder you can "
                              f"write (or leave it out: roll then writes under output_dir); --cpu does this for you.")


def check_rollout_mock(config: "AgenticConfig") -> None:
    """rollout_mock: a known mode, and in mock mode a folder holding the dumped steps."""
    mock = config.rollout_mock
    if mock is None or not mock.enable:
        return
    if mock.mode not in MOCK_MODES:
        raise ConfigError(f"rollout_mock.mode: {mock.mode!r} is not one of {list(MOCK_MODES)}.")
    if mock.mode == "mock":
        have = dumped_steps(mock.dump_dir)
        missing = [s for s in range(1, config.max_steps + 1) if s not in have]
        if missing:
            raise ConfigError(f"rollout_mock.dump_dir: {mock.dump_dir} has no dumped batch for steps {missing[:5]}"
                              f"{'…' if len(missing) > 5 else ''} (it holds {have or 'none'}). Dump them first with "
                              f"rollout_mock.mode: dump (or rollout_dump_dir), or lower max_steps.")


def check_first_prompts(config: "AgenticConfig") -> None:
    """Each env's first prompt (system + instruction + first observation, through the chat template)
    must leave room below sequence_length for a response."""
    from hydra.utils import get_class
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(config.actor_infer.model_args.model_name_or_path)
    checked: set[str] = set()
    for manager_config in (config.train_env_manager, config.val_env_manager):
        for tag in [t for t in manager_config.tags if t not in checked]:
            checked.add(tag)
            if config.custom_envs[tag].env_type is None:
                continue  # an agent runner's own game: its prompts are the agent's
            # the configured manager builds the prompt (step-wise managers use their own template fields)
            manager_cls = get_class(config.custom_envs[tag].env_manager_cls)
            if not (isinstance(manager_cls, type) and issubclass(manager_cls, TrajEnvManager)):
                manager_cls = TrajEnvManager
            manager = manager_cls(tag, config.custom_envs[tag], manager_config, tokenizer, proxy=None,
                                  sequence_length=config.sequence_length)
            length = _first_prompt_length(manager, config.seed)
            if length >= config.sequence_length:
                raise ConfigError(
                    f"sequence_length={config.sequence_length} cannot hold the first prompt of env {tag!r}, which is "
                    f"{length} tokens with this model's tokenizer (system prompt, instruction, first observation). "
                    f"Raise sequence_length (to at least {length + manager.spec.max_tokens_per_step} for one full "
                    f"turn) or shorten custom_envs.{tag}'s templates."
                )


def _first_prompt_length(manager: Any, seed: int) -> int:
    """The manager's own first prompt (its templates and env), without generating."""
    where = f"custom_envs.{manager.tag} (env_type {manager.spec.env_type!r})"
    try:
        env = make_env(manager.spec.env_type, **manager.env_kwargs)
    except (ImportError, ValueError, LookupError, OSError) as exc:
        raise ConfigError(f"{where}: the env cannot be built on this machine: {exc}") from None
    try:
        try:
            observation, info = env.reset(seed)
        except Exception as exc:
            raise ConfigError(f"{where}: the env's reset(seed={seed}) fails: {type(exc).__name__}: {exc}") from None
        instruction = manager.spec.env_instruction or info.get("env_instruction", "")
        manager.env = env  # a manager may build the prompt from its env (AgentNativeStepEnvManager)
        try:
            # the manager's own chat: a vision manager counts its images' placeholder tokens
            return len(manager._new_chat().start(manager.first_messages(instruction, observation)))
        except ValueError as exc:  # a template field the manager does not fill
            raise ConfigError(str(exc)) from None
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()
