"""Hub members on remote hosts (docs/cluster.md): ``Cluster.start(RayEngine(...))``,
``cluster.hub(tenant, config)``. Ray is imported only when a :class:`RayEngine` opens."""

from __future__ import annotations

from .cluster import Cluster, ClusterStatus, HostStatus
from .protocol import HostSpec
from .ray_engine import RayEngine
from .remote import AsyncRemoteHub, FutureRemoteHub, RemoteHub

__all__ = [
    "AsyncRemoteHub",
    "Cluster",
    "ClusterStatus",
    "FutureRemoteHub",
    "HostSpec",
    "HostStatus",
    "RayEngine",
    "RemoteHub",
]
