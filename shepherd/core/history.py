"""A run's progress history as one series: its attempts' points merged, restarts and redone steps marked (pure).

The wrapper appends one line per kept step and one per checkpoint to each
attempt's history (fray.wrapper.history, schemas/history-line.json). `parse`
reads one attempt's bytes: a line cut by a kill, a line that is not JSON or
not a record, and a metric value that is not a number are skipped and
counted, never raised. NaN and infinities come back as float('nan') and
±inf, so a plot can mark them and leave them out of its scale.

`merge` puts the attempts in order. A *segment* is a stretch of steps that
never go back: a new one starts with each attempt and wherever the step
goes back inside one. A point is *redone* when a later segment started at or
before its step: that work was lost and done again after the restart. A
restart is where a segment starts after the first: the step it resumed at,
and how many steps earlier segments had reached beyond it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

DEFAULT_METRIC = "loss"
_NOT_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class Point(NamedTuple):
    attempt: int
    t: float
    step: int
    metrics: dict[str, float]
    redone: bool = False


class CheckpointMark(NamedTuple):
    attempt: int
    t: float
    step: int
    name: str


class Restart(NamedTuple):
    attempt: int  # the attempt the new segment belongs to
    t: float  # its first point
    step: int  # the step it reported first
    redone_steps: int  # how far earlier segments had got past it


class Parsed(NamedTuple):
    points: list[Point]
    checkpoints: list[CheckpointMark]
    skipped: int  # lines or values that could not be read


@dataclass
class Series:
    """A run's metrics across its attempts, with its checkpoints and restarts (a docstring: without one,
    dataclass builds one from inspect.signature at import, which `fray status` pays)."""

    points: list[Point] = field(default_factory=list)  # attempt, then time order
    checkpoints: list[CheckpointMark] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # loss first, then by first appearance
    skipped: int = 0

    @property
    def redone_steps(self) -> int:
        return sum(r.redone_steps for r in self.restarts)

    def default_metric(self) -> str | None:
        return self.metrics[0] if self.metrics else None


def parse(attempt: int, data: bytes) -> Parsed:
    """The points and checkpoint marks in one attempt's history bytes, in file order."""
    points: list[Point] = []
    marks: list[CheckpointMark] = []
    skipped = 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        lines.pop()  # no newline at the end: cut mid-write
        skipped += 1
    for raw in lines:
        record = _record(raw)
        if record is None:
            skipped += bool(raw.strip())
            continue
        t, step = float(record["t"]), record["step"]
        if isinstance(record.get("checkpoint"), str):
            marks.append(CheckpointMark(attempt, t, step, record["checkpoint"]))
            continue
        metrics, bad = metric_values(record.get("metrics"))
        skipped += bad
        points.append(Point(attempt, t, step, metrics))
    return Parsed(points, marks, skipped)


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    t, step = record.get("t"), record.get("step")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(_float(t)):
        return None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return None
    return record


def metric_values(raw: Any) -> tuple[dict[str, float], int]:
    """The numeric metrics of a record (non-finite ones included) and how many values were not numbers."""
    if not isinstance(raw, dict):
        return {}, int(raw is not None)
    found: dict[str, float] = {}
    bad = 0
    for name, value in raw.items():
        if isinstance(value, bool):
            bad += 1
        elif isinstance(value, (int, float)):
            found[str(name)] = _float(value)
        elif isinstance(value, str) and value in _NOT_FINITE:
            found[str(name)] = _NOT_FINITE[value]
        else:
            bad += 1
    return found, bad


def _float(value: int | float) -> float:
    """`value` as a float; a JSON integer too large for one is infinite, not an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def merge(attempts: list[Parsed]) -> Series:
    """One series from the attempts' parsed histories, given in attempt order."""
    segments: list[list[Point]] = []
    for parsed in attempts:
        current: list[Point] = []
        for point in parsed.points:
            if current and point.step < current[-1].step:
                segments.append(current)
                current = []
            current.append(point)
        if current:
            segments.append(current)
    series = Series(checkpoints=[m for p in attempts for m in p.checkpoints], skipped=sum(p.skipped for p in attempts))
    later_start: int | None = None  # the lowest step a later segment started at
    marked: list[list[Point]] = []
    for segment in reversed(segments):
        marked.append([p if later_start is None or p.step < later_start
                       else Point(p.attempt, p.t, p.step, p.metrics, True) for p in segment])
        later_start = segment[0].step if later_start is None else min(later_start, segment[0].step)
    marked.reverse()
    reached = -1
    for index, segment in enumerate(marked):
        first = segment[0]
        if index > 0:
            series.restarts.append(Restart(first.attempt, first.t, first.step,
                                           _redone(reached, first, series.checkpoints)))
        reached = max(reached, segment[-1].step)
        series.points += segment
    seen: dict[str, None] = {}
    for point in series.points:
        for name in point.metrics:
            seen.setdefault(name)
    names = list(seen)
    series.metrics = ([DEFAULT_METRIC] if DEFAULT_METRIC in seen else []) + [n for n in names if n != DEFAULT_METRIC]
    return series


def _redone(reached: int, first: Point, marks: list[CheckpointMark]) -> int:
    """Steps done twice at a restart: from the checkpoint it resumed from (the newest one written before it
    that is below its first step), else from its first step, up to the step reached before it."""
    held = [m.step for m in marks if m.t <= first.t and m.step < first.step]
    base = max(held) if held else first.step - 1
    return max(0, reached - base)


def finite_values(series: Series, metric: str) -> list[Point]:
    """The points that have a finite value of `metric` (what a plot draws)."""
    return [p for p in series.points if metric in p.metrics and math.isfinite(p.metrics[metric])]


def not_finite_points(series: Series, metric: str) -> list[Point]:
    """The points where `metric` was NaN or infinite (a plot marks them)."""
    return [p for p in series.points if metric in p.metrics and not math.isfinite(p.metrics[metric])]
