"""Checks of a loaded config against this machine, run by the launchers before any worker starts."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from roll.configs.errors import ConfigError
from roll.strategies.registry import strategy_problem

if TYPE_CHECKING:
    from roll.pipeline.agentic.agentic_config import AgenticConfig

logger = logging.getLogger("roll.config")


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


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
