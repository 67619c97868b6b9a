"""The one seam between fray's backends and external commands (sbatch, squeue, ...).

    run(argv, timeout) -> CommandResult

A command that fails, hangs or is missing is data, not an exception: the
result says how it ended (`exit_code`, `timed_out`) and what it printed, and
the caller decides what that means. Backends take a `Runner`, so tests can run
the real commands, count them, or replay recorded output where that is the
honest option.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

# exit_code for a command that could not be started at all (the shell's convention).
NOT_FOUND = 127


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_code: int | None  # None when it timed out and was killed
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """`squeue ... exited 1: <first stderr line>` — for logs and events."""
        name = self.argv[0] if self.argv else "command"
        if self.timed_out:
            return f"{name} timed out after {self.seconds:.0f}s"
        first = next((line.strip() for line in self.stderr.splitlines() if line.strip()), "")
        return f"{name} exited {self.exit_code}" + (f": {first}" if first else "")


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        """Run `argv` (no shell), wait at most `timeout` seconds, never raise."""


def run(argv: Sequence[str], timeout: float) -> CommandResult:
    """The real runner: a subprocess without a shell, killed when it overruns."""
    args = tuple(argv)
    started = time.monotonic()
    try:
        done = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return CommandResult(args, None, _text(exc.stdout), _text(exc.stderr), True, time.monotonic() - started)
    except OSError as exc:
        return CommandResult(args, NOT_FOUND, "", f"{args[0]}: {exc.strerror or exc}", False,
                             time.monotonic() - started)
    return CommandResult(args, done.returncode, done.stdout, done.stderr, False, time.monotonic() - started)


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
