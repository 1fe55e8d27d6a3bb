"""Pieces of the run report that need no run: token texts, the step table, finding a run's logs."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from roll.viewer.plots import write_plots
from roll.viewer.report import find_logging_dir, step_rows
from roll.viewer.records import token_texts


def test_token_texts_join_to_each_segments_text_across_split_characters(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompt, reply = tokenizer("Map: P_G 😀 é").input_ids, tokenizer("go 😀€ left").input_ids
    texts = token_texts(tokenizer, prompt + reply, [0] * len(prompt) + [1] * len(reply))
    assert len(texts) == len(prompt) + len(reply)
    assert "".join(texts[:len(prompt)]) == "Map: P_G 😀 é"
    assert "".join(texts[len(prompt):]) == "go 😀€ left"
    assert "\ufffd" not in "".join(texts)


def test_step_table_merges_rows_of_one_step_and_lists_tripped_alarms():
    rows = [{"step": 0, "val/env/A/success": 0.5}, {"step": 0, "sft/loss": 1.0},
            {"step": 1, "env/A/success": 1.0, "env/B/success": 0.0, "alarm/kl_jump": 1.0, "alarm/length_at_cap": 0.0}]
    table = step_rows(rows)
    assert [r["step"] for r in table] == [0, 1]
    assert table[0]["val_success"] == 0.5 and table[1]["success"] == 0.5
    assert table[1]["alarms"] == ["kl_jump"]


def test_find_logging_dir(tmp_path):
    logs = tmp_path / "out" / "logs"
    logs.mkdir(parents=True)
    (logs / "metrics.jsonl").write_text(json.dumps({"step": 1}) + "\n")
    assert find_logging_dir(tmp_path / "out") == logs and find_logging_dir(logs) == logs
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        find_logging_dir(tmp_path / "out" / "logs" / "trajectories")
    other = tmp_path / "out" / "second" / "logs"
    other.mkdir(parents=True)
    (other / "metrics.jsonl").write_text("")
    with pytest.raises(ValueError, match="several runs"):
        find_logging_dir(tmp_path / "out")


def test_validation_plot_draws_the_map_blind_baseline_beside_success(tmp_path):
    rows = [{"step": 1, "val/env/A/success": 0.25, "val/blind/A/best": 0.45, "val/blind/A/uniform_random": 0.01},
            {"step": 5, "val/env/A/success": 0.5, "val/blind/A/best": 0.45}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_plots(tmp_path)
    drawn = json.loads((tmp_path / "plots" / "curves.json").read_text())["validation"]
    assert drawn["val/blind/A/best"] == [[1.0, 0.45], [5.0, 0.45]]
    assert drawn["val/env/A/success"] == [[1.0, 0.25], [5.0, 0.5]]
    assert "val/blind/A/uniform_random" not in drawn
