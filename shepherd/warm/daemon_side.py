"""A warm worker for function runs on the local backend: wrappers forked from a Python that has imported them.

A function run (`fray.submit(fn)`, `fray.map`) costs two new Pythons per
attempt when started cold: the wrapper, then its workload, which imports
fray's entry point and cloudpickle again. That is about half a second on a
small machine, far more than a short function. So the local backend keeps one
warm process (`python -m fray.warm.worker --home HOME`, started on first
use and again if it died) that has imported the wrapper, the entry point and
cloudpickle once (the entry point as the first launched run's shim imports it). A plain function attempt runs in one of its function hosts
(fray.warm.function_host: forked once per CPU, then wrapper and workload of
attempt after attempt, with every record of a cold start; fray.warm.host_pool
says which attempts qualify). For any other attempt it forks a child that
becomes the wrapper exactly as `subprocess.Popen` would have started it (its
own session, stdin from /dev/null, wrapper.log as stdout and stderr, the
attempt folder as working folder, the attempt's environment), which forks a
function's workload in turn (fray.wrapper.forked). Either way its records,
result files, retries, fencing, cancellation and exit status are those of a
cold start. A stop for an attempt the running worker forked goes through the
worker (`cancel`), which alone knows whether a host is still on that attempt.

The worker is also the machine's queue of functions (fray.warm.queueing):
the ledger admits function attempts beyond the CPUs, as many per CPU as
QUEUED_WORK_SEC of work at the pace recent attempts ended (`depth_per_cpu`:
from 3 for long functions to 64 for ones of a few milliseconds); the worker
runs as many as the CPUs hold and starts the next queued one the moment an
attempt ends, without waiting for a daemon cycle. A queued
attempt is the backend's "pending" (a submitted Slurm job not yet running: no
heartbeat or stall clock runs for it); a cancel takes it out of the queue; if
the worker dies, its queued attempts are reported gone, with why, and retried
as the run's policy says.

Protocol (fray.warm.worker), one JSON object a line: the backend writes
{"argv", "env", "cwd", "log", "cpus"} or {"cancel": cwd, "signal", "group"}; the worker answers
{"ready": true} once, then {"pid": N, "cwd"}, {"queued": true} or {"error": text} for
each request, and tells {"started": cwd, "pid": N}, {"failed": cwd, "error"},
{"dropped": cwd} and {"exit": N} as they happen (an exit wakes the daemon). When
its stdin closes (the daemon is gone) it exits, dropping its queue, and the
wrappers and hosts it forked live on, each in its own session, to be found
again by the attempt folder they work in or hold open (`attempt_of`); a host
takes no new attempt once its worker is gone.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fray.wrapper import contract
from fray.wrapper import face as wrapper

MODULE = "fray.warm.worker"  # the process
START_TIMEOUT_SEC = 30.0
QUEUE_PER_CPU = 3  # queued function attempts per CPU, at least: enough that a CPU never waits for a daemon cycle
QUEUE_MAX_PER_CPU = 64
QUEUED_WORK_SEC = 1.0  # per CPU: what the queue holds of attempts as long as the recent ones (`depth_per_cpu`)
GONE_FROM_QUEUE = "queued on this machine's warm worker, which exited before starting it"
_Worker = subprocess.Popen  # the warm process, as the daemon started it


@dataclass(frozen=True)
class Known:
    """What the worker said of the attempts it was given, by the backend's key."""

    queued: set[Any]  # waiting in its queue for CPUs
    running: dict[Any, int]  # forked, whose exit was not heard yet (even before a scan of /proc could tell them)
    ended: set[Any]  # whose wrapper's exit was heard: gone, no scan needed to tell


