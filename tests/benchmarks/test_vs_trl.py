"""benchmarks/vs_trl.py, roll beside TRL: both sides get equal settings, TRL's answers are scored by roll's
own env, and a mismatch in the prompts is caught. The end-to-end run (marked slow) needs .venv-trl with
TRL in it (`python benchmarks/vs_trl.py` creates it) and skips without it."""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Client
from pathlib import Path

import pytest

from benchmarks.trl_venv import has_trl, venv_python
from benchmarks.vs_trl import (CONFIG_DIR, CONFIG_NAME, TAG, TINY_MODEL, RewardServer, SideBySide, cpu_count,
                               different_settings, prompt_order_problems, roll_overrides, settings_rows, trl_arguments)
from roll.agentic.env import make_env
from roll.launch.loader import load_agentic_config
from roll.models import resolve_model_path

REPO = Path(__file__).resolve().parents[2]


def rows_for(side: SideBySide, extra: list[str] = ()) -> list[tuple[str, object, object]]:
    config = load_agentic_config(CONFIG_DIR, CONFIG_NAME, [*roll_overrides(side, "vs_trl_test"), *extra])
    return settings_rows(config, trl_arguments(side, Path("unused")), side)


def test_both_sides_get_the_same_settings():
    # the threads the script gives both sides (main() sets them to this machine's cores)
    side = SideBySide(model=resolve_model_path(TINY_MODEL), steps=3, prompts=4, group=8, max_new_tokens=32,
                      threads=cpu_count())
    rows = {name: (roll, trl) for name, roll, trl in rows_for(side)}
    assert different_settings(list((name, *pair) for name, pair in rows.items())) == []
    assert rows["prompts per step"] == (4, 4) and rows["answers per prompt"] == (8, 8)
    assert rows["samples per optimizer step"] == (32, 32) and rows["optimizer steps per RL step"] == (1, 1)
    assert rows["max new tokens"] == (32, 32) and rows["groups with equal scores trained"] == (True, True)


def test_a_setting_that_differs_is_named():
    side = SideBySide(model=resolve_model_path(TINY_MODEL), steps=2, prompts=2, group=4, max_new_tokens=8,
                      threads=cpu_count())
    extra = ["actor_train.model_args.disable_gradient_checkpointing=false", "actor_infer.generating_args.top_k=50"]
    assert different_settings(rows_for(side, extra)) == ["sampling (temperature, top_p, top_k)", "gradient checkpointing"]


def test_the_micro_batch_must_divide_the_step():
    with pytest.raises(ValueError, match="multiple of 8"):
        SideBySide(model="m", prompts=3, group=4).micro_batch


def test_trl_answers_are_scored_by_rolls_countdown_env():
    config = load_agentic_config(CONFIG_DIR, CONFIG_NAME, ["pretrain=tiny-random-qwen2"])
    spec = config.custom_envs[TAG]
    server = RewardServer(spec.env_type, dict(spec.env_config))
    env = make_env(spec.env_type, **spec.env_config)
    env.reset(seed=7)
    solved = f"<answer>{env.optimal_answer()}</answer>"
    with Client(server.listener.address, authkey=server.authkey) as connection:
        connection.send([(7, solved), (7, "no answer here"), (8, solved)])
        rewards = connection.recv()
    assert rewards[0] == 1.0 and rewards[1] == spec.env_config["format_penalty"] and rewards[2] != 1.0
    assert server.calls == [[7, 7, 8]]


def test_a_step_with_other_prompts_is_reported():
    prompts = [[{"env_seed": 1}, {"env_seed": 2}], [{"env_seed": 3}, {"env_seed": 4}]]
    assert prompt_order_problems(prompts, [[2, 1, 1, 2], [3, 4, 4, 3]], group=2) == []
    problems = prompt_order_problems(prompts, [[1, 1, 2, 2], [3, 3, 5, 5]], group=2)
    assert len(problems) == 1 and problems[0].startswith("step 2")


@pytest.mark.slow
@pytest.mark.skipif(not has_trl(venv_python()), reason=".venv-trl with TRL is missing: python benchmarks/vs_trl.py creates it")
def test_a_tiny_run_prints_both_frameworks():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "benchmarks/vs_trl.py", "--tiny", "--steps", "2", "--prompts", "2", "--group", "4",
                          "--max-new-tokens", "8"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "same prompts and prompt tokens each step: yes" in out.stdout
    assert "| roll | " in out.stdout and "| TRL | " in out.stdout and "| roll / TRL | " in out.stdout
    assert "matmul: " in out.stdout and "GFLOP/s fp32 before" in out.stdout
