"""Runs as the scheduler sees them: a run's spec as a placement `Job`, its start as a `Task` (pure).

A run whose spec says `replicas: N` is one job of N tasks. Coscheduled
(`group_by`), its N tasks go to N workers sharing the attribute; otherwise the
run starts as a whole on one worker (the local machine runs its N tasks side
by side), so it is placed as one task asking for N times the resources. The
constraints were checked when the run was submitted (`parse_all`), so a
stored spec parses.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from fray.core.model import Meta
from fray.core.placement.attributes import Resources, Worker
from fray.core.placement.constraints import Constraint, Op, parse
from fray.core.placement.feasible import why_never
from fray.core.placement.placement import Job, SchedulingResult, Task, Unschedulable, find_assignments
from fray.core.placement.posting import WorkerIndex
from fray.core.placement.priority import Credits, parse_band, usage_hours
from fray.core.values import format_duration


def parse_all(texts: Sequence[str]) -> tuple[Constraint, ...]:
    return tuple(parse(text) for text in texts)


def job_for(meta: Meta) -> Job:
    spec = meta.spec
    tasks = spec.replicas if spec.group_by else 1
    scale = 1 if spec.group_by else spec.replicas
    need = Resources(spec.cpus * scale, spec.mem_mb * scale if spec.mem_mb else None, spec.gpus * scale)
    return Job(meta.run_id, need, parse_all(spec.constraints), tuple(spec.tolerations), spec.group_by, tasks,
               parse_band(spec.priority), meta.submitted_by.get("user", ""), meta.created_at,
               spec.scheduling_timeout_sec)


def startable_since(meta: Meta) -> float:
    """Since when the run has been waiting to be placed: its submission, or the end of its last
    attempt and of the backoff after it (a retry's wait starts again)."""
    last = meta.attempts[-1].ended_at if meta.attempts else None
    return max(meta.created_at, last or 0.0, meta.next_attempt_at or 0.0)


def tasks_for(meta: Meta, pending_since: float) -> list[Task]:
    """The run's next start as the tasks of its job (`pending_since`: when it became startable)."""
    count = meta.spec.replicas if meta.spec.group_by else 1
    return [Task(f"{meta.run_id}/{i}", meta.run_id, i, "pending", pending_since) for i in range(count)]


def place_on_machine(startable: Sequence[Meta], machine: Worker, now: float,
                     credits: Credits = Credits()) -> SchedulingResult:
    """Which of the runs that may start now go on this one machine, in priority order.

    The local backend's use of the scheduler: one worker (this machine, its
    attributes and what its Ledger has free); a run in `waiting` is held back
    this cycle, with the reason, and one in `timed_out` has waited past its
    --scheduling-timeout. The Ledger still admits each placed run (it picks
    the GPU ids)."""
    jobs = {meta.run_id: job_for(meta) for meta in startable}
    tasks = [task for meta in startable for task in tasks_for(meta, startable_since(meta))]
    return find_assignments(tasks, [machine], jobs.__getitem__, now=now, credits=credits)


def never_placeable(startable: Sequence[Meta], workers: Sequence[Worker], now: float) -> dict[str, Unschedulable]:
    """Run id -> why no worker could ever take it, for a backend that queues by itself but lists its
    nodes (Slurm: `workers` with their totals). Its constraints, its named partitions and one task's
    resources on `replicas` distinct nodes are checked; the reason starts "not placed within" once
    the run has waited past its --scheduling-timeout (`timed_out`)."""
    index = WorkerIndex(workers)
    found: dict[str, Unschedulable] = {}
    for meta in startable:
        spec = meta.spec
        named = (Constraint("partition", Op.IN, tuple(spec.partitions)),) if spec.partitions else ()
        why = why_never(index, parse_all(spec.constraints) + named, tuple(spec.tolerations),
                        Resources(spec.cpus, spec.mem_mb, spec.gpus), spec.replicas)
        if why:
            limit = spec.scheduling_timeout_sec
            late = limit is not None and now - startable_since(meta) >= limit
            found[meta.run_id] = Unschedulable(meta.run_id, f"not placed within {format_duration(limit)}: {why}" if late else why,
                                               late)
    return found


DEFAULT_CREDIT_WINDOW_SEC = 7 * 24 * 3600.0


def credits_from(config: Mapping[str, Any], metas: Iterable[Meta], now: float) -> Credits:
    """Each user's credits from the `priority` section of config.json and what their runs' attempts
    used inside the window (running attempts up to `now`)."""
    section = config.get("priority") or {}
    budget = section.get("credit_hours")
    if budget is None:
        return Credits()
    since = now - float(section.get("window_sec", DEFAULT_CREDIT_WINDOW_SEC))
    usage: dict[str, float] = {}
    for meta in metas:
        spec = meta.spec
        for attempt in meta.attempts:
            if attempt.started_at is None:
                continue
            seconds = min(attempt.ended_at or now, now) - max(attempt.started_at, since)
            if seconds > 0:
                user = meta.submitted_by.get("user", "")
                usage[user] = usage.get(user, 0.0) + usage_hours(spec.cpus * spec.replicas, spec.gpus * spec.replicas,
                                                                 seconds)
    return Credits(float(budget), usage)
