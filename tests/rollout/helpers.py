"""Shared builders for the rollout tests (real tiny models, real envs)."""

from __future__ import annotations

from pathlib import Path

from roll.configs.worker_config import GeneratingArgs, ModelArgs, WorkerConfig
from roll.pipeline.agentic.agentic_config import CustomEnvConfig, EnvManagerConfig

FROZEN_LAKE_SPEC = CustomEnvConfig(
    env_type="frozen_lake",
    max_steps=5,
    max_tokens_per_step=12,
    env_config={"max_steps": 5, "is_slippery": False, "format_penalty": -0.01},
)


def infer_config(model_dir: Path) -> WorkerConfig:
    return WorkerConfig(model_args=ModelArgs(model_name_or_path=str(model_dir)))


def greedy(max_new_tokens: int = 12) -> GeneratingArgs:
    return GeneratingArgs(max_new_tokens=max_new_tokens, do_sample=False, temperature=0.0)


def manager_config(generating_args: GeneratingArgs | None = None, **fields) -> EnvManagerConfig:
    """The env manager settings a TrajEnvManager reads (sampling defaults to GeneratingArgs' own)."""
    return EnvManagerConfig(generating_args=generating_args or GeneratingArgs(), **fields)
