"""The end-of-run summary puts each validation metric's first and last value on one line."""

from pathlib import Path

from roll.configs.agentic_config import AgenticConfig
from roll.pipeline.agentic.builders import summary_table


def test_summary_lines_pair_before_and_after_per_metric():
    history = [(0, {"val/FrozenLake/success": 0.125, "val/FrozenLake/action_is_valid": 0.5, "val/other": 3.0}),
               (4, {"val/FrozenLake/success": 0.5, "val/FrozenLake/action_is_valid": 0.875, "val/other": 1.0})]
    text = summary_table(history, AgenticConfig(exp_name="demo", max_steps=4), Path("/runs/ckpt"))
    lines = text.splitlines()
    assert lines[0] == "run 'demo' finished after 4 steps"
    assert "before (step 0)" in lines[1] and "after (step 4)" in lines[1]
    assert [line.split() for line in lines if "FrozenLake" in line] == [
        ["val/FrozenLake/action_is_valid", "0.500", "0.875"],
        ["val/FrozenLake/success", "0.125", "0.500"],
    ]
    assert "val/other" not in text and "\x1b[" not in text  # only success/validity, and no colour codes
    assert lines[-1] == "checkpoints: /runs/ckpt"
