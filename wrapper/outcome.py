"""What the end of an attempt means, and the records that say so.

`decide` turns what happened (a launch error, the workload's wait status, a
stop signal the wrapper received) into the wrapper's exit code, a failure
cause and a message; the `*_record` functions build the documents of
schemas/{started,final,failure,exit}.json. No IO here.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from . import contract


def signal_name(signum: int) -> str:
    """"SIGTERM" for 15; real-time and unknown signals as "SIG<n>"."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


@dataclass(frozen=True)
class AttemptStamp:
    """What every record of this attempt repeats."""

    run_id: str
    attempt: int
    host: str
    started_at: float
    node: str = ""  # the node as the scheduler names it (Slurm's may differ from the hostname)


@dataclass(frozen=True)
class WorkloadEnd:
    """How the workload process ended: an exit code, or the signal that killed it."""

    exit_code: int | None
    signal: str | None

    @classmethod
    def from_wait_status(cls, status: int) -> "WorkloadEnd":
        if os.WIFSIGNALED(status):
            return cls(None, signal_name(os.WTERMSIG(status)))
        return cls(os.waitstatus_to_exitcode(status), None)

    def describe(self) -> str:
        if self.signal is not None:
            return f"was killed by {self.signal}"
        return f"exited with code {self.exit_code}"


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    cause: str | None  # None: success, no failure.json
    message: str
    probe: str | None = None  # the preflight probe that failed
    killed_by: dict[str, Any] | None = None  # a workload killed by a signal: which, and whether the OOM killer sent it


def decide(
    *,
    probe_failure: Outcome | None = None,
    launch_error: str | None,
    end: WorkloadEnd | None,
    launch_node_side: bool = False,
    received_signal: int | None,
    script: str,
    stderr_path: str,
    killed_by: dict[str, Any] | None = None,
) -> Outcome:
    """The wrapper's exit code and failure cause (see the table in DESIGN.md).

    A stop signal wins (the attempt was ended from outside), then a failed
    preflight probe (the workload never started), then a launch error.
    """
    if received_signal is not None:
        # A workload that was told to stop did not finish, whatever it exited with.
        name = signal_name(received_signal)
        if name == contract.PLANNED_STOP_SIGNAL:
            name += " (the shepherd's planned stop)"
        if end is None:
            what = "before the workload was started" if launch_error is None else "while the workload could not be started"
        else:
            what = f"and passed the stop on; the workload then {end.describe()}"
        return Outcome(contract.EXIT_SIGNALLED_BASE + received_signal, contract.CAUSE_TERMINATED, f"the wrapper received {name} {what}")
    if probe_failure is not None:
        return probe_failure
    if launch_error is not None:
        # A node without the run's interpreter is the node's fault: another may have it (exit 42, as a probe).
        code = contract.EXIT_NODE_FAULT if launch_node_side else contract.EXIT_WORKLOAD_FAILURE
        return Outcome(code, contract.CAUSE_LAUNCH_FAILED, f"cannot launch {script}: {launch_error}")
    if end is None:
        return Outcome(
            contract.EXIT_WORKLOAD_FAILURE,
            contract.CAUSE_WORKLOAD_FAILURE,
            f"the workload ({script}) did not report an exit status; see {stderr_path}",
        )
    if end.exit_code == 0:
        return Outcome(contract.EXIT_OK, None, f"the workload ({script}) exited with code 0")
    if end.exit_code == contract.EXIT_NODE_FAULT:
        # A workload that checks its node itself (its own probe) blames the node with the probes' code.
        return Outcome(
            contract.EXIT_NODE_FAULT,
            contract.CAUSE_NODE_FAULT,
            f"the workload ({script}) exited {end.exit_code}: it reports a node fault; see {stderr_path}",
        )
    if end.signal is not None:
        how = f": {killed_by['how']}" if killed_by else ""
        return Outcome(
            contract.EXIT_WORKLOAD_FAILURE,
            contract.CAUSE_WORKLOAD_SIGNALLED,
            f"the workload ({script}) {end.describe()}{how} (its stderr, which may say more: {stderr_path})",
            killed_by=killed_by,
        )
    return Outcome(
        contract.EXIT_WORKLOAD_FAILURE,
        contract.CAUSE_WORKLOAD_FAILURE,
        f"the workload ({script}) {end.describe()}; the last lines of its stderr are in stderr_tail, all of it in {stderr_path}",
    )


def hang_outcome(cause: str, detail: str, hung_in: str | None) -> Outcome:
    """The workload hung (fray.wrapper.hangwatch) and was killed for it: the workload's failure, exit 50."""
    where = f"; hung in {hung_in}" if hung_in else "; no Python stack could be taken"
    return Outcome(contract.EXIT_WORKLOAD_FAILURE, cause, f"hung: {detail}{where} (all stacks: {contract.STACKS})")


def started_record(stamp: AttemptStamp, pid: int, workload_pid: int | None, python: str) -> dict[str, Any]:
    return {
        "run_id": stamp.run_id,
        "attempt": stamp.attempt,
        "host": stamp.host,
        "node": stamp.node or stamp.host,
        "pid": pid,
        "workload_pid": workload_pid,
        "started_at": stamp.started_at,
        "python": python,
    }


def final_record(stamp: AttemptStamp, completed_at: float, result: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "run_id": stamp.run_id,
        "attempt": stamp.attempt,
        "completed_at": completed_at,
        "host": stamp.host,
        "result": result,
    }


def failure_record(
    stamp: AttemptStamp, outcome: Outcome, end: WorkloadEnd | None, stderr_tail: list[str], ended_at: float
) -> dict[str, Any]:
    if outcome.cause is None:
        raise ValueError("a successful outcome has no failure record")
    extra: dict[str, Any] = {}
    if outcome.probe is not None:
        extra["probe"] = outcome.probe
    if outcome.killed_by is not None:
        extra["killed_by"] = outcome.killed_by
    return {
        "run_id": stamp.run_id,
        "attempt": stamp.attempt,
        "exit_code": outcome.exit_code,
        "cause": outcome.cause,
        "message": outcome.message,
        "workload_exit_code": end.exit_code if end else None,
        "workload_signal": end.signal if end else None,
        "stderr_tail": stderr_tail,
        "host": stamp.host,
        "started_at": stamp.started_at,
        "ended_at": ended_at,
        **extra,
    }


def exit_record(
    stamp: AttemptStamp, exit_code: int, end: WorkloadEnd | None, received_signal: int | None, ended_at: float
) -> dict[str, Any]:
    return {
        "run_id": stamp.run_id,
        "attempt": stamp.attempt,
        "exit_code": exit_code,
        "workload_exit_code": end.exit_code if end else None,
        "workload_signal": end.signal if end else None,
        "received_signal": signal_name(received_signal) if received_signal is not None else None,
        "host": stamp.host,
        "started_at": stamp.started_at,
        "ended_at": ended_at,
    }
