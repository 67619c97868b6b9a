"""Processes on the node: the workload's exit status, and no orphans left behind.

The workload is started with a parent-death signal (PR_SET_PDEATHSIG, Linux):
when the wrapper dies, however (SIGKILL, the OOM killer, a crash), the kernel
SIGKILLs the workload at once. Its own descendants are the stray killer's
(fray.wrapper.tags).

The wrapper becomes a child subreaper (Linux), so whatever the workload leaves
running - `cmd &` inside its process group, `setsid cmd &` outside it - is
reparented to the wrapper rather than to init, where it can still be found
(through /proc) and killed. The wrapper reaps every child that dies, because a
zombie still answers kill(pid, 0) and would look alive to anyone checking.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
KILL_WAIT_SEC = 5.0  # after SIGKILL only an unkillable (D state) process is still there


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux prctl); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes  # only here: it costs milliseconds and only Linux needs it

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def ended_children() -> Iterator[tuple[int, int]]:
    """(pid, wait status) of each child of this process that has ended, collected as the caller takes them,
    never waiting for one that still runs; it stops when none is left ended (or no child is left at all)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def die_with_this_process() -> Callable[[], None] | None:
    """A preexec_fn for Popen: the child gets SIGKILL when this process dies; None off Linux.

    Set in the child between fork and exec (it survives exec); prctl is looked up
    here, before the fork, so the child only makes one foreign call. The signal
    follows the thread that forks, so call Popen from the thread that lives as
    long as the process: the main thread.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # the parent died before the signal was armed

    return arm


def _ppid_and_state(pid: str) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None  # gone meanwhile
    # The command name is in parentheses and may itself contain ") ".
    fields = data.rpartition(b")")[2].split()
    if len(fields) < 2:
        return None
    return int(fields[1]), fields[0].decode("ascii", errors="replace")


def parent_of(pid: int) -> int | None:
    """The parent of process `pid` (from /proc); None once it is gone."""
    info = _ppid_and_state(str(pid))
    return None if info is None else info[0]


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (the SigCgt mask of /proc/<pid>/status)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


_outside: set[int] = set()  # children of this process that are none of its attempt's processes (its guardian)


def not_the_attempts(pid: int) -> None:
    """`pid`, a child of this process, is none of the attempt's processes: `descendants` leaves it out, so the
    clean-up neither signals it nor waits for it."""
    _outside.add(pid)


def descendants(root: int) -> list[int]:
    """Live (not zombie) descendants of `root`: children's children from /proc/<pid>/task/<tid>/children, a
    few reads; where the kernel has no such file, from a scan of every process. [] where there is no /proc."""
    try:
        tree = _children_files(root)
    except FileNotFoundError:
        tree = _scan_all()
    dead: set[int] = set()
    found: list[int] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child in tree(pid):
            if child in dead or child in _outside:
                continue
            info = _ppid_and_state(str(child))
            if info is None or info[1] in ("Z", "X"):
                dead.add(child)  # a zombie has no children left: nothing below it to find
                continue
            found.append(child)
            frontier.append(child)
    return found


def _children_files(root: int) -> Callable[[int], list[int]]:
    """pid -> its children, read from the kernel's per-thread lists (a child forked by any of its threads);
    FileNotFoundError where the kernel keeps none (CONFIG_PROC_CHILDREN) or there is no /proc."""
    def children(pid: int) -> list[int]:
        found: list[int] = []
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return found  # gone meanwhile
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                    found.extend(int(child) for child in handle.read().split())
            except OSError:
                continue  # that thread has ended
        return found

    os.stat(f"/proc/{root}/task/{root}/children")  # FileNotFoundError: none kept here
    return children


def _scan_all() -> Callable[[int], list[int]]:
    """pid -> its children, from every process's parent in /proc (a kernel without children files)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    for name in names:
        if name.isdigit():
            info = _ppid_and_state(name)
            if info is not None:
                children.setdefault(info[0], []).append(int(name))
    return lambda pid: children.get(pid, [])


