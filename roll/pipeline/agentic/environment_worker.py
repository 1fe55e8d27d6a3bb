"""EnvironmentWorker: one process (a Ray actor, or a plain object for the local executor) hosting up to
`max_env_num_per_worker` env managers. Each `run_episode` call plays one episode of one manager;
Ray runs the calls of different managers on concurrent threads (`max_concurrency`), so envs that
are stepping never hold up envs that are waiting for generation, and vice versa.

`run_episode` never raises: it returns the episode's samples (`list[Trajectory]`), or an
`EpisodeFailureResult` the scheduler counts, logs, and replaces with a new group.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from hydra.utils import get_class

from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.llm_proxy import make_proxy
from roll.pipeline.agentic.trajectory import EpisodeFailure, EpisodeFailureResult, Trajectory

logger = logging.getLogger(__name__)


@dataclass
class EnvSlot:
    """One env manager a worker hosts: its index in the run, its `custom_envs` tag and that entry."""

    env_id: int
    tag: str
    env_config: CustomEnvConfig


@dataclass
class WorkerPlace:
    """A worker process: its pid and its Ray node ("local" outside Ray)."""

    pid: int
    node_id: str


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"


class EnvironmentWorker:
    def __init__(self, worker_index: int, slots: list[EnvSlot], manager_config: EnvManagerConfig, tokenizer_path: str,
                 proxy_spec: dict[str, Any], sequence_length: int, num_threads: int = 1) -> None:
        # env workers do no heavy math: one torch thread each, so they never oversubscribe the cores
        # that the inference and training workers were given
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        import torch
        from transformers import AutoTokenizer

        torch.set_num_threads(num_threads)
        self.worker_index = worker_index
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        self.managers: dict[int, Any] = {}
        for slot in slots:
            # validation imported the same path in the driver; here it runs in the worker's own process
            manager_cls = get_class(slot.env_config.env_manager_cls)
            self.managers[slot.env_id] = manager_cls(
                tag=slot.tag, env_config=slot.env_config, manager_config=manager_config, tokenizer=self.tokenizer,
                proxy=make_proxy(proxy_spec, self.tokenizer, index=slot.env_id), sequence_length=sequence_length,
                env_id=slot.env_id, session_prefix=f"w{worker_index}-e{slot.env_id}",
            )

    def ready(self) -> WorkerPlace:
        """Where this worker runs: the pool tells a replacement process from the one it replaced, and
        logs which nodes the env workers are on."""
        return WorkerPlace(pid=os.getpid(), node_id=_node_id())

    def hung_env_calls(self) -> int:
        """Env calls of this process that timed out and still run: only replacing the process ends them.
        A custom env manager without `hung_env_calls` counts as having none."""
        return sum(getattr(m, "hung_env_calls", lambda: 0)() for m in self.managers.values())

    def torch_threads(self) -> int:
        import torch

        return torch.get_num_threads()

    def run_episode(self, env_id: int, seed: int, episode_key: str) -> list[Trajectory] | EpisodeFailureResult:
        manager = self.managers[env_id]
        start = time.perf_counter()
        try:
            samples = manager.run_episode(seed, episode_key)
        except EpisodeFailure as exc:
            logger.warning("episode failed: %s", exc)
            return EpisodeFailureResult(exc.kind, exc.tag, exc.seed, exc.detail, env_id=env_id)
        except Exception as exc:  # anything else is a bug in the episode loop, still only this episode's
            logger.exception("episode crashed in env tag=%s seed=%s", manager.tag, seed)
            return EpisodeFailureResult("episode_error", manager.tag, seed, f"{type(exc).__name__}: {exc}", env_id=env_id)
        if not samples or not all(isinstance(s, Trajectory) for s in samples):
            return EpisodeFailureResult("episode_error", manager.tag, seed, env_id=env_id,
                                        detail=f"{type(manager).__name__}.run_episode must return a non-empty list of "
                                               f"Trajectory, got {type(samples).__name__}")
        elapsed = time.perf_counter() - start
        for sample in samples:
            sample.env_id, sample.time_s = env_id, elapsed
        return samples
