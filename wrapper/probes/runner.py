"""The one way probes run external commands: argv in; stdout, stderr, exit code or timeout out.

A hung `nvidia-smi` (a wedged driver) is a classic sign of a bad node, so
every command has a deadline; on timeout its whole process group is killed,
and what it printed so far is kept for the record. Nothing here raises for a
command that fails: a missing program is exit code None with the reason.
`kill_all()` ends the commands of probes the wrapper gives up on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

_running: set[int] = set()  # process groups of commands under way, for kill_all()
_running_lock = threading.Lock()

OUTPUT_LIMIT = 1024 * 1024  # nvidia-smi on a 16-GPU node prints a few KB; a runaway command, more
AFTER_KILL_SEC = 1.0


class CommandResult:
    """What running one command produced."""

    __slots__ = ("argv", "exit_code", "stdout", "stderr", "timed_out", "seconds", "error")

    def __init__(
        self,
        argv: Sequence[str],
        exit_code: int | None,
        stdout: str,
        stderr: str,
        timed_out: bool,
        seconds: float,
        error: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.seconds = seconds
        self.error = error  # why it could not be started at all

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """One line for a probe's detail: what went wrong, with the command's own words."""
        command = " ".join(self.argv[:3]) + (" ..." if len(self.argv) > 3 else "")
        if self.error is not None:
            return f"{command}: {self.error}"
        if self.timed_out:
            return f"{command} did not answer within {self.seconds:.1f}s (hung)"
        said = (self.stderr.strip() or self.stdout.strip()).splitlines()
        first = f": {said[0].strip()[:300]}" if said else ""
        return f"{command} exited with code {self.exit_code}{first}"


def _text(data: bytes | None) -> str:
    return (data or b"")[:OUTPUT_LIMIT].decode("utf-8", errors="replace")


def run(
    argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> CommandResult:
    """Run `argv` to completion or until `timeout` seconds, then kill its process group."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,  # so a timeout kills what it started too
            close_fds=True,
        )
    except FileNotFoundError:
        return CommandResult(argv, None, "", "", False, 0.0, f"{argv[0]} not found on PATH")
    except OSError as exc:
        return CommandResult(argv, None, "", "", False, 0.0, f"cannot run {argv[0]}: {exc.strerror or exc}")
    with _running_lock:
        _running.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=max(timeout, 0.0))
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        timed_out = True
        try:
            # What it printed before it hung; bounded, since something that left
            # its session may still hold the pipes open.
            out, err = proc.communicate(timeout=AFTER_KILL_SEC)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            out, err = b"", b""
    finally:
        with _running_lock:
            _running.discard(proc.pid)
    return CommandResult(argv, proc.returncode, _text(out), _text(err), timed_out, time.monotonic() - started)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill every command under way: a probe abandoned (stop signal, missed deadline) must not leave one behind."""
    with _running_lock:
        groups = list(_running)
    for pgid in groups:
        _kill_group(pgid)
