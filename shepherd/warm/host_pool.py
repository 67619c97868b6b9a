"""The warm worker's function hosts (fray.warm.function_host): which attempts they take, handing them over,
stopping them, and the records of a host that died while serving one.

A function attempt goes to a host when a forked workload would have been this
very interpreter running the run's launch shim with nothing else to set up: a
callable (not a script), no package environment to build, no GPU or TPU, no
health command, no other interpreter. Every other attempt keeps its own
forked wrapper (fray.warm.worker).

The pool forks a host when no idle one is left (so at most one per CPU slot
busy at once) and keeps it for the next attempt. A stop for an attempt a host
serves goes through here, never straight to the host's pid from the backend:
only the worker knows whether that host is still on that attempt or has moved
on to the next. A polite stop is SIGTERM to the host (a checkpointable call
saves its checkpoint on it, fray.cluster.resuming), then SIGKILL to its group
after the attempt's --stop-grace; a forced one is SIGKILL to its group.

A host that dies while serving an attempt (that stop, the OOM killer, a crash,
an os._exit in the function) leaves the records to this process, its parent:
it kills what the attempt left (the processes tagged with it, as the
guardian does), then, unless the attempt was superseded, killed by force, or
wrote its exit.json already, writes what the wrapper would have written for a
workload that ended so, through the attempt's fence.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fray.state import layout
from fray.wrapper import contract
from fray.wrapper import face as wrapper

if TYPE_CHECKING:
    from fray.wrapper.face import Options


@dataclass
class Serving:
    """The attempt a host runs now."""

    cwd: str
    options: Options
    started_at: float
    stop_signal: int | None = None  # the stop the backend asked for, relayed
    kill_at: float | None = None  # SIGKILL to the host's group then: the stop's grace is over


@dataclass
class Host:
    pid: int
    requests: int  # the write end of its requests pipe
    replies: int  # the read end of its replies pipe
    serving: Serving | None = None
    retiring: bool = False
    pending: bytes = field(default=b"", repr=False)


class HostPool:
    def __init__(self) -> None:
        self.hosts: dict[int, Host] = {}  # pid -> host

    def options_if_hostable(self, request: dict[str, Any]) -> Options | None:
        """The attempt's options when a host may run it; None when it needs a wrapper of its own."""
        argv = request["argv"]
        try:
            options = wrapper.parse_wrapper_args(argv[argv.index("fray.wrapper") + 1:])
        except (SystemExit, ValueError):
            return None
        if _needs_its_own_wrapper(options):
            return None
        try:
            with open(os.path.join(options.home, "runs", options.run_id, "job.json"), "rb") as handle:
                job = json.loads(handle.read())
            return options if job["kind"] != "script" and not job["environment"]["key"] else None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # the wrapper's workload says what is wrong with it

    def hand(self, request: dict[str, Any], options: Options) -> int:
        """Give the attempt to an idle host, or to a new one; the host's pid. OSError when none can be forked."""
        message = json.dumps({**request, "options": as_fields(options)}).encode() + b"\n"
        for host in [host for host in self.hosts.values() if host.serving is None and not host.retiring]:
            try:
                os.write(host.requests, message)
            except OSError:
                host.retiring = True  # it died while idle, not reaped yet: no attempt of its to record
                continue
            return self._serving(host, request, options)
        host = self._fork()
        os.write(host.requests, message)
        return self._serving(host, request, options)

    def _serving(self, host: Host, request: dict[str, Any], options: Options) -> int:
        host.serving = Serving(request["cwd"], options, time.time())
        return host.pid

    def _fork(self) -> Host:
        from fray.warm import function_host

        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (requests_read, requests_write, replies_read, replies_write):
                os.close(fd)
            raise
        if pid == 0:
            function_host.serve(requests_read, replies_write)
        os.close(requests_read)
        os.close(replies_write)
        host = Host(pid, requests_write, replies_read)
        self.hosts[pid] = host
        return host

    def reply_fds(self) -> dict[int, int]:
        """Replies' read end -> host pid, for the worker's select."""
        return {host.replies: pid for pid, host in self.hosts.items()}

    def heard(self, pid: int) -> list[str]:
        """Read what host `pid` said; the attempt folders it is done with (at most one)."""
        host = self.hosts[pid]
        try:
            chunk = os.read(host.replies, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            return []  # it died: `died` says what became of its attempt
        host.pending += chunk
        done = []
        while b"\n" in host.pending:
            line, host.pending = host.pending.split(b"\n", 1)
            if host.serving is not None:
                done.append(host.serving.cwd)
                host.serving = None
            if line == b"retire":
                self._retire(host)
        return done

    def _retire(self, host: Host) -> None:
        host.retiring = True  # it exits by itself; its requests pipe is closed when it is reaped (`died`)

    def died(self, pid: int, status: int) -> str | None:
        """Host `pid` ended (reaped); the folder of the attempt it was serving (recorded here), else None."""
        host = self.hosts.pop(pid)
        for fd in (host.replies, host.requests):
            os.close(fd)
        serving = host.serving
        if serving is None:
            return None
        _record_death(pid, serving, status)
        return serving.cwd

    def stop(self, cwd: str, signum: int) -> bool:
        """The backend's stop for the attempt in `cwd`, if a host serves it; whether one did."""
        for host in self.hosts.values():
            serving = host.serving
            if serving is None or serving.cwd != cwd:
                continue
            if signum == signal.SIGKILL:
                serving.stop_signal = signal.SIGKILL
                _kill_group(host.pid, signal.SIGKILL)
            elif serving.stop_signal is None:
                serving.stop_signal = signum
                serving.kill_at = time.monotonic() + serving.options.stop_grace
                _kill_group(host.pid, signal.SIGTERM)  # the host's group: the function and what it started
            return True
        return False

    def next_deadline(self) -> float | None:
        """Seconds until a stopped host's grace is over (None: no such host)."""
        deadlines = [h.serving.kill_at for h in self.hosts.values() if h.serving and h.serving.kill_at]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def enforce_grace(self) -> None:
        now = time.monotonic()
        for host in self.hosts.values():
            if host.serving and host.serving.kill_at is not None and now >= host.serving.kill_at:
                host.serving.kill_at = None
                _kill_group(host.pid, signal.SIGKILL)


def _needs_its_own_wrapper(options: Options) -> bool:
    """What a host does not give an attempt: a script or a module, arguments, GPUs or TPUs, a health command,
    another interpreter or environment."""
    other_python = options.python is not None and os.path.realpath(options.python) != os.path.realpath(sys.executable)
    return (options.home is None or os.path.basename(options.script) != layout.LAUNCHED_SHIM or not wrapper.has_function_entry()
            or bool(options.script_args) or options.module is not None or bool(options.gpus)
            or bool(options.tpu_devices) or options.health_cmd is not None or options.python_env is not None
            or other_python)


def as_fields(options: Options) -> dict[str, Any]:
    """`options` as JSON can carry them to the host, which then need not parse the command line again."""
    return {name: getattr(options, name) for name in wrapper.Options.__slots__}


def _kill_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _record_death(pid: int, serving: Serving, status: int) -> None:
    """What the wrapper would have written for its workload ending with `status` (the host's guardian kills what
    it left): failure.json (or final.json) and exit.json, through the fence and the wrapper's own
    record_end (fray.wrapper.hosted.record_death); nothing once superseded or force-killed."""
    options = serving.options
    fenced = os.WIFEXITED(status) and os.WEXITSTATUS(status) == contract.EXIT_FENCED
    if fenced or serving.stop_signal == signal.SIGKILL or os.path.exists(os.path.join(options.attempt_dir,
                                                                                         contract.EXIT)):
        return
    wrapper.record_host_death(options, pid, status, serving.started_at, serving.stop_signal)