class WarmWorker:
    """The daemon's side: starts the warm process on first use, asks it for wrappers, hears their exits."""

    def __init__(self, home: Path, slots: int, on_exit: Callable[[], None] | None) -> None:
        self.home = home
        self.slots = slots  # the machine's CPUs: a new worker is told which of them earlier ones' wrappers hold
        self._on_exit = on_exit
        self._proc: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()  # one request and its reply at a time
        # What the worker said, kept by its listener (never held while waiting for a reply):
        self._state = threading.Lock()
        self._waiting: dict[str, tuple[Any, _Worker]] = {}  # working folder -> (key, worker): handed, not started
        self._running: dict[int, tuple[Any, _Worker]] = {}  # pid -> (key, worker): forked, no exit heard yet
        self._gone: dict[Any, str] = {}  # key -> why: attempts that left the queue without starting
        self._ended: set[Any] = set()  # keys whose wrapper's exit was heard since `known` was last asked
        self._started_at: dict[int, float] = {}  # pid -> when it started its attempt (a host starts many)
        self._mean_sec: float | None = None  # how long attempts have lasted lately (an exponential average)

    def start(self, key: Any, argv: list[str], env: dict[str, str], cwd: str, log: str, cpus: int) -> int | None:
        """Fork a wrapper running `argv`: its pid, or None when it waits in the worker's queue for CPUs.
        OSError when the warm process cannot start or fork."""
        with self._lock:
            proc = self._ensure()
            with self._state:
                self._waiting[cwd] = (key, proc)  # before the worker can say it started
            reply: dict[str, Any] = {}
            try:
                self._write(proc, {"argv": argv, "env": env, "cwd": cwd, "log": log, "cpus": cpus})
                reply = self._reply()
            finally:
                if "pid" not in reply and not reply.get("queued"):
                    with self._state:
                        self._waiting.pop(cwd, None)
        if reply.get("queued"):
            return None
        if "pid" not in reply:
            raise OSError(f"the warm worker could not start the wrapper: {reply.get('error', reply)}")
        return int(reply["pid"])

    def prestart(self) -> None:
        """Start the warm process now, in a thread, so that the first attempt does not wait for its imports."""
        def start() -> None:
            with self._lock:
                try:
                    self._ensure()
                except OSError:
                    pass  # the first attempt's start tries again, and says why if it cannot

        threading.Thread(target=start, name="fray-warm-start", daemon=True).start()

    def known(self) -> Known:
        """What this worker knows of its attempts now; each exit is told once."""
        with self._state:
            ended, self._ended = self._ended, set()
            return Known({key for key, _ in self._waiting.values()},
                         {key: pid for pid, (key, _) in self._running.items()}, ended)

    def depth_per_cpu(self) -> int:
        """How many attempts per CPU the queue may hold: QUEUED_WORK_SEC of work at the recent attempts' pace,
        between QUEUE_PER_CPU and QUEUE_MAX_PER_CPU. Short functions need a deep queue (a CPU must not drain it
        within a daemon cycle); long ones a shallow one, so that the daemon's scheduler, not this queue's
        first-in first-out, still orders what comes after them."""
        mean = self._mean_sec
        if not mean:
            return QUEUE_PER_CPU
        return max(QUEUE_PER_CPU, min(QUEUE_MAX_PER_CPU, int(QUEUED_WORK_SEC / mean)))

    def queue_held(self) -> bool:
        """Whether attempts handed to the worker wait in its queue for CPUs."""
        with self._state:
            return bool(self._waiting)

    def gone(self, key: Any) -> str | None:
        """Why `key` left the queue without starting (once), None if it did not."""
        with self._state:
            return self._gone.pop(key, None)

    def forked(self, pid: int) -> bool:
        """Whether the running worker forked `pid` (a wrapper or a function host): its stops go through it."""
        proc = self._proc
        return proc is not None and proc.poll() is None and wrapper.parent_of(pid) == proc.pid

    def cancel(self, cwd: str, signum: int, group: bool) -> None:
        """Take the attempt whose folder is `cwd` out of the queue; if the worker forked it already, have the
        worker send it `signum` (to its group with `group`). Nothing when there is no worker."""
        with self._lock:
            if self._proc is not None:
                try:
                    self._write(self._proc, {"cancel": cwd, "signal": int(signum), "group": group})
                except OSError:
                    pass  # the worker is gone, and its queue with it: the listener says so

    def close(self) -> None:
        """Let the warm process go (its stdin closed: it exits, dropping its queue; what it forked lives on)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def _write(self, proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            self._proc = None
            raise OSError("the warm worker has exited") from None

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._replies = queue.Queue()
        busy = ",".join(str(pid) for pid in forked_wrappers(self.home))  # a restart's, or a killed worker's
        proc = subprocess.Popen([sys.executable, "-m", MODULE, "--home", str(self.home), "--slots", str(self.slots),
                                 "--busy", busy],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
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

    def _listen(self, proc: _Worker, replies: queue.Queue[dict[str, Any]]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            message = json.loads(line)
            if "started" in message:  # a queued one forked: no word to the daemon, which sees it in its records
                self._settle(message["started"], message["pid"], None)
                continue
            if "pid" in message:  # the reply to a start, after which this listener may hear its exit
                self._settle(message["cwd"], message["pid"], None)
            if "exit" in message:
                with self._state:
                    ended = self._running.pop(message["exit"], None)
                    if ended is not None:
                        self._ended.add(ended[0])
                    self._timed(message["exit"])
            elif "dropped" in message or "failed" in message:
                self._settle(message.get("dropped") or message["failed"], None, message.get("error"))
            else:
                replies.put(message)
                continue
            if self._on_exit is not None:
                self._on_exit()  # an end, or one out of the queue for good: the daemon looks at once
        replies.put({"error": "the warm worker has exited"})
        proc.wait()
        with self._state:
            for cwd, (key, owner) in list(self._waiting.items()):
                if owner is proc:
                    self._gone[key] = GONE_FROM_QUEUE
                    del self._waiting[cwd]
            # Its wrappers live on, found by /proc from now on: their exits will not be heard here.
            self._running = {pid: entry for pid, entry in self._running.items() if entry[1] is not proc}
        if self._on_exit is not None:
            self._on_exit()

    def _timed(self, pid: int) -> None:
        started = self._started_at.pop(pid, None)
        if started is not None:
            took = time.monotonic() - started
            self._mean_sec = took if self._mean_sec is None else 0.8 * self._mean_sec + 0.2 * took

    def _settle(self, cwd: str | None, pid: int | None, error: str | None) -> None:
        """What became of the attempt handed over in `cwd`: forked as `pid`, or out of the queue for good."""
        with self._state:
            entry = self._waiting.pop(cwd, None) if cwd is not None else None
            if entry is not None and pid is not None:
                self._running[pid] = entry
                self._started_at[pid] = time.monotonic()
            elif entry is not None and error is not None:
                self._gone[entry[0]] = f"the warm worker could not start it: {error}"


def forked_wrappers(home: Path) -> list[int]:
    """Pids of the live wrappers any warm worker of `home` forked (found by their command line and folder)."""
    marks = (MODULE.encode(), str(home).encode())
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if all(mark in argv for mark in marks) and attempt_of(int(entry.name), home) is not None:
            found.append(int(entry.name))
    return found


def attempt_of(pid: int, home: Path) -> tuple[str, int] | None:
    """(run id, attempt) of a wrapper the warm worker forked, from its working folder
    (runs/<id>/attempts/<n>: where every wrapper runs), or of a function host, from the folder it holds open
    on contract.ATTEMPT_FD; None for the worker itself, an idle host or a workload.

    A process the wrapper forks starts in that folder too, with the same command line, until it moves
    (a script's workload between its fork and its exec, a function's workload, the guardian): its parent
    is in the same folder, where a wrapper's (the warm worker, or init) never is. Taken for the wrapper,
    it would get the attempt's stop, and a workload that exits 0 on SIGTERM would pass for a success."""
    runs = Path(os.path.realpath(home)) / "runs"
    folder = _attempt_folder(pid, runs)
    if folder is None:
        return None
    parent = wrapper.parent_of(pid)
    if parent is not None and _attempt_folder(parent, runs) == folder:
        return None
    return folder.parent.parent.name, int(folder.name)


def _attempt_folder(pid: int, runs: Path) -> Path | None:
    """The attempt folder `pid` works in (a forked wrapper) or holds open on contract.ATTEMPT_FD (a function
    host, fray.warm.function_host, whose working folder is its function's); None if neither."""
    for link in (f"/proc/{pid}/cwd", f"/proc/{pid}/fd/{contract.ATTEMPT_FD}"):
        try:
            folder = Path(os.readlink(link))
        except OSError:
            continue
        if folder.parent.name == "attempts" and folder.parent.parent.parent == runs and folder.name.isdigit():
            return folder
    return None
