"""A worker for Cluster.recover tests: its state is one value set by a @replayed_on_restart method, and a
restarted process dies inside that replay while `die_dir` holds a ticket (one ticket per death), as an
inference worker does when the OOM killer ends it again while its weights are being replayed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from roll.distributed.cluster import replayed_on_restart


class RestartProbe:
    def __init__(self, worker_config: Any, rank: int, world_size: int, die_dir: str) -> None:
        self.die_dir = Path(die_dir)
        self.value: int | None = None

    @replayed_on_restart
    def set_value(self, value: int) -> None:
        import ray

        tickets = sorted(self.die_dir.glob("ticket-*"))
        if tickets and ray.get_runtime_context().was_current_actor_reconstructed:
            tickets[0].unlink()
            os._exit(1)
        self.value = value

    def get_value(self) -> int | None:
        return self.value

    def pid(self) -> int:
        return os.getpid()
