"""Machine checks before any worker starts: each names the key and the fix, the launcher exits 2,
and Ray was never started."""

from __future__ import annotations

import importlib.util
import logging
import os

import pytest
import ray
import torch

from roll.launch.runtime_checks import cpu_has_native_bf16
from roll.launch.cli import main

CPU = ["--config-path", "examples/smollm2-135M-agentic_cpu", "--config-name", "agent_val_frozen_lake"]
TRAIN = "roll.pipeline.agentic.agentic_pipeline.AgenticPipeline"
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks what a machine without a GPU refuses")
# the checks assert that Ray was never started, which only means something with Ray down
pytestmark = pytest.mark.usefixtures("no_ray")


def launch(tiny_model_dir, *overrides: str, dry_run: bool = False) -> int:
    argv = [*CPU, *(["--dry-run"] if dry_run else []), f"pretrain={tiny_model_dir}", *overrides]
    return main(argv, default_pipeline=TRAIN)


def refused(capsys, rc: int) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert not ray.is_initialized()  # no worker was started
    return err


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed here")
def test_flash_attention_without_flash_attn(tiny_model_dir, capsys):
    err = refused(capsys, launch(tiny_model_dir, "actor_train.model_args.attn_implementation=fa2"))
    assert "actor_train.model_args.attn_implementation: fa2 needs the flash-attn package" in err
    assert "attn_implementation: sdpa" in err


@no_gpu
def test_more_cpu_workers_than_cores(tiny_model_dir, capsys):
    n = (os.cpu_count() or 1) + 1
    err = refused(capsys, launch(tiny_model_dir, f"actor_infer.device_mapping='list(range(0,{n}))'"))
    assert f"actor_infer.device_mapping asks for {n} workers" in err
    assert f"this machine has {os.cpu_count()} CPU cores" in err and "device_mapping: [0]" in err


def test_a_first_prompt_that_cannot_fit_sequence_length(tiny_model_dir, capsys):
    err = refused(capsys, launch(tiny_model_dir, "sequence_length=64"))
    assert "sequence_length=64 cannot hold the first prompt of env 'FrozenLakeCPU'" in err
    assert "Raise sequence_length" in err


def test_an_output_path_that_cannot_be_written(tiny_model_dir, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    err = refused(capsys, launch(tiny_model_dir, f"++tracker_kwargs.log_dir={blocker}/tb"))
    assert f"tracker_kwargs.log_dir: '{blocker}/tb' cannot be written on this machine" in err


def test_rollout_mock_without_dumps(tiny_model_dir, tmp_path, capsys):
    overrides = ["++rollout_mock.enable=true", "++rollout_mock.mode=mock", f"++rollout_mock.dump_dir={tmp_path}", "max_steps=2"]
    err = refused(capsys, launch(tiny_model_dir, *overrides))
    assert f"rollout_mock.dump_dir: {tmp_path} has no dumped batch for steps [1, 2]" in err


def test_bf16_on_a_cpu_is_computed_in_fp32_with_a_warning(tiny_model_dir, capsys, caplog):
    with caplog.at_level(logging.WARNING, logger="roll.config"):
        rc = launch(tiny_model_dir, "actor_train.model_args.dtype=bf16", dry_run=True)
    assert rc == 0 and not ray.is_initialized()
    if torch.cuda.is_available():
        return
    message = "many times slower" if not cpu_has_native_bf16() else "roll computes in fp32 on CPU"
    assert any(message in r.getMessage() and r.getMessage().startswith("actor_train.model_args.dtype") for r in caplog.records)


def test_native_bf16_is_read_from_the_cpu_flags():
    assert cpu_has_native_bf16("processor : 0\nflags : fpu sse2 avx2 avx512f avx512_bf16 amx_tile\n")
    assert cpu_has_native_bf16("Features : fp asimd bf16 i8mm\n")  # Arm
    assert not cpu_has_native_bf16("processor : 0\nflags : fpu sse2 avx2 avx512f\n")
    assert not cpu_has_native_bf16("")
