"""The warm worker process of the local backend (fray.warm.daemon_side): wrappers forked, not started.

`python -m fray.warm.worker --home HOME --slots N [--busy PID,...]` imports once
what a function run's wrapper and workload need (the wrapper, cloudpickle; on
the first attempt of a run launched through the cluster API, what its launch
shim imports: `load_entry`), then reads requests on stdin, one JSON object a line
({"argv", "env", "cwd", "log", "cpus"}). A plain function attempt goes to one
of its function hosts (fray.warm.host_pool, fray.warm.function_host);
for any other it forks a child that becomes the wrapper as
`subprocess.Popen(argv, stdin=DEVNULL, stdout=log, stderr=log, env=env,
cwd=cwd, start_new_session=True, close_fds=True)` would have started it. At
most N CPUs' worth of attempts run at once, counting one
CPU for each wrapper an earlier worker forked that still runs (--busy; the
daemon restarted, or the worker was killed): a request that
does not fit now waits in the worker's queue, first in first out, and starts
the moment an exit frees its CPUs, with no round trip to the daemon (a Slurm
job PENDING, then RUNNING). It answers {"ready": true} once, then per request
{"pid": N, "cwd": cwd}, {"queued": true} or {"error": text}; {"started": cwd, "pid": N}
(or {"failed": cwd, "error": text}) when a queued one starts; {"exit": N} when
a wrapper it forked ends, or the host N is done with its attempt (it wrote
exit.json) or died in it. {"cancel": cwd, "signal": N, "group": bool} takes a
queued request out of the queue ({"dropped": cwd}), or stops the attempt: that
signal to the wrapper forked for it, or the host's stop (fray.warm.host_pool)
to the host serving it; the backend sends every stop for what this worker
forked through here. It exits when stdin closes (the daemon is gone), dropping
its queue (the next daemon finds those attempts gone and retries them); the
wrappers and busy hosts live on in their own sessions, and a host exits once
its attempt is done.
A workload (forked, or a host's function) names on a pipe the standard-library
modules it had to import (what the function's module imports), and the worker
imports them itself, once, for every later fork (fray.wrapper.warm_imports).

`--home` is not read: it names the home in the command line, for whoever scans
/proc (fray.warm.daemon_side.forked_wrappers, the tests' clean-up); the name of
this module marks the worker's forks there too.
"""

from __future__ import annotations

import ast
import collections
import gc
import json
import os
import select
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from fray.state import layout
from fray.wrapper import face as wrapper
from fray.wrapper import forked, options

if TYPE_CHECKING:
    from fray.warm import host_pool


def main(argv: list[str]) -> int:
    def option(name: str, default: str) -> str:
        return argv[argv.index(name) + 1] if name in argv else default

    return serve(int(option("--slots", str(os.cpu_count() or 1))),
                 [int(pid) for pid in option("--busy", "").split(",") if pid])


def serve(slots: int, busy: list[int]) -> int:
    """Import once, then fork a wrapper per request, `slots` CPUs' worth at once, until stdin closes. `busy`:
    wrappers an earlier worker forked that still run, a CPU each until they end (watched by pidfd)."""
    import ctypes  # noqa: F401  what every wrapper imports late (fray.wrapper.procs: prctl), a tenth of its start
    import cloudpickle  # noqa: F401  what every function's workload unpickles with
    from fray.core import validation
    from fray.state import store  # noqa: F401
    from fray.wrapper import attempt, jobside  # noqa: F401  the wrapper, all of it
    from fray.wrapper.main import main as wrapper_main

    from fray.warm import host_pool
    from fray.wrapper import warm_imports

    told = warm_imports.open_pipe()
    forked.become_warm()
    options.build_parser()  # argparse's parser, once for every wrapper forked from here
    try:
        jobside.helpers_path()  # its version hash, once for every wrapper forked from here
    except OSError:
        pass  # each wrapper says why, as a cold one would
    for schema in ("job", "call-result", "call-batch", "call-time"):  # what function workloads read and write, compiled once
        validation.is_valid(schema)
    # Out of the collector's sight for good: a child's collections would otherwise walk (and so copy, page by
    # page) every object inherited from here.
    gc.freeze()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select below
    _send({"ready": True})
    slots_ = _Slots(slots, wrapper_main, _pidfds(busy), host_pool.HostPool())
    hosts = slots_.hosts
    pending = b""
    while True:
        replies = hosts.reply_fds()
        try:
            readable, _, _ = select.select([0, wake_read, told, *slots_.others, *replies], [], [],
                                           hosts.next_deadline())
        except InterruptedError:
            continue
        hosts.enforce_grace()
        for fd in readable:
            if fd in replies:
                slots_.host_done(replies[fd])
        ended = [fd for fd in readable if fd in slots_.others]
        for fd in ended:
            os.close(fd)
            del slots_.others[fd]
        if wake_read in readable or ended:
            if wake_read in readable:
                os.read(wake_read, 4096)
            slots_.reap()
        if told in readable:
            warm_imports.learn(os.read(told, 1 << 16))
        if 0 in readable:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                slots_.take(json.loads(line))


