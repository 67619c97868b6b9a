"""Admission of runs onto a machine's CPUs, memory and GPUs (pure).

The local backend runs attempts on this machine; the daemon asks a `Ledger`
whether each queued run fits. A run that does not fit stays queued with the
reason shown; one that can never fit says so. Backends with a scheduler of
their own (Slurm, TPU) use `Ledger.unlimited()`.

A backend with a queue of its own for short functions (the local backend's
warm worker, fray.warm.daemon_side) is given `queue_cpus`: a request that
may wait there (`queueable`) is admitted beyond the machine's CPUs by that
much, as Slurm takes jobs beyond its nodes and holds them PENDING. The worker
runs only as many as the CPUs allow. Honest counting needs both sides: while
a run that does not go through that queue holds CPUs, nothing is queued
(so the worker, which runs up to every CPU, never shares one), and such a run
is admitted only when the queued and running ones leave it room.

Which queued run goes first (priority band, then oldest) and whether the
machine's attributes meet a run's constraints is `placement`'s decision: it
sees this machine as one worker whose free resources are this ledger's. The
ledger then admits each run placed, and picks its GPU ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from fray.core.capacity import Capacity, Request

if TYPE_CHECKING:  # a name in annotations only: `fray submit` checks a run's size without loading placement
    from fray.core.placement.attributes import Worker


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str = ""
    gpu_ids: tuple[int, ...] = ()
    unschedulable: bool = False  # refused for good (past --scheduling-timeout, an --after that cannot hold): it ends
    final: str | None = None  # with unschedulable: the run's end status and this reason as is (else failed)

    @property
    def end_reason(self) -> str:
        """Why a refusal for good ends the run: an --after's own words, else unschedulable."""
        return self.reason if self.final else f"unschedulable: {self.reason}"


@dataclass
class Ledger:
    capacity: Capacity | None
    used_cpus: int = 0
    used_mem_mb: int = 0
    used_gpu_ids: set[int] = field(default_factory=set)
    closed: str | None = None  # why nothing may start now (every node is banned), whatever is free
    attributes: dict[str, str | int | float] = field(default_factory=dict)  # the machine's, for constraints
    # A backend that queues by itself but lists its nodes (Slurm): each with its totals, so that
    # placement can tell a run no node could ever take (fray.core.placement.feasible).
    workers: tuple[Worker, ...] = ()
    queue_cpus: int = 0  # how far beyond its CPUs queueable requests may be admitted (module doc)
    unqueued_cpus: int = 0  # CPUs held by attempts that are not in that queue

    @classmethod
    def unlimited(cls, workers: tuple[Worker, ...] = ()) -> "Ledger":
        return cls(capacity=None, workers=workers)

    def hold(self, request: Request, gpu_ids: tuple[int, ...] = ()) -> None:
        """Count what an attempt already in flight uses."""
        self.used_cpus += request.cpus
        self.unqueued_cpus += 0 if request.queueable else request.cpus
        self.used_mem_mb += request.mem_mb or 0
        self.used_gpu_ids.update(gpu_ids)

    def explain(self, request: Request) -> str:
        """Why `request` would wait now (empty: it would fit), reserving nothing."""
        if self.closed:
            return self.closed
        if self.capacity is None:
            return ""
        return self.copy().admit(request).reason

    def copy(self) -> "Ledger":
        """A trial ledger: what it admits is not held here."""
        return replace(self, used_gpu_ids=set(self.used_gpu_ids))

    def admit(self, request: Request) -> Admission:
        """Reserve `request` if it fits now; otherwise say why it waits."""
        if self.closed:
            return Admission(False, self.closed)
        cap = self.capacity
        if cap is None:
            return Admission(True)
        never = _never_fits(request, cap)
        if never:
            return Admission(False, never)
        short: list[str] = []
        free_cpus = cap.cpus - self.used_cpus
        queue = self.queue_cpus if request.queueable and not self.unqueued_cpus else 0
        if request.cpus > free_cpus + queue:
            # Not how many: that number moves every cycle, and a waiting run's reason must only change with
            # what it waits for (fray.daemon.quiet skips deciding again a run whose reason would stay the same).
            queued = " and the machine's queue full" if queue else ""
            short.append(f"{request.cpus} CPUs wanted, {max(free_cpus, 0)} of {cap.cpus} free{queued}")
        if cap.mem_mb is not None and request.mem_mb:
            free_mem = cap.mem_mb - self.used_mem_mb
            if request.mem_mb > free_mem:
                short.append(f"{request.mem_mb} MB wanted, {free_mem} of {cap.mem_mb} MB free")
        free_gpus = [i for i in range(cap.gpus) if i not in self.used_gpu_ids]
        if request.gpus > len(free_gpus):
            short.append(f"{request.gpus} GPUs wanted, {len(free_gpus)} of {cap.gpus} free")
        if short:
            return Admission(False, "waiting for resources: " + "; ".join(short))
        gpu_ids = tuple(free_gpus[: request.gpus])
        self.hold(request, gpu_ids)
        return Admission(True, gpu_ids=gpu_ids)


def _never_fits(request: Request, cap: Capacity) -> str:
    too_big: list[str] = []
    if request.cpus > cap.cpus:
        too_big.append(f"{request.cpus} CPUs (this machine offers {cap.cpus})")
    if cap.mem_mb is not None and request.mem_mb and request.mem_mb > cap.mem_mb:
        too_big.append(f"{request.mem_mb} MB of memory (this machine offers {cap.mem_mb} MB)")
    if request.gpus > cap.gpus:
        too_big.append(f"{request.gpus} GPUs (this machine offers {cap.gpus})")
    if not too_big:
        return ""
    return "can never start here: it asks for " + ", ".join(too_big) + "; lower the request or use another backend"
