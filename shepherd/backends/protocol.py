"""The protocol every backend answers, the optional capabilities some add, and the records that cross it.

Submit one attempt (or, where the backend can, a sweep's attempts in one call);
snapshot all attempts in one call; cancel many in one call; list nodes. A backend never decides anything: `policy` does, from snapshots.

`Backend` is what every backend has. What only some have is a small protocol of
its own below (`runtime_checkable`): the daemon asks `isinstance(backend, X)`
before it uses one, rather than probing names with `getattr`:

    Closing           close(): let go of what it holds (local: its warm worker)
    WarmsUp           warm_up(): start what a first attempt would wait for (local)
    QueuesFunctions   queue_cpus(), queue_held(): a queue of function attempts past its CPUs (local)
    DescribesWorker   worker_attributes(): the one machine it places work on, for constraints (local)
    ListsWorkers      placement_workers(): every node it may place on, to judge a run placeable (slurm)
    OffersPartitions  partition_candidates(spec): the partitions to try, best first (slurm)
    ListsPartitions   list_partitions(): its partitions as it last saw them, no extra call (slurm)
    WatchesTools      cli: its command runner, counting each tool's failures in a row (slurm, tpu; in cli_health)
    GroupBackend      submit_group(batch): a sweep's attempts in one call (slurm: job arrays)
    LaunchesArrays    launch_array(...), remove_finished_arrays(...): a sweep's first attempts as one array (slurm)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fray.core.model import RunSpec
from fray.core.observation import BackendView
from fray.core.capacity import Capacity

if TYPE_CHECKING:  # the placement and partition records, loaded only by the backends that offer them
    from fray.core.placement.attributes import Worker
    from fray.core.partition_policy import Candidates
    from fray.backends.slurm.partitions import Partition


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
    # Snapshot it every cycle, even with no attempt of it in flight (tpu: its snapshot deletes finished slices).
    snapshot_when_idle: bool
    # List its nodes this often (None: the daemon's own pace); tpu's hosts come from its last list, free to ask.
    nodes_every_sec: float | None

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


@runtime_checkable
class GroupBackend(Backend, Protocol):
    """A backend that submits many attempts of a sweep in one call (Slurm: a job array).

    The daemon hands it a sweep's attempts to start in one cycle; a backend
    without `submit_group` gets them one `submit` at a time.
    """

    def submit_group(self, batch: GroupSubmit) -> GroupOutcome:
        """Start every attempt of `batch`; never raises for one part's failure (see GroupOutcome)."""


@runtime_checkable
class LaunchesArrays(Protocol):
    """A backend that starts a sweep's first attempts as one array, before their folders are written (slurm)."""

    def launch_array(self, group_id: str, name: str, first: SubmitRequest, attempt_dirs: list[Path],
                     max_parallel: int | None) -> str:
        """The array's job id; raises BackendError (an AmbiguousSubmission: it may exist all the same)."""

    def remove_finished_arrays(self, in_use: set[str], now: float) -> list[str]:
        """Remove the folders of arrays every task of which has ended (none of `in_use`); their names."""


@runtime_checkable
class Closing(Protocol):
    def close(self) -> None:
        """This daemon stops serving: let go of what the backend holds (what it started lives on)."""


@runtime_checkable
class WarmsUp(Protocol):
    def warm_up(self) -> None:
        """Start, ahead of the first attempt, what one would otherwise wait for."""


@runtime_checkable
class QueuesFunctions(Protocol):
    def queue_cpus(self) -> int:
        """How far beyond its CPUs the ledger may admit function attempts (its queue takes them)."""

    def queue_held(self) -> bool:
        """Whether function attempts wait in its queue now, which starts them without the daemon."""


@runtime_checkable
class DescribesWorker(Protocol):
    def worker_attributes(self) -> dict[str, str | int | float]:
        """The one machine it places work on, as the scheduler's constraints see it."""


@runtime_checkable
class ListsWorkers(Protocol):
    def placement_workers(self) -> tuple[Worker, ...]:
        """Every node it may place on with its attributes (empty when it cannot tell)."""


@runtime_checkable
class OffersPartitions(Protocol):
    def partition_candidates(self, spec: RunSpec) -> Candidates | None:
        """The partitions to try for a run, best first (None: the scheduler's default)."""


@runtime_checkable
class ListsPartitions(Protocol):
    def list_partitions(self) -> list[Partition] | None:
        """Its partitions, from what it already knows (the Slurm backend's cached sinfo); None: it cannot tell."""
