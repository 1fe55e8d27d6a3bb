"""EnvironmentWorker: one process (a Ray actor, or a plain object for the local executor) hosting up to
`max_env_num_per_worker` env managers. Each `run_episode` call plays one episode of one manager;
Ray runs the calls of different managers on concurrent threads (`max_concurrency`), so envs that
are stepping never hold up envs that are waiting for generation, and vice versa.

`run_episode` never raises: a failed episode comes back as {"failure": kind, "tag", "env_seed",
"detail"} so the scheduler can count it, log it, and replace the group.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from roll.pipeline.agentic.env_manager.traj_env_manager import EpisodeFailure, as_dict, import_path
from roll.pipeline.agentic.llm_proxy import make_proxy

logger = logging.getLogger(__name__)
DEFAULT_ENV_MANAGER_CLS = "roll.pipeline.agentic.env_manager.traj_env_manager.TrajEnvManager"


class EnvironmentWorker:
    def __init__(self, worker_index: int, managers: list[dict[str, Any]], tokenizer_path: str, proxy_spec: dict[str, Any],
                 sequence_length: int, generating_args: Any = None, format_penalty: float | None = None,
                 env_timeout_s: float | None = 60.0, num_threads: int = 1) -> None:
        """managers: [{"env_id": int, "tag": str, "env_spec": CustomEnvConfig or dict}]."""
        # env workers do no heavy math: one torch thread each, so they never oversubscribe the cores
        # that the inference and training workers were given
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        import torch
        from transformers import AutoTokenizer

        torch.set_num_threads(num_threads)
        self.worker_index = worker_index
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        self.managers: dict[int, Any] = {}
        for m in managers:
            spec = as_dict(m["env_spec"])
            manager_cls = import_path(spec.get("env_manager_cls") or DEFAULT_ENV_MANAGER_CLS)
            self.managers[m["env_id"]] = manager_cls(
                tag=m["tag"], env_spec=spec, tokenizer=self.tokenizer,
                proxy=make_proxy(proxy_spec, self.tokenizer, index=m["env_id"]),
                sequence_length=sequence_length, generating_args=generating_args, format_penalty=format_penalty,
                env_id=m["env_id"], env_timeout_s=env_timeout_s, session_prefix=f"w{worker_index}-e{m['env_id']}",
            )

    def ready(self) -> bool:
        return True

    def torch_threads(self) -> int:
        import torch

        return torch.get_num_threads()

    def run_episode(self, env_id: int, seed: int, episode_key: str) -> dict[str, Any]:
        manager = self.managers[env_id]
        start = time.perf_counter()
        try:
            traj = manager.run_episode(seed, episode_key)
        except EpisodeFailure as exc:
            logger.warning("episode failed: %s", exc)
            return {"failure": exc.kind, "tag": exc.tag, "env_seed": exc.seed, "detail": exc.detail, "env_id": env_id}
        except Exception as exc:  # anything else is a bug in the episode loop, still only this episode's
            logger.exception("episode crashed in env tag=%s seed=%s", manager.tag, seed)
            return {"failure": "episode_error", "tag": manager.tag, "env_seed": seed, "env_id": env_id,
                    "detail": f"{type(exc).__name__}: {exc}"}
        traj["env_id"] = env_id
        traj["time_s"] = time.perf_counter() - start
        return traj
