"""Resource use counted from attempts' start and end: wall time, CPU-, GPU- and TPU chip-hours, goodput (pure).

An attempt counts from `started_at` (its wrapper started: time queued is not
use) to `ended_at`, or to `now` while it still runs, clipped to the window
[since, now]. It holds the run's resources the whole time: `cpus` and `gpus`
per task times `replicas`, and a TPU slice's chips (the caller works those out
from the accelerator type).

Goodput is useful time over the time accounted. For a run that reported
steps it comes from them (fray.core.goodput): each attempt carries its
stretches (useful, redone, detection, backoff and queue before it, start,
idle), clipped to the window, so the time accounted includes queueing and
backoff. For a run without steps it is the older figure, and the row says so
(`basis`): an attempt is *useful* when it succeeded, ran an indefinite run to
the end of its keep-alive, was stopped by a person, or is still running; any
other end is time lost to `failed_attempts`.

`tally` groups the figures by run, group (a job group, else the run's family,
else the run), partition or node, biggest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fray.core.goodput import LOST_CAUSES, USEFUL, USEFUL_CAUSES, Stretch
from fray.core.model import Meta

GROUPINGS = ("run", "group", "partition", "node")
NONE_KEY = "-"  # an attempt with no partition (not Slurm) or no node (never placed)


@dataclass(frozen=True)
class Resources:
    cpus: int
    gpus: int
    tpu_chips: int = 0


@dataclass(frozen=True)
class Span:
    """One attempt as usage sees it: whose, where, when, with what, and whether it was useful."""

    run_id: str
    name: str
    group: str
    group_label: str  # a sweep's name; else the group's id
    partition: str | None
    node: str | None
    started_at: float
    ended_at: float | None  # None: still running
    useful: bool
    resources: Resources
    stretches: tuple[Stretch, ...] | None = None  # from the run's steps; None: the run reported none


def group_of(meta: Meta) -> str:
    """A job group's id; else the family's namespace (a top-level run's own id, which its children share)."""
    if meta.group and meta.group.get("id"):
        return str(meta.group["id"])
    return meta.job_namespace


def group_label_of(meta: Meta) -> str:
    """What a person calls the group: a sweep's name (`--sweep-name`, the run name by default), else its id."""
    if meta.group and meta.group.get("name"):
        return str(meta.group["name"])
    return group_of(meta)


def spans_of(meta: Meta, resources: Resources, stretches: list[Stretch] | None = None) -> list[Span]:
    """The run's attempts that started (those that never did used nothing), with their share of `stretches`."""
    spans = []
    for attempt in meta.attempts:
        if attempt.started_at is None:
            continue
        running = attempt.in_flight
        mine = None if not stretches else tuple(s for s in stretches if s.attempt == attempt.number)
        spans.append(Span(meta.run_id, meta.name, group_of(meta), group_label_of(meta), attempt.partition, attempt.node,
                          attempt.started_at, None if running else attempt.ended_at,
                          running or attempt.cause in USEFUL_CAUSES, resources, mine))
    return spans


ATTEMPTS_LOST = "failed_attempts"  # the cause of lost time in a run without steps


@dataclass
class Figures:
    key: str
    label: str
    runs: set[str] = field(default_factory=set)
    attempts: int = 0
    running: int = 0
    wall_sec: float = 0.0
    useful_sec: float = 0.0
    lost_by_cause: dict[str, float] = field(default_factory=lambda: dict.fromkeys((*LOST_CAUSES, ATTEMPTS_LOST), 0.0))
    bases: set[str] = field(default_factory=set)
    cpu_hours: float = 0.0
    gpu_hours: float = 0.0
    tpu_chip_hours: float = 0.0

    def add(self, span: Span, seconds: float, running: bool, since: float | None, now: float) -> None:
        self.runs.add(span.run_id)
        self.attempts += 1
        self.running += running
        self.wall_sec += seconds
        if span.stretches is None:
            self.bases.add("attempts")
            if span.useful:
                self.useful_sec += seconds
            else:
                self.lost_by_cause[ATTEMPTS_LOST] += seconds
        else:
            self.bases.add("steps")
            for stretch in span.stretches:
                inside = max(0.0, min(stretch.end, now) - (stretch.start if since is None else max(stretch.start, since)))
                if stretch.kind == USEFUL:
                    self.useful_sec += inside
                else:
                    self.lost_by_cause[stretch.kind] += inside
        hours = seconds / 3600.0
        self.cpu_hours += span.resources.cpus * hours
        self.gpu_hours += span.resources.gpus * hours
        self.tpu_chip_hours += span.resources.tpu_chips * hours

    @property
    def lost_sec(self) -> float:
        return sum(self.lost_by_cause.values())

    @property
    def basis(self) -> str | None:
        """"steps" or "attempts" (what goodput was counted from), "mixed" for both; None when nothing ran."""
        return None if not self.bases else (next(iter(self.bases)) if len(self.bases) == 1 else "mixed")

    @property
    def goodput(self) -> float | None:
        """Useful time over the time accounted; None when nothing ran."""
        accounted = self.useful_sec + self.lost_sec
        return self.useful_sec / accounted if accounted > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "runs": len(self.runs), "attempts": self.attempts,
                "running": self.running, "wall_sec": round(self.wall_sec, 3),
                "useful_sec": round(self.useful_sec, 3), "lost_sec": round(self.lost_sec, 3),
                "lost_by_cause": {k: round(v, 3) for k, v in self.lost_by_cause.items() if v > 0},
                "basis": self.basis,
                "goodput": None if self.goodput is None else round(self.goodput, 4),
                "cpu_hours": round(self.cpu_hours, 4), "gpu_hours": round(self.gpu_hours, 4),
                "tpu_chip_hours": round(self.tpu_chip_hours, 4)}


def tally(spans: list[Span], by: str, since: float | None, now: float) -> tuple[list[Figures], Figures]:
    """Figures per `by` key (most wall time first) and for everything, inside [since, now]."""
    if by not in GROUPINGS:
        raise ValueError(f"cannot group usage by {by!r}: choose one of {', '.join(GROUPINGS)}")
    rows: dict[str, Figures] = {}
    total = Figures("total", "total")
    for span in spans:
        start = span.started_at if since is None else max(span.started_at, since)
        end = now if span.ended_at is None else min(span.ended_at, now)
        running = span.ended_at is None
        if end < start or (end == start and not running):
            continue  # outside the window (a running attempt counts from its first instant)
        key, label = _key(span, by)
        rows.setdefault(key, Figures(key, label)).add(span, end - start, running, since, now)
        total.add(span, end - start, running, since, now)
    ordered = sorted(rows.values(), key=lambda f: (-f.wall_sec, f.key))
    return ordered, total


def _key(span: Span, by: str) -> tuple[str, str]:
    if by == "run":
        return span.run_id, span.name
    if by == "group":
        return span.group, span.group_label
    value = (span.partition if by == "partition" else span.node) or NONE_KEY
    return value, value
