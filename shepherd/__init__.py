"""fray's login side: the shepherd that keeps runs progressing, its CLI and TUI,
and the cluster API that jobs use to launch each other and talk through actors.

    from shepherd import current_cluster, JobRequest, Entrypoint, ActorServer, WorkerPool

The public names below are loaded lazily (PEP 562), so `import shepherd` and
`fray list` import neither cloudpickle nor any of the cluster machinery.
Everything else lives in private modules named for what they own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "current_cluster": "shepherd.cluster",
    "LocalCluster": "shepherd.cluster.local",
    "FrayCluster": "shepherd.cluster.fray",
    "JobRequest": "shepherd.cluster.api",
    "ResourceConfig": "shepherd.cluster.api",
    "Entrypoint": "shepherd.cluster.api",
    "EnvironmentConfig": "shepherd.cluster.api",
    "JobGroupConfig": "shepherd.cluster.api",
    "ReservationConfig": "shepherd.cluster.api",
    "Reservation": "shepherd.cluster.api",
    "JobInfo": "shepherd.cluster.api",
    "JobStatus": "shepherd.cluster.api",
    "JobFailed": "shepherd.cluster.api",
    "ClusterError": "shepherd.cluster.api",
    "ActorServer": "shepherd.actors.server",
    "ActorContext": "shepherd.actors.server",
    "ClusterResolver": "shepherd.actors.resolver",
    "FixedResolver": "shepherd.actors.resolver",
    "ActorPool": "shepherd.actors.pool",
    "ActorFuture": "shepherd.actors.client",
    "ActorConnectionError": "shepherd.actors.client",
    "RemoteActorError": "shepherd.actors.client",
    "WorkerPool": "shepherd.workers",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from shepherd.actors.client import ActorConnectionError, ActorFuture, RemoteActorError
    from shepherd.actors.pool import ActorPool
    from shepherd.actors.resolver import ClusterResolver, FixedResolver
    from shepherd.actors.server import ActorContext, ActorServer
    from shepherd.cluster import current_cluster
    from shepherd.cluster.api import (ClusterError, EnvironmentConfig, Entrypoint, JobFailed, JobGroupConfig,
                                      JobInfo, JobRequest, JobStatus, Reservation, ReservationConfig, ResourceConfig)
    from shepherd.cluster.fray import FrayCluster
    from shepherd.cluster.local import LocalCluster
    from shepherd.workers import WorkerPool


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'shepherd' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
