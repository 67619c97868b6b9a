"""What the daemon has seen of each attempt in flight, on its own clock, and each node's clock against it.

A compute node writes its own clock's epochs into its files (the heartbeat,
started.json, progress.json's step_changed_at, exit.json's ended_at), and that
clock may be minutes off the login host's. Subtracting one from the daemon's
`now` closed a healthy attempt one second after it started on a node 3 minutes
behind, and would hide a dead node 3 minutes ahead. So the daemon never does:
as Kubernetes' node controller judges lease renewals, it notes when *it* saw
each heartbeat and each step change (`Sightings.on_daemon_clock`), and hands the
policy the attempt's files with those times in place of the node's.

A remote epoch is still data: a heartbeat written at node time r and first seen
at daemon time t gives r - t, the node's offset less the delay; the largest of
the last readings is the estimate (a lower bound, within a poll interval),
raised by an exit record in sight (written before it was seen, so it bounds
the offset too: an attempt first seen ended keeps its length). It turns the
node's start and end into the daemon's clock (never later than seen, never
earlier than true), is kept on the attempt for readers (`clock_offset_sec`),
and per node for `fray nodes`.

A heartbeat that cannot be read (empty, cut, 50 MB of garbage) is no news:
the last good reading stands, and the file's damage is said if the attempt is
judged stalled. A daemon that starts (or takes over) has seen nothing yet, so
its first sight of an attempt counts as a beat: each attempt gets one whole
timeout from a new daemon, never a verdict from an epoch it cannot compare.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

from fray.backends.protocol import AttemptKey
from fray.core.placement.reporting import TaskEnd
from fray.core.policy import AttemptFiles

READINGS = 32  # the offset is the largest of a node's last readings: a clock stepped by NTP is followed
AGREE_SEC = 5.0  # readings further than this from their median are outliers (a damaged file that parses as a time)


def offset_of(readings: Iterable[float]) -> float | None:
    """The node's clock minus the daemon's from readings of (its epoch - when the daemon saw it): the largest of
    those near their median, as one damaged file that still parses as a time must not move it for long."""
    ordered = sorted(readings)
    if not ordered:
        return None
    middle = ordered[(len(ordered) - 1) // 2]  # the lower median: of two readings, the higher alone cannot lead
    return max(r for r in ordered if abs(r - middle) <= AGREE_SEC)


def _bounded_by_exit(offset: float | None, files: AttemptFiles, now: float) -> float | None:
    """The offset, raised to what an exit record in sight proves: it was written before `now`, so the node's clock
    is at least its `ended_at` - now ahead. Without this, an attempt first seen after it ended (its one heartbeat at
    its start) had its start put at the sight and its end clamped there too: a 30 s run lasted 0 s, and
    `fray usage` left it out. Only task 0's end counts (the other tasks may run on nodes with other clocks), and it
    is not kept among the readings: it is read once, and is no heartbeat."""
    ended_at = (files.exit or {}).get("ended_at")
    if not isinstance(ended_at, (int, float)):
        return offset
    bound = ended_at - now
    return bound if offset is None or bound > offset else offset


@dataclass
class _Sighting:
    first_seen: float
    beat: float | None = None  # the last heartbeat value read
    beat_seen: float | None = None  # when it was first read (daemon clock)
    damaged_since: float | None = None
    step: Any = None
    step_seen: float | None = None
    progress_mark: Any = None
    progress_seen: float | None = None
    progress: dict[str, Any] | None = None  # the last good one
    readings: deque[float] = field(default_factory=lambda: deque(maxlen=READINGS))
    gone_since: float | None = None  # when the backend was first seen without it

    @property
    def offset(self) -> float | None:
        return offset_of(self.readings)


class Sightings:
    """The daemon's readings of the attempts in flight and of the nodes' clocks."""

    def __init__(self) -> None:
        self._attempts: dict[AttemptKey, _Sighting] = {}
        self._nodes: dict[str, deque[float]] = {}

    def on_daemon_clock(self, key: AttemptKey, node: str | None, files: AttemptFiles, now: float,
                        gone: bool = False) -> AttemptFiles:
        """`files` with every time the policy compares with `now` on the daemon's clock: a heartbeat and a step as
        when this daemon saw them change, the start and the ends less the node's offset."""
        seen = self._attempts.get(key)
        if seen is None:
            seen = self._attempts[key] = _Sighting(first_seen=now)
        self._read_beat(seen, files, now, node)
        seen.gone_since = (seen.gone_since or now) if gone else None
        if files.started is not None and not seen.readings:
            seen.readings.append(files.started["started_at"] - now)  # a reading too: bounds the start by its sight
        progress = self._read_progress(seen, files.progress, now)
        offset = _bounded_by_exit(seen.offset, files, now)
        shift = offset if offset is not None else 0.0

        def daemon_time(epoch: Any) -> Any:
            return min(now, epoch - shift) if isinstance(epoch, (int, float)) else epoch

        def ended(record: dict[str, Any] | None) -> dict[str, Any] | None:
            return {**record, "ended_at": daemon_time(record["ended_at"])} if record and "ended_at" in record else record

        started = {**files.started, "started_at": daemon_time(files.started["started_at"])} if files.started else None
        return dataclasses.replace(
            files, started=started, exit=ended(files.exit), progress=progress,
            heartbeat_at=seen.beat_seen if seen.beat_seen is not None else None,
            heartbeat_problem=_damage(seen, now) if files.heartbeat_problem else None, clock_offset=offset,
            gone_since=seen.gone_since,
            tasks=tuple(TaskEnd(t.index, ended(t.exit), t.failure) for t in files.tasks))  # type: ignore[arg-type]

    def _read_beat(self, seen: _Sighting, files: AttemptFiles, now: float, node: str | None) -> None:
        beat = files.heartbeat_at
        if beat is None:
            if files.heartbeat_problem and seen.damaged_since is None:
                seen.damaged_since = now
            if seen.beat_seen is None and files.started is not None:
                seen.beat_seen = now  # no beat yet, or none readable: the start is the first sign of life
            return
        seen.damaged_since = None
        if beat != seen.beat:
            seen.beat, seen.beat_seen = beat, now
            seen.readings.append(beat - now)
            if node:
                self._nodes.setdefault(node, deque(maxlen=READINGS)).append(beat - now)

    def _read_progress(self, seen: _Sighting, progress: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
        if progress is None:
            return seen.progress  # unreadable this cycle (or none yet): the last good one, with its times
        mark = (progress.get("updated_at"), progress.get("step"))
        if mark != seen.progress_mark:
            seen.progress_mark, seen.progress_seen = mark, now
        if progress.get("step") != seen.step or seen.step_seen is None:
            seen.step, seen.step_seen = progress.get("step"), now
        seen.progress = {**progress, "updated_at": seen.progress_seen, "step_changed_at": seen.step_seen}
        return seen.progress

    def keep_only(self, keys: set[AttemptKey]) -> None:
        """Forget the attempts no longer in flight."""
        for key in [k for k in self._attempts if k not in keys]:
            del self._attempts[key]

    def node_offsets(self) -> dict[str, float]:
        """Each node's clock minus the daemon's, as last measured."""
        return {node: round(offset, 3) for node, readings in self._nodes.items()
                if (offset := offset_of(readings)) is not None}


def _damage(seen: _Sighting, now: float) -> str | None:
    if seen.damaged_since is None:
        return None
    return f"its heartbeat file has been unreadable for {now - seen.damaged_since:.0f}s (damaged)"
