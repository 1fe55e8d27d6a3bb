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


def test_the_summary_says_in_one_line_whether_the_agent_beat_every_map_blind_policy():
    def last(success: float) -> dict[str, float]:
        return {"val/env/Lake/success": success, "val/blind/Lake/best": 0.453125, "val/blind/Lake/maps": 64.0}

    def verdict(success: float) -> str:
        text = summary_table([(1, last(0.0)), (9, last(success))], AgenticConfig(exp_name="d", max_steps=8), Path("/c"))
        (line,) = [line for line in text.splitlines() if line.startswith("Lake:")]
        return line

    assert verdict(0.703125) == ("Lake: the agent solved 0.703 of 64 validation maps, the best map-blind policy 0.453 "
                                 "on the same maps: it beats the best policy that never looks at the map by 16.0 maps")
    # 30 maps against 29: within one map is no evidence
    assert verdict(30 / 64).endswith("does not beat the best policy that never looks at the map by more than one map")
