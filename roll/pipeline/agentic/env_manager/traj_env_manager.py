"""TrajEnvManager: runs one env turn by turn against an LLM proxy and returns a trajectory.

Prompt layout (ROLL's): a system message (`agent_system_template`), then a first user message with
the env instruction and `agent_template` filled with {turn_idx}, {observation}, {actions_left} and
{max_response_length}; every later turn appends the next observation the same way. The episode
ends at terminated, truncated, `max_steps`, or when the next prompt would not fit `sequence_length`.

The trajectory is one sequence of ids (see chat_tokens.py): `response_mask` 1 on generated tokens,
`infer_logprobs` the log-probs recorded at generation, the episode score = sum of turn rewards.
Model text that is empty or cut off without its closing tag goes to the env like any other text:
the env charges its format penalty and the episode continues.

Env calls run under a timeout: an env that hangs or raises fails this episode (EpisodeFailure, with
the tag and seed), and the manager builds a fresh env for its next episode.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import asdict, is_dataclass
from typing import Any, Callable

from roll.agentic.env import make_env
from roll.pipeline.agentic.env_manager.chat_tokens import ChatTokens

# ROLL's agent_template (shared/roll-configs/config/traj_envs.yaml), used when an env spec has none.
DEFAULT_AGENT_TEMPLATE = (
    "Turn {turn_idx}:\nObservation:\n{observation}\nStrictly follow this format:\n"
    "1. output format is '<answer> [your answer] </answer>' with no extra text. \n"
    "2. You have {actions_left} actions left. \n3. Max response length: {max_response_length} words (tokens).\n"
    "Decide the next action:\n"
)
DEFAULT_SYSTEM_TEMPLATE = "You're a helpful assistant. You are a good game player. You are aiming to get high reward in the game."


class EpisodeFailure(RuntimeError):
    """An episode that could not finish (env raised or hung, generation failed)."""

    def __init__(self, kind: str, tag: str, seed: int, detail: str) -> None:
        super().__init__(f"{kind} in env tag={tag} seed={seed}: {detail}")
        self.kind, self.tag, self.seed, self.detail = kind, tag, seed, detail


def as_dict(obj: Any) -> dict:
    if obj is None:
        return {}
    return asdict(obj) if is_dataclass(obj) else dict(obj)


def call_with_timeout(fn: Callable, timeout_s: float | None, *args: Any) -> Any:
    """Runs fn(*args) in a daemon thread; raises TimeoutError if it is not back in time (the thread
    is abandoned: a hung env cannot be interrupted, only replaced)."""
    if not timeout_s:
        return fn(*args)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"{getattr(fn, '__name__', fn)} did not return within {timeout_s}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def aggregate_metrics(steps: list[dict[str, float]], modes: dict[str, str]) -> dict[str, float]:
    """Per-episode metrics from per-step ones, each by its aggregation mode (mean by default)."""
    out: dict[str, float] = {}
    for key in {k for step in steps for k in step}:
        values = [float(step[key]) for step in steps if key in step]
        mode = modes.get(key, "mean")
        out[key] = {"sum": sum(values), "last": values[-1], "max": max(values)}.get(mode, sum(values) / len(values))
    return out


def import_path(path: str) -> Any:
    """`package.module.Name` -> the object (for class paths written in configs)."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"{path!r} is not a dotted path like package.module.Name")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"cannot import {path!r}: {exc}") from None


def build_env(env_type: str, env_config: dict) -> Any:
    """A registered env name, or a dotted path to a BaseEnv subclass (an env you have not registered)."""
    if "." in env_type:
        return import_path(env_type)(**env_config)
    return make_env(env_type, **env_config)


