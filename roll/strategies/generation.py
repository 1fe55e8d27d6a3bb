"""What crosses into and out of a generation engine: a typed request and a typed result.

Every generation path (the decode engine behind `hf_infer`, the LLM proxies an env manager talks
to, the OpenAI-compatible server) takes a `GenerationRequest` and answers with a `GenerationResult`.
Sampling parameters are checked once, when a `SamplingParams` is built (from the run's
`GeneratingArgs`, or from an OpenAI request body), so no engine re-defaults or re-parses them.
All three are plain dataclasses of Python values: they pickle cheaply through Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from roll.data.vision import VisionInputs

if TYPE_CHECKING:
    from roll.configs.worker_config import GeneratingArgs

# no engine generated it: the env manager played a random legal answer (random_action_rate)
RANDOM_ACTION = "random_action"
FINISH_REASONS = ("stop", "length", RANDOM_ACTION)


@dataclass(frozen=True)
class SamplingParams:
    """How one response is drawn.

    max_new_tokens: most tokens to generate (>= 1).
    do_sample: False, or temperature 0, means greedy (argmax); see `greedy`.
    temperature: > 0 when sampling; logits are divided by it.
    top_p: nucleus mass in (0, 1]; 1 keeps every token.
    top_k: keep the k most likely tokens; 0 keeps every token.
    stop_strings: generation stops once the decoded output contains one of these (kept in the output).
    seed: seeds this request's sampler, so the same request samples the same tokens; None lets the
        engine derive one.
    """

    max_new_tokens: int
    do_sample: bool
    temperature: float
    top_p: float
    top_k: int
    stop_strings: tuple[str, ...] | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"sampling: max_new_tokens must be an int >= 1, got {self.max_new_tokens!r}")
        if self.temperature < 0:
            raise ValueError(f"sampling: temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"sampling: top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"sampling: top_k must be >= 0 (0 = no limit), got {self.top_k}")
        if self.stop_strings is not None:
            object.__setattr__(self, "stop_strings", tuple(str(s) for s in self.stop_strings) or None)

    @property
    def greedy(self) -> bool:
        return not self.do_sample or self.temperature <= 0

    @classmethod
    def from_generating_args(cls, args: "GeneratingArgs", max_new_tokens: int | None = None,
                             seed: int | None = None) -> "SamplingParams":
        """The run's `GeneratingArgs` (the one place sampling defaults live), capped at `max_new_tokens`
        when given (an env's per-turn budget, the room left in `sequence_length`)."""
        limit = args.max_new_tokens if max_new_tokens is None else min(args.max_new_tokens, max_new_tokens)
        return cls(max_new_tokens=int(limit), do_sample=bool(args.do_sample), temperature=float(args.temperature),
                   top_p=float(args.top_p), top_k=int(args.top_k or 0),
                   stop_strings=tuple(args.stop_strings) if args.stop_strings else None, seed=seed)


@dataclass
class GenerationRequest:
    """One prompt to continue.

    input_ids: the whole prompt as token ids `[P]` (an engine that caches a session's earlier turns
        prefills only what is new).
    sampling: how to draw the response.
    request_id: echoed in the result (for logs).
    session_id: an episode's id; an engine keeps its KV cache between the episode's turns. None: no
        session.
    messages: the conversation so far as chat messages, for proxies that speak a chat API instead
        of token ids; engines that take ids ignore it.
    vision: the prompt's images (processed pixels and grids, in the order of the image placeholder
        tokens in input_ids) for a vision-language model; None for a text prompt.
    tools: the OpenAI tool definitions a chat call offered (roll's OpenAI server sets them), for
        proxies that answer with scripted tool calls; engines ignore them (the prompt shows them).
    """

    input_ids: list[int]
    sampling: SamplingParams
    request_id: str | None = None
    session_id: str | None = None
    messages: list[dict[str, str]] | None = None
    vision: VisionInputs | None = None
    tools: list[dict] | None = None

    def __post_init__(self) -> None:
        if not self.input_ids:
            raise ValueError(f"generation request {self.request_id!r} has an empty prompt")


@dataclass
class GenerationResult:
    """The response to one request.

    output_ids: the generated token ids `[N]`, including the eos token when generation stopped at it.
    logprobs: `[N]` the policy's raw log-probability of each generated token (before temperature,
        top-k, top-p), 0.0 where the answering server reported none.
    finish_reason: "stop" (eos or a stop string), "length" (max_new_tokens reached), or "random_action"
        (the env manager's exploration, not the engine: traj_env_manager.py).
    prefilled_tokens / cached_tokens: prompt tokens computed now / reused from the session's cache.
    weight_version: the policy weights' version that generated it (-1: not a roll policy).
    exact_ids: False when the ids are a re-tokenisation of text returned by a server, not the ids
        it sampled.
    """

    request_id: str | None
    output_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    prefilled_tokens: int = 0
    cached_tokens: int = 0
    weight_version: int = -1
    exact_ids: bool = True

    def __post_init__(self) -> None:
        if self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {FINISH_REASONS}, got {self.finish_reason!r}")
        if len(self.logprobs) != len(self.output_ids):
            raise ValueError(f"result {self.request_id!r}: {len(self.logprobs)} log-probs for {len(self.output_ids)} tokens")


def refuse_images(requests: list[GenerationRequest], strategy: str) -> None:
    """For engines that take token ids only: a request with images would be generated blind to them."""
    if any(req.vision is not None for req in requests):
        raise ValueError(f"actor_infer strategy {strategy} does not take images yet; vision-language env managers "
                         "(VLTrajEnvManager) generate with strategy_name: hf_infer")
