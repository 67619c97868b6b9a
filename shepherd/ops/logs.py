"""A run's output: reading an attempt's log (whole or its last lines), tailing a
growing file, and following the logs across attempts until the run ends.
`fray logs`, `fray submit --follow` and the dashboard's logs screen all read
through here.

A multi-node attempt has one log per task (task 0 in the attempt folder, task
i in tasks/<i>/): every task is read unless one is asked for, and when there
are several, each line carries its task index (`[task 1] ...`).

Polling with short sleeps: a reader waits on files another process writes, and a
poll every 0.2 s costs nothing next to the reader's attention. The run's
meta.json is read before the log files on each pass, so once it says an
attempt has ended, draining that attempt's files gets all of its output.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from fray.core.model import AttemptState, Meta, Phase
from fray.errors import CorruptFileError
from fray.ops.wait import POLL_SEC, DaemonKeeper
from fray.state import runs, store
from fray.state.layout import Home
from fray.wrapper import contract

CHUNK = 1 << 16
STREAMS = ("stdout", "stderr")


@dataclass(frozen=True)
class LogLine:
    run_id: str
    attempt: int
    stream: str  # "stdout" | "stderr"
    line: str
    task: int = 0
    tasks: int = 1  # how many tasks the attempt has shown so far: prefix lines when more than one

    @property
    def text(self) -> str:
        """The line as a person reads it: with its task when the attempt has several."""
        return f"{task_prefix(self.task)}{self.line}" if self.tasks > 1 else self.line

    def to_dict(self) -> dict[str, object]:
        return {"run_id": self.run_id, "attempt": self.attempt, "stream": self.stream, "task": self.task,
                "line": self.line}


@dataclass(frozen=True)
class TaskLog:
    task: int
    path: Path
    lines: list[str]


def task_prefix(task: int) -> str:
    return f"[task {task}] "


def log_path(home: Home, run_id: str, attempt: int, stream: str, task: int = 0) -> Path:
    files = home.run(run_id).attempt(attempt).task(task)
    return files.stderr if stream == "stderr" else files.stdout


def read_tasks(home: Home, run_id: str, attempt: int, stream: str, task: int | None = None,
               last: int | None = None) -> list[TaskLog]:
    """One attempt's log of each task (or of task `task` only), whole or its last `last` lines."""
    tasks = [task] if task is not None else home.run(run_id).attempt(attempt).task_indexes()
    logs = []
    for index in tasks:
        path = log_path(home, run_id, attempt, stream, index)
        logs.append(TaskLog(index, path, read_lines(path, last)))
    return logs


def stacks_lines(home: Home, run_id: str, attempts: list[int]) -> tuple[list[str], list[Path]]:
    """The Python stacks the wrapper took (attempts/N/stacks.txt) of these attempts, each under a separator
    naming its attempt; and the files read (attempts without stacks are skipped)."""
    lines: list[str] = []
    found: list[Path] = []
    for number in attempts:
        path = home.run(run_id).attempt(number).dir / contract.STACKS
        text = read_lines(path)
        if text:
            found.append(path)
            lines += [f"=== attempt {number}: {path} ===", *text, ""]
    return lines, found


def merged_lines(logs: list[TaskLog]) -> list[str]:
    """The lines of every task, task by task, each prefixed with its task when there are several."""
    if len(logs) == 1:
        return list(logs[0].lines)
    return [f"{task_prefix(log.task)}{line}" for log in logs for line in log.lines]


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").removesuffix("\r")


def read_lines(path: Path, last: int | None = None) -> list[str]:
    """The lines of a log file (all, or the last `last`); [] when it does not exist yet."""
    try:
        with open(path, "rb") as handle:
            start = tail_offset(handle, last) if last is not None else 0
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [_decode(line) for line in lines]


def read_bytes(path: Path, last: int | None = None) -> bytes:
    """A log file's bytes as the workload wrote them (all, or from its last `last` lines); b"" before it exists."""
    try:
        with open(path, "rb") as handle:
            handle.seek(tail_offset(handle, last) if last is not None else 0)
            return handle.read()
    except FileNotFoundError:
        return b""


def tail_now(path: Path, last: int) -> tuple[list[str], "Tail"]:
    """The last `last` lines of a log as it is now, and a Tail that yields the lines written after them."""
    try:
        with open(path, "rb") as handle:
            start = tail_offset(handle, last)
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return [], Tail(path, 0)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [_decode(line) for line in lines], Tail(path, start + len(data))


def tail_offset(handle: BinaryIO, count: int) -> int:
    """Where the last `count` lines of an open binary file begin (reading backwards)."""
    end = os.fstat(handle.fileno()).st_size
    if count <= 0:
        return end
    position, newlines = end, 0
    # A final newline ends the last line rather than starting a new one.
    handle.seek(max(0, end - 1))
    skip_last = handle.read(1) == b"\n"
    while position > 0:
        size = min(CHUNK, position)
        position -= size
        handle.seek(position)
        block = handle.read(size)
        for index in range(len(block) - 1, -1, -1):
            if block[index] != 0x0A:
                continue
            if skip_last and position + index == end - 1:
                continue
            newlines += 1
            if newlines == count:
                return position + index + 1
    return 0