class TrajEnvManager:
    def __init__(self, tag: str, env_spec: Any, tokenizer: Any, proxy: Any, sequence_length: int,
                 generating_args: Any = None, format_penalty: float | None = None, env_id: int = 0,
                 env_timeout_s: float | None = 60.0, session_prefix: str = "") -> None:
        spec = as_dict(env_spec)
        self.tag, self.env_id = tag, env_id
        self.env_type = spec.get("env_type", "frozen_lake")
        self.env_config = dict(spec.get("env_config") or {})
        if format_penalty is not None:
            self.env_config["format_penalty"] = format_penalty
        self.max_steps = int(spec.get("max_steps", 10))
        self.max_tokens_per_step = int(spec.get("max_tokens_per_step", 128))
        self.env_instruction = spec.get("env_instruction")
        self.system_template = spec.get("agent_system_template") or DEFAULT_SYSTEM_TEMPLATE
        self.agent_template = spec.get("agent_template") or DEFAULT_AGENT_TEMPLATE
        self.gen = as_dict(generating_args)
        self.tokenizer, self.proxy = tokenizer, proxy
        self.sequence_length = sequence_length
        self.env_timeout_s = env_timeout_s
        self.session_prefix = session_prefix or f"{tag}-{env_id}"
        self.env = None  # built lazily, and rebuilt after a failure

    def _prompt(self, observation: str, turn: int) -> str:
        try:
            return self.agent_template.format(
                turn_idx=turn + 1, observation=observation, actions_left=self.max_steps - turn,
                max_response_length=self.max_tokens_per_step,
            )
        except (KeyError, IndexError) as exc:
            raise ValueError(f"custom_envs.{self.tag}.agent_template uses an unknown field {exc}; it may use "
                             "{turn_idx} {observation} {actions_left} {max_response_length}") from None

    def _env_call(self, what: str, seed: int, fn: Callable, *args: Any) -> Any:
        try:
            return call_with_timeout(fn, self.env_timeout_s, *args)
        except Exception as exc:
            self.env = None  # never reuse an env that raised or may still be running
            kind = "env_timeout" if isinstance(exc, TimeoutError) else "env_error"
            raise EpisodeFailure(kind, self.tag, seed, f"{what}: {type(exc).__name__}: {exc}") from exc

    def _request(self, session_id: str, ids: list[int], max_new: int, messages: list[dict], seed: int, turn: int) -> dict:
        return {
            "request_id": f"{session_id}-t{turn}", "session_id": session_id, "input_ids": ids, "max_new_tokens": max_new,
            "do_sample": bool(self.gen.get("do_sample", True)), "temperature": float(self.gen.get("temperature", 1.0)),
            "top_p": float(self.gen.get("top_p", 1.0)), "top_k": int(self.gen.get("top_k") or 0),
            "stop_strings": self.gen.get("stop_strings"), "seed": (seed * 1000003 + self.env_id * 101 + turn) % 2**63,
            "messages": messages,
        }

    # ---- hooks for subclasses (the tool env manager renders tool output as `tool` messages) ----
    def _new_chat(self) -> ChatTokens:
        return ChatTokens(self.tokenizer)

    def _next_turn_ids(self, chat: ChatTokens, observation: str, info: dict, turn: int) -> list[int]:
        """Ids of the message that carries `observation` (from the step that returned `info`)."""
        return chat.next_prompt(self._prompt(observation, turn))

    def run_episode(self, seed: int, episode_key: str = "0") -> dict[str, Any]:
        """Plays one episode from `seed`; returns the trajectory dict (lists, picklable)."""
        if self.env is None:
            self.env = self._env_call("make_env", seed, lambda: build_env(self.env_type, self.env_config))
        observation, info = self._env_call("reset", seed, self.env.reset, seed)
        instruction = self.env_instruction or info.get("env_instruction", "")
        chat = self._new_chat()
        first_user = (instruction + "\n" if instruction else "") + self._prompt(observation, 0)
        ids = chat.start([{"role": "system", "content": self.system_template}, {"role": "user", "content": first_user}])
        if len(ids) >= self.sequence_length:
            raise ValueError(f"the first prompt of env {self.tag} has {len(ids)} tokens, not below sequence_length={self.sequence_length}")
        mask, logps = [0] * len(ids), [0.0] * len(ids)
        session_id = f"{self.session_prefix}-{episode_key}"
        rewards, actions, step_metrics, modes = [], [], [], {}
        stop_reason, gen_tokens = "max_steps", 0
        try:
            for turn in range(self.max_steps):
                max_new = min(self.max_tokens_per_step, int(self.gen.get("max_new_tokens", self.max_tokens_per_step)),
                              self.sequence_length - len(ids))
                try:
                    result = self.proxy.generate(self._request(session_id, ids, max_new, chat.messages, seed, turn))
                except Exception as exc:
                    raise EpisodeFailure("generation_error", self.tag, seed, f"{type(exc).__name__}: {exc}") from exc
                out = result["output_ids"]
                ids, mask, logps = ids + out, mask + [1] * len(out), logps + list(result["logprobs"])
                gen_tokens += len(out)
                stopped = result["finish_reason"] == "stop" and bool(out) and out[-1] == self.tokenizer.eos_token_id
                text = chat.add_response(out, stopped)
                observation, reward, terminated, truncated, info = self._env_call("step", seed, self.env.step, text)
                rewards.append(float(reward))
                actions.append(text)
                step_metrics.append(dict(info.get("metrics", {})))
                modes.update(info.get("metrics_agg_mode", {}))
                if terminated or truncated:
                    stop_reason = "terminated" if terminated else "truncated"
                    break
                if turn + 1 == self.max_steps:
                    break
                delta = self._next_turn_ids(chat, observation, info, turn + 1)
                if len(ids) + len(delta) >= self.sequence_length:  # no room left for a response token
                    chat.drop_last_user()
                    stop_reason = "sequence_length"
                    break
                ids, mask, logps = ids + delta, mask + [0] * len(delta), logps + [0.0] * len(delta)
        finally:
            self.proxy.release(session_id)
        metrics = aggregate_metrics(step_metrics, modes)
        metrics["num_actions"] = float(len(actions))
        return {
            "input_ids": ids, "response_mask": mask, "infer_logprobs": logps, "score": float(sum(rewards)),
            "step_rewards": rewards, "actions": actions, "messages": chat.messages, "env_metrics": metrics,
            "tag": self.tag, "env_seed": seed, "stop_reason": stop_reason, "generated_tokens": gen_tokens,
        }
