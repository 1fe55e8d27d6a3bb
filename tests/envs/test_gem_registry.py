"""GEM as GEM is: every id GEM registers is an env_type. The walk builds each one whose data is here
(GEM's games, every reasoning-gym task, and GEM's math/QA/code ids on the generated sample files),
resets it and steps it once; the others are refused naming what they need."""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys

import pytest

from roll.agentic.env import get_env_cls, make_env, make_env_config
from roll.agentic.env.dataset_task.env import CodeTaskEnv, DatasetTaskEnv, MathTaskEnv, QaTaskEnv
from roll.agentic.env.gem.gem_types import BROKEN_IDS, gem_env_ids
from roll.agentic.env.tool_use.sandbox import sandbox_unavailable_reason
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gem") is None, reason="GEM (gem-llm) is not installed")
NLTK_WORD_GAMES = ("game:Wordle", "game:Hangman", "game:WordSearch")
SAMPLE_FILE = {MathTaskEnv: "math.parquet", QaTaskEnv: "qa.jsonl", CodeTaskEnv: "code.jsonl"}
SANDBOX_MISSING = sandbox_unavailable_reason()


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = tmp_path_factory.mktemp("task_samples")
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_task_samples.py"), str(out)], check=True)
    return out


def nltk_words_present() -> bool:
    import nltk

    try:
        nltk.data.find("corpora/words")
        return True
    except LookupError:
        return False


def local_config(gem_id: str, env_cls: type, samples) -> dict:
    if issubclass(env_cls, DatasetTaskEnv):
        family = next(cls for cls in SAMPLE_FILE if issubclass(env_cls, cls))
        values = {"dataset_name": str(samples / SAMPLE_FILE[family])}
        if family is QaTaskEnv:
            values.update(question_key="question", extract_boxed=False)  # the sample's columns, <answer> replies
        return values
    return {"size": 5} if gem_id.startswith("rg:") else {}  # reasoning-gym: a small generated set


def test_walk_gem_registry(samples):
    ids = gem_env_ids()
    stepped, refused, solved = [], {}, 0
    for gem_id in ids:
        try:
            env_cls = get_env_cls(gem_id)
        except ValueError as error:
            refused[gem_id] = str(error)
            continue
        if issubclass(env_cls, CodeTaskEnv) and SANDBOX_MISSING:
            continue
        config = make_env_config(gem_id, **local_config(gem_id, env_cls, samples))
        try:
            env = make_env(gem_id, **local_config(gem_id, env_cls, samples))
        except ValueError as error:
            refused[gem_id] = str(error)
            continue
        assert type(env.config) is type(config)
        observation, _ = env.reset(seed=3)
        assert isinstance(observation, str) and observation
        if gem_id.startswith("rg:"):  # reasoning-gym's own answer (its scorers raise on some malformed ones)
            reply = f"\\boxed{{{env.gem_env.data['answer']}}}"
        else:
            reply = env.random_answer(random.Random(0))
        _, reward, terminated, truncated, info = env.step(reply)
        assert isinstance(reward, float) and "success" in info["metrics"], gem_id
        env.close()
        stepped.append(gem_id)
        solved += gem_id.startswith("rg:") and reward == 1.0
    rg_tasks = [i for i in stepped if i.startswith("rg:")]
    assert solved >= 0.8 * len(rg_tasks)  # the reference answer, boxed, scores 1 through GEM
    assert len(rg_tasks) >= 100 and {"rg:leg_counting", "rg:sokoban", "rg:advanced_geometry"} <= set(rg_tasks)
    assert {"game:Sudoku-v0-easy", "game:Sokoban-v0-easy", "game:Game2048-v0-hard", "math:GSM8K", "qa:HotpotQA",
            "logic:RuleTaker-d0", "eval:AIME24"} <= set(stepped)
    for gem_id, reason in refused.items():  # each refusal names what is missing
        if gem_id.startswith(NLTK_WORD_GAMES):
            assert not nltk_words_present() and "python -m nltk.downloader words" in reason, reason
        elif gem_id in BROKEN_IDS:
            assert BROKEN_IDS[gem_id] in reason
        elif gem_id == "math:Geometry3K":
            assert "vision-language model" in reason
        else:
            assert "needs the Python package" in reason and "pip install" in reason, (gem_id, reason)
    assert len(stepped) + len(refused) + (4 if SANDBOX_MISSING else 0) == len(ids)


def test_a_misspelt_gem_keyword_names_the_closest():
    with pytest.raises(ValueError, match="Did you mean 'min_number'") as error:
        make_env_config("game:GuessTheNumber-v0-easy", min_numbr=1)
    assert "max_turns" in str(error.value)  # the valid keys are the GEM env's own
    config = make_env_config("game:GuessTheNumber-v0", min_number=1, max_number=20, max_turns=10)  # ROLL's form
    assert config.gem_kwargs == {"min_number": 1, "max_number": 20, "max_turns": 10}


def test_an_unknown_gem_id_names_the_closest():
    with pytest.raises(ValueError, match="Did you mean 'rg:leg_counting'"):
        get_env_cls("rg:leg_countin")


@pytest.mark.parametrize("env_type, dataset", [("math:GSM8K", "axon-rl/GSM-8k"), ("roll_qa", "axon-rl/HotpotQA"),
                                               ("code:CodeContest", "axon-rl/CodeContest")])
def test_a_dataset_that_is_not_local_is_refused_naming_it(env_type, dataset):
    values = {} if env_type.startswith(("math:", "code:")) else {"dataset_name": dataset}
    with pytest.raises(ValueError) as error:
        make_env_config(env_type, **values)
    message = str(error.value)
    assert repr(dataset) in message and "does not download" in message
    assert f"--repo-type dataset {dataset}" in message and "env_config.dataset_name" in message
