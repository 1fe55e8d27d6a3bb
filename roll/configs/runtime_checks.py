"""Checks of a loaded config against this machine, run by the launchers before any worker starts."""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING

from roll.configs.errors import ConfigError

if TYPE_CHECKING:
    from roll.pipeline.agentic.agentic_config import AgenticConfig

logger = logging.getLogger("roll.config")
CPU_EXAMPLE = (
    "python examples/start_agentic_pipeline.py --config-path examples/smollm2-135M-agentic_cpu "
    "--config-name agent_val_frozen_lake"
)


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def strategy_problem(strategy: str, cuda: bool) -> str | None:
    """Why `strategy` cannot run on this machine, with what to use instead; None when it can."""
    if strategy == "vllm":
        from roll.strategies.vllm_infer import vllm_unavailable_reason

        reason = vllm_unavailable_reason()
        return f"{reason} (the CPU example uses hf_infer: {CPU_EXAMPLE})" if reason else None
    if strategy == "sglang":
        from roll.strategies.sglang_infer import sglang_unavailable_reason

        return sglang_unavailable_reason()
    if strategy == "deepspeed_train":
        if importlib.util.find_spec("deepspeed") is None:
            return "deepspeed_train needs DeepSpeed, which is not installed: pip install deepspeed, or use strategy_name: fsdp2_train (PyTorch FSDP2, no extra package)."
        if not cuda:
            return "deepspeed_train needs a CUDA GPU; on CPU use strategy_name: hf_train (one process) or fsdp2_train (several, over gloo)."
    if strategy == "megatron_train":
        return "megatron_train is not supported by roll; use strategy_name: fsdp2_train (PyTorch FSDP2), which shards the same way for models of this size."
    return None


def check_runnable(config: "AgenticConfig") -> None:
    """Raises ConfigError when a strategy cannot run here or a model cannot be found; resolves every
    role's model_name_or_path to a local folder in place (the embedded model is converted once)."""
    from roll.models.resolve import resolve_model_path

    cuda = has_cuda()
    roles = [(r, getattr(config, r)) for r in ("actor_train", "actor_infer", "critic", "reference") if getattr(config, r) is not None]
    for role, worker in roles:
        problem = strategy_problem(worker.strategy_args.strategy_name, cuda)
        if problem:
            raise ConfigError(f"{role}.strategy_args.strategy_name: {problem}")
        if not cuda and worker.model_args.dtype != "fp32":
            logger.warning("%s.model_args.dtype is %s but there is no GPU: roll computes in fp32 on CPU (bf16 is 5-100x slower on most CPUs).", role, worker.model_args.dtype)
            worker.model_args.dtype = "fp32"
    for role, worker in roles:
        try:
            worker.model_args.model_name_or_path = resolve_model_path(worker.model_args.model_name_or_path)
        except FileNotFoundError as error:
            raise ConfigError(f"{role}.model_args.model_name_or_path (from pretrain): {error}") from None
