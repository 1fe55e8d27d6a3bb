"""The launcher joins an existing Ray cluster through RAY_ADDRESS: a head node and a second node started
with `ray start` on this machine, two training steps, env workers on both nodes, the nodes stopped."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tests.pipeline.ray_nodes import NODE_ENV, processes_using, start_node
from tests.pipeline.test_end_to_end import CPU, overrides, read_metrics, work  # noqa: F401 (fixture)


def test_two_steps_on_an_existing_two_node_cluster_through_ray_address(tiny_model_dir, work):
    head, _ = start_node(work / "head", None, nodes=1)
    second = None
    try:
        address = f"127.0.0.1:{head.port}"
        second, node_ids = start_node(work / "node2", address, nodes=2)
        # 8 training envs, 4 per env worker: two workers, which roll spreads over the nodes
        args = overrides(tiny_model_dir, work, max_steps=2, eval_steps="0",
                         extra={"sft_warmup.steps": "0", "train_env_manager.max_env_num_per_worker": "4"})
        env = {**os.environ, **NODE_ENV, "RAY_ADDRESS": address, "PYTHONUNBUFFERED": "1"}
        env.pop("ROLL_RAY_TEMP_DIR", None)
        result = subprocess.run([sys.executable, "examples/start_agentic_pipeline.py", "--config-path", CPU[0],
                                 "--config-name", CPU[1], *args], cwd=REPO_ROOT, env=env, capture_output=True,
                                text=True, timeout=600)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
    finally:
        for node in (second, head):
            if node is not None:
                node.stop()
    assert "Started a local Ray instance" not in output  # it joined the cluster instead of starting its own
    (placement,) = [line for line in output.splitlines() if "env workers by node:" in line]
    respreads = [line for line in output.splitlines() if "landed off their nodes" in line]
    assert all(f"{node_id} x1" in placement for node_id in node_ids), (placement, node_ids, respreads)
    assert [r["step"] for r in read_metrics(work) if "actor/pg_loss" in r] == [1, 2]
    assert not processes_using(head.temp_dir) and not processes_using(second.temp_dir)  # both nodes are gone
