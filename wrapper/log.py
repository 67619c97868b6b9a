"""The wrapper's own diagnostic log: `wrapper.log` in the attempt folder, echoed to stderr.

Not the `logging` module: this is a handful of lines per attempt, and the
wrapper's startup is on the path the shepherd times (submit to first
heartbeat). Writing a line never raises: a full disk or a closed stderr must
not stop the wrapper from cleaning up and exiting with the right code. Each
line passes the fence first (fray.wrapper.fence.guard), as every job-side
write does: a superseded wrapper logs nothing.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from . import fence


def _stamp(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def _same_file(fd_a: int, fd_b: int) -> bool:
    try:
        a, b = os.fstat(fd_a), os.fstat(fd_b)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class DiagnosticLog:
    """Timestamped lines to a file (opened for append, 0600) and, with `echo`, to stderr."""

    def __init__(self, path: str | os.PathLike[str] | None, echo: bool = True) -> None:
        self._lock = threading.Lock()  # the heartbeat thread logs too
        self._echo = echo
        self._fd: int | None = None
        self._prefix = f"wrapper[{os.getpid()}]"
        if path is not None:
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            except OSError as exc:
                self._echo_line(f"{_stamp(time.time())} {self._prefix}: cannot open {os.fspath(path)}: {exc}\n")
            else:
                # A backend may already send the wrapper's stderr into wrapper.log: say each line once.
                self._echo = echo and not _same_file(self._fd, 2)

    def write(self, message: str) -> None:
        try:
            # A job-side write like any other: a wrapper thawed past its fence logs nothing either (and is
            # killed by the check). Before the lock: the fence's handler silences this log.
            fence.guard()
        except fence.Superseded:
            return
        line = f"{_stamp(time.time())} {self._prefix}: {message}\n"
        with self._lock:
            if self._fd is not None:
                try:
                    # One write per line with O_APPEND: lines never interleave.
                    os.write(self._fd, line.encode("utf-8", errors="replace"))
                except OSError:
                    pass
            self._echo_line(line)

    def silence(self) -> None:
        """Write nothing more, anywhere: the attempt was superseded (fray.wrapper.fence)."""
        with self._lock:
            self._echo = False
        self.close()

    def exception(self, message: str) -> None:
        """`message` followed by the traceback of the exception being handled."""
        import traceback  # only on the way to a crash report

        self.write(message + "\n" + traceback.format_exc().rstrip())

    def _echo_line(self, line: str) -> None:
        if not self._echo or sys.stderr is None:
            return
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except OSError:
                    pass
                self._fd = None
