"""Training runs through the launcher with vLLM generating: the CPU example with
`actor_infer.strategy_args.strategy_name=vllm`, and the guide's GPU config under `--cpu`, which keeps vLLM
where it is installed."""

from __future__ import annotations

import math

import pytest

from roll.strategies.vllm_infer import vllm_unavailable_reason

from tests.pipeline.test_end_to_end import overrides, read_metrics, run_to_end, work  # noqa: F401 (fixture)

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(vllm_unavailable_reason() is not None,
                                                  reason=str(vllm_unavailable_reason()))]
GUIDE_CONFIG = ("examples/qwen2.5-0.5B-agentic_ds", "agent_val_frozen_lake")


def test_cpu_example_trains_two_steps_with_vllm_generating(tmp_path_factory, work):  # noqa: F811
    from roll.models.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path_factory.mktemp("vllm_train") / "model", hidden_size=128)
    args = overrides(model_dir, work, max_steps=2, eval_steps="0", save_steps="10",
                     extra={"actor_infer.strategy_args.strategy_name": "vllm"})
    output = run_to_end(args, work)
    assert "init engine (profile, create kv cache" in output  # vLLM's own start-up line, from the actor_infer worker
    train_rows = [r for r in read_metrics(work) if "actor/pg_loss" in r]
    assert [r["step"] for r in train_rows] == [1, 2]
    for row in train_rows:
        assert all(math.isfinite(v) for v in row.values())
        assert row["env/FrozenLakeCPU/num_actions"] > 0


def test_guide_config_under_cpu_keeps_vllm_and_trains_a_step(tmp_path_factory, work):  # noqa: F811
    from roll.models.tiny import build_tiny_model

    # heads of 32 (vLLM's CPU attention refuses tiny-random-qwen2's 16)
    model_dir = build_tiny_model(tmp_path_factory.mktemp("vllm_guide") / "model", hidden_size=128)
    args = ["--cpu", f"pretrain={model_dir}", "max_steps=1", "eval_steps=0", f"output_dir={work / 'out'}",
            f"logging_dir={work / 'logs'}", "track_with='stdout'"]
    output = run_to_end(args, work, GUIDE_CONFIG)
    assert "--cpu: actor_infer.strategy_args.strategy_name" not in output  # vllm stays, with no note
    assert "--cpu: actor_train.strategy_args.strategy_name: 'fsdp2_train' -> 'hf_train'" in output
    assert "init engine (profile, create kv cache" in output
    train_rows = [r for r in read_metrics(work) if "actor/pg_loss" in r]
    assert [r["step"] for r in train_rows] == [1]
    assert all(math.isfinite(v) for v in train_rows[0].values())
