"""The cluster API used inside jobs (`fray` exports the public names).

    api          the records: JobRequest, ResourceConfig, Entrypoint, EnvironmentConfig, ...
    shared       what every cluster shares: waiting, monitoring, the actor secret
    local        LocalCluster: jobs as threads in this process (arguments still cloudpickled)
    fray_cluster FrayCluster: jobs as runs in FRAY_HOME that the daemon starts and watches
    launching    writing a launched job's run folder (meta, shim, payload, job.json)
    environment  virtual environments cached by the hash of their requirements
    entry        what a launched job runs (`python -m fray.cluster.entry`)
    resuming     checkpointable callables: the call saved on preemption, made by the next attempt
    futures      fray.submit / fray.map / fray.get_run: a function as a run, and its future
    chunks       fray.map(chunk=N): N calls in one run, each recorded as it finishes
    call_records a call's outcome, written in the job: its value or exception, then its record
    payloads     cloudpickle files, unpickled only when private to this user inside FRAY_HOME
    job_view     the cluster a LocalCluster job thread sees as current

    remote       RemoteCluster: a FrayCluster on another machine, over SSH

`current_cluster()` reads FRAY_CLUSTER_SPEC: `local` gives the process's
LocalCluster (inside a LocalCluster job thread: that job's view of it); `fray`
(what the wrapper sets inside a job) gives the FrayCluster of FRAY_HOME, whose
jobs become children of the current run. Unset, a remote host named as the CLI
names one (`current_cluster(remote="HOST")`, else FRAY_REMOTE, else `remote` in
~/.config/fray/config.toml) gives the RemoteCluster of that host's FRAY_HOME
(FRAY_REMOTE_HOME there, when set); with none, the LocalCluster.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from fray.cluster.job_view import job_view
from fray.wrapper import contract

_lock = threading.Lock()
_clusters: dict[str, Any] = {}


def current_cluster(remote: str | None = None) -> Any:
    """The cluster this code runs in, or the one behind `remote` (see the module docstring);
    one instance per process and spec."""
    view = getattr(job_view, "cluster", None)
    if view is not None and remote is None:
        return view
    spec = os.environ.get(contract.ENV_CLUSTER_SPEC, "").strip()
    if remote is None and not spec:
        from fray.remote import forward

        remote = forward.default_host()
    spec = f"remote:{remote}" if remote else spec or "local"
    with _lock:
        existing = _clusters.get(spec)
        if existing is not None:
            return existing
        if remote:
            from fray.cluster.remote import RemoteCluster
            from fray.remote.forward import ENV_REMOTE_HOME

            cluster: Any = RemoteCluster(remote, home=os.environ.get(ENV_REMOTE_HOME) or None)
        elif spec == "local":
            from fray.cluster.local import LocalCluster

            cluster = LocalCluster()
        elif spec == contract.ENV_CLUSTER_SPEC_FRAY:
            from fray.cluster.fray_cluster import FrayCluster

            cluster = FrayCluster()
        else:
            from fray.errors import UsageError

            raise UsageError(f"FRAY_CLUSTER_SPEC={spec!r} is not known: use 'local' (jobs as threads here) or "
                             "'fray' (jobs as runs in FRAY_HOME)")
        _clusters[spec] = cluster
        return cluster
