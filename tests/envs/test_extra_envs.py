"""Countdown (single-turn) and guess-the-number (multi-turn dialogue)."""

import math
import re
from fractions import Fraction

import pytest

from roll.agentic.env import make_env
from roll.agentic.env.countdown.arith import ExpressionError, evaluate


@pytest.mark.parametrize(
    "text, value, numbers",
    [
        ("1 + 2 * 3", Fraction(7), (1, 2, 3)),
        ("(1 + 2) * 3", Fraction(9), (1, 2, 3)),
        ("8 - 3 - 2", Fraction(3), (8, 3, 2)),  # left-associative
        ("6 / 4 * 2", Fraction(3), (6, 4, 2)),  # exact, no float rounding
        ("7 / 2", Fraction(7, 2), (7, 2)),
        ("2 × (9 ÷ 3) − 1", Fraction(5), (2, 9, 3, 1)),
        ("((((5))))", Fraction(5), (5,)),
        ("10 - 4 = 6", Fraction(6), (10, 4)),
    ],
)
def test_arithmetic_parser_values(text, value, numbers):
    result = evaluate(text)
    assert (result.value, result.numbers) == (value, numbers)


@pytest.mark.parametrize("text", ["", "2 **3", "-1", "1 2", "(1", "1)", "abs(1)", "1.0", "4 / (2 - 2)", "٣ + 1"])
def test_arithmetic_parser_rejects(text):
    with pytest.raises(ExpressionError):
        evaluate(text)


def test_countdown_puzzles_are_solvable_and_graded_by_the_rules():
    env = make_env("countdown", num_numbers=4, max_number=50, max_target=500)
    for seed in range(200):
        obs, info = env.reset(seed=seed)
        numbers = [int(n) for n in re.search(r"Numbers: \[(.*)\]", obs).group(1).split(", ")]
        target = int(re.search(r"Target: (\d+)", obs).group(1))
        assert len(numbers) == 4 and all(1 <= n <= 50 for n in numbers) and 1 <= target <= 500
        solution = env.optimal_answer()
        result = evaluate(solution)
        assert result.value == target and sorted(result.numbers) == sorted(numbers)
        assert "exactly once" in info["env_instruction"]
    env.reset(seed=3)
    a, b, c, d = env.numbers
    _, reward, terminated, _, info = env.step(f"<answer>{a} + {b} + {c}</answer>")  # d unused
    assert (reward, terminated, info["metrics"]["action_is_effective"], info["metrics"]["success"]) == (0.0, True, 0.0, 0.0)


def test_countdown_subset_rule_and_wrong_answer_reward():
    env = make_env("countdown", use_all_numbers=False, wrong_answer_reward=0.1)
    env.reset(seed=5)
    a, b = env.numbers[:2]
    _, reward, _, _, info = env.step(f"<answer>{a} + {b}</answer>")
    expected_success = a + b == env.target
    assert info["metrics"]["action_is_effective"] == 1.0
    assert reward == (1.0 if expected_success else 0.1)
    env.reset(seed=5)
    _, _, _, _, info = env.step(f"<answer>{a} + {a} + {a} + {a} + {a}</answer>")  # reuses a number
    assert info["metrics"]["action_is_effective"] == 0.0 or env.numbers.count(a) >= 5


def test_guess_number_feedback_and_rewards():
    env = make_env("guess_number", min_value=1, max_value=100, wrong_guess_reward=-0.05)
    obs, _ = env.reset(seed=42)
    secret = env.secret
    assert "1 to 100" in obs
    low = secret - 1 if secret > 1 else secret + 1
    obs, reward, terminated, _, info = env.step(f"<answer>{low}</answer>")
    assert obs == f"{low} is too {'low' if low < secret else 'high'}." and reward == -0.05 and not terminated
    obs, reward, terminated, _, info = env.step(f"<answer> {secret} </answer>")
    assert (obs, reward, terminated, info["metrics"]["success"]) == (f"{secret} is correct!", 1.0, True, 1.0)


def test_guess_number_effective_means_consistent_with_feedback():
    env = make_env("guess_number", min_value=1, max_value=100)
    env.reset(seed=1)
    secret = env.secret
    guess = 100 if secret < 100 else 1
    assert env.step(f"<answer>{guess}</answer>")[4]["metrics"]["action_is_effective"] == 1.0
    # guessing the same number again contradicts what the env already said
    assert env.step(f"<answer>{guess}</answer>")[4]["metrics"]["action_is_effective"] == 0.0


@pytest.mark.parametrize("low, high", [(1, 100), (-20, 20), (0, 1000)])
def test_guess_number_binary_search_finds_secrets_within_log2_guesses(low, high):
    from roll.agentic.env.policies import run_scripted_episode

    bound = math.ceil(math.log2(high - low + 2))
    env = make_env("guess_number", min_value=low, max_value=high, max_steps=bound)
    secrets = set()
    for seed in range(1500):
        episode = run_scripted_episode(env, seed, "optimal")
        assert episode.success and episode.num_turns <= bound
        secrets.add(env.secret)
        if len(secrets) == high - low + 1:
            break
    # small ranges: every secret was drawn (so found); the big one: the draws spread over it
    assert len(secrets) == high - low + 1 if high - low <= 100 else len(secrets) > 600
