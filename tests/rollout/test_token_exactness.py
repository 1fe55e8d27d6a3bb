"""The token test: a 5-turn episode's ids are exactly the conversation, and the log-probs recorded at
generation equal a fresh forward pass over the final sequence (greedy, tiny models, two templates)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.llm_proxy import PolicyProxy
from roll.workers.infer_worker import InferWorker

from tests.rollout.helpers import FROZEN_LAKE_SPEC, fresh_logprobs, greedy, infer_config, manager_config


@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_llama_dir"])
def test_five_turn_episode_ids_and_logprobs_are_exact(model_fixture, request):
    model_dir = request.getfixturevalue(model_fixture)
    worker = InferWorker(infer_config(model_dir))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    try:
        manager = TrajEnvManager("FrozenLake", FROZEN_LAKE_SPEC, manager_config(greedy(12)), tokenizer,
                                 PolicyProxy([worker]), sequence_length=4096)
        (traj,) = manager.run_episode(seed=3)
        # a second episode on the same manager reuses nothing stale and is also exact
        (traj2,) = manager.run_episode(seed=4, episode_key="1")
    finally:
        worker.shutdown()
    # the random tiny model never produces a valid answer: each turn is penalised, the episode runs on
    assert traj.env_metrics["num_actions"] == 5
    assert traj.step_rewards == [-0.01] * 5

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    for t in (traj, traj2):
        mask = torch.tensor(t.response_mask, dtype=torch.bool)
        fresh = fresh_logprobs(model, t.input_ids)
        recorded = torch.tensor(t.infer_logprobs)
        assert mask.sum() >= 5  # five responses of at least one token each
        assert torch.allclose(fresh[mask], recorded[mask], atol=1e-4), (fresh[mask] - recorded[mask]).abs().max()
        assert (recorded[~mask] == 0).all()

        # decoding the ids gives exactly the conversation (template text) the env and model saw
        text = tokenizer.decode(t.input_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        rendered = tokenizer.apply_chat_template(t.messages, tokenize=False)
        # all that is owed is the template's closing of the last turn (minus the eos, when it was generated)
        closing = tokenizer.apply_chat_template([{"role": "assistant", "content": "@@"}], tokenize=False).split("@@", 1)[1]
        assert rendered.startswith(text)
        assert rendered[len(text):] in {closing, closing.removeprefix(tokenizer.eos_token)}
        assert [m["content"] for m in t.messages if m["role"] == "assistant"] == t.actions
        # every response segment is generated text that ends at eos or at the per-turn cap
        segments = torch.nonzero(torch.diff(torch.cat([torch.tensor([0]), mask.int(), torch.tensor([0])]))).view(-1, 2)
        assert len(segments) == 5
        assert all(end - start <= 12 for start, end in segments.tolist())


def test_a_template_that_trims_content_still_gives_exact_tokens(tiny_llama_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    # Llama-3's official template trims every message's content
    tokenizer.chat_template = tokenizer.chat_template.replace("message['content']", "(message['content'] | trim)")
    worker = InferWorker(infer_config(tiny_llama_dir))
    try:
        manager = TrajEnvManager("FrozenLake", FROZEN_LAKE_SPEC, manager_config(greedy(12)), tokenizer,
                                 PolicyProxy([worker]), sequence_length=4096)
        (traj,) = manager.run_episode(seed=5)
    finally:
        worker.shutdown()
    assert traj.env_metrics["num_actions"] == 5
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir).eval()
    mask = torch.tensor(traj.response_mask, dtype=torch.bool)
    fresh = fresh_logprobs(model, traj.input_ids)
    assert torch.allclose(fresh[mask], torch.tensor(traj.infer_logprobs)[mask], atol=1e-4)
    text = tokenizer.decode(traj.input_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    rendered = tokenizer.apply_chat_template(traj.messages, tokenize=False)
    assert "".join(rendered.split()).startswith("".join(text.split()))  # equal up to the trimmed whitespace
