"""A warm worker for function runs on the local backend: wrappers forked from a Python that has imported them.

A function run (`fray.submit(fn)`, `fray.map`) costs two new Pythons per
attempt when started cold: the wrapper, then its workload, which imports
fray's entry point and cloudpickle again. That is about half a second on a
small machine, far more than a short function. So the local backend keeps one
warm process (`python -m fray.backends.local.warm --home HOME`, started on first
use and again if it died) that has imported the wrapper, the entry point and
cloudpickle once. For each attempt it forks a child that becomes the wrapper
exactly as `subprocess.Popen` would have started it (its own session, stdin
from /dev/null, wrapper.log as stdout and stderr, the attempt folder as working
folder, the attempt's environment). That wrapper forks the function's workload
in turn (fray.wrapper.forked). Every attempt still has its own wrapper and
workload processes, so its records, result files, retries, fencing, signals,
cancellation and exit status are those of a cold start. What stays warm is the
interpreter they are forked from, with cloudpickle loaded once. As many run at
once as the ledger admits: one per CPU for one-CPU functions.

Protocol, one JSON object a line: the backend writes {"argv", "env", "cwd", "log"};
the worker answers {"ready": true} once, then {"pid": N} for each request (or
{"error": text}) and {"exit": N} whenever a wrapper it forked ends, so the
daemon looks at once. When its stdin closes (the daemon is gone) it exits, and
the wrappers it forked live on, each in its own session, to be found again by
their working folder (`attempt_of`).
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn

MODULE = "fray.backends.local.warm"
START_TIMEOUT_SEC = 30.0


class WarmWorker:
    """The daemon's side: starts the warm process on first use, asks it for wrappers, hears their exits."""

    def __init__(self, home: Path, on_exit: Callable[[], None] | None) -> None:
        self.home = home
        self._on_exit = on_exit
        self._proc: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()

    def start(self, argv: list[str], env: dict[str, str], cwd: str, log: str) -> int:
        """Fork a wrapper running `argv`; its pid. OSError when the warm process cannot start or fork."""
        with self._lock:
            proc = self._ensure()
            assert proc.stdin is not None
            try:
                proc.stdin.write(json.dumps({"argv": argv, "env": env, "cwd": cwd, "log": log}).encode() + b"\n")
                proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                self._proc = None
                raise OSError("the warm worker has exited") from None
            reply = self._reply()
        if "pid" not in reply:
            raise OSError(f"the warm worker could not start the wrapper: {reply.get('error', reply)}")
        return int(reply["pid"])

    def close(self) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._replies = queue.Queue()
        proc = subprocess.Popen([sys.executable, "-m", MODULE, "--home", str(self.home)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True)
        threading.Thread(target=self._listen, args=(proc, self._replies), name="fray-warm-worker",
                         daemon=True).start()
        self._proc = proc
        if not self._reply().get("ready"):
            raise OSError("the warm worker did not start")
        return proc

    def _reply(self) -> dict[str, Any]:
        try:
            return self._replies.get(timeout=START_TIMEOUT_SEC)
        except queue.Empty:
            self._proc = None
            raise OSError(f"the warm worker did not answer within {START_TIMEOUT_SEC:g}s") from None

    def _listen(self, proc: subprocess.Popen[bytes], replies: queue.Queue[dict[str, Any]]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            message = json.loads(line)
            if "exit" in message:
                if self._on_exit is not None:
                    self._on_exit()
            else:
                replies.put(message)
        replies.put({"error": "the warm worker has exited"})
        proc.wait()


def attempt_of(pid: int, home: Path) -> tuple[str, int] | None:
    """(run id, attempt) of a wrapper the warm worker forked, from its working folder
    (runs/<id>/attempts/<n>: where every wrapper runs); None for the worker itself or a workload."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    folder = Path(cwd)
    runs = Path(os.path.realpath(home)) / "runs"
    if folder.parent.name != "attempts" or folder.parent.parent.parent != runs or not folder.name.isdigit():
        return None
    return folder.parent.parent.name, int(folder.name)


# -- the warm process itself -------------------------------------------------------------------


def serve() -> int:
    """Import once, then fork a wrapper per request until stdin closes."""
    import cloudpickle  # noqa: F401  what every function's workload unpickles with
    from fray.cluster import entry, environment, payloads, resuming  # noqa: F401  the workload's imports
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
                _fork_wrapper(json.loads(line), (wake_read, wake_write), main.main)


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


def _fork_wrapper(request: dict[str, Any], wake: tuple[int, int], wrapper_main: Callable[[list[str]], int]) -> None:
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
        _become_wrapper(request, log, wake, wrapper_main)
    os.close(log)
    _send({"pid": pid})


def _become_wrapper(request: dict[str, Any], log: int, wake: tuple[int, int],
                    wrapper_main: Callable[[list[str]], int]) -> NoReturn:
    """In the forked child: what Popen(argv, stdin=DEVNULL, stdout=log, stderr=log, env, cwd,
    start_new_session=True, close_fds=True) makes of a new process, then the wrapper's main."""
    from fray.wrapper import forked

    code = 70
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        forked.close_from(3)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        forked.new_std_streams(unbuffered=True)
        argv = request["argv"]
        args = argv[argv.index("fray.wrapper") + 1:]
        sys.argv = [argv[0], *args]
        code = wrapper_main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    sys.exit(serve())  # --home HOME is not read: it names the home in the command line, for whoever scans /proc
