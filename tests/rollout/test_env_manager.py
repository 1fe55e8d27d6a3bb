"""TrajEnvManager with each LLM proxy: format penalties, and the OpenAI proxy against a real local server."""

from __future__ import annotations

import dataclasses

import pytest
from transformers import AutoTokenizer

from roll.agentic.env import make_env
from roll.algorithms.step_advantages import response_segments
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.llm_proxy import OpenAIProxy, PolicyProxy, RandomProxy
from roll.pipeline.agentic.llm_proxy.openai_server import OpenAIServer
from roll.strategies.hf_infer import HFInferStrategy

from roll.strategies.generation import GenerationRequest, SamplingParams

from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch
from tests.rollout.helpers import FROZEN_LAKE_SPEC, greedy, manager_config


def test_a_whole_episode_records_the_state_each_reply_acted_in(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    manager = TrajEnvManager("FrozenLake", FROZEN_LAKE_SPEC, manager_config(), tokenizer, RandomProxy(tokenizer, seed=5),
                             sequence_length=4096)
    trajs = [manager.run_episode(seed=seed)[0] for seed in (2, 3)]
    for traj, seed in zip(trajs, (2, 3)):
        replay = make_env("frozen_lake", **FROZEN_LAKE_SPEC.env_config)
        replay.reset(seed)
        expected = []
        for action in traj.actions:  # the key before each action is the state that reply acted in
            expected.append(replay.state_key())
            replay.step(action)
        assert traj.turn_state_keys == expected and len(expected) == len(traj.step_rewards) >= 1
    batch = trajectories_to_batch(trajs, tokenizer.pad_token_id)
    assert batch["turn_state_keys"] == [t.turn_state_keys for t in trajs]
    # traj_gigpo maps reply segment k of a row to turn k: one segment per turn
    segments = response_segments(batch["response_mask"])
    assert [int(row.max()) for row in segments] == [len(t.step_rewards) for t in trajs]


@pytest.mark.parametrize("template,expect_finish", [
    ("{answer}", "stop"),  # an empty response (eos at once)
    ("<answer>{answer} and then some more words that run past the limit</answer>", "length"),  # no closing tag
])
def test_empty_or_cut_off_output_gets_the_format_penalty_and_the_episode_continues(tiny_model_dir, template, expect_finish):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    answers = [""] if expect_finish == "stop" else ["Left"]
    proxy = RandomProxy(tokenizer, answers=answers, template=template)
    spec = dataclasses.replace(FROZEN_LAKE_SPEC, max_tokens_per_step=6)
    (traj,) = TrajEnvManager("FrozenLake", spec, manager_config(format_penalty=-0.5), tokenizer, proxy,
                             sequence_length=4096).run_episode(seed=1)
    assert traj.step_rewards == [-0.5] * 5  # the env manager's format_penalty overrides the env's
    assert traj.env_metrics["action_is_valid"] == 0.0
    assert traj.stop_reason == "truncated" and traj.env_metrics["num_actions"] == 5
    if expect_finish == "stop":
        assert traj.actions == [""] * 5
    else:
        assert all("</answer>" not in a for a in traj.actions)


def test_openai_proxy_against_a_local_server_gives_the_policy_tokens(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir)
    server = OpenAIServer(strategy.tokenizer, engine=strategy).start()
    url = server.base_url
    tokenizer = strategy.tokenizer
    try:
        greedy_manager = manager_config(greedy(10))
        (via_http,) = TrajEnvManager("FrozenLake", FROZEN_LAKE_SPEC, greedy_manager, tokenizer, OpenAIProxy(tokenizer, url),
                                     sequence_length=4096).run_episode(seed=2)
        (direct,) = TrajEnvManager("FrozenLake", FROZEN_LAKE_SPEC, greedy_manager, tokenizer, PolicyProxy([strategy]),
                                   sequence_length=4096).run_episode(seed=2)
        (chat,) = TrajEnvManager("FrozenLake", FROZEN_LAKE_SPEC, greedy_manager, tokenizer,
                                 OpenAIProxy(tokenizer, url, mode="chat"), sequence_length=4096).run_episode(seed=2)
        with pytest.raises(ConnectionError, match="cannot reach"):
            request = GenerationRequest([1, 2], SamplingParams.from_generating_args(greedy(2)))
            OpenAIProxy(tokenizer, "http://127.0.0.1:1/v1", timeout_s=5).generate(request)
    finally:
        server.stop()
        strategy.shutdown()
    assert via_http.input_ids == direct.input_ids
    assert via_http.infer_logprobs == pytest.approx(direct.infer_logprobs, abs=1e-6)
    assert chat.env_metrics["num_actions"] == 5 and len(chat.messages) == 11
