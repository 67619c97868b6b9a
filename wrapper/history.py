"""The attempt's progress history: every `report.progress` step and every checkpoint, appended (stdlib only).

progress.json holds only the latest step; this file keeps the curve. Each
line of `attempts/<n>/history.jsonl` (schemas/history-line.json) is one
compact JSON object ending in a newline:

    {"t": 1764151234.5, "step": 120, "metrics": {"loss": 0.31, "lr": 0.0003}}
    {"t": 1764151240.1, "step": 120, "checkpoint": "step-120"}

Metrics are the numbers the workload reported (loss, samples_per_sec and the
extra values that are numbers); NaN and infinities are kept as the strings
"nan", "inf", "-inf" (JSON has no NaN, and a diverging loss is worth seeing);
anything else (strings, lists) stays in progress.json only.

Bounded: the file never grows past MAX_BYTES (4 MiB). It is thinned as it
grows: a step is kept when it is at least `stride` steps after the last kept
one, and the stride doubles every LEVEL_BYTES (256 KiB) written, so the
first ~4,000 points are kept whole and a week at 10 steps a second ends near
3 MiB. Checkpoint marks are never thinned (they may use RESERVE_BYTES past
the cap). A line is cut to MAX_LINE_BYTES by dropping metrics (in name order,
the rest kept). A report without a step (none yet in this attempt) is not a
point of the curve and is not recorded.

Append-only: one write(2) per line with O_APPEND through
`fray.wrapper.records.append_bytes`, so a line is whole or (killed mid-write)
the last line lacks its newline, which readers skip. Not fsynced: history is
advisory, like progress.

Write-once layout (FRAY_RECORDS=write-once, gcsfuse: no append, no rename):
`history.jsonl.d/<seq>` chunk files, each created once (O_EXCL) and never
touched again; readers concatenate them in order. Lines are buffered and a
chunk is written every CHUNK_LINES lines, CHUNK_SEC seconds, at each
checkpoint mark and at exit, so up to CHUNK_SEC of points may be lost when
the process is killed. Limit: the shell twin (`python -m fray.wrapper.report
progress`) is one process per call, so there each point is its own chunk.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import contract, records, versions

MAX_BYTES = 4 * 1024 * 1024
LEVEL_BYTES = 256 * 1024
RESERVE_BYTES = 64 * 1024  # room kept for checkpoint marks once the points fill MAX_BYTES
MAX_LINE_BYTES = 2048
CHUNK_LINES = 64
CHUNK_SEC = 30.0
_TAIL_BYTES = 8192  # enough to find the last whole line when the writer's state is rebuilt
_quoted = json.encoder.encode_basestring  # a JSON string, as the encoder writes one (ensure_ascii=False)
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)  # one, not one a line
_RESERVED_KEYS = ("step", "loss", "samples_per_sec", "checkpoint_version", "updated_at", "step_changed_at", "extra")


@dataclass
class _State:
    """What the writer knows of one history file: rebuilt from the file once per process."""

    path: str
    size: int = 0
    last_step: int | None = None
    next_seq: int = 1  # write-once: the next chunk's number
    buffer: list[bytes] = field(default_factory=list)
    buffered_since: float | None = None
    buffered_lines: int = 0
    deferred: list[bytes] = field(default_factory=list)  # kept points not yet handed to _append


_lock = threading.Lock()
_states: dict[str, _State] = {}
_paths: dict[str | os.PathLike[str], str] = {}  # attempt folder -> its history file


def path_in(attempt_dir: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(attempt_dir), contract.HISTORY)


def stride(size: int) -> int:
    """How many steps apart kept points are once the file holds `size` bytes."""
    return 1 << (size // LEVEL_BYTES)


def metrics_of(document: dict[str, Any]) -> dict[str, Any]:
    """The plottable values of a progress document: numbers, and non-finite ones as strings."""
    found: dict[str, Any] = {}
    for name in ("loss", "samples_per_sec"):
        if isinstance(document.get(name), (int, float)) and not isinstance(document.get(name), bool):
            found[name] = document[name]
    for name, value in (document.get("extra") or {}).items():
        if name.endswith("_not_finite") and isinstance(value, str):
            found[name[: -len("_not_finite")]] = _not_finite(value)
        elif isinstance(value, bool) or name in _RESERVED_KEYS:
            continue
        elif isinstance(value, (int, float)):
            found[name] = value  # finite: progress.json refused the document otherwise
    return found


def _not_finite(text: str) -> str:
    text = text.lower()
    return "nan" if "nan" in text else ("-inf" if text.startswith("-") else "inf")


def line(t: float, step: int, metrics: dict[str, Any] | None = None, checkpoint: str | None = None) -> bytes:
    """One history line, cut to MAX_LINE_BYTES by dropping metrics from the end of the name order."""
    record: dict[str, Any] = {"t": round(t, 3), "step": step}
    if checkpoint is not None:
        record["checkpoint"] = checkpoint
    if metrics:
        record["metrics"] = dict(sorted(metrics.items()))
    while True:
        data = (_ENCODER.encode(record) + "\n").encode("utf-8")
        if len(data) <= MAX_LINE_BYTES or not record.get("metrics"):
            return data
        record["metrics"].popitem()


def point_line(t: float, step: int, metrics: dict[str, Any]) -> bytes:
    """`line(t, step, metrics)`, the same bytes built by hand at a fraction of the cost: each kept report makes one."""
    parts = []
    for name, value in sorted(metrics.items()):
        if isinstance(value, str):
            text = _quoted(value)
        elif isinstance(value, float) and math.isfinite(value):
            text = float.__repr__(value)  # what the encoder writes, also for a float subclass (numpy's)
        elif isinstance(value, int) and not isinstance(value, bool):
            text = int.__repr__(value)
        else:
            return line(t, step, metrics)
        parts.append(f"{_quoted(name)}:{text}")
    tail = ',"metrics":{' + ",".join(parts) + "}}\n" if parts else "}\n"
    data = ('{"t":' + float.__repr__(round(t, 3)) + ',"step":' + int.__repr__(step) + tail).encode("utf-8")
    return data if len(data) <= MAX_LINE_BYTES else line(t, step, metrics)


def record_progress(attempt_dir: str | os.PathLike[str], document: dict[str, Any], defer: bool = False) -> None:
    """Append `document` (what report.progress wrote) as a point, if the thinning keeps it; raises OSError.

    `defer` keeps the line, counted as written, until `write_deferred` (fray.wrapper.progress_buffer: the
    thinning sees every point as it comes, the file gets them a fraction of a second later)."""
    step = document.get("step")
    if not isinstance(step, int):
        return
    with _lock:
        path = _paths.get(attempt_dir)
        if path is None:
            path = _paths[attempt_dir] = path_in(attempt_dir)  # once: this runs on every report
        state = _state(path)
        if state.last_step is not None and 0 <= step - state.last_step < stride(state.size):
            return  # thinned; a step that went back (a new series) is always kept
        data = point_line(float(document["updated_at"]), step, metrics_of(document))  # only for a point kept
        if state.size + len(data) > MAX_BYTES:
            return
        state.last_step = step
        state.size += len(data)
        if defer:
            state.deferred.append(data)
        else:
            _append(state, data, flush_now=False)


def write_deferred(attempt_dir: str | os.PathLike[str]) -> None:
    """Append the lines `record_progress(..., defer=True)` kept, in one write; raises OSError (they stay kept)."""
    with _lock:
        state = _states.get(path_in(attempt_dir))
        if state is not None:
            _write_deferred(state)


def drop_deferred(attempt_dir: str | os.PathLike[str]) -> None:
    """Forget the kept lines: this attempt is superseded and writes nothing more."""
    with _lock:
        state = _states.get(path_in(attempt_dir))
        if state is not None:
            state.deferred.clear()


def _write_deferred(state: _State) -> None:
    if not state.deferred:
        return
    data = b"".join(state.deferred)
    if records.write_once():
        state.deferred.clear()  # into the chunk buffer: a chunk that fails is written with the next one
    _append(state, data, flush_now=False)  # raises OSError: appended nothing, the lines stay kept
    state.deferred.clear()


def mark_checkpoint(attempt_dir: str | os.PathLike[str], name: str, step: int | None, t: float | None = None) -> None:
    """Record that checkpoint `name` holds `step` (None: unknown, not recorded); raises OSError."""
    if step is None:
        return
    data = line(time.time() if t is None else t, step, checkpoint=name)
    with _lock:
        state = _state(path_in(attempt_dir))
        if state.size + len(data) > MAX_BYTES + RESERVE_BYTES:
            return
        _write_deferred(state)  # the points before the mark come before it
        state.size += len(data)
        _append(state, data, flush_now=True)


def flush() -> None:
    """Write what the write-once layout has buffered (called at exit)."""
    with _lock:
        for state in _states.values():
            _flush(state)


def _append(state: _State, data: bytes, flush_now: bool) -> None:
    """Write `data` (already counted in state.size) or, write-once, buffer it for the next chunk."""
    if not records.write_once():
        records.append_bytes(state.path, data)
        return
    state.buffer.append(data)
    state.buffered_lines += data.count(b"\n")  # `data` may be many lines (fray.wrapper.progress_buffer's)
    now = time.time()
    state.buffered_since = state.buffered_since or now
    if flush_now or state.buffered_lines >= CHUNK_LINES or now - state.buffered_since >= CHUNK_SEC:
        _flush(state)


def _flush(state: _State) -> None:
    if not state.buffer:
        return
    folder = versions.versions_dir(state.path)
    records.make_private_dir(folder)
    data = b"".join(state.buffer)
    while not records.create_bytes(os.path.join(folder, versions.version_name(state.next_seq)), data):
        state.next_seq += 1  # taken (another process of this attempt, the shell twin): the next one
    state.next_seq += 1
    state.buffer.clear()
    state.buffered_lines = 0
    state.buffered_since = None


def _state(path: str) -> _State:
    state = _states.get(path)
    if state is None:
        state = _states[path] = _rebuilt(path)
    return state


def _rebuilt(path: str) -> _State:
    """The writer's state from what is on disk: its size, last kept step and next chunk number."""
    state = _State(path)
    tail = b""
    try:
        with open(path, "rb") as handle:
            state.size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, state.size - _TAIL_BYTES))
            tail = handle.read()
    except FileNotFoundError:
        folder = versions.versions_dir(path)
        try:
            names = versions.newest_first(os.listdir(folder))
        except FileNotFoundError:
            names = []
        state.next_seq = versions.next_seq(names)
        for name in names:
            try:
                state.size += os.path.getsize(os.path.join(folder, name))
            except FileNotFoundError:
                continue
        if names:
            try:
                with open(os.path.join(folder, names[0]), "rb") as handle:
                    tail = handle.read()
            except FileNotFoundError:
                tail = b""
    state.last_step = _last_step(tail)
    return state


def _last_step(tail: bytes) -> int | None:
    for raw in reversed(tail.split(b"\n")[:-1]):  # the part after the last newline is cut or empty
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and "checkpoint" not in record:
            return record["step"]
    return None


def _reset_in_child() -> None:
    """A forked child starts with its own lock and none of the lines its parent kept (the parent writes those)."""
    global _lock
    _lock = threading.Lock()
    for state in _states.values():
        state.deferred.clear()


atexit.register(flush)
os.register_at_fork(after_in_child=_reset_in_child)
