"""The examples in docs/internals.md "Extension points" run as written and register what they say."""

import re

import pytest
import torch

from roll.algorithms import ADV_ESTIMATORS, compute_advantages
from roll.strategies import STRATEGIES, strategy_problem
from roll.utils.tracking import TRACKERS, Tracker
from tests.conftest import REPO_ROOT

SECTIONS = ("Advantage estimator", "Inference strategy and train strategy", "Tracker")


def examples(heading: str) -> list[str]:
    text = (REPO_ROOT / "docs" / "internals.md").read_text()
    section = text.split(f"### {heading}", 1)[1].split("\n#", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


@pytest.fixture
def registries(monkeypatch):
    monkeypatch.setattr(ADV_ESTIMATORS, "_entries", dict(ADV_ESTIMATORS._entries))
    monkeypatch.setattr(TRACKERS, "_entries", dict(TRACKERS._entries))
    for name, facts in list(STRATEGIES.items()):
        monkeypatch.setitem(STRATEGIES, name, facts)
    yield
    for name in ("my_infer", "my_train"):
        STRATEGIES.pop(name, None)


def run_examples(heading: str) -> dict:
    namespace: dict = {}
    blocks = examples(heading)
    assert blocks, f"no python example under {heading!r}"
    for block in blocks:
        exec(compile(block, f"docs/internals.md: {heading}", "exec"), namespace)
    return namespace


def test_every_section_has_an_example():
    assert all(examples(heading) for heading in SECTIONS)


def test_advantage_estimator_example(registries):
    run_examples("Advantage estimator")
    mask = torch.tensor([[0, 1, 1], [1, 1, 0]])
    advantages, _ = compute_advantages("sign_of_score", torch.zeros(2, 3), mask, 1.0, 1.0,
                                       response_level_rewards=torch.tensor([2.5, -0.5]))
    assert advantages.tolist() == [[0, 1, 1], [-1, -1, 0]]


def test_strategy_examples(registries):
    run_examples("Inference strategy and train strategy")
    assert STRATEGIES["my_infer"].kind == "infer" and STRATEGIES["my_train"].sharded
    assert "pip install my-engine" in strategy_problem("my_infer", cuda=True)


def test_tracker_example(registries, tmp_path):
    run_examples("Tracker")
    tracker = Tracker("csv", {}, str(tmp_path), "exp")
    tracker.log({"actor/pg_loss": 0.5}, 2)
    tracker.close()
    assert (tmp_path / "metrics.csv").read_text() == "2,actor/pg_loss,0.5\n"
