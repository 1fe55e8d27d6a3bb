"""Two Ray nodes on this machine, started with `ray start` as a user would start a cluster, and stopped
again by the ids of the processes they started (never `ray stop`, which ends every Ray on the machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from roll.utils.rendezvous import free_address

RAY = str(Path(sys.executable).parent / "ray")
NODE_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_raylet_start_wait_time_s": "300", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    return free_address()[1]


def node_ports(head: bool) -> list[str]:
    """Every port a node listens on, free ones: two nodes on one machine must not share any (0 for the
    workers' ports: each worker binds one the OS gives it)."""
    ports = ["--node-manager-port", str(free_port()), "--object-manager-port", str(free_port()),
             "--runtime-env-agent-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
             "--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port()),
             "--min-worker-port", "0", "--max-worker-port", "0"]
    if head:
        ports += ["--port", str(free_port()), "--ray-client-server-port", str(free_port()), "--include-dashboard=false"]
    return ports


class RayNode:
    """`ray start --block` in its own process group; `stop()` ends it and every process of its temp dir."""

    def __init__(self, temp_dir: Path, head_address: str | None = None, num_cpus: int = 1) -> None:
        self.temp_dir = temp_dir
        temp_dir.mkdir(parents=True, exist_ok=True)
        role = ["--head"] if head_address is None else ["--address", head_address]
        self.log = open(temp_dir.parent / f"{temp_dir.name}.log", "w")
        self.port = None
        args = node_ports(head_address is None)
        if head_address is None:
            self.port = int(args[args.index("--port") + 1])
        self.process = subprocess.Popen(
            [RAY, "start", *role, "--block", "--disable-usage-stats", "--num-cpus", str(num_cpus),
             "--temp-dir", str(temp_dir), *args],
            env={**os.environ, **NODE_ENV}, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_until_in_cluster(self, address: str, nodes: int, timeout_s: float = 240) -> list[str]:
        """The cluster's node ids once `nodes` nodes are alive (asked from a separate driver process)."""
        script = ("import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
                  "print(' '.join(n['NodeID'] for n in ray.nodes() if n['Alive']))")
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process.poll() is None, self.log_text()
            try:
                result = subprocess.run([sys.executable, "-c", script, address], env={**os.environ, **NODE_ENV},
                                        capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                continue
            ids = result.stdout.split() if result.returncode == 0 else []
            if len(ids) >= nodes:
                return ids
            assert time.monotonic() < deadline, f"{nodes} Ray nodes not alive in {timeout_s} s: {result.stderr[-2000:]}"
            time.sleep(2)

    def log_text(self) -> str:
        return (self.temp_dir.parent / f"{self.temp_dir.name}.log").read_text()[-3000:]

    def stop(self) -> None:
        for pid in [self.process.pid, *processes_using(self.temp_dir)]:
            try:
                os.killpg(pid, signal.SIGKILL) if pid == self.process.pid else os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)
        self.log.close()


def start_node(temp_dir: Path, address: str | None, nodes: int, attempts: int = 2) -> tuple["RayNode", list[str]]:
    """A node that joined: (the node, the cluster's node ids once `nodes` are alive). On a loaded
    machine Ray's own start-up can time out ("Failed to get node info"); that start is retried once
    with fresh ports, since it is Ray's start-up, not roll, that failed."""
    for attempt in range(attempts):
        node = RayNode(temp_dir.with_name(f"{temp_dir.name}_{attempt}"), head_address=address)
        try:
            return node, node.wait_until_in_cluster(address or f"127.0.0.1:{node.port}", nodes)
        except AssertionError:
            node.stop()
            if attempt == attempts - 1:
                raise


def processes_using(temp_dir: Path) -> list[int]:
    """Pids of the processes whose command line names `temp_dir` (raylet, gcs, workers of that node)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(temp_dir) in cmdline:
            pids.append(int(entry.name))
    return pids