class Tail:
    """New complete lines of one growing file, from an offset."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.partial = b""

    def read(self, final: bool) -> Iterator[str]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                while True:
                    data = handle.read(CHUNK)
                    if not data:
                        break
                    self.offset += len(data)
                    *complete, self.partial = (self.partial + data).split(b"\n")
                    for line in complete:
                        yield _decode(line)
        except FileNotFoundError:
            pass
        if final and self.partial:
            yield _decode(self.partial)
            self.partial = b""


class Follower:
    """Streams a run's log lines as they are written, attempt after attempt, until the run ends.

    `on_attempt(number, node)` is called when an attempt's output begins (the
    separator), `on_line(LogLine)` for each line. `run` blocks until the run
    ends (`fray logs -f`); `step` is one pass, for a reader with its own timer
    (the dashboard's logs screen), which may hand over `tails` it already read
    `start_attempt` up to, so that attempt is neither announced nor read again.
    """

    def __init__(self, home: Home, run_id: str, streams: tuple[str, ...], start_attempt: int | None = None,
                 last: int | None = None, poll: float = POLL_SEC, tails: dict[str, Tail] | None = None,
                 task: int | None = None) -> None:
        self.home = home
        self.run_id = run_id
        self.streams = streams
        self.task = task  # one task of a multi-node attempt; None: every task
        self.last = last
        self.poll = poll
        self.number = start_attempt
        self.tails = tails  # the streams of task 0 (or of the one task asked for)
        self.task_tails: dict[tuple[int, str], Tail] = {}  # the other tasks' streams, as they appear
        self.first = tails is None  # only the first attempt shown starts at its last `last` lines
        self.meta: Meta | None = None  # as the last step read it

    def run(self, on_attempt: Callable[[int, str | None], None], on_line: Callable[[LogLine], None]) -> Meta:
        keeper = DaemonKeeper(self.home)
        while not self.step(on_attempt, on_line):
            keeper.tick()
            time.sleep(self.poll)
        assert self.meta is not None
        return self.meta

    def step(self, on_attempt: Callable[[int, str | None], None], on_line: Callable[[LogLine], None]) -> bool:
        """Read what is new (moving on to the next attempt when this one has ended); True once the run has
        ended and all its output is read."""
        while True:
            meta = self.meta = runs.read_meta(self.home, self.run_id)
            if self.number is None:
                self.number = meta.current.number if meta.current else 1
            number = self.number
            attempt = meta.attempts[number - 1] if len(meta.attempts) >= number else None
            if attempt is not None and self.tails is None:
                begun, node = self._begun(attempt.state, attempt.node, number)
                if begun:
                    on_attempt(number, node)
                    self.tails, self.first = self._open(number, self.first), False
            if attempt is not None and self.tails is not None:
                ended = attempt.state == AttemptState.ENDED.value
                self._open_new_tasks(number)  # other nodes' tasks start a moment after task 0
                shown = len({task for task, _ in self.task_tails}) + 1
                for stream, tail in self.tails.items():
                    for text in tail.read(final=ended):
                        on_line(LogLine(self.run_id, number, stream, text, self.task or 0, shown))
                for (task, stream), tail in self.task_tails.items():
                    for text in tail.read(final=ended):
                        on_line(LogLine(self.run_id, number, stream, text, task, shown))
                if ended and len(meta.attempts) > number:
                    self.number, self.tails, self.task_tails = number + 1, None, {}
                    continue
            return meta.phase == Phase.ENDED.value and (attempt is None or attempt.state == AttemptState.ENDED.value)

    def _begun(self, state: str, node: str | None, number: int) -> tuple[bool, str | None]:
        """Whether the attempt's output has begun (announce it then), and its node.

        The wrapper writes started.json (with its host) right after launching the
        workload; the daemon records the attempt as running a moment later.
        """
        if state not in (AttemptState.SUBMITTING.value, AttemptState.SUBMITTED.value):
            return True, node
        try:
            started = store.read_json(self.home.run(self.run_id).attempt(number).started, "started")
        except CorruptFileError:
            started = None
        return (True, started.get("host")) if started else (False, None)

    def _open_new_tasks(self, number: int) -> None:
        if self.task is not None:
            return
        for task in self.home.run(self.run_id).attempt(number).task_indexes()[1:]:
            for stream in self.streams:
                if (task, stream) not in self.task_tails:
                    self.task_tails[(task, stream)] = Tail(log_path(self.home, self.run_id, number, stream, task))

    def _open(self, number: int, first: bool) -> dict[str, Tail]:
        tails = {}
        for stream in self.streams:
            path = log_path(self.home, self.run_id, number, stream, self.task or 0)
            offset = 0
            if first and self.last is not None:
                try:
                    with open(path, "rb") as handle:
                        offset = tail_offset(handle, self.last)
                except FileNotFoundError:
                    pass
            tails[stream] = Tail(path, offset)
        return tails
