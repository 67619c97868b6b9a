"""What the root PID namespace's /proc says about the box's processes.

The box's own code runs in the root namespaces, where every host's processes are visible with their
root-namespace pids; a host's PID namespace is told apart by the inode of /proc/PID/ns/pid.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterable

GONE = ("Z", "X")  # a zombie is dead already: it only waits to be reaped


def namespace(pid: int, kind: str = "pid") -> str | None:
    """`pid:[4026532...]`: which namespace of `kind` process `pid` is in; None once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def state(pid: int) -> str | None:
    """Its state letter (R, S, D, T, Z, ...); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int | None, named: str | None = None) -> bool:
    """Whether `pid` runs (and, with `named`, is that program: a pid in a state file may be reused)."""
    if not pid or pid <= 0 or state(pid) in (None, *GONE):
        return False
    return named is None or comm(pid) == named


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return []


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(part) for part in handle.read().split()]
    except OSError:
        return []


def first_child(pid: int) -> int:
    """The pid of its first child; 0 while it has none."""
    found = children(pid)
    return found[0] if found else 0


def in_namespace(ns: str) -> list[int]:
    """The live processes of PID namespace `ns`, by their root-namespace pids."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and namespace(int(name)) == ns and alive(int(name)):
            found.append(int(name))
    return sorted(found)


def send(pids: Iterable[int], sig: int) -> None:
    """Signal each of `pids` that still exists (0 or less, which kill(2) reads as a process group, is skipped)."""
    for pid in pids:
        if pid <= 0:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
