"""Hosts 1..N-1 of a multi-host slice: is each still there? Read from the shared FRAY_HOME.

Host 0 speaks for the attempt: policy reads its heartbeat and exit in the
attempt folder, as for any backend. The other hosts run wrappers of their own
(`tasks/<i>/`) that nothing else watches, and a slice is only as alive as its
least alive host: a JAX program whose host 3 died hangs in its next collective
while host 0 goes on beating. So the snapshot reads every other host's
heartbeat and exit record and ends the attempt when one is lost (a preemption,
as the issue's recovery rule says: the slice is replaced) or failed (its exit
code says whose fault).

`verdict` is pure; `read_hosts` is the thin reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from fray.core.model import Cause
from fray.state import store
from fray.state.layout import AttemptPaths
from fray.wrapper import contract
from fray.wrapper import face as wrapper


@dataclass(frozen=True)
class HostRecord:
    index: int
    heartbeat_at: float | None  # the host's last beat (epoch, as the wrapper wrote it); None: none yet
    exit_code: int | None  # the host's wrapper exit code; None: still running, or died without a word


@dataclass(frozen=True)
class Verdict:
    cause: str  # a Cause value
    detail: str


def verdict(hosts: Sequence[HostRecord], count: int, launched_at: float, now: float,
            timeout_sec: float, startup_grace_sec: float) -> Verdict | None:
    """Why the attempt on this slice is over because of one of its other hosts; None while all are fine.

    A host that exited 0 is done (hosts may finish apart); one that exited
    otherwise failed the attempt; one whose beat is older than `timeout_sec`
    (or that never beat within `startup_grace_sec + timeout_sec` of the launch)
    is lost.
    """
    for host in hosts:
        where = f"host {host.index} of {count}"
        if host.exit_code is not None:
            if host.exit_code == contract.EXIT_OK or host.exit_code == contract.EXIT_FENCED:
                continue
            return Verdict(_exit_cause(host.exit_code), f"{where} exited {host.exit_code}")
        if host.heartbeat_at is None:
            waited = now - launched_at
            if waited > startup_grace_sec + timeout_sec:
                return Verdict(Cause.PREEMPTED.value, f"{where} never reported in {waited:.0f}s after the launch")
        elif now - host.heartbeat_at > timeout_sec:
            return Verdict(Cause.PREEMPTED.value, f"{where}: no heartbeat for {now - host.heartbeat_at:.0f}s "
                                                  f"(timeout {timeout_sec:.0f}s)")
    return None


def _exit_cause(code: int) -> str:
    if code in contract.NODE_FAULT_EXITS:
        return Cause.NODE_FAULT.value
    if code >= contract.EXIT_SIGNALLED_BASE:
        return Cause.PREEMPTED.value  # killed from outside: the host went away under it
    return Cause.WORKLOAD_FAILURE.value


def read_hosts(attempt_dir: Path, count: int) -> list[HostRecord]:
    """Hosts 1..count-1 as their files in the attempt folder show them."""
    attempt = AttemptPaths(attempt_dir)
    return [HostRecord(i, store.read_heartbeat(attempt.task(i).heartbeat), _exit_code(attempt.task(i).exit))
            for i in range(1, count)]


def _exit_code(path: Path) -> int | None:
    try:
        code = wrapper.read_json(path).get("exit_code")  # either layout (FRAY_RECORDS): fray.wrapper.records
    except (OSError, ValueError, AttributeError):
        return None  # absent, or being written: looked at again next cycle
    return code if isinstance(code, int) else None
