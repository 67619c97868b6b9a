"""The protocol every backend answers, and the records that cross it.

Submit one attempt (or, where the backend can, a sweep's attempts in one call);
snapshot all attempts in one call; cancel many in one call; list nodes. A backend never decides anything: `policy` does, from snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fray.core.model import RunSpec
from fray.core.observation import BackendView
from fray.core.capacity import Capacity


@dataclass(frozen=True)
class AttemptKey:
    run_id: str
    attempt: int


@dataclass(frozen=True)
class SubmitRequest:
    key: AttemptKey
    name: str
    spec: RunSpec
    home: Path
    script: Path
    attempt_dir: Path
    checkpoint_dir: Path
    gpu_ids: tuple[int, ...] = ()
    exclude_nodes: tuple[str, ...] = ()
    partition: str | None = None  # where the scheduler should run it (partition fallback chose it)
    namespace: str | None = None  # FRAY_NAMESPACE in the job; None: the run id (a top-level run's own)


@dataclass(frozen=True)
class GroupSubmit:
    """Attempts of one sweep's members to submit together: on Slurm, one job array (`--array=0-N%K`)."""

    group_id: str
    requests: tuple[SubmitRequest, ...]
    max_parallel: int | None = None  # at most this many of them running at once (None: no limit)


# What became of each attempt of a GroupSubmit: its reference, or the error its part of the batch met
# (an AmbiguousSubmission: it may exist all the same).
GroupOutcome = dict[AttemptKey, "dict[str, Any] | Exception"]


@dataclass(frozen=True)
class Tracked:
    """An attempt the daemon wants news of, with what it recorded at submission."""

    key: AttemptKey
    ref: dict[str, Any] | None
    spec: RunSpec | None = None  # the run's settings now (`fray control config-set` included)


@dataclass(frozen=True)
class CancelTarget:
    key: AttemptKey
    ref: dict[str, Any] | None
    force: bool = False
    workload_pid: int | None = None


@dataclass(frozen=True)
class TpuHost:
    """What makes a node a host of a TPU slice: which slice, which worker, and whose run it serves."""

    slice: str
    zone: str
    worker: int  # the tpu-worker-id, the order of the slice's networkEndpoints
    ip: str
    accelerator_type: str
    health: str | None
    run_id: str | None
    attempt: int | None


@dataclass(frozen=True)
class Node:
    name: str
    state: str
    cpus: int | None
    mem_mb: int | None
    gpus: int
    gpu_type: str | None = None
    partitions: tuple[str, ...] = field(default_factory=tuple)
    tpu: TpuHost | None = None  # a host of a live TPU slice (the tpu backend): not a place new attempts go


class Backend(Protocol):
    name: str
    poll_interval_sec: float

    def capacity(self) -> Capacity | None:
        """What this backend's own admission may hand out; None when it queues by itself."""

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        """Start one attempt; return the reference that finds it again. Raises BackendError."""

    def snapshot(self, tracked: list[Tracked]) -> dict[AttemptKey, BackendView]:
        """One batched look at every tracked attempt (missing key: unknown)."""

    def cancel(self, targets: list[CancelTarget]) -> None:
        """Ask many attempts to stop (force: kill now), in one batch."""

    def nodes(self) -> list[Node]:
        """The nodes this backend can place attempts on."""


class GroupBackend(Backend, Protocol):
    """A backend that submits many attempts of a sweep in one call (Slurm: a job array).

    The daemon hands it a sweep's attempts to start in one cycle; a backend
    without `submit_group` gets them one `submit` at a time.
    """

    def submit_group(self, batch: GroupSubmit) -> GroupOutcome:
        """Start every attempt of `batch`; never raises for one part's failure (see GroupOutcome)."""
