"""Cluster.recover with real Ray restarts: a rank killed (SIGKILL) is restarted and gets its state
replayed; a rank that dies again during that replay is waited for and restored from the start."""

from __future__ import annotations

import os
import signal

from roll.distributed.cluster import Cluster
from tests.rollout.helpers import infer_config
from tests.workers.restart_probe import RestartProbe


def test_a_rank_killed_again_while_its_state_is_replayed_is_restored(ray_session, tiny_model_dir, tmp_path):
    cluster = Cluster("probe", RestartProbe, infer_config(tiny_model_dir), num_workers=1, max_restarts=3,
                      threads_per_worker=1, die_dir=str(tmp_path))
    try:
        cluster.execute_all("set_value", 42)
        (first,) = cluster.execute_all("pid")
        (tmp_path / "ticket-1").touch()  # the first restarted process dies in the replay
        os.kill(first, signal.SIGKILL)
        assert cluster.recover(timeout_s=120) == 1
        (last,) = cluster.execute_all("pid")
        assert cluster.execute_all("get_value") == [42]
        assert last != first and not list(tmp_path.glob("ticket-*")), "the replay killed one process, then succeeded"
        assert cluster.restarts == 1
    finally:
        cluster.shutdown()
