"""Shared test fixtures: tiny random models built locally, and one Ray instance per test session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# ROLL's own configs (SPEC §1) are read in place from the shared/ folder beside the checkout.
SHARED_DIR = Path(os.environ.get("ROLL_SHARED_DIR", REPO_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny Qwen2-architecture model with a ChatML template (eos = pad = <|im_end|>)."""
    from roll.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_qwen2") / "model", arch="qwen2")


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A tiny Llama-architecture model with a Llama-3 style chat template."""
    from roll.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_llama") / "model", arch="llama")


def start_ray():
    """A real local Ray with its own temp dir and no auth, unless one is already running."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if not ray.is_initialized():
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=tempfile.mkdtemp(prefix="ray_", dir="/tmp"),
            runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT), "RAY_AUTH_MODE": "disabled"}},
        )


@pytest.fixture(scope="session")
def ray_session():
    """One Ray for the whole test session (starting it takes seconds)."""
    import ray

    start_ray()
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def no_ray():
    """Ray down for a module whose tests check that nothing was started, whatever ran before it; a Ray
    the session had started comes back afterwards for the modules that follow."""
    import ray

    was_running = ray.is_initialized()
    ray.shutdown()
    yield
    if was_running:
        start_ray()
