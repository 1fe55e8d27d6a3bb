"""TrajEnvManager: runs one env turn by turn against an LLM proxy and returns the episode as one sample.

Prompt layout (ROLL's): a system message (`agent_system_template`), then a first user message with
the env instruction and `agent_template` filled with {turn_idx}, {observation}, {actions_left} and
{max_response_length}; every later turn appends the next observation the same way. The episode
ends at terminated, truncated, `max_steps`, or when the next prompt would not fit `sequence_length`.

`run_episode` returns `[Trajectory]` (roll/pipeline/agentic/trajectory.py): one sequence of ids
(see chat_tokens.py) with `response_mask` 1 on generated tokens, `infer_logprobs` the log-probs
recorded at generation, the episode score = sum of turn rewards. Model text that is empty or cut
off without its closing tag goes to the env like any other text: the env charges its format
penalty and the episode continues.

Env calls run under a timeout: an env that hangs or raises fails this episode (EpisodeFailure, with
the tag and seed), and the manager builds a fresh env for its next episode. The thread of a call that
timed out is kept in `abandoned_calls`; while one still runs, `hung_env_calls()` says so and the
rollout replaces the worker process once the batch is done (env_worker_pool.py).

A new manager subclasses this one (or keeps its constructor signature) and is named by class path
in `custom_envs.<tag>.env_manager_cls`; see docs/internals.md.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from roll.agentic.env import BaseEnv, make_env
from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.env_manager.chat_tokens import ChatTokens
from roll.pipeline.agentic.trajectory import EpisodeFailure, TokenBuffer, Trajectory
from roll.strategies.generation import RANDOM_ACTION, GenerationRequest, GenerationResult, SamplingParams


class EnvCallTimeout(TimeoutError):
    """An env call that did not return in time; `thread` still runs it (a thread cannot be killed)."""

    def __init__(self, message: str, thread: threading.Thread) -> None:
        super().__init__(message)
        self.thread = thread


def call_with_timeout(fn: Callable, timeout_s: float | None, *args: Any) -> Any:
    """Runs fn(*args) in a daemon thread; raises EnvCallTimeout if it is not back in time (the thread
    is abandoned: a hung env cannot be interrupted, only its process replaced)."""
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
        raise EnvCallTimeout(f"{getattr(fn, '__name__', fn)} did not return within {timeout_s}s", thread)
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class EpisodeSteps:
    """What the env answered at each turn of one episode."""

    rewards: list[float] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # the replies, as the env received them
    step_metrics: list[dict[str, float]] = field(default_factory=list)
    modes: dict[str, str] = field(default_factory=dict)  # metric name -> aggregation mode
    random_turns: list[int] | None = None  # turns (0-based) played by random_action_rate; None: exploration is off

    def count_reply(self, result: GenerationResult) -> None:
        """Called with each turn's reply before the env plays it (so `actions` holds the earlier turns)."""
        if self.random_turns is not None and result.finish_reason == RANDOM_ACTION:
            self.random_turns.append(len(self.actions))

    def episode_metrics(self) -> dict[str, float]:
        metrics = aggregate_metrics(self.step_metrics, self.modes)
        metrics["num_actions"] = float(len(self.actions))
        if self.random_turns is not None:
            metrics["random_actions"] = float(len(self.random_turns))
        return metrics


def aggregate_metrics(steps: list[dict[str, float]], modes: dict[str, str]) -> dict[str, float]:
    """Per-episode metrics from per-step ones, each by its aggregation mode (mean by default)."""
    out: dict[str, float] = {}
    for key in {k for step in steps for k in step}:
        values = [float(step[key]) for step in steps if key in step]
        mode = modes.get(key, "mean")
        out[key] = {"sum": sum(values), "last": values[-1], "max": max(values)}.get(mode, sum(values) / len(values))
    return out


