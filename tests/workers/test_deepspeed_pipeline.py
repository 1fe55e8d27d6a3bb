"""The CPU example trains two steps with actor_train on deepspeed_train (ZeRO-2 by default) and checkpoints."""

from __future__ import annotations

import math

import pytest

from roll.configs import ConfigError
from roll.launch.loader import load_agentic_config
from tests.pipeline.test_end_to_end import overrides, read_metrics, run_to_end, work  # noqa: F401 (fixture)

pytest.importorskip("deepspeed", reason="DeepSpeed is an extra: pip install 'roll[deepspeed]' (scripts/bootstrap.sh installs it)")

DEEPSPEED = {"actor_train.strategy_args.strategy_name": "deepspeed_train", "sft_warmup.steps": "0"}

def test_cpu_example_trains_two_steps_on_deepspeed(tiny_model_dir, work):  # noqa: F811
    run_to_end(overrides(tiny_model_dir, work, max_steps=2, extra=DEEPSPEED, eval_steps="0"), work)
    train_rows = [r for r in read_metrics(work) if "actor/pg_loss" in r]
    assert [r["step"] for r in train_rows] == [1, 2]
    # (a tiny random policy may earn equal rewards in a group: zero advantages, a zero gradient)
    assert all(math.isfinite(r["actor/grad_norm"]) and math.isfinite(r["actor/pg_loss"]) for r in train_rows)
    actor = work / "out" / "checkpoints" / "checkpoint-2" / "actor_train"
    assert any(actor.rglob("*.safetensors")), "actor weights saved in Hugging Face format"
    assert (actor / "deepspeed" / "state").is_dir(), "DeepSpeed's own checkpoint beside them"

def test_bad_deepspeed_settings_fail_before_any_worker_starts(tiny_model_dir, tmp_path):
    base = overrides(tiny_model_dir, tmp_path, max_steps=1, extra=DEEPSPEED)
    cases = [
        (["actor_train.strategy_args.strategy_config={gradient_clipping: 1.0}"], "strategy_config.gradient_clipping.*max_grad_norm"),
        (["+actor_train.strategy_args.strategy_config.train_micro_batch_size_per_gpu=3"], "per_device_train_batch_size=4"),
        (["sft_warmup.steps=1"], "sft_warmup.steps"),
    ]
    for extra, match in cases:
        with pytest.raises(ConfigError, match=match):
            load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake", [*base, *extra])


def test_a_deepspeed_reference_cannot_take_the_warmed_up_weights(tiny_model_dir, tmp_path):
    """After the SFT warm-up the reference loads the warmed-up weights, which a DeepSpeed engine cannot."""
    base = overrides(tiny_model_dir, tmp_path, max_steps=1, extra={"reference.strategy_args.strategy_name": "deepspeed_train"})
    with pytest.raises(ConfigError, match="reference.strategy_args.strategy_name.*hf_infer"):
        load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_reinforce_pp_frozen_lake", base)
    # without the warm-up the reference stays the base model, which DeepSpeed loads as any strategy does
    load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_reinforce_pp_frozen_lake", [*base, "sft_warmup.steps=0"])
