"""`strategy_name: sglang` on a machine without CUDA: refused before any worker starts, with the reason
and the alternatives; the request mapping is SGLang's sampling-parameter dict."""

from __future__ import annotations

import pytest
import torch

from roll.configs.errors import ConfigError
from roll.launch.loader import load_agentic_config
from roll.launch.runtime_checks import check_runnable
from roll.strategies.generation import SamplingParams
from roll.strategies.sglang_infer import sampling_params, sglang_unavailable_reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_sglang_is_refused_without_cuda_with_the_reason_and_alternatives(tiny_model_dir):
    config = load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                         [f"pretrain={tiny_model_dir}", "actor_infer.strategy_args.strategy_name=sglang"])
    with pytest.raises(ConfigError) as info:
        check_runnable(config)
    message = str(info.value)
    assert "actor_infer.strategy_args.strategy_name" in message and "needs a CUDA GPU" in message
    assert "strategy_name: vllm" in message and "hf_infer" in message
    assert sglang_unavailable_reason() is not None


def test_sglang_sampling_params_follow_the_request():
    greedy = sampling_params(SamplingParams(max_new_tokens=8, do_sample=False, temperature=0.7, top_p=1.0, top_k=5, seed=3))
    assert greedy == {"max_new_tokens": 8, "temperature": 0.0, "top_p": 1.0, "top_k": -1, "skip_special_tokens": False}
    sampled = sampling_params(SamplingParams(max_new_tokens=4, do_sample=True, temperature=0.7, top_p=0.9, top_k=5,
                                             seed=3, stop_strings=("</answer>",)))
    assert sampled["temperature"] == 0.7 and sampled["top_p"] == 0.9 and sampled["top_k"] == 5
    assert sampled["stop"] == ["</answer>"] and sampled["sampling_seed"] == 3
