"""benchmarks/learning_tool_use.py end to end on a tiny random model: the tool-use example config through
the real launcher and Ray (tool-user SFT warm-up, one GRPO step, validations before the warm-up and
at step 1 with and without the tool), and the table it prints matches the run's metrics."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

TOOL, BASELINE = "ToolMultiplyCPU", "NoToolMultiplyCPU"


@pytest.fixture()
def work():
    path = Path(tempfile.mkdtemp(prefix="tooluse", dir="/tmp"))  # Ray's socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_tool_use_benchmark_runs_and_prints_tool_use_beside_the_no_tool_baseline(work, tiny_model_dir):
    logs = work / "run" / "logs"
    args = [sys.executable, "benchmarks/learning_tool_use.py", f"pretrain={tiny_model_dir}", "max_steps=1",
            "eval_steps=1", "sft_warmup.steps=1", "sft_warmup.episodes_per_step=4", "rollout_batch_size=8",
            "train_env_manager.num_env_groups=2", "train_env_manager.group_size=4", "val_batch_size=8",
            "val_env_manager.num_env_groups=8", f"output_dir={work / 'run'}", f"logging_dir={logs}",
            "track_with=stdout"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": str(work / "ray"),
           "ROLL_CACHE_DIR": str(work / "cache"), "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    rows = [json.loads(line) for line in (logs / "metrics.jsonl").read_text().splitlines() if line.strip()]
    validations = [r for r in rows if f"val/env/{TOOL}/success" in r]
    # before the warm-up, after it (before step 1), and the final one after the last step
    assert [r["step"] for r in validations] == [0, 1, 2]
    warmup = [r for r in rows if "sft/loss" in r]
    assert len(warmup) == 1 and warmup[0]["sft/loss"] > 0
    for row in validations:
        assert row[f"val/env/{BASELINE}/used_tool"] == 0.0  # the baseline has no tool
        for tag in (TOOL, BASELINE):
            assert 0.0 <= row[f"val/env/{tag}/success"] <= 1.0
    # the printed table: one line per validation, the run's own numbers with and without the tool
    table = result.stdout.split(f"no-tool baseline on the same tasks: {BASELINE}\n", 1)[1].splitlines()
    assert len(table) >= 4, result.stdout[-3000:]
    assert re.split(r"\s{2,}", table[0].strip()) == ["before step", "success", "used tool", "tool errors", "valid",
                                                     "no-tool succ", "no-tool valid"]
    for line, row in zip(table[1:4], validations, strict=True):
        cells = [float(x) for x in line.split()]
        assert cells[0] == row["step"]
        expected = [row[f"val/env/{TOOL}/success"], row[f"val/env/{TOOL}/used_tool"],
                    row[f"val/env/{TOOL}/tool_errors"], row[f"val/env/{TOOL}/action_is_valid"],
                    row[f"val/env/{BASELINE}/success"], row[f"val/env/{BASELINE}/action_is_valid"]]
        assert cells[1:] == pytest.approx(expected, abs=5e-4)
    assert re.search(r"GRPO, CPU: [\d.]+ min, matmul \d+ GFLOP/s", result.stdout)
