"""Soak: 30 training steps of the CPU example cut small, on the tiny random model, through
benchmarks/soak.py (real launcher parts, real Ray). No role's resident memory may keep growing.

The bound: from step 10 to step 30 each role (actor_train, actor_infer, the env workers summed, the
driver) may grow by at most GROWTH_BOUND_MB = 20 MB, i.e. 1 MB per step. Steps 1-9 are left out: they
hold one-off allocations (optimizer state, caches, the KV cache reaching its size). Measured on this
branch: every role grew 0-4 MB over those 20 steps; before it, the inference worker grew 31-34 MB
(Ray's 1024-thread pool getting each thread's stack resident one call at a time), which this bound
catches, as it catches any leak of 1 MB or more per step (two copies of the tiny model's weights, or
one step's batch tensors, per step)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow
STEPS, FIRST, GROWTH_BOUND_MB = 30, 10, 20.0


def test_no_role_keeps_growing_over_30_steps(tmp_path):
    table = tmp_path / "soak.json"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    run = subprocess.run([sys.executable, "benchmarks/soak.py", "--steps", str(STEPS), "--json", str(table)],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    print(f"soak of {STEPS} steps: {time.monotonic() - start:.0f} s")
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    result = json.loads(table.read_text())
    rows = result["rows"]
    assert len(rows) == STEPS and set(result["roles"]) == {"actor_train", "actor_infer", "env_workers", "driver"}
    growth = {role: rows[STEPS - 1][role] - rows[FIRST - 1][role] for role in result["roles"]}
    print("resident growth from step 10 to step 30 (MB):", {r: round(g, 1) for r, g in growth.items()})
    assert all(row[role] > 50 for row in rows for role in result["roles"]), "a role's memory was not read"
    # a role's peak covers every sample of its largest process (env workers and the driver are summed
    # per sample, so only the single-process roles are checked)
    for role in ("actor_train", "actor_infer"):
        assert result["peaks"][role] >= max(row[role] for row in rows), (role, result["peaks"][role])
    grown = {role: round(g, 1) for role, g in growth.items() if g >= GROWTH_BOUND_MB}
    assert not grown, f"resident memory grew by {grown} MB from step {FIRST} to {STEPS} (bound {GROWTH_BOUND_MB} MB)"