class _Slots:
    """The wrappers running (pid -> CPUs) and the requests waiting for CPUs, oldest first."""

    def __init__(self, slots: int, wrapper_main: Callable[[list[str]], int], others: dict[int, int],
                 hosts: host_pool.HostPool) -> None:
        self.slots = slots
        self.hosts = hosts  # those that run function attempts in themselves (fray.warm.function_host)
        self.running: dict[int, tuple[int, str]] = {}  # pid -> (CPUs, working folder)
        self.others = others  # pidfd -> pid: an earlier worker's wrappers still running, one CPU each
        self.queue: collections.deque[dict[str, Any]] = collections.deque()
        self._main = wrapper_main

    def take(self, request: dict[str, Any]) -> None:
        if "cancel" in request:
            self._cancel(request["cancel"], int(request["signal"]), bool(request.get("group")))
            return
        if self.queue or not self._fits(request):
            self.queue.append(request)
            _send({"queued": True})
            return
        pid, error = self._fork(request)
        _send({"pid": pid, "cwd": request["cwd"]} if error is None else {"error": error})

    def _cancel(self, cwd: str, signum: int, group: bool) -> None:
        """Out of the queue; or, forked already (the backend asks only for what its scan did not find), the
        backend's stop signal for it."""
        kept = [r for r in self.queue if r["cwd"] != cwd]
        if len(kept) != len(self.queue):
            self.queue = collections.deque(kept)
            _send({"dropped": cwd})
            return
        if self.hosts.stop(cwd, signum):
            return
        for pid, (_, folder) in self.running.items():
            if folder == cwd:
                _signal(pid, signum, group)

    def reap(self) -> None:
        for pid, status in wrapper.ended_children():
            if pid in self.hosts.hosts and self.hosts.died(pid, status) is None:
                continue  # an idle host (retired, or stopped after its attempt was done)
            self.running.pop(pid, None)
            _send({"exit": pid})
        self._start_queued()

    def host_done(self, pid: int) -> None:
        """Host `pid` said it is done with its attempt (exit.json written): its CPUs are free."""
        for _ in self.hosts.heard(pid):
            self.running.pop(pid, None)
            _send({"exit": pid})
        self._start_queued()

    def _start_queued(self) -> None:
        while self.queue and self._fits(self.queue[0]):
            request = self.queue.popleft()
            pid, error = self._fork(request)
            _send({"started": request["cwd"], "pid": pid} if error is None else
                  {"failed": request["cwd"], "error": error})

    def _fits(self, request: dict[str, Any]) -> bool:
        # An attempt wider than the machine's CPUs runs alone rather than never.
        used = sum(cpus for cpus, _ in self.running.values()) + len(self.others)
        return not used or used + int(request.get("cpus", 1)) <= self.slots

    def _fork(self, request: dict[str, Any]) -> tuple[int, str | None]:
        if not forked.has_entry():
            load_entry(request)
        options = self.hosts.options_if_hostable(request)
        if options is not None:
            try:
                pid = self.hosts.hand(request, options)
            except OSError as exc:
                return 0, f"fork: {exc}"
            self.running[pid] = (int(request.get("cpus", 1)), request["cwd"])
            return pid, None
        try:
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            return 0, f"cannot open {request['log']}: {exc}"
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(log)
            return 0, f"fork: {exc}"
        if pid == 0:
            _become_wrapper(request, log, self._main)
        os.close(log)
        self.running[pid] = (int(request.get("cpus", 1)), request["cwd"])
        return pid, None


def load_entry(request: dict[str, Any]) -> None:
    """For the wrapper of a run launched through the cluster API (its script is the launch shim): run the shim's
    imports here, once, and make its `main` what every fork runs for such a shim (fray.wrapper.forked.set_entry).

    The shim names the function entry point (fray.cluster.launching.SHIM: `from fray.cluster.entry import main`)
    and that module imports what a function's workload needs: the cluster API, a layer above this worker, is
    imported as its workloads import it, by the run's own script, never by a name written here. A shim that
    cannot be read leaves this worker cold for it: each wrapper then starts the shim as a new Python."""
    argv = request["argv"]
    try:
        script = options.parse(argv[argv.index("fray.wrapper") + 1:]).script
    except (SystemExit, ValueError):
        return
    if os.path.basename(script) != layout.LAUNCHED_SHIM:
        return
    try:
        with open(script, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), script)
        imports = ast.Module([node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))], [])
        namespace: dict[str, Any] = {"__name__": "__fray_launch_shim__"}
        exec(compile(imports, script, "exec"), namespace)  # its imports only: the shim's last line calls main()
        main = namespace["main"]
    except (OSError, SyntaxError, ImportError, KeyError):
        return
    forked.set_entry(layout.LAUNCHED_SHIM, main)
    gc.freeze()  # what it imported, out of the collector's sight as the rest is (serve)


def _signal(pid: int, signum: int, group: bool) -> None:
    """`signum` to the wrapper `pid`, or with `group` to the session it leads (to it alone before its setsid)."""
    for send in ((os.killpg, os.kill) if group else (os.kill,)):
        try:
            send(pid, signum)
            return
        except (ProcessLookupError, PermissionError):
            continue


def _pidfds(pids: list[int]) -> dict[int, int]:
    """pidfd -> pid for those of `pids` still alive: readable once that process ends."""
    found = {}
    for pid in pids:
        try:
            found[os.pidfd_open(pid)] = pid
        except OSError:
            continue  # gone already (or no pidfds here: then it is not waited for)
    return found


def _send(message: dict[str, Any]) -> None:
    os.write(1, json.dumps(message).encode() + b"\n")


def _become_wrapper(request: dict[str, Any], log: int, wrapper_main: Callable[[list[str]], int]) -> NoReturn:
    """In the forked child: the new process Popen would have started (wrapper.log as stdout and stderr), then
    the wrapper's main with the arguments after `-m fray.wrapper`."""
    def wrapper() -> int:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        forked.become_new_process(log, log, request["cwd"], request["env"], unbuffered=True)
        argv = request["argv"]
        args = argv[argv.index("fray.wrapper") + 1:]
        sys.argv = [argv[0], *args]
        return wrapper_main(args)

    forked.exit_with(wrapper)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