class TrajEnvManager:
    """Plays episodes of the env `env_config` describes. Constructed by EnvironmentWorker with the
    tag, that env's `CustomEnvConfig`, the env manager's `EnvManagerConfig` (its `generating_args`
    already resolved), the tokenizer, an LLM proxy, the run's `sequence_length`, the env's index and a
    session prefix unique in the run."""

    def __init__(self, tag: str, env_config: CustomEnvConfig, manager_config: EnvManagerConfig, tokenizer: Any,
                 proxy: Any, sequence_length: int, env_id: int = 0, session_prefix: str = "") -> None:
        if manager_config.generating_args is None:
            raise ValueError("TrajEnvManager needs manager_config.generating_args (validation fills it from "
                             "actor_infer.generating_args; RolloutScheduler resolves it)")
        self.tag, self.env_id = tag, env_id
        self.spec = env_config
        self.env_kwargs = dict(env_config.env_config)
        if manager_config.format_penalty is not None:
            self.env_kwargs["format_penalty"] = manager_config.format_penalty
        self.generating_args = manager_config.generating_args
        self.env_timeout_s = manager_config.env_timeout_s
        self.random_action_rate = manager_config.random_action_rate
        self.tokenizer, self.proxy = tokenizer, proxy
        self.sequence_length = sequence_length
        self.session_prefix = session_prefix or f"{tag}-{env_id}"
        self.env: BaseEnv | None = None  # built lazily, and rebuilt after a failure
        self.abandoned_calls: list[threading.Thread] = []  # env calls that timed out, possibly still running

    def _prompt(self, observation: str, turn: int) -> str:
        try:
            # {suffix}: ROLL's GEM templates write "{observation}\n{suffix}"; roll's envs end the
            # observation with what ROLL passes as the suffix (GEM's board), so it renders empty here
            return self.spec.agent_template.format(
                turn_idx=turn + 1, observation=observation, actions_left=self.spec.max_steps - turn,
                max_response_length=self.spec.max_tokens_per_step, suffix="",
            )
        except (KeyError, IndexError) as exc:
            raise ValueError(f"custom_envs.{self.tag}.agent_template uses an unknown field {exc}; it may use "
                             "{turn_idx} {observation} {actions_left} {max_response_length} {suffix}") from None

    def _env_call(self, what: str, seed: int, fn: Callable, *args: Any) -> Any:
        try:
            return call_with_timeout(fn, self.env_timeout_s, *args)
        except Exception as exc:
            self.env = None  # never reuse an env that raised or may still be running
            if isinstance(exc, EnvCallTimeout):
                self.abandoned_calls.append(exc.thread)
            kind = "env_timeout" if isinstance(exc, TimeoutError) else "env_error"
            raise EpisodeFailure(kind, self.tag, seed, f"{what}: {type(exc).__name__}: {exc}") from exc

    def hung_env_calls(self) -> int:
        """Env calls that timed out and have still not returned (threads only a new process ends)."""
        self.abandoned_calls = [t for t in self.abandoned_calls if t.is_alive()]
        return len(self.abandoned_calls)

    def _request(self, session_id: str, ids: list[int], max_new: int, messages: list[dict], seed: int,
                 turn: int) -> GenerationRequest:
        sampling = SamplingParams.from_generating_args(
            self.generating_args, max_new_tokens=max_new, seed=(seed * 1000003 + self.env_id * 101 + turn) % 2**63)
        return GenerationRequest(input_ids=list(ids), sampling=sampling, request_id=f"{session_id}-t{turn}",
                                 session_id=session_id, messages=list(messages))

    # ---- hooks for subclasses (the tool env manager renders tool output as `tool` messages) ----
    def _new_chat(self) -> ChatTokens:
        return ChatTokens(self.tokenizer)

    def _next_turn_ids(self, chat: ChatTokens, observation: str, info: dict, turn: int) -> list[int]:
        """Ids of the message that carries `observation` (from the step that returned `info`)."""
        return chat.next_prompt(self._prompt(observation, turn))

    def first_messages(self, instruction: str, observation: str) -> list[dict[str, str]]:
        """The chat of the episode's first turn (system, then instruction + first observation)."""
        first_user = (instruction + "\n" if instruction else "") + self._prompt(observation, 0)
        return [{"role": "system", "content": self.spec.agent_system_template}, {"role": "user", "content": first_user}]

    def _generate_reply(self, chat: ChatTokens, request: GenerationRequest, seed: int) -> tuple[GenerationResult, str]:
        """The model's reply to `request` (or, at a `random_action_rate` turn, a random legal answer),
        appended to `chat` (its text is what the env gets); a generation error fails the episode."""
        result = self._random_reply(request)
        if result is None:
            try:
                result = self.proxy.generate(request)
            except Exception as exc:
                raise EpisodeFailure("generation_error", self.tag, seed, f"{type(exc).__name__}: {exc}") from exc
        out = result.output_ids
        stopped = result.finish_reason in ("stop", RANDOM_ACTION) and bool(out) and out[-1] == self.tokenizer.eos_token_id
        return result, chat.add_response(out, stopped)

    def _random_reply(self, request: GenerationRequest) -> GenerationResult | None:
        """With probability `random_action_rate` (drawn from the turn's sampling seed, so a run repeats),
        the env's random legal answer in the env's answer format, ended as the policy's replies end (at
        a stop string such as `</answer>` when the sampling has one, else by eos): exploration that
        reaches moves the policy has stopped sampling. Its log-probs are 0.0, "none reported" (no policy
        sampled it; the actor scores it for training). None: the policy answers this turn."""
        if not self.random_action_rate:
            return None
        rng = random.Random(f"random_action-{request.sampling.seed}")
        if rng.random() >= self.random_action_rate:
            return None
        text = self.env.format_answer(self.env.random_answer(rng), "A random move.")
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        # a stop string ends generation before eos: an eos here would teach a token the policy never emits
        if not any(text.endswith(stop) for stop in request.sampling.stop_strings or ()):
            ids.append(self.tokenizer.eos_token_id)
        if len(ids) > request.sampling.max_new_tokens:
            return None  # it would not fit the turn's response budget: the policy answers
        return GenerationResult(request_id=request.request_id, output_ids=ids, logprobs=[0.0] * len(ids),
                                finish_reason=RANDOM_ACTION)

    def _episode_steps(self) -> EpisodeSteps:
        return EpisodeSteps(random_turns=[] if self.random_action_rate else None)

    def _state_key(self, seed: int) -> str:
        """The env's state before the next action (GiGPO's anchor state; BaseEnv.state_key)."""
        key_fn = getattr(self.env, "state_key", None) or self.env.render
        return str(self._env_call("state_key", seed, key_fn))

    def _play(self, seed: int, text: str, steps: EpisodeSteps) -> tuple[Any, dict, str | None]:
        """Steps the env with reply `text` and records the turn in `steps`; returns (observation, info,
        "terminated" / "truncated" when the episode ended, else None)."""
        observation, reward, terminated, truncated, info = self._env_call("step", seed, self.env.step, text)
        steps.rewards.append(float(reward))
        steps.actions.append(text)
        steps.step_metrics.append(dict(info.get("metrics", {})))
        steps.modes.update(info.get("metrics_agg_mode", {}))
        ended = ("terminated" if terminated else "truncated") if (terminated or truncated) else None
        return observation, info, ended

    def run_episode(self, seed: int, episode_key: str = "0") -> list[Trajectory]:
        """Plays one episode from `seed`; returns it as one Trajectory."""
        if self.env is None:
            self.env = self._env_call("make_env", seed, lambda: make_env(self.spec.env_type, **self.env_kwargs))
        observation, info = self._env_call("reset", seed, self.env.reset, seed)
        instruction = self.spec.env_instruction or info.get("env_instruction", "")
        chat = self._new_chat()
        tokens = TokenBuffer()
        tokens.add_prompt(chat.start(self.first_messages(instruction, observation)))
        if len(tokens) >= self.sequence_length:
            raise ValueError(f"the first prompt of env {self.tag} has {len(tokens)} tokens, not below sequence_length={self.sequence_length}")
        session_id = f"{self.session_prefix}-{episode_key}"
        steps = self._episode_steps()
        state_keys: list[str] = []  # per turn, for step credit on whole episodes (adv_estimator traj_gigpo)
        stop_reason, gen_tokens = "max_steps", 0
        try:
            for turn in range(self.spec.max_steps):
                state_keys.append(self._state_key(seed))
                max_new = min(self.spec.max_tokens_per_step, self.sequence_length - len(tokens))
                request = self._request(session_id, tokens.input_ids, max_new, chat.messages, seed, turn)
                result, text = self._generate_reply(chat, request, seed)
                steps.count_reply(result)
                tokens.add_response(result.output_ids, result.logprobs, result.weight_version)
                gen_tokens += len(result.output_ids)
                observation, info, ended = self._play(seed, text, steps)
                if ended:
                    stop_reason = ended
                    break
                if turn + 1 == self.spec.max_steps:
                    break
                delta = self._next_turn_ids(chat, observation, info, turn + 1)
                if len(tokens) + len(delta) >= self.sequence_length:  # no room left for a response token
                    chat.drop_last_user()
                    stop_reason = "sequence_length"
                    break
                tokens.add_prompt(delta)
        finally:
            self.proxy.release(session_id)
        return [Trajectory.from_tokens(
            tokens, score=float(sum(steps.rewards)), step_rewards=steps.rewards, actions=steps.actions,
            messages=chat.messages, env_metrics=steps.episode_metrics(), tag=self.tag, env_seed=seed, stop_reason=stop_reason,
            generated_tokens=gen_tokens, turn_state_keys=state_keys, random_turns=steps.random_turns,
        )]
