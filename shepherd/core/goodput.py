"""Goodput from the steps: a run's wall time cut into useful time and time lost per cause (pure).

The run's wall time runs from its first submission to its last attempt's end
(now while it runs). Each attempt's share is cut into stretches:

- `backoff`: from the previous attempt's end to this one's submission;
- `queue`: from submission to the wrapper's start (an attempt that never
  started is all queue);
- `start`: from the wrapper's start to the work behind the first reported
  step (imports, loading the checkpoint); an attempt that reported no step
  is all start;
- between two reported steps: `useful` when the later step was never done
  again, `redone` when a later attempt did it again (fray.core.history);
  the first step's work is taken to last one typical interval (the median
  between the attempt's points);
- after the last step: when the attempt failed, one typical interval of
  `redone` (the work in flight), then `detection` (the fault to the
  attempt's end: a hang or a lost node until fray noticed it); when it ended
  well or still runs, `idle` (saving, shutting down, or a step still under way).

Goodput = useful / wall. A run with no reported step has no such figure:
`attempt_figures` is the older one (an attempt's whole time is useful when it
ended well, lost when it failed), and says so with `basis: "attempts"`.
"""

from __future__ import annotations

from typing import NamedTuple

from fray.core.history import Point, Series
from fray.core.model import Cause

USEFUL = "useful"
USEFUL_CAUSES = frozenset({Cause.SUCCESS.value, Cause.EXPIRED.value, Cause.STOPPED.value})  # ended doing its work
LOST_CAUSES = ("redone", "detection", "backoff", "queue", "start", "idle")
GOOD_ENDS = frozenset({"success", "stopped", "expired", "restarted", "paused"})


class AttemptTimes(NamedTuple):
    number: int
    submitted_at: float
    started_at: float | None
    ended_at: float | None  # None: still in flight
    cause: str | None


class Stretch(NamedTuple):
    attempt: int
    start: float
    end: float
    kind: str  # USEFUL or one of LOST_CAUSES

    @property
    def seconds(self) -> float:
        return self.end - self.start


def stretches(attempts: list[AttemptTimes], series: Series, now: float) -> list[Stretch]:
    """The run's wall time cut by cause, attempt by attempt; empty when no step was reported."""
    if not series.points:
        return []
    out: list[Stretch] = []
    previous_end: float | None = None
    for attempt in sorted(attempts, key=lambda a: a.number):
        end = now if attempt.ended_at is None else attempt.ended_at
        if previous_end is not None:
            _add(out, attempt.number, previous_end, attempt.submitted_at, "backoff")
        started = attempt.started_at if attempt.started_at is not None else end
        _add(out, attempt.number, attempt.submitted_at, min(started, end), "queue")
        if attempt.started_at is not None:
            # in time order: a clock that stepped back on the node must not make stretches overlap
            points = sorted((p for p in series.points if p.attempt == attempt.number and started <= p.t <= end),
                            key=lambda p: p.t)
            out += _working(attempt, points, started, end)
        previous_end = max(end, previous_end or end)
    return out


def _working(attempt: AttemptTimes, points: list[Point], started: float, end: float) -> list[Stretch]:
    n = attempt.number
    if not points:
        return _clip([Stretch(n, started, end, "start")])
    gaps = [b.t - a.t for a, b in zip(points, points[1:]) if b.t > a.t]
    if gaps:
        from statistics import median  # here: it imports fractions, decimal and random, which `fray status`
        # then loads only for a run with a progress history

        typical = median(gaps)
    else:
        typical = 0.0
    out: list[Stretch] = []
    first_work = max(started, points[0].t - typical)
    out.append(Stretch(n, started, first_work, "start"))
    out.append(Stretch(n, first_work, points[0].t, "redone" if points[0].redone else USEFUL))
    for a, b in zip(points, points[1:]):
        out.append(_between(n, a, b))
    last = points[-1].t
    if attempt.ended_at is not None and attempt.cause not in GOOD_ENDS:
        in_flight = min(end, last + typical)
        out.append(Stretch(n, last, in_flight, "redone"))
        out.append(Stretch(n, in_flight, end, "detection"))
    else:
        out.append(Stretch(n, last, end, "idle"))
    return _clip(out)


def _between(attempt: int, a: Point, b: Point) -> Stretch:
    """The time from point a to point b made b's steps: redone when b was done again later.

    Exact when every step is reported; with coarser reports the interval where
    a restart's checkpoint falls counts whole as redone."""
    return Stretch(attempt, a.t, b.t, "redone" if b.redone else USEFUL)


def _add(out: list[Stretch], attempt: int, start: float, end: float, kind: str) -> None:
    if end > start:
        out.append(Stretch(attempt, start, end, kind))


def _clip(found: list[Stretch]) -> list[Stretch]:
    return [s for s in found if s.end > s.start]


class Breakdown(NamedTuple):
    basis: str  # "steps" | "attempts"
    wall_sec: float
    useful_sec: float
    lost_sec: dict[str, float]

    @property
    def goodput(self) -> float | None:
        return self.useful_sec / self.wall_sec if self.wall_sec > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {"basis": self.basis, "wall_sec": round(self.wall_sec, 3), "useful_sec": round(self.useful_sec, 3),
                "lost_sec": {k: round(v, 3) for k, v in self.lost_sec.items()},
                "goodput": None if self.goodput is None else round(self.goodput, 4)}


def breakdown(found: list[Stretch], since: float | None = None, until: float | None = None) -> Breakdown:
    """The sum of `found` by cause, cut to [since, until]."""
    useful = 0.0
    lost = {cause: 0.0 for cause in LOST_CAUSES}
    for s in found:
        seconds = _inside(s.start, s.end, since, until)
        if s.kind == USEFUL:
            useful += seconds
        else:
            lost[s.kind] = lost.get(s.kind, 0.0) + seconds
    return Breakdown("steps", useful + sum(lost.values()), useful, lost)


def attempt_figures(attempts: list[AttemptTimes], now: float, useful_causes: frozenset[str]) -> Breakdown:
    """The figure without steps: each started attempt's time, useful when it ended in `useful_causes` or runs."""
    useful = lost = 0.0
    for a in attempts:
        if a.started_at is None:
            continue
        seconds = max(0.0, (now if a.ended_at is None else a.ended_at) - a.started_at)
        if a.ended_at is None or a.cause in useful_causes:
            useful += seconds
        else:
            lost += seconds
    return Breakdown("attempts", useful + lost, useful, {"failed_attempts": lost})


def _inside(start: float, end: float, since: float | None, until: float | None) -> float:
    lo = start if since is None else max(start, since)
    hi = end if until is None else min(end, until)
    return max(0.0, hi - lo)
