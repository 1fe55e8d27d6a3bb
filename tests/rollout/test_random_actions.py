"""`random_action_rate`: at that share of turns the manager plays the env's random legal answer instead of
the policy's reply, and the sample holds exactly those tokens; the draws repeat from the same seeds."""

from __future__ import annotations

from transformers import AutoTokenizer

from roll.configs.worker_config import GeneratingArgs
from roll.pipeline.agentic.env_manager.step_env_manager import StepEnvManager
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.llm_proxy import RandomProxy
from tests.rollout.helpers import FROZEN_LAKE_SPEC, manager_config

# the policy stand-in always answers a move FrozenLake does not have: its turns are the penalised ones
POLICY_TEXT = "<answer>Stay</answer>"
MOVES = {f"<answer>{move}</answer>" for move in ("Up", "Down", "Left", "Right")}


def play(tokenizer, rate: float, seeds: range, manager_cls=StepEnvManager, generating_args=None):
    proxy = RandomProxy(tokenizer, answers=["Stay"], seed=0)
    config = manager_config(generating_args, random_action_rate=rate)
    manager = manager_cls("FrozenLake", FROZEN_LAKE_SPEC, config, tokenizer, proxy, sequence_length=4096)
    return [manager.run_episode(seed) for seed in seeds]


def test_random_turns_are_legal_moves_at_the_set_rate_and_samples_hold_their_tokens(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    episodes = play(tokenizer, 0.4, range(40))
    random_turns = policy_turns = 0
    for samples in episodes:
        actions = samples[0].actions
        assert set(actions) <= MOVES | {POLICY_TEXT}
        episode_random = 0
        for sample in samples:
            action = actions[sample.step_index]
            reward = sample.step_rewards[sample.step_index]
            prompt_len = sample.response_mask.index(1)
            response = sample.input_ids[prompt_len:]
            if action == POLICY_TEXT:
                policy_turns += 1
                assert reward == -0.01  # the format penalty: the env got the policy's text
                continue
            episode_random += 1
            # the env applied a legal move (no penalty), and the sample is exactly its tokens and eos
            assert reward != -0.01
            assert response == tokenizer.encode(action, add_special_tokens=False) + [tokenizer.eos_token_id]
            assert sample.infer_logprobs[prompt_len:] == [0.0] * len(response)
            assert sample.messages[-1] == {"role": "assistant", "content": action}
        assert samples[0].env_metrics["random_actions"] == episode_random
        # every sample of the episode names the random turns, by index into `actions`
        expected = [k for k, action in enumerate(actions) if action != POLICY_TEXT]
        assert all(sample.random_turns == expected for sample in samples)
        random_turns += episode_random
    share = random_turns / (random_turns + policy_turns)
    assert random_turns + policy_turns > 100 and 0.3 < share < 0.5, (random_turns, policy_turns)
    # the draws come from the turn's seed: the same seeds play the same turns
    again = play(tokenizer, 0.4, range(40))
    assert [s[0].actions for s in again] == [s[0].actions for s in episodes]


def test_with_a_stop_string_random_replies_end_where_the_policy_would_stop(tiny_model_dir):
    """Generation that stops at `</answer>` never emits eos after it, so neither does a random reply."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    episodes = play(tokenizer, 0.5, range(10), generating_args=GeneratingArgs(stop_strings=["</answer>"]))
    random_samples = [s for samples in episodes for s in samples if s.actions[s.step_index] != POLICY_TEXT]
    assert random_samples
    for sample in random_samples:
        response = sample.input_ids[sample.response_mask.index(1):]
        assert response == tokenizer.encode(sample.actions[sample.step_index], add_special_tokens=False)
        assert tokenizer.eos_token_id not in response


def test_rate_zero_asks_the_policy_every_turn_and_reports_nothing(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for samples in play(tokenizer, 0.0, range(5)):
        assert samples[0].actions == [POLICY_TEXT] * 5
        assert "random_actions" not in samples[0].env_metrics
        assert all(sample.random_turns is None for sample in samples)


def test_whole_episode_manager_explores_too(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    episodes = play(tokenizer, 0.5, range(10), TrajEnvManager)
    moves = [a for (sample,) in episodes for a in sample.actions if a != POLICY_TEXT]
    assert moves and set(moves) <= MOVES
    for (sample,) in episodes:
        assert sample.env_metrics["random_actions"] == sum(a != POLICY_TEXT for a in sample.actions)
        assert sample.random_turns == [k for k, a in enumerate(sample.actions) if a != POLICY_TEXT]
        for action in sample.actions:  # every reply, random or not, is in the one token sequence
            assert action in tokenizer.decode(sample.input_ids)


def test_the_sft_warm_up_never_explores(tiny_model_dir):
    """The warm-up plays its scripted policy on every turn, whatever the run's random_action_rate."""
    from roll.launch.loader import load_agentic_config
    from roll.pipeline.agentic.sft_warmup import scripted_trajectories

    config = load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                                 [f"pretrain={tiny_model_dir}", "sft_warmup.policy=optimal",
                                  "train_env_manager.random_action_rate=0.9"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trajectories = scripted_trajectories(config, tokenizer, count=6, step=0)
    # at 0.9 nearly every move would be random and most episodes would miss the goal
    assert [t.env_metrics["success"] for t in trajectories] == [1.0] * 6
    assert all("random_actions" not in t.env_metrics for t in trajectories)
