"""ProxyEnvManager: trains an agent that lives outside roll (ROLL's ProxyEnvManager).

Select it with `env_manager_cls: roll.pipeline.agentic.env_manager.proxy_env_manager.ProxyEnvManager`
and name the agent with `agent_runner_cls` (a class with `run_episode(seed, base_url, env_config) ->
EpisodeResult`, see roll/pipeline/agentic/agent_runner/). Each episode:

1. opens an episode key on the env worker process's OpenAI-compatible server (one per process,
   llm_proxy/openai_server.py), whose calls go to this manager's LLM proxy (the run's inference
   workers) with the run's sampling (`generating_args`, at most `max_tokens_per_step` new tokens, a
   prompt + reply within `sequence_length`);
2. runs the agent runner with that episode's base URL, under a timeout of `env_timeout_s` per turn
   (`max_steps` turns): a runner that raises or hangs fails the episode (`env_error` /
   `env_timeout`, reported and its group re-run, as for an env that raises or hangs);
3. returns the recorder's samples (llm_proxy/recorder.py) as Trajectories with the runner's score.
   Calls that could not be attributed are left out and counted (`agent/unattributed_calls`); an
   episode with no call left to train on fails (`episode_error`).
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

from hydra.utils import get_class

from roll.pipeline.agentic.agent_runner.base import as_episode_result, with_env_kwargs
from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.env_manager.traj_env_manager import EnvCallTimeout, call_with_timeout
from roll.pipeline.agentic.llm_proxy.openai_server import OpenAIServer, SamplingDefaults
from roll.pipeline.agentic.trajectory import EpisodeFailure, Trajectory
from roll.strategies.generation import GenerationRequest, GenerationResult

_SERVER: OpenAIServer | None = None
_SERVER_LOCK = threading.Lock()


def process_server(tokenizer: Any) -> OpenAIServer:
    """The OpenAI server of this process (started once; every manager of the worker keys its
    episodes on it). It has no engine of its own: a call must name an open episode."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None:
            _SERVER = OpenAIServer(tokenizer).start()
        return _SERVER


class ProxyEnvManager:
    step_samples = False  # one episode may still give several samples (a rewritten history)

    def __init__(self, tag: str, env_config: CustomEnvConfig, manager_config: EnvManagerConfig, tokenizer: Any,
                 proxy: Any, sequence_length: int, env_id: int = 0, session_prefix: str = "") -> None:
        if not env_config.agent_runner_cls:
            raise ValueError(f"custom_envs.{tag}: env_manager_cls ProxyEnvManager needs agent_runner_cls, the class "
                             "path of your agent runner (e.g. roll.pipeline.agentic.agent_runner.gem_runner.GEMRunner)")
        if manager_config.random_action_rate:
            raise ValueError(f"custom_envs.{tag}: random_action_rate plays the env's random answers in roll's own "
                             "prompts; an agent runner owns its prompts, so set random_action_rate: 0")
        args = manager_config.generating_args
        if args is None:
            raise ValueError("ProxyEnvManager needs manager_config.generating_args (RolloutScheduler resolves it)")
        self.tag, self.env_id, self.proxy = tag, env_id, proxy
        self.session_prefix = session_prefix or f"{tag}-{env_id}"
        penalty = {} if manager_config.format_penalty is None else {"format_penalty": manager_config.format_penalty}
        self.spec = with_env_kwargs(env_config, **penalty)
        self.runner_name = env_config.agent_runner_cls
        self.runner = get_class(env_config.agent_runner_cls)()
        per_turn = min(args.max_new_tokens, env_config.max_tokens_per_step)
        self.defaults = SamplingDefaults(
            max_tokens=per_turn, max_tokens_cap=per_turn, max_context_tokens=sequence_length,
            temperature=float(args.temperature) if args.do_sample else 0.0, top_p=float(args.top_p), top_k=int(args.top_k or 0))
        self.timeout_s = manager_config.env_timeout_s * max(1, env_config.max_steps) if manager_config.env_timeout_s else None
        self.server = process_server(tokenizer)
        self.abandoned_calls: list[threading.Thread] = []

    def _generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        return [self.proxy.generate(request) for request in requests]

    def hung_env_calls(self) -> int:
        """Runner threads that timed out and still run (only replacing the process ends them)."""
        self.abandoned_calls = [t for t in self.abandoned_calls if t.is_alive()]
        return len(self.abandoned_calls)

    def run_episode(self, seed: int, episode_key: str = "0") -> list[Trajectory]:
        key = f"{self.session_prefix}-{episode_key}-{secrets.token_hex(4)}"  # unguessable by other episodes' agents
        recorder = self.server.open_episode(key, self._generate, self.defaults)
        try:
            value = call_with_timeout(self.runner.run_episode, self.timeout_s, seed, self.server.episode_url(key), self.spec)
            result = as_episode_result(value)
        except EnvCallTimeout as exc:
            self.abandoned_calls.append(exc.thread)
            raise EpisodeFailure("env_timeout", self.tag, seed, f"agent runner {self.runner_name} did not finish within "
                                 f"{self.timeout_s}s (env_timeout_s x max_steps)") from exc
        except Exception as exc:
            raise EpisodeFailure("env_error", self.tag, seed, f"agent runner {self.runner_name} raised "
                                 f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.server.close_episode(key)
            self.proxy.release(key)
        samples = recorder.trajectories(result.score, result.step_scores, result.metrics, self.tag, seed, result.stop_reason)
        if not samples:
            calls = recorder.metrics()
            raise EpisodeFailure("episode_error", self.tag, seed, f"no call of agent runner {self.runner_name} can be "
                                 f"trained on ({int(calls['agent/calls'])} calls, {int(calls['agent/unattributed_calls'])} "
                                 f"unattributed: {recorder.left_out()[:1]})")
        return samples
