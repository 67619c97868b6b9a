"""fray: a user-space job shepherd for ML work, and the small cluster API jobs use.

    from fray import report                      # inside a job: progress, result, checkpoints
    fut = fray.submit(fn, *args, resources={"cpus": 4})   # a function as a run; fut.result()
    from fray import current_cluster, JobRequest, Entrypoint, ActorServer, WorkerPool

This package is the `shepherd/` folder (the login side); `fray.wrapper` is the
`wrapper/` folder (the compute side) and `fray.schemas` the `schemas/` folder.
The public names below are loaded lazily (PEP 562): `import fray` runs only the
standard library, so the wrapper (`python -m fray.wrapper`) still starts on a
node whose environment lacks fray's dependencies, and `fray list` imports
neither cloudpickle nor any of the cluster machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fray.version import __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "report": "fray.wrapper.report",  # a module: `from fray import report`
    "current_cluster": "fray.cluster",
    "LocalCluster": "fray.cluster.local",
    "FrayCluster": "fray.cluster.fray_cluster",
    "RemoteCluster": "fray.cluster.remote",
    "JobRequest": "fray.cluster.api",
    "ResourceConfig": "fray.cluster.api",
    "Entrypoint": "fray.cluster.api",
    "EnvironmentConfig": "fray.cluster.api",
    "JobGroupConfig": "fray.cluster.api",
    "ReservationConfig": "fray.cluster.api",
    "Reservation": "fray.cluster.api",
    "JobInfo": "fray.cluster.api",
    "JobStatus": "fray.cluster.api",
    "JobFailed": "fray.cluster.api",
    "ClusterError": "fray.cluster.api",
    "ActorServer": "fray.actors.server",
    "ActorContext": "fray.actors.server",
    "ClusterResolver": "fray.actors.resolver",
    "FixedResolver": "fray.actors.resolver",
    "ActorPool": "fray.actors.pool",
    "ActorFuture": "fray.actors.client",
    "ActorConnectionError": "fray.actors.client",
    "RemoteActorError": "fray.actors.client",
    "WorkerPool": "fray.actors.workers",
    "submit": "fray.cluster.submits",
    "get_run": "fray.cluster.futures",
    "map": "fray.cluster.futures",
    "RunFuture": "fray.cluster.futures",
    "RemoteTraceback": "fray.errors",
    "FrayError": "fray.errors",  # the root of every error fray raises on purpose: `except fray.FrayError`
    "Call": "fray.cluster.api",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from fray.wrapper import report
    from fray.actors.client import ActorConnectionError, ActorFuture, RemoteActorError
    from fray.actors.pool import ActorPool
    from fray.actors.resolver import ClusterResolver, FixedResolver
    from fray.actors.server import ActorContext, ActorServer
    from fray.cluster import current_cluster
    from fray.cluster.api import (Call, ClusterError, EnvironmentConfig, Entrypoint, JobFailed, JobGroupConfig,
                                  JobInfo, JobRequest, JobStatus, Reservation, ReservationConfig, ResourceConfig)
    from fray.cluster.fray_cluster import FrayCluster
    from fray.cluster.futures import RunFuture, get_run, map
    from fray.cluster.submits import submit
    from fray.errors import FrayError, RemoteTraceback
    from fray.cluster.remote import RemoteCluster
    from fray.cluster.local import LocalCluster
    from fray.actors.workers import WorkerPool


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fray' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module.endswith(f".{name}") else getattr(imported, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def _arm_stack_dump() -> None:
    """Inside a fray job, `import fray` arms the stack dump the wrapper asks for when the job hangs."""
    import os

    if os.environ.get("FRAY_ATTEMPT_DIR"):
        from fray.wrapper import face as wrapper

        wrapper.arm_stack_dump()


_arm_stack_dump()
