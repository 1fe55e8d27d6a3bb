"""Shared builders for the rollout tests (real tiny models, real envs)."""

from __future__ import annotations

from pathlib import Path

import torch

from roll.configs.worker_config import GeneratingArgs, ModelArgs, WorkerConfig
from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig

FROZEN_LAKE_SPEC = CustomEnvConfig(
    env_type="frozen_lake",
    max_steps=5,
    max_tokens_per_step=12,
    env_config={"max_steps": 5, "is_slippery": False, "format_penalty": -0.01},
)


def fresh_logprobs(model, ids: list[int]) -> torch.Tensor:
    """Each token's log-prob under a fresh forward pass of `model` over `ids` (0 for the first token),
    to compare with the log-probs recorded when the tokens were generated."""
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return torch.cat([torch.zeros(1), logp[:-1].gather(1, torch.tensor(ids)[1:, None])[:, 0]])


def infer_config(model_dir: Path) -> WorkerConfig:
    return WorkerConfig(model_args=ModelArgs(model_name_or_path=str(model_dir)))


def greedy(max_new_tokens: int = 12) -> GeneratingArgs:
    return GeneratingArgs(max_new_tokens=max_new_tokens, do_sample=False, temperature=0.0)


def manager_config(generating_args: GeneratingArgs | None = None, **fields) -> EnvManagerConfig:
    """The env manager settings a TrajEnvManager reads (sampling defaults to GeneratingArgs' own)."""
    return EnvManagerConfig(generating_args=generating_args or GeneratingArgs(), **fields)
