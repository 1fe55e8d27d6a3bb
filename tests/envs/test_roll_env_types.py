"""ROLL's env types: the docs table says for each whether it runs here, runs with local data, or is
refused for what it needs; the refusals say the same thing as the table."""

from __future__ import annotations

import re

import pytest

from roll.agentic.env import get_env_cls
from roll.agentic.env.roll_env_types import ROLL_ENV_NEEDS
from tests.conftest import REPO_ROOT


def table_rows() -> dict[str, str]:
    doc = (REPO_ROOT / "docs" / "configuration.md").read_text()
    section = doc.split("### ROLL's env types", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_every_row_says_runs_local_data_or_refused():
    rows = table_rows()
    assert rows and all(re.match(r"(runs|runs with local data|refused: needs )", v) for v in rows.values()), rows


@pytest.mark.parametrize("env_type", ["sokoban", "frozen_lake", "sokoban_native_env", "sokoban_sandbox",
                                      "roll_math", "roll_qa", "roll_code"])
def test_the_types_the_table_says_run_are_registered(env_type):
    assert table_rows()[env_type].startswith("runs")
    get_env_cls(env_type)


@pytest.mark.parametrize("env_type", sorted(ROLL_ENV_NEEDS))
def test_each_refusal_names_what_it_needs_as_the_table_does(env_type):
    with pytest.raises(ValueError) as error:
        get_env_cls(env_type)
    assert ROLL_ENV_NEEDS[env_type] in str(error.value) and "roll does not run it" in str(error.value)
    assert table_rows()[env_type].startswith("refused: needs ")
