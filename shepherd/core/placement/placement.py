"""Which pending task goes on which worker: `find_assignments` (pure, never mutates its input).

One scheduling cycle: the workers' free resources are copied into a capacity
snapshot; pending tasks are taken in priority order (`priority`: band, then
first in first out); each is placed on the first worker, in the order given,
that satisfies its job's constraints (`constraints`, with posting lists from
`posting`) and still has room in the snapshot, and that room is deducted
tentatively, so later tasks of the same cycle see it taken. A task that does
not fit is passed over, not waited for: smaller work behind it may still run.

A job with `group_by` (e.g. `tpu-name`) is coscheduled: all its tasks land on
workers that share the value of that attribute, task i on the worker with the
i-th `tpu-worker-id`, or none of them is placed; it is placed only when all
`replicas` tasks are pending together.

A task still unplaced after its job's `scheduling_timeout_sec` is returned in
`timed_out` with the reason, for the caller to mark unschedulable; the others
that could not be placed are in `waiting`, with theirs.

How this relates to the other admission code: `scheduler.Ledger` is one
machine's book of CPUs, memory and GPU ids (which GPU a run gets), and
`reservations.Admitter` holds resources back for reservations. Both answer
"does this run fit here now?"; this module answers "where, among many
workers, and in which order", and a backend that places work on one machine
feeds it that machine as a single worker whose free resources come from its
Ledger.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from fray.core.placement.attributes import Resources, Worker
from fray.core.placement.constraints import Constraint
from fray.core.placement.posting import IndexKind, WorkerIndex
from fray.core.placement.priority import DEFAULT_BAND, Band, Credits, effective_band
from fray.core.values import format_duration

PENDING = "pending"
_NO_LIMIT = 1 << 62  # memory of a worker that does not account it


@dataclass(frozen=True)
class Task:
    task_id: str
    job_id: str
    index: int = 0
    state: str = PENDING
    pending_since: float = 0.0


@dataclass(frozen=True)
class Job:
    """What every task of a job asks for."""

    job_id: str
    resources: Resources = Resources()
    constraints: tuple[Constraint, ...] = ()
    tolerations: tuple[str, ...] = ()
    group_by: str | None = None
    replicas: int = 1
    band: Band = DEFAULT_BAND
    user: str = ""
    submitted_at: float = 0.0
    scheduling_timeout_sec: float | None = None


@dataclass(frozen=True)
class Assignment:
    task_id: str
    worker_id: str


@dataclass(frozen=True)
class Unschedulable:
    task_id: str
    reason: str
    timed_out: bool = True  # False: cannot be placed now, still within its --scheduling-timeout


@dataclass(frozen=True)
class SchedulingResult:
    assignments: tuple[Assignment, ...]
    timed_out: tuple[Unschedulable, ...]
    waiting: Mapping[str, str] = field(default_factory=dict)  # task id -> why it stays pending
    bands: Mapping[str, Band] = field(default_factory=dict)  # job id -> the band it was placed in


def find_assignments(pending_tasks: Iterable[Task], workers: Sequence[Worker], get_job: Callable[[str], Job], *,
                     now: float = 0.0, credits: Credits = Credits(), index: IndexKind = "posting") -> SchedulingResult:
    with _cyclic_gc_paused():
        return _find_assignments(pending_tasks, workers, get_job, now, credits, index)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """A cycle makes about a million short-lived objects, none in a reference cycle; each time the
    cyclic collector runs meanwhile, it walks every live object (all the tasks and workers), which
    took about a third of a 10,000 x 50,000 cycle (tests/bench/bench_scheduler.py). Reference counting
    frees them all the same, so the collector waits until the cycle is over."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _find_assignments(pending_tasks: Iterable[Task], workers: Sequence[Worker], get_job: Callable[[str], Job],
                      now: float, credits: Credits, index: IndexKind) -> SchedulingResult:
    cycle = _Cycle(workers, index)
    by_job: dict[str, list[Task]] = {}
    for task in pending_tasks:
        if task.state != PENDING:
            continue  # running, or ended: not ours to place
        tasks = by_job.get(task.job_id)
        if tasks is None:
            by_job[task.job_id] = [task]
        else:
            tasks.append(task)
    jobs = {job_id: get_job(job_id) for job_id in by_job}
    bands = {job_id: effective_band(job.band, credits.remaining(job.user)) for job_id, job in jobs.items()}
    order = sorted(jobs.values(), key=lambda j: (bands[j.job_id], j.submitted_at, j.job_id))
    by_index = attrgetter("index", "task_id")
    tasks_of = {job_id: sorted(tasks, key=by_index) if len(tasks) > 1 else tasks for job_id, tasks in by_job.items()}
    assignments: list[Assignment] = []
    waiting: dict[str, str] = {}
    for job in order:
        tasks = tasks_of[job.job_id]
        if job.group_by:
            placed, reason = cycle.place_group(job, tasks)
            left = tasks if not placed else []
        else:
            placed, reason = cycle.place_each(job, tasks)
            left = tasks[len(placed):]
        assignments.extend(placed)
        waiting.update((t.task_id, reason) for t in left)
    timed_out = []
    for job in order:
        limit = job.scheduling_timeout_sec
        if limit is None:
            continue
        for task in tasks_of[job.job_id]:
            if task.task_id in waiting and now - task.pending_since >= limit:
                why = waiting.pop(task.task_id)
                timed_out.append(Unschedulable(task.task_id, f"not placed within {format_duration(limit)}: {why}"))
    return SchedulingResult(tuple(assignments), tuple(timed_out), waiting, bands)


