"""Soak: 20 training steps of the CPU example cut small, on the tiny random model, through
benchmarks/soak.py (real launcher parts, real Ray). No role's resident memory may keep growing.

The bound: from step 6 to step 20 the slope of a least-squares line through each role's resident size
(actor_train, actor_infer, the env workers summed, the driver) must stay under SLOPE_BOUND_MB = 1 MB
per step. Steps 1-5 are left out: they hold one-off allocations (optimizer state, caches, the KV cache
reaching its size). Before Ray's thread pool of the inference worker was bounded it grew 31-34 MB over
20 steps (each thread's stack made resident one call at a time), which this bound catches, as it
catches any leak of 1 MB or more per step (two copies of the tiny model's weights, or one step's batch
tensors, per step). Part of the default test run (and so of CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT

STEPS, FIRST, SLOPE_BOUND_MB = 20, 6, 1.0


def slope(values: list[float]) -> float:
    """MB per step of the least-squares line through `values` (one per step)."""
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values)) / sum((x - mean_x) ** 2 for x in range(n))


@pytest.mark.timeout(1200)  # a launcher run of many steps: past the suite's 600 s on a loaded machine
def test_no_role_keeps_growing_over_20_steps(tmp_path):
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
    slopes = {role: slope([row[role] for row in rows[FIRST - 1:]]) for role in result["roles"]}
    print(f"resident growth from step {FIRST} to step {STEPS} (MB per step):", {r: round(g, 2) for r, g in slopes.items()})
    assert all(row[role] > 50 for row in rows for role in result["roles"]), "a role's memory was not read"
    # a role's peak covers every sample of its largest process (env workers and the driver are summed
    # per sample, so only the single-process roles are checked)
    for role in ("actor_train", "actor_infer"):
        assert result["peaks"][role] >= max(row[role] for row in rows), (role, result["peaks"][role])
    grown = {role: round(g, 2) for role, g in slopes.items() if g >= SLOPE_BOUND_MB}
    assert not grown, f"resident memory grew {grown} MB per step from step {FIRST} to {STEPS} (bound {SLOPE_BOUND_MB} MB)"
