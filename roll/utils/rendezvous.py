"""Where the ranks of a torch.distributed group meet: rank 0's host and a free TCP port there."""

from __future__ import annotations

import socket
import sys


def free_address() -> tuple[str, int]:
    """This machine's address as other Ray nodes see it, and a port the OS just handed out. Ray is
    asked only when this process already uses it: a single process (one rank, the GPU check) never
    imports Ray, which may not even be installed there."""
    ray = sys.modules.get("ray")
    try:
        host = ray.util.get_node_ip_address() if ray is not None and ray.is_initialized() else "127.0.0.1"
    except Exception:  # noqa: BLE001 - any failure to ask Ray means we are alone: loopback is right
        host = "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return host, s.getsockname()[1]
