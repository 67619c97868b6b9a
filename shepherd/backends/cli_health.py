"""Whether a backend's command-line tool fails every call: the streak a person is shown.

A backend whose `gcloud` or `squeue` fails on every call leaves its runs
"waiting to start" with nothing to say why. The daemon's backends run their
commands through a `WatchedRunner`, which counts each tool's failures in a
row (a success ends the streak); from `FAILING_AFTER` of them, the daemon
writes the streak into daemon.json (`failing_commands`) and `fray daemon
status`, `fray list` and the dashboard show it:

    tpu: gcloud failing for 3m (12 calls): ModuleNotFoundError: No module named 'googlecloudsdk'
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable

from fray.backends import external

FAILING_AFTER = 3  # calls in a row: a few cycles' worth of one tool failing, not one bad answer


@dataclass
class Streak:
    """One tool failing since `since`: how many calls in a row, and the last thing it said."""

    command: str
    since: float
    failures: int
    last_error: str

    def to_dict(self, backend: str) -> dict[str, object]:
        return {"backend": backend, "command": self.command, "since": self.since, "failures": self.failures,
                "last_error": self.last_error}


class WatchedRunner:
    """An `external.Runner` that remembers each tool's current streak of failures (thread-safe: the TPU
    backend calls gcloud from a pool)."""

    def __init__(self, runner: external.Runner = external.run, clock: Callable[[], float] = time.time,
                 ignore: frozenset[str] = frozenset(),
                 answered: Mapping[str, Callable[[external.CommandResult], bool]] | None = None) -> None:
        self.runner = runner
        self.clock = clock
        self.ignore = ignore  # tools whose failure is expected and handled (sacct without accounting)
        # Per tool: whether a failed call was still an answer (sbatch refusing a job's own request: the tool and
        # its controller work, the job is at fault), which ends a streak instead of adding to it.
        self.answered = dict(answered or {})
        self._streaks: dict[str, Streak] = {}
        self._lock = threading.Lock()

    def __call__(self, argv: Sequence[str], timeout: float) -> external.CommandResult:
        result = self.runner(argv, timeout)
        command = argv[0] if argv else "command"
        if command in self.ignore:
            return result
        with self._lock:
            judge = self.answered.get(command)
            if result.ok or (judge is not None and judge(result)):
                self._streaks.pop(command, None)
            else:
                streak = self._streaks.setdefault(command, Streak(command, self.clock(), 0, ""))
                streak.failures += 1
                streak.last_error = last_line(result)
        return result

    def failing(self) -> list[Streak]:
        """The tools failing at least FAILING_AFTER calls in a row, now."""
        with self._lock:
            return [Streak(**vars(s)) for s in self._streaks.values() if s.failures >= FAILING_AFTER]


@runtime_checkable
class WatchesTools(Protocol):
    """A backend whose external commands all go through a WatchedRunner (fray.backends.protocol's capabilities)."""

    cli: WatchedRunner


def failing_commands(backends: Mapping[str, object]) -> list[dict[str, object]]:
    """daemon.json's `failing_commands`: every tool of these backends (name -> backend) failing every call."""
    return [streak.to_dict(name) for name, backend in backends.items()
            for streak in (backend.cli.failing() if isinstance(backend, WatchesTools) else [])]


def last_line(result: external.CommandResult) -> str:
    """What a failed call said last (a traceback ends with its error), or that it timed out."""
    if result.timed_out:
        return f"timed out after {result.seconds:.0f}s"
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    return (lines[-1] if lines else f"exited {result.exit_code}")[:300]
