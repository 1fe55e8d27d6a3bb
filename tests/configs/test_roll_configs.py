"""ROLL's own agentic configs through the launchers' --dry-run: with --cpu each one validates or is
refused for a named env or feature (never an unknown key); without --cpu, on this GPU-less machine,
each is refused before any worker starts, with the reason."""

from __future__ import annotations

import importlib.util
import re

import pytest
import ray
import torch

from roll.launch.cli import main
from tests.conftest import REPO_ROOT, roll_examples

ROLL_DIR = roll_examples("qwen2.5-0.5B-agentic")
CONFIGS = sorted(p.stem for p in ROLL_DIR.glob("*.yaml"))
TRAIN = "roll.pipeline.agentic.agentic_pipeline.AgenticPipeline"
ROLLOUT = "roll.pipeline.agentic.agentic_rollout_pipeline.AgenticRolloutPipeline"

# What roll does not do yet, named in the refusal (by config, for the configs in ROLL_DIR today).
EXPECTED_REFUSALS: dict[str, str] = {}  # none today: every config in ROLL_DIR validates
VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None
NAMED_FEATURE = re.compile(r"not implemented|not supported|roll does not run it|cannot import")
# each dry run asserts that Ray was never started, which only means something with Ray down
pytestmark = pytest.mark.usefixtures("no_ray")


@pytest.fixture(autouse=True)
def tiny_cache(tmp_path_factory, monkeypatch):
    # tiny-random-qwen2 is built once into this session's cache folder, not the user's
    monkeypatch.setenv("ROLL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "roll_cache"))


def dry_run(name: str, *extra: str) -> tuple[int, str]:
    pipeline = ROLLOUT if "rollout_sokoban" in name else TRAIN
    argv = ["--config-path", str(ROLL_DIR), "--config-name", name, "--dry-run", *extra]
    return main(argv, default_pipeline=pipeline, rollout_only=pipeline == ROLLOUT), pipeline


def test_the_compatibility_target_is_there():
    assert len(CONFIGS) >= 16, f"ROLL's configs are missing from {ROLL_DIR}"


@pytest.mark.parametrize("name", CONFIGS)
def test_dry_run_cpu_validates_or_names_what_roll_lacks(name, capsys):
    rc, _ = dry_run(name, "--cpu", "pretrain=tiny-random-qwen2")
    out = capsys.readouterr()
    text = out.out + out.err
    assert "unknown key" not in text
    assert not ray.is_initialized()  # nothing was started
    if rc == 0:
        assert name not in EXPECTED_REFUSALS, text[-2000:]
        assert "dry run:" in out.out and "# resolved config" in out.out
        if VLLM_INSTALLED:  # vLLM's CPU build generates; the config's generator stays
            assert "--cpu: actor_infer.strategy_args.strategy_name" not in out.out
        else:
            assert ("--cpu: actor_infer.strategy_args.strategy_name: vllm is not installed in this Python "
                    "(to generate with it: bash scripts/setup_vllm.sh") in out.out
            assert "--cpu: actor_infer.strategy_args.strategy_name: 'vllm' -> 'hf_infer'" in out.out
    else:
        assert rc == 2
        assert NAMED_FEATURE.search(out.err), out.err
        if name in EXPECTED_REFUSALS:
            assert EXPECTED_REFUSALS[name] in out.err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusals of a machine without a GPU")
@pytest.mark.parametrize("name", CONFIGS)
def test_dry_run_without_cpu_refuses_gpu_configs_before_any_worker(name, capsys):
    rc, _ = dry_run(name)
    err = capsys.readouterr().err
    assert rc == 2 and not ray.is_initialized()
    assert "unknown key" not in err
    gpu_reason = re.search(r"(megatron_train|vllm) (is not supported by roll|needs a CUDA GPU|"
                           r"needs vLLM, which is not installed)|'megatron_train' does not train LoRA adapters", err)
    assert gpu_reason or NAMED_FEATURE.search(err), err
    if name not in EXPECTED_REFUSALS:
        assert gpu_reason, err  # a config roll would run elsewhere is refused for the GPU it needs


def test_the_docs_table_lists_every_roll_key_roll_does_not_implement():
    from roll.launch import roll_keys

    doc = (REPO_ROOT / "docs" / "configuration.md").read_text()
    keys = set()
    for name, section in roll_keys.SECTIONS.items():
        if not callable(section):
            keys |= set(section)
    missing = sorted(k for k in keys if f"`{k}" not in doc)
    assert not missing, f"docs/configuration.md does not list {missing}"


def test_cpu_turns_sequence_parallelism_off_instead_of_refusing_it(capsys):
    ulysses = "++actor_train.model_args.ulysses_size=4"
    rc, _ = dry_run("agentic_val_sokoban", ulysses)
    err = capsys.readouterr().err
    assert rc == 2 and "actor_train.model_args.ulysses_size: 4 is not supported" in err
    rc, _ = dry_run("agentic_val_sokoban", "--cpu", "pretrain=tiny-random-qwen2", ulysses,
                    "++reference.model_args.ulysses_size=1")
    out = capsys.readouterr().out
    assert rc == 0 and not ray.is_initialized()
    changes = [line for line in out.splitlines() if "ulysses_size" in line and line.startswith("--cpu:")]
    assert changes == ["--cpu: actor_train.model_args.ulysses_size: 4 -> 1 (Ulysses sequence parallelism splits "
                       "each sequence over several devices; this run has one device)"]  # reference's 1 stays
