"""The warm worker process of the local backend (fray.backends.local.warm): wrappers forked, not started.

`python -m fray.cluster.warm_worker --home HOME` imports once what a function
run's wrapper and workload need (the wrapper, fray's function entry point,
cloudpickle), then reads requests on stdin, one JSON object a line
({"argv", "env", "cwd", "log"}), and forks a child for each that becomes the
wrapper as `subprocess.Popen(argv, stdin=DEVNULL, stdout=log, stderr=log,
env=env, cwd=cwd, start_new_session=True, close_fds=True)` would have started
it. It answers {"ready": true} once, then {"pid": N} (or {"error": text}) per
request, and {"exit": N} when a wrapper it forked ends. It exits when stdin
closes (the daemon is gone); the wrappers live on in their own sessions.
The wrapper forks the function's workload in turn (fray.wrapper.forked).
`--home` is not read: it names the home in the command line, for whoever
scans /proc (fray.backends.local.backend, the tests' clean-up).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any, Callable, NoReturn


def serve() -> int:
    """Import once, then fork a wrapper per request until stdin closes."""
    import ctypes  # noqa: F401  what every wrapper imports late (fray.wrapper.procs: prctl), a tenth of its start
    import cloudpickle  # noqa: F401  what every function's workload unpickles with
    from fray.cluster import call_records, chunks, entry, environment, payloads, resuming  # noqa: F401  the workload's imports
    from fray.state import layout, store  # noqa: F401
    from fray.wrapper import attempt, forked, main  # noqa: F401  the wrapper, all of it

    forked.set_entry(layout.LAUNCHED_SHIM, entry.main)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select below
    _send({"ready": True})
    pending = b""
    while True:
        try:
            readable, _, _ = select.select([0, wake_read], [], [])
        except InterruptedError:
            continue
        if wake_read in readable:
            os.read(wake_read, 4096)
            _reap()
        if 0 in readable:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                _fork_wrapper(json.loads(line), main.main)


def _send(message: dict[str, Any]) -> None:
    os.write(1, json.dumps(message).encode() + b"\n")


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"exit": pid})


def _fork_wrapper(request: dict[str, Any], wrapper_main: Callable[[list[str]], int]) -> None:
    try:
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:
        _send({"error": f"cannot open {request['log']}: {exc}"})
        return
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(log)
        _send({"error": f"fork: {exc}"})
        return
    if pid == 0:
        _become_wrapper(request, log, wrapper_main)
    os.close(log)
    _send({"pid": pid})


def _become_wrapper(request: dict[str, Any], log: int, wrapper_main: Callable[[list[str]], int]) -> NoReturn:
    """In the forked child: the new process Popen would have started (wrapper.log as stdout and stderr), then
    the wrapper's main with the arguments after `-m fray.wrapper`."""
    from fray.wrapper import forked

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
    sys.exit(serve())
