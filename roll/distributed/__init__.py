"""Worker groups per role (roll.distributed.cluster.Cluster) and rank rendezvous."""

from roll.distributed.cluster import Cluster, WorkerHost, collective

__all__ = ["Cluster", "WorkerHost", "collective"]
