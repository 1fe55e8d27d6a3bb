"""scripts/gpu_check.sh, the check prepared for a lent GPU, runs here on CPU (tiny model) so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

EXPECTED = [
    "hf_train: bf16 vs fp32 log-probs", "hf_train: train step, dynamic batching", "hf_train: train step, packing",
    "hf_train: packed vs dynamic log-probs", "hf_train: response NLL over 4 steps", "hf_train: training peak vs estimate",
    "fsdp2_train: bf16 vs fp32 log-probs", "fsdp2_train: train step, packing", "fsdp2_train: response NLL over 4 steps",
    "fsdp2_train: save, load, next step", "fsdp2_train offload_policy: 2 steps", "hf_infer: 2-turn sessions, recorded vs fresh log-probs (fp32)",
    "hf_infer: seeded sampling on the device", "hf_infer: decode engine vs HF generate", "hf_infer: engine peak vs estimate",
    "memory check (CPU branch)", "no Ray, vLLM, Hydra or OmegaConf imported",
]


def test_the_gpu_check_passes_on_cpu_and_prints_one_table(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(["bash", "scripts/gpu_check.sh", "--device", "cpu", "--out", str(tmp_path)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    rows = {row["check"]: row for row in json.loads((tmp_path / "gpu_check.json").read_text())}
    assert [name for name in EXPECTED if name not in rows] == []
    assert [name for name, row in rows.items() if row["ok"] is False] == []
    assert rows["fsdp2_train: save, load, next step"]["ok"] is True  # bit-identical resume
    assert "tokens/s" in rows["hf_infer: decode engine vs HF generate"]["result"]
    # one table, the same on stdout and in the file
    assert out.stdout.count("| check | result |") == 1
    assert (tmp_path / "gpu_check.md").read_text().strip() in out.stdout
