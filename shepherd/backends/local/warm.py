"""A warm worker for function runs on the local backend: wrappers forked from a Python that has imported them.

A function run (`fray.submit(fn)`, `fray.map`) costs two new Pythons per
attempt when started cold: the wrapper, then its workload, which imports
fray's entry point and cloudpickle again. That is about half a second on a
small machine, far more than a short function. So the local backend keeps one
warm process (`python -m fray.cluster.warm_worker --home HOME`, started on first
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
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

MODULE = "fray.cluster.warm_worker"  # the process; it knows what a function's workload imports (a layer above)
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
