"""A run's progress history and its goodput from the steps: the reads behind `fray plot`, the dashboard's
curves, `fray status`'s goodput line and `fray usage`.

Reads each attempt's history (the appended file, else the write-once
chunks in `history.jsonl.d/`, in order) and its progress.json, whose latest
step is added as the attempt's last point when thinning left it out.
fray.core.history merges them; fray.core.goodput does the accounting.
A file that cannot be read counts as empty: a history is advisory.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from fray.core import goodput, history
from fray.core.model import Meta
from fray.errors import CorruptFileError
from fray.state import store
from fray.state.layout import AttemptPaths, Home
from fray.wrapper import face as wrapper

MAX_READ_BYTES = 8 * 1024 * 1024  # twice the writer's cap (fray.wrapper.history.MAX_BYTES): a file past it is not ours
CACHED_FILES = 256
_parsed: dict[str, tuple[int, history.Parsed]] = {}  # appended file -> (bytes parsed, what they held)


class RunHistory(NamedTuple):
    series: history.Series
    attempts: list[goodput.AttemptTimes]


def attempt_bytes(files: AttemptPaths) -> bytes:
    """One attempt's history as written: the file, else its write-once chunks joined in order."""
    try:
        with open(files.history, "rb") as handle:
            return handle.read(MAX_READ_BYTES)
    except FileNotFoundError:
        pass
    except OSError:
        return b""
    folder = wrapper.versions_dir(files.history)
    try:
        names = list(reversed(wrapper.newest_first(os.listdir(folder))))
    except OSError:
        return b""
    chunks: list[bytes] = []
    size = 0
    for name in names:
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                data = handle.read(MAX_READ_BYTES - size)
        except OSError:
            continue
        if not wrapper.complete(data):
            continue  # still being uploaded, or cut: its lines come with a later read
        chunks.append(data)
        size += len(data)
        if size >= MAX_READ_BYTES:
            break
    return b"".join(chunks)


def attempt_history(files: AttemptPaths, number: int) -> history.Parsed:
    """One attempt's parsed history. An appended file is read on from where the last read stopped (its last
    whole line), so the dashboard redrawing a long run's curves every refresh parses only the new lines; a
    file that shrank (replaced) is read again whole. The write-once chunks are read whole each time."""
    path = str(files.history)
    try:
        size = os.stat(path).st_size
    except OSError:
        _parsed.pop(path, None)
        return history.parse(number, attempt_bytes(files))
    done, known = _parsed.get(path, (0, history.Parsed([], [], 0)))
    if size < done:
        done, known = 0, history.Parsed([], [], 0)
    try:
        with open(path, "rb") as handle:
            handle.seek(done)
            data = handle.read(max(0, MAX_READ_BYTES - done))
    except OSError:
        return known
    whole = data[: data.rfind(b"\n") + 1]
    more = history.parse(number, whole)
    known = history.Parsed([*known.points, *more.points], [*known.checkpoints, *more.checkpoints],
                           known.skipped + more.skipped)
    if len(_parsed) >= CACHED_FILES and path not in _parsed:
        _parsed.pop(next(iter(_parsed)))  # the oldest entry
    _parsed[path] = (done + len(whole), known)
    cut = len(whole) < len(data)  # a last line still being written, or cut by a kill
    return history.Parsed(known.points, known.checkpoints, known.skipped + cut)


def _with_latest(parsed: history.Parsed, files: AttemptPaths, number: int) -> history.Parsed:
    """The attempt's points plus progress.json's latest step when the history lacks it (thinned, or no history)."""
    try:
        latest = store.read_json(files.progress, "progress")
    except CorruptFileError:
        latest = None  # moved aside and reported by the status reader
    step = latest.get("step") if latest else None
    if not isinstance(step, int) or (parsed.points and parsed.points[-1].step >= step):
        return parsed
    metrics, _ = history.metric_values({k: latest.get(k) for k in ("loss", "samples_per_sec") if latest.get(k) is not None})
    point = history.Point(number, float(latest["updated_at"]), step, metrics)
    return history.Parsed([*parsed.points, point], parsed.checkpoints, parsed.skipped)


def attempt_times(meta: Meta) -> list[goodput.AttemptTimes]:
    return [goodput.AttemptTimes(a.number, a.submitted_at, a.started_at, None if a.in_flight else a.ended_at, a.cause)
            for a in meta.attempts]


def run_history(home: Home, meta: Meta) -> RunHistory:
    paths = home.run(meta.run_id)
    parsed = []
    for attempt in meta.attempts:
        files = paths.attempt(attempt.number)
        found = _with_latest(attempt_history(files, attempt.number), files, attempt.number)
        parsed.append(_on_daemon_clock(found, attempt.clock_offset_sec))
    return RunHistory(history.merge(parsed), attempt_times(meta))


# The node's offset is estimated from when the daemon saw its heartbeats (fray.daemon.sightings): a lower
# bound, short of the truth by the delay of the least delayed sighting, up to a poll interval or two. An
# estimate this small is that delay, not a clock apart: a node on the daemon's own clock read -0.2 s under
# load, its points then fell after its attempt's end (which is never later than seen) and its redone steps
# counted as nothing.
CLOCK_NOISE_SEC = 2.0


def _on_daemon_clock(parsed: history.Parsed, offset: float | None) -> history.Parsed:
    """An attempt's points, written on its node's clock, on the daemon's (its attempts' times are)."""
    if not offset or abs(offset) < CLOCK_NOISE_SEC:
        return parsed
    return history.Parsed([history.Point(p.attempt, p.t - offset, p.step, p.metrics, p.redone) for p in parsed.points],
                          [history.CheckpointMark(m.attempt, m.t - offset, m.step, m.name) for m in parsed.checkpoints],
                          parsed.skipped)


def run_goodput(found: RunHistory, now: float, since: float | None = None) -> goodput.Breakdown:
    """The run's goodput from its steps, else (no step reported) from its attempts."""
    cut = goodput.stretches(found.attempts, found.series, now)
    if cut:
        return goodput.breakdown(cut, since, now)
    return goodput.attempt_figures(found.attempts, now, goodput.USEFUL_CAUSES)


def goodput_view(home: Home, meta: Meta, now: float) -> dict[str, object]:
    """`fray status`'s goodput: the run's breakdown (fray.core.goodput.Breakdown.to_dict) and the steps redone."""
    found = run_history(home, meta)
    return {**run_goodput(found, now).to_dict(), "redone_steps": found.series.redone_steps,
            "restarts": len(found.series.restarts)}
