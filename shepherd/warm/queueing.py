"""Which runs may wait in a backend's own queue of short functions (the local backend's warm worker).

The local backend keeps function runs (`fray.submit(fn)`, `fray.map`) in a
queue of its own beyond the machine's CPUs, the way Slurm holds PENDING jobs,
and starts the next the moment a CPU frees, without a daemon cycle in between
(fray.warm.daemon_side). The ledger admits such a run beyond the CPUs by
the backend's `queue_cpus()` (fray.core.scheduler); this module tells it which
runs those are: a function run (its frozen script is the launch shim) of one
task and no GPU. Every place that asks the ledger about a run asks with
`request_of` (or `mark`s the policy's request), so they all agree.
"""

from __future__ import annotations

from dataclasses import replace

from fray.core.model import Meta
from fray.core.capacity import Request, run_request
from fray.state import layout


def is_function(meta: Meta) -> bool:
    """A run of the Python API's functions: what the local backend's warm worker starts."""
    return meta.script.get("frozen") == layout.LAUNCHED_SHIM and not meta.script.get("in_place")


def request_of(meta: Meta) -> Request:
    """What `meta`'s run asks the ledger for, saying whether it may wait in the backend's queue."""
    spec = meta.spec
    return run_request(spec.cpus, spec.mem_mb, spec.gpus, spec.replicas, queueable=is_function(meta))


def mark(meta: Meta, request: Request) -> Request:
    """The policy's `request` for `meta` (built from its spec alone), saying whether it may wait in that queue."""
    queueable = is_function(meta) and request.gpus == 0 and meta.spec.replicas == 1
    return replace(request, queueable=queueable) if queueable != request.queueable else request
