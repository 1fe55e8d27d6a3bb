"""Shared test fixtures: tiny random models built locally, and one Ray instance per test session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# ROLL's own example configs, read in place from a ROLL checkout's examples/ folder (or any folder laid
# out like it: config/ and qwen2.5-0.5B-agentic/). Without it the tests that read them skip.
ROLL_EXAMPLES_SKIP = ("ROLL's example configs not found: set ROLL_EXAMPLES_DIR to a ROLL checkout's examples/ "
                      "folder to run the tests that read them")
_ROLL_EXAMPLES_DIR = os.environ.get("ROLL_EXAMPLES_DIR")
ROLL_EXAMPLES: Path | None = Path(_ROLL_EXAMPLES_DIR).resolve() if _ROLL_EXAMPLES_DIR else None
if ROLL_EXAMPLES is not None and not ROLL_EXAMPLES.is_dir():
    raise RuntimeError(f"ROLL_EXAMPLES_DIR={_ROLL_EXAMPLES_DIR!r} is not a folder")
requires_roll_examples = pytest.mark.skipif(ROLL_EXAMPLES is None, reason=ROLL_EXAMPLES_SKIP)


def roll_examples(*parts: str) -> Path:
    """A path under ROLL_EXAMPLES_DIR; skips the calling test (or module) when the variable is unset."""
    if ROLL_EXAMPLES is None:
        pytest.skip(ROLL_EXAMPLES_SKIP, allow_module_level=True)
    return ROLL_EXAMPLES.joinpath(*parts)


def pytest_terminal_summary(terminalreporter) -> None:
    """One line saying why the ROLL-config tests skipped, however many there were."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if ROLL_EXAMPLES_SKIP in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} skipped: {ROLL_EXAMPLES_SKIP}")


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


@pytest.fixture(scope="session")
def tiny_vl_dir(tmp_path_factory) -> Path:
    """A tiny Qwen2.5-VL (vision tower, 3-D rope) with Qwen's vision tokens and its image processor."""
    from roll.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_qwen2_5_vl") / "model", arch="qwen2_5_vl")


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
