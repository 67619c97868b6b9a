"""Progress from what the workload prints: `--progress-pattern` over its stdout.log and stderr.log.

The workload writes straight into those files (fray.wrapper.workload): no pipe passes through the
wrapper, so reading them can neither slow the workload nor block it. A thread of the wrapper tails
both files every POLL_SEC, splits what is new into lines (a carriage return ends a line too: progress
bars rewrite theirs) and searches each line for each pattern. A match's named groups are what it
reports: `step` (a whole number), `loss`, `samples_per_sec`, `checkpoint_version`, and any other
name as a metric of that name (numbers only; a group whose text is no number is left out). Values
carry over between matches, so one pattern may give the step (a progress bar's `50/1000`) and
another the loss printed on another line.

Each poll ends in one write of progress.json through `fray.wrapper.report.progress_in`, fenced and
checked as the workload's own `report.progress` is (a superseded attempt writes nothing), and every
match that carried a step is a point of the history (fray.wrapper.history thins them as it does any
report's), at most MAX_POINTS_PER_POLL a poll, spread evenly. A line whose step is lower than the
last one is not progress (an evaluation loop that counts from 0, a second counter) and is skipped.

Bounded: at most MAX_READ_BYTES of a file are read a poll (what a flood wrote before that is
skipped: only its latest lines matter), and a line is cut at MAX_LINE_BYTES. When the workload has
exited, `stop` reads what is left, so its last lines count.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import history, report
from .fence import Superseded

POLL_SEC = 0.5
MAX_READ_BYTES = 4 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024
MAX_POINTS_PER_POLL = 256
COUNTERS = ("step", "checkpoint_version")
MEASURES = ("loss", "samples_per_sec")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class Matcher:
    """What the patterns have read so far (pure: fed lines, asked for the progress they add up to)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = [re.compile(pattern) for pattern in patterns]
        self.values: dict[str, Any] = {}  # step, loss, samples_per_sec, checkpoint_version and other metrics
        self.points: list[dict[str, Any]] = []  # the values at each match that carried a step, since taken
        self.changed = False
        self.went_back: tuple[int, int] | None = None  # (last step, lower step) of the first line skipped

    def feed(self, line: str) -> None:
        for pattern in self.patterns:
            match = pattern.search(line)
            if match is not None:
                self._apply(match.groupdict())

    def _apply(self, groups: dict[str, str | None]) -> None:
        found: dict[str, Any] = {}
        for name, text in groups.items():
            if text is None:
                continue
            value = _number(text.strip().replace(",", ""))
            if value is None:
                continue
            if name in COUNTERS:
                if not math.isfinite(value) or value < 0 or value != int(value):
                    continue
                value = int(value)
            found[name] = value
        step = found.get("step")
        last = self.values.get("step")
        if step is not None and last is not None and step < last:
            self.went_back = self.went_back or (last, step)
            return
        if not found:
            return
        self.values.update(found)
        self.changed = True
        if step is not None:
            self.points.append(dict(self.values))

    def take_points(self) -> list[dict[str, Any]]:
        """The points since the last call, at most MAX_POINTS_PER_POLL (evenly spread, the last kept)."""
        points, self.points = self.points, []
        if len(points) > MAX_POINTS_PER_POLL:
            stride = len(points) / MAX_POINTS_PER_POLL
            points = [points[int(i * stride)] for i in range(MAX_POINTS_PER_POLL - 1)] + [points[-1]]
        return points


def document(values: dict[str, Any], now: float) -> dict[str, Any]:
    """`values` as report.progress's arguments: (step, loss, samples_per_sec, checkpoint_version, extra)."""
    extra: dict[str, Any] = {}
    for name, value in values.items():
        if name in COUNTERS or name in MEASURES:
            continue
        if math.isfinite(value):
            extra[name] = value
        else:
            extra[f"{name}_not_finite"] = repr(value)  # JSON has no NaN; as report.progress says it
    return {"updated_at": now, "step": values.get("step"), "loss": values.get("loss"),
            "samples_per_sec": values.get("samples_per_sec"),
            "checkpoint_version": values.get("checkpoint_version"), "extra": extra}


class _Tail:
    """New complete lines of one log, read from where the last read stopped."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.offset = 0
        self.partial = b""

    def read(self) -> list[str]:
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return []  # not there yet
        size = os.fstat(self.fd).st_size
        if size - self.offset > MAX_READ_BYTES:
            self.offset, self.partial = size - MAX_READ_BYTES, b""  # a flood: only its latest lines matter
        chunks = []
        while self.offset < size:
            chunk = os.pread(self.fd, min(size - self.offset, 1 << 20), self.offset)
            if not chunk:
                break
            self.offset += len(chunk)
            chunks.append(chunk)
        if not chunks:
            return []
        data = self.partial + b"".join(chunks)
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        self.partial = data[cut + 1:][-MAX_LINE_BYTES:]
        if cut < 0:
            return []
        text = data[:cut].decode("utf-8", errors="replace")
        return text.replace("\r", "\n").split("\n")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class LogScan:
    """The thread that reads the workload's logs with `patterns` and reports what they match."""

    def __init__(self, patterns: Sequence[str], logs: Sequence[str], attempt_dir: str,
                 log: Callable[[str], None], poll: float = POLL_SEC) -> None:
        self.matcher = Matcher(patterns)
        self.tails = [_Tail(path) for path in logs]
        self.folder = Path(attempt_dir)
        self.log = log
        self.poll = poll
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fray-logscan", daemon=True)
        self._lock = threading.Lock()  # the thread's polls and the last one `stop` makes
        self._told_back = False
        self._told_refused = False
        self.superseded = False

    def start(self) -> "LogScan":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread, then read what the workload wrote last (it has exited)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.scan()
        for tail in self.tails:
            tail.close()

    def _loop(self) -> None:
        while not self._stopping.wait(self.poll):
            self.scan()

    def scan(self) -> None:
        """One poll: read, match, report. Never raises (a reading the wrapper cannot make is logged)."""
        with self._lock:
            if self.superseded:
                return
            try:
                for tail in self.tails:
                    for line in tail.read():
                        if line:
                            self.matcher.feed(line)
                self._report(time.time())
            except Superseded:
                self.superseded = True  # the fence's handler is ending the attempt
            except Exception as exc:  # noqa: BLE001 - progress is advisory: the workload goes on
                self.log(f"progress from the output: {type(exc).__name__}: {exc}")

    def _report(self, now: float) -> None:
        matcher = self.matcher
        if matcher.went_back and not self._told_back:
            self._told_back = True
            last, lower = matcher.went_back
            self.log(f"progress from the output: skipping lines whose step went back (step {lower} after {last}); "
                     "a step must not decrease within an attempt")
        if not matcher.changed:
            return
        matcher.changed = False
        points = matcher.take_points()
        for point in points[:-1]:  # the last one is recorded with progress.json, below
            history.record_progress(self.folder, document(point, now))
        values = document(matcher.values, now)
        try:
            report.progress_in(self.folder, values["step"], values["loss"], values["samples_per_sec"],
                               values["checkpoint_version"], values["extra"], now=now)
        except ValueError as exc:  # the workload's own report.progress got further: its word stands
            if not self._told_refused:
                self._told_refused = True
                self.log(f"progress from the output not recorded: {exc}")
