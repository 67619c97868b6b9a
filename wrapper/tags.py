"""The attempt tag: which attempt a process on this machine belongs to, and killing those of closed attempts.

The wrapper puts `FRAY_ATTEMPT_TAG=<run_id>:<attempt>:<FRAY_HOME>` into its
workload's environment. Every descendant inherits it - a `setsid cmd &`, a
double-forked daemon, a process that escaped the wrapper's group - and
/proc/<pid>/environ keeps the environment a process was started with, so the
tag names the attempt even after the wrapper is gone and the process was
reparented to init. The reaper (`reap`) finds the tagged processes of one
FRAY_HOME and kills those whose attempt the caller judges closed: the daemon
on the login node (fray.daemon.strays), and each wrapper as it starts on a
compute node (`reap_closed`, judged by the run's meta.json as the fence
judges it).

A kill goes through a pidfd opened before the environment is read again, so a
pid that was reused meanwhile is never signalled.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from . import contract, fence

PROC = "/proc"
KILL_WAIT_SEC = 2.0
SWEEP_LOOKS = 5  # looks at most, while each kills something: enough for a tree forking as it is killed


@dataclass(frozen=True, order=True)
class Tag:
    """One attempt of one run of one FRAY_HOME."""

    run_id: str
    attempt: int
    home: str

    def text(self) -> str:
        return f"{self.run_id}:{self.attempt}:{self.home}"

    @classmethod
    def parse(cls, text: str) -> "Tag | None":
        """The tag in `text`, or None when it is not one (run ids have no colon; a home may)."""
        run_id, _, rest = text.partition(":")
        number, _, home = rest.partition(":")
        if not run_id or not number.isdigit() or not home:
            return None
        return cls(run_id, int(number), home)


def untagged(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without an attempt's tag: for processes that must outlive the attempt they were started from
    (a daemon or a wrapper started from inside a job)."""
    return {name: value for name, value in env.items() if name != contract.ENV_ATTEMPT_TAG}


def started_with(pid: int | str, name: str) -> str | None:
    """The value of `name` in the environment process `pid` was started with; None when it has none (or is gone,
    or another user's)."""
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    prefix = name.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode("utf-8", errors="replace")
    return None


def _tag_of(pid: str) -> Tag | None:
    text = started_with(pid, contract.ENV_ATTEMPT_TAG)
    return Tag.parse(text) if text is not None else None


def _alive(pid: str) -> bool:
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as handle:
            state = handle.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")  # a zombie is dead already, only not reaped


def tagged(home: str) -> dict[int, Tag]:
    """Every live process of this user tagged with an attempt of FRAY_HOME `home`: pid -> tag."""
    uid = os.getuid()
    found: dict[int, Tag] = {}
    me = os.getpid()
    try:
        names = os.listdir(PROC)
    except OSError:
        return found  # no /proc: nothing can be found, nothing is killed
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"{PROC}/{name}").st_uid != uid:
                continue  # cheaper than failing to read another user's environ
        except OSError:
            continue
        tag = _tag_of(name)
        if tag is not None and tag.home == home and _alive(name):
            found[int(name)] = tag
    return found


def kill(pid: int, tag: Tag) -> bool:
    """SIGKILL `pid` if it still carries `tag`; True when it was signalled."""
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None  # an old kernel or Python: the check below and kill() are as close as it gets
    try:
        if _tag_of(str(pid)) != tag:
            return False  # exited, and the pid is another process now
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if pidfd is not None:
            os.close(pidfd)


def reap(home: str, closed: Callable[[Tag], str | None]) -> dict[Tag, tuple[str, list[int]]]:
    """Kill every process of `home` whose attempt `closed` gives a reason for; tag -> (reason, pids killed).

    `closed` is asked once per attempt, not per process. Looks again while a look
    killed something: a process forked between the look and the kill inherits the
    tag and would live on. Returns once the killed are dead (or after KILL_WAIT_SEC:
    one stuck in the kernel cannot be helped).
    """
    verdicts: dict[Tag, str | None] = {}
    killed: dict[Tag, tuple[str, list[int]]] = {}
    for _look in range(SWEEP_LOOKS):
        before = sum(len(group) for _reason, group in killed.values())
        for pid, tag in sorted(tagged(home).items()):
            if tag not in verdicts:
                verdicts[tag] = closed(tag)
            reason = verdicts[tag]
            if reason is not None and pid not in killed.get(tag, ("", []))[1] and kill(pid, tag):
                killed.setdefault(tag, (reason, []))[1].append(pid)
        if sum(len(group) for _reason, group in killed.values()) == before:
            break
    pids = [str(pid) for _reason, group in killed.values() for pid in group]
    deadline = time.monotonic() + KILL_WAIT_SEC
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.005)
    return killed


def closed_by_meta(tag: Tag) -> str | None:
    """Why `tag`'s attempt is closed, judged by its run's meta.json as the fence judges it (None: it is not,
    or that cannot be told: an unreadable meta.json kills nothing)."""
    return fence.read(fence.meta_path(tag.home, tag.run_id), tag.attempt).reason


def reap_closed(home: str) -> dict[Tag, tuple[str, list[int]]]:
    """What a wrapper does as it starts on a node: kill what closed attempts of `home` left running here."""
    return reap(home, closed_by_meta)


def describe(killed: Iterable[tuple[Tag, tuple[str, list[int]]]]) -> list[str]:
    """One line per attempt reaped, for a log."""
    return [f"killed pids {pids} left by run {tag.run_id} attempt {tag.attempt} ({reason})"
            for tag, (reason, pids) in killed]