class Reaper:
    """Reaps the wrapper's children; keeps the workload's wait status when it is among them.

    A thread blocks in waitpid(-1) while the workload runs (orphans adopted as
    subreaper are reaped along the way); `reap_ready()` reaps without blocking
    during cleanup. Both may run at once; whichever reaps the workload records it.
    Since waitpid(-1) takes every child, whoever else starts a child meanwhile
    (the health command) learns its status from `wait_child()`, never from
    Popen.wait(), which would find it gone and report 0.
    """

    KEPT_STATUSES = 256  # of children nobody asked about (adopted orphans)

    def __init__(self, workload_pid: int, on_exit: Callable[[], None]) -> None:
        self.workload_pid = workload_pid
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._reaped = threading.Condition(self._lock)
        self._status: int | None = None
        self._others: dict[int, int] = {}  # pid -> wait status, children other than the workload
        self.exited = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fray-reaper", daemon=True)

    @property
    def wait_status(self) -> int | None:
        """The workload's raw wait status once it has been reaped."""
        with self._lock:
            return self._status

    def start(self) -> "Reaper":
        self._thread.start()
        return self

    def _collect(self, pid: int, status: int) -> None:
        if pid != self.workload_pid:
            with self._lock:
                self._others[pid] = status
                while len(self._others) > self.KEPT_STATUSES:
                    del self._others[next(iter(self._others))]
                self._reaped.notify_all()
            return
        with self._lock:
            self._status = status
        self.exited.set()
        self._on_exit()

    def _run(self) -> None:
        while not self.exited.is_set():
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return  # no children left: reap_ready() got the workload
            self._collect(pid, status)

    def wait_child(self, pid: int, timeout: float) -> int | None:
        """The wait status of child `pid` (not the workload) once reaped; None if still running at `timeout`."""
        deadline = time.monotonic() + timeout
        with self._reaped:
            while pid not in self._others:
                if not self._thread.is_alive():
                    # The thread stops with the workload; from then on reap it here.
                    try:
                        reaped, status = os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        return self._others.pop(pid, None)
                    if reaped:
                        return status
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._reaped.wait(min(remaining, 0.05))
            return self._others.pop(pid)

    def reap_ready(self) -> None:
        for pid, status in ended_children():
            self._collect(pid, status)


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _signal_pids(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_until_gone(pgid: int | None, reap: Callable[[], None], deadline: float, resignal: int | None) -> list[int]:
    """Poll (reaping as it goes) until the group and the descendants are gone.

    Returns what is left at `deadline`: pids, or [-pgid] for a group whose
    members are not the wrapper's descendants (kill()'s way to name a group).
    """
    delay = 0.005
    me = os.getpid()
    while True:
        reap()
        left = descendants(me)
        group_left = pgid if pgid is not None and _signal_group(pgid, 0) else None
        if not left and group_left is None:
            return []
        if resignal is not None:
            # A process that forks while being killed would otherwise leave its new child behind.
            _signal_pids(left, resignal)
            if group_left is not None:
                _signal_group(group_left, resignal)
        if time.monotonic() >= deadline:
            return left or ([-group_left] if group_left is not None else [])
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def kill_all_now(pgid: int | None) -> None:
    """SIGKILL the workload's group and every descendant at once, logging nothing (a fenced attempt).

    What dies is reaped here: the reaper thread stops once it has the workload, and a member of its group that
    died after it (an orphan this subreaper adopted) stays a zombie that keeps the group alive to killpg, so the
    wait ran its whole KILL_WAIT_SEC and a fenced wrapper outlived its fence by 5 s."""
    if pgid is not None:
        _signal_group(pgid, signal.SIGKILL)
    _signal_pids(descendants(os.getpid()), signal.SIGKILL)
    _wait_until_gone(pgid, _reap_ended, time.monotonic() + KILL_WAIT_SEC, resignal=signal.SIGKILL)


def _reap_ended() -> None:
    for _ in ended_children():
        pass


def stop_all(pgid: int | None, reap: Callable[[], None], grace: float, log: Callable[[str], None]) -> list[int]:
    """SIGTERM the workload's group and every descendant, SIGKILL what outlives `grace`.

    Returns the pids that even SIGKILL did not remove within KILL_WAIT_SEC
    (empty in all but pathological cases): the wrapper reports them and exits
    rather than hang.
    """
    me = os.getpid()
    reap()
    left = descendants(me)
    group_left = pgid is not None and _signal_group(pgid, signal.SIGTERM)
    if not left and not group_left:
        return []
    log(f"stopping what the workload left running (SIGTERM, then SIGKILL after {grace:g}s): pids {left or '(group only)'}")
    _signal_pids(left, signal.SIGTERM)
    if _wait_until_gone(pgid, reap, time.monotonic() + grace, resignal=None):
        log("still running after SIGTERM; sending SIGKILL")
        remaining = _wait_until_gone(pgid, reap, time.monotonic() + KILL_WAIT_SEC, resignal=signal.SIGKILL)
        if remaining:
            log(f"processes survived SIGKILL for {KILL_WAIT_SEC:g}s (stuck in the kernel?): {remaining}")
        return remaining
    return []
