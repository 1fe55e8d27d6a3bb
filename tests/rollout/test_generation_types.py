"""Sampling parameters are read once, from GeneratingArgs or an OpenAI body, and checked when built."""

from __future__ import annotations

import pytest

from roll.configs.worker_config import GeneratingArgs
from roll.pipeline.agentic.llm_proxy.openai_server import SamplingDefaults, sampling_from_body
from roll.pipeline.agentic.llm_proxy.openai_wire import CompletionRequest, parse_body
from roll.strategies.generation import GenerationRequest, GenerationResult, SamplingParams


def test_sampling_comes_from_generating_args_capped_by_the_turn_budget():
    args = GeneratingArgs(max_new_tokens=32, temperature=0.7, top_p=0.9, top_k=50, stop_strings=["</answer>"])
    params = SamplingParams.from_generating_args(args, max_new_tokens=12, seed=5)
    assert (params.max_new_tokens, params.temperature, params.top_p, params.top_k) == (12, 0.7, 0.9, 50)
    assert params.stop_strings == ("</answer>",) and params.seed == 5 and not params.greedy
    assert SamplingParams.from_generating_args(args, max_new_tokens=100).max_new_tokens == 32
    # the defaults are GeneratingArgs' own: 0.99 / 0.99 / 100, sampling on
    default = SamplingParams.from_generating_args(GeneratingArgs())
    assert (default.temperature, default.top_p, default.top_k, default.do_sample) == (0.99, 0.99, 100, True)
    assert SamplingParams.from_generating_args(GeneratingArgs(do_sample=False)).greedy
    assert SamplingParams.from_generating_args(GeneratingArgs(temperature=0.0)).greedy


@pytest.mark.parametrize("field,value,message", [
    ("max_new_tokens", 0, "max_new_tokens must be an int >= 1"),
    ("temperature", -0.5, "temperature must be >= 0"),
    ("top_p", 0.0, r"top_p must be in \(0, 1\]"),
    ("top_k", -1, "top_k must be >= 0"),
])
def test_bad_sampling_values_are_refused_where_they_are_built(field, value, message):
    values = dict(max_new_tokens=8, do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
    values[field] = value
    with pytest.raises(ValueError, match=message):
        SamplingParams(**values)


def test_requests_and_results_refuse_what_no_engine_could_serve():
    greedy = SamplingParams(max_new_tokens=4, do_sample=False, temperature=0.0, top_p=1.0, top_k=0)
    with pytest.raises(ValueError, match="empty prompt"):
        GenerationRequest(input_ids=[], sampling=greedy, request_id="r1")
    with pytest.raises(ValueError, match="2 log-probs for 3 tokens"):
        GenerationResult(request_id="r1", output_ids=[1, 2, 3], logprobs=[-0.1, -0.2], finish_reason="stop")
    with pytest.raises(ValueError, match="finish_reason"):
        GenerationResult(request_id="r1", output_ids=[1], logprobs=[-0.1], finish_reason="abort")


def test_an_openai_body_becomes_typed_sampling_with_the_apis_defaults():
    def sampling(**body):
        return sampling_from_body(parse_body(CompletionRequest, {"prompt": [1, 2, 3], **body}), SamplingDefaults(), 3, 0, "prompt")

    params = sampling(temperature=0, max_tokens=5, stop="</answer>", seed=3)
    assert params.greedy and params.max_new_tokens == 5 and params.stop_strings == ("</answer>",) and params.seed == 3
    bare = sampling()
    assert (bare.max_new_tokens, bare.temperature, bare.top_p) == (16, 1.0, 1.0)
    assert not bare.greedy
    with pytest.raises(ValueError, match="top_p"):
        sampling(top_p=2.0)
    capped = sampling_from_body(parse_body(CompletionRequest, {"prompt": [1], "max_tokens": 50}),
                                SamplingDefaults(max_tokens_cap=8, max_context_tokens=10), 4, 0, "prompt")
    assert capped.max_new_tokens == 6  # the room left in the context
