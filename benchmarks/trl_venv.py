"""The virtual environment that holds TRL for benchmarks/vs_trl.py: `.venv-trl` at the repository root.

Kept apart from .venv so that TRL's requirements (its own transformers, accelerate, datasets pins)
never change the packages roll runs with. torch is installed first, at the version .venv has, so that
pip takes the CPU build this machine provides instead of pulling a CUDA build of several GB as a
dependency of TRL.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRL_VENV = ROOT / ".venv-trl"
TRL_VERSION = "1.16.0"
TORCH_VERSION = "2.13.0"


def venv_python(venv: Path = TRL_VENV) -> Path:
    return venv / "bin" / "python"


def has_trl(python: Path) -> bool:
    """True when `python` imports TRL at the pinned version."""
    check = f"import trl, sys; sys.exit(trl.__version__ != {TRL_VERSION!r})"
    return python.is_file() and subprocess.run([str(python), "-c", check], capture_output=True).returncode == 0


def ensure_trl_venv(venv: Path = TRL_VENV) -> Path:
    """.venv-trl's python, creating the venv and installing torch then TRL on first use."""
    python = venv_python(venv)
    if has_trl(python):
        return python
    if not python.is_file():
        print(f"[vs_trl] creating {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    print(f"[vs_trl] installing torch=={TORCH_VERSION}, then trl=={TRL_VERSION} into {venv}", flush=True)
    subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run([*pip, f"trl=={TRL_VERSION}"], check=True)
    if not has_trl(python):
        raise RuntimeError(f"{python} does not import trl=={TRL_VERSION} after installing it")
    return python
