"""roll_math / roll_qa / roll_code on the generated sample files: the right answer scores 1 and a
wrong one 0, through each env's own reading of the reply (math-verify, normalised exact match, the
sandboxed tests); parquet and JSONL give the same records."""

from __future__ import annotations

import subprocess
import sys

import pytest

from roll.agentic.env import make_env
from roll.agentic.env.tool_use.sandbox import sandbox_unavailable_reason
from tests.conftest import REPO_ROOT

pytest.importorskip("math_verify")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = tmp_path_factory.mktemp("task_samples")
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_task_samples.py"), str(out)], check=True)
    return out


def test_parquet_and_jsonl_hold_the_same_questions(samples):
    parquet = make_env("roll_math", dataset_name=str(samples / "math.parquet"))
    jsonl = make_env("roll_math", dataset_name=str(samples / "math.jsonl"))
    assert parquet.records == jsonl.records and len(parquet.records) == 16
    assert parquet.reset(seed=7)[0] == jsonl.reset(seed=7)[0]  # the seed picks the record


def test_math_is_scored_by_math_verify_on_the_last_box(samples):
    env = make_env("roll_math", dataset_name=str(samples / "math.jsonl"))
    fractions = [seed for seed in range(40) if env.reset(seed=seed) and "\\frac" in str(env.target)]
    env.reset(seed=fractions[0])
    numerator, denominator = (int(part) for part in str(env.target)[6:-1].split("}{"))
    equal = f"\\boxed{{0}} no, \\boxed{{{2 * numerator}/{2 * denominator}}}"  # another form, last box counts
    _, reward, terminated, _, info = env.step(equal)
    assert (reward, terminated, info["metrics"]["success"]) == (1.0, True, 1.0)
    env.reset(seed=fractions[0])
    _, reward, terminated, _, info = env.step(f"\\boxed{{{numerator + 1}/{denominator}}}")
    assert (reward, terminated, info["metrics"]["success"]) == (0.0, True, 0.0)
    env.reset(seed=fractions[0])
    _, reward, _, truncated, info = env.step("the answer is 3")  # no box: not an answer
    assert reward == 0.0 and truncated and info["metrics"]["action_is_valid"] == 0.0


def test_qa_is_exact_match_after_normalisation(samples):
    env = make_env("roll_qa", dataset_name=str(samples / "qa.jsonl"))
    seed = next(s for s in range(50) if env.reset(seed=s) and "Pacific" in str(env.target))
    assert "<answer>" in env.reset(seed=seed)[0]
    assert env.step("<think>water</think><answer>The  PACIFIC ocean!</answer>")[1] == 1.0
    env.reset(seed=seed)
    assert env.step("<answer>Atlantic</answer>")[1] == 0.0


@pytest.mark.skipif(sandbox_unavailable_reason() is not None, reason=str(sandbox_unavailable_reason()))
def test_code_runs_the_tests_in_the_sandbox(samples):
    env = make_env("roll_code", dataset_name=str(samples / "code.jsonl"), timeout=10)
    seed = next(s for s in range(50) if env.reset(seed=s) and "sum" in env.question())
    program = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert env.step(f"First a draft:\n```python\nprint(0)\n```\nFinal:\n{program}")[1] == 1.0  # the last block
    env.reset(seed=seed)
    assert env.step(program.replace("a + b", "a - b"))[1] == 0.0
    env.reset(seed=seed)
    escape = "```python\nimport socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)\nprint(0)\n```"
    assert env.step(escape)[1] == 0.0  # no network in the sandbox: the run fails