class _Cycle:
    """The capacity snapshot of one cycle and what it has learned: candidate workers per constraint
    set, and how far each request shape has looked (room only shrinks within a cycle, so a worker or
    group that lacked room for a shape lacks it for the rest of the cycle)."""

    def __init__(self, workers: Sequence[Worker], index: IndexKind) -> None:
        self.workers = workers
        self.ids = [w.worker_id for w in workers]
        self.index = WorkerIndex(workers, index)
        self.cpus = [w.free.cpus for w in workers]
        self.mem = [_NO_LIMIT if w.free.mem_mb is None else w.free.mem_mb for w in workers]
        self.gpus = [w.free.gpus for w in workers]
        # Constraint sets get a small int id once, so the per-task lookups hash ints, not Constraint records.
        self._candidates: dict[tuple, tuple[tuple[int, ...], str, int]] = {}
        self._groups: dict[tuple[int, str], tuple[list[tuple[object, tuple[int, ...]]], int]] = {}
        self._cursor: dict[tuple, int] = {}
        self._shapes: dict[int, list[tuple[int, int, int]]] = {}  # constraint set id -> request shapes seen
        self._reasons: dict[tuple, str] = {}  # request shape -> why it waits

    def candidates(self, job: Job) -> tuple[tuple[int, ...], str, int]:
        key = (job.constraints, job.tolerations)
        found = self._candidates.get(key)
        if found is None:
            result = self.index.candidates(job.constraints + self.index.implicit(job.tolerations))
            found = self._candidates[key] = (result.workers, result.reason, len(self._candidates))
        return found

    def fits(self, position: int, need: Resources) -> bool:
        return (self.cpus[position] >= need.cpus and self.gpus[position] >= need.gpus
                and self.mem[position] >= (need.mem_mb or 0))

    def take(self, position: int, need: Resources) -> None:
        self.cpus[position] -= need.cpus
        self.gpus[position] -= need.gpus
        self.mem[position] -= need.mem_mb or 0

    def _start(self, shape: tuple[int, int, int, int]) -> int:
        """Where a shape's search starts: its own cursor, or, the first time, the furthest cursor of a
        shape it dominates with the same constraints (where a smaller request found no room, it finds none)."""
        at = self._cursor.get(shape)
        if at is None:
            kid, cpus, gpus, mem = shape
            seen = self._shapes.setdefault(kid, [])
            at = max((self._cursor.get((kid, *other), 0) for other in seen
                      if other[0] <= cpus and other[1] <= gpus and other[2] <= mem), default=0)
            seen.append((cpus, gpus, mem))
        return at

    def place_each(self, job: Job, tasks: Sequence[Task]) -> tuple[list[Assignment], str]:
        """Tasks placed independently, in order; stops at the first that finds no room (the rest would not)."""
        candidates, reason, key = self.candidates(job)
        if not candidates:
            return [], reason
        need = job.resources
        want_cpus, want_gpus, want_mem = need.cpus, need.gpus, need.mem_mb or 0
        cpus, gpus, mem, ids = self.cpus, self.gpus, self.mem, self.ids
        shape = (key, want_cpus, want_gpus, want_mem)
        at, end = self._start(shape), len(candidates)
        placed: list[Assignment] = []
        for task in tasks:
            # The hot loop of the cycle, written out: room only shrinks, so `at` never moves back.
            while at < end:
                p = candidates[at]
                if cpus[p] >= want_cpus and gpus[p] >= want_gpus and mem[p] >= want_mem:
                    break
                at += 1
            if at == end:
                break
            p = candidates[at]
            cpus[p] -= want_cpus
            gpus[p] -= want_gpus
            mem[p] -= want_mem
            placed.append(Assignment(task.task_id, ids[p]))
        self._cursor[shape] = at
        if len(placed) == len(tasks):
            return placed, ""
        reason = self._reasons.get(shape)
        if reason is None:  # the same words for every job of this shape: built once a cycle
            reason = self._reasons[shape] = _short(need, job.constraints, end)
        return placed, reason

    def place_group(self, job: Job, tasks: Sequence[Task]) -> tuple[list[Assignment], str]:
        wanted = job.replicas
        if len(tasks) != wanted or sorted(t.index for t in tasks) != list(range(wanted)):
            return [], f"waiting for all {wanted} tasks of its group to be pending ({len(tasks)} are)"
        candidates, reason, key = self.candidates(job)
        if not candidates:
            return [], reason
        assert job.group_by is not None
        group_key = (key, job.group_by)
        found = self._groups.get(group_key)
        if found is None:
            split = self.index.groups(candidates, job.group_by)
            found = self._groups[group_key] = (split, max((len(members) for _, members in split), default=0))
        groups, largest = found
        where = f" with {_joined(job.constraints)}" if job.constraints else ""
        if largest < wanted:
            return [], (f"no {job.group_by} group has {wanted} workers{where} "
                        f"(the largest has {largest})")
        need = job.resources
        shape = (group_key, need, wanted)
        at = self._cursor.get(shape, 0)  # groups before it lacked room for this shape, and still do
        while at < len(groups):
            chosen = [p for p in groups[at][1] if self.fits(p, need)][:wanted]
            if len(chosen) == wanted:
                self._cursor[shape] = at
                for position in chosen:
                    self.take(position, need)
                return [Assignment(task.task_id, self.workers[p].worker_id) for task, p in zip(tasks, chosen)], ""
            at += 1
        self._cursor[shape] = at
        return [], (f"waiting for resources: no {job.group_by} group{where} has {wanted} workers with "
                    f"{amount(need)} free")


def _joined(constraints: Sequence[Constraint]) -> str:
    return " and ".join(str(c) for c in constraints)


def amount(need: Resources) -> str:
    """`2 CPUs, 4096 MB, 1 GPU`: a request as the reasons spell it."""
    parts = [f"{need.cpus} CPU" + ("s" if need.cpus != 1 else "")]
    if need.mem_mb:
        parts.append(f"{need.mem_mb} MB")
    if need.gpus:
        parts.append(f"{need.gpus} GPU" + ("s" if need.gpus != 1 else ""))
    return ", ".join(parts)


def _short(need: Resources, constraints: Sequence[Constraint], matching: int) -> str:
    where = f" with {_joined(constraints)}" if constraints else ""
    return f"waiting for resources: no worker{where} has {amount(need)} free ({matching} match)"
