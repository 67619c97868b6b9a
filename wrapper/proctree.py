"""The workload's processes as /proc shows them: state, CPU time, what a sleeping one waits on (Linux, read only).

One scan of /proc per sample finds the workload's tree: its main process, every
descendant, and whatever still runs in its session (the wrapper is a subreaper,
so an orphan is reparented to the wrapper, not to the workload, yet keeps the
session the workload started). Every read may race with a process exiting: a
process gone between listing and reading is simply not in the sample, and an
unreadable /proc (another user's process, a hidepid mount) is counted, never
raised, so the watch can say what it could not see.
"""

from __future__ import annotations

import os

try:
    CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
except (ValueError, OSError, AttributeError):
    CLOCK_TICKS = 100


class Proc:
    """One process: /proc/<pid>/stat's state, parent, session and CPU time (user + system, in seconds)."""

    __slots__ = ("pid", "ppid", "sid", "state", "cpu_sec", "comm")

    def __init__(self, pid: int, ppid: int, sid: int, state: str, cpu_sec: float, comm: str) -> None:
        self.pid = pid
        self.ppid = ppid
        self.sid = sid
        self.state = state
        self.cpu_sec = cpu_sec
        self.comm = comm

    def __repr__(self) -> str:
        return f"Proc({self.pid}, {self.state}, {self.comm!r})"


def parse_stat(pid: int, data: bytes) -> Proc | None:
    """A Proc from the text of /proc/<pid>/stat; None when it is not what the kernel writes."""
    head, _, rest = data.rpartition(b")")  # the command name is in parentheses and may itself hold ") "
    fields = rest.split()
    if len(fields) < 13 or b"(" not in head:
        return None
    comm = head.partition(b"(")[2].decode("utf-8", errors="replace")
    try:
        # Fields after the name, from 0: state, ppid, pgrp, session, ..., utime (11), stime (12).
        ticks = int(fields[11]) + int(fields[12])
        return Proc(pid, int(fields[1]), int(fields[3]), fields[0].decode("ascii", errors="replace"),
                    ticks / CLOCK_TICKS, comm)
    except ValueError:
        return None


def read(pid: int) -> Proc | None:
    """Process `pid` now; None when it is gone (or was never there)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return parse_stat(pid, handle.read())
    except OSError:
        return None


class Scan:
    """The workload's tree at one moment, and how many processes /proc would not show."""

    __slots__ = ("procs", "unreadable")

    def __init__(self, procs: dict[int, Proc], unreadable: int) -> None:
        self.procs = procs
        self.unreadable = unreadable


def tree(root: int) -> Scan | None:
    """`root`, its live descendants and the live members of its session; None when /proc cannot be listed."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    everyone: dict[int, Proc] = {}
    unreadable = 0
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            continue  # exited since the listing
        except OSError:
            unreadable += 1
            continue
        proc = parse_stat(pid, data)
        if proc is not None:
            everyone[pid] = proc
    return Scan(members(root, everyone), unreadable)


def members(root: int, everyone: dict[int, Proc]) -> dict[int, Proc]:
    """Of `everyone`, the live processes of `root`'s tree: descendants and its session (pure)."""
    children: dict[int, list[int]] = {}
    for proc in everyone.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found = {pid for pid, proc in everyone.items() if proc.sid == root}
    if root in everyone:
        found.add(root)
    frontier = list(found)  # the session's members may have children outside it (setsid)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return {pid: everyone[pid] for pid in found if everyone[pid].state not in ("Z", "X")}


def wchan(pid: int) -> str:
    """The kernel function process `pid` sleeps in ("?" when the kernel will not say)."""
    try:
        with open(f"/proc/{pid}/wchan", "rb") as handle:
            name = handle.read().decode("ascii", errors="replace").strip()
    except OSError:
        return "?"
    return name if name and name != "0" else "?"


def is_python(pid: int, comm: str) -> bool:
    """Whether process `pid` runs a Python interpreter (by its executable's name, or its command name)."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        exe = ""
    return exe.startswith("python") or comm.startswith("python")
