"""What an attempt's exit records say about why it ended: (cause, detail) for the policy (pure).

The wrapper's exit code (fray.wrapper.contract), its final.json and failure.json are read as
a person would: `exit 1: <last stderr line>` first, the node's fault apart from the workload's.
A workload killed by a signal is described by what killed it (the kernel's OOM killer where
its memory cgroup counted the kill, failure.json `killed_by`), never by its stderr's last
line: a process killed from outside printed nothing about it, and that line is whatever it
printed last (a warning minutes earlier).
"""

from __future__ import annotations

from typing import Any

from fray.core.model import Attempt, Cause
from fray.wrapper import contract


def classify_exit(exit_record: dict[str, Any], final: dict[str, Any] | None, failure: dict[str, Any] | None,
                  attempt: Attempt) -> tuple[str, str]:
    """(cause, detail) of an attempt from the wrapper's exit record."""
    code = exit_record["exit_code"]
    message = _failure_summary(failure)
    if code == contract.EXIT_OK:
        if final is not None:
            return Cause.SUCCESS.value, "exited 0 with final.json"
        return Cause.CLEAN_EXIT.value, "exited 0 without final.json"
    if code in contract.NODE_FAULT_EXITS:
        return Cause.NODE_FAULT.value, message or f"node fault (wrapper exit {code})"
    if code == contract.EXIT_WORKLOAD_FAILURE and failure and failure.get("cause") == contract.CAUSE_SNAPSHOT_LEFT_OUT:
        # It failed on a file its snapshot left out (fray.wrapper.left_out): the same submission fails the same.
        return Cause.SNAPSHOT_LEFT_OUT.value, failure.get("message") or Cause.SNAPSHOT_LEFT_OUT.value
    if code == contract.EXIT_WORKLOAD_FAILURE and failure and failure.get("cause") in contract.HANG_CAUSES:
        # The wrapper saw it hung and ended it: the cause says how (fray.wrapper.hangwatch).
        return failure["cause"], failure.get("message") or failure["cause"]
    if code >= contract.EXIT_SIGNALLED_BASE:
        signal = exit_record.get("received_signal") or f"signal {code - contract.EXIT_SIGNALLED_BASE}"
        if attempt.stop_reason:
            return attempt.stop_reason, f"stopped by fray with {signal}"
        return Cause.PREEMPTED.value, f"terminated by {signal} from outside fray (preemption?)"
    return Cause.WORKLOAD_FAILURE.value, message or f"wrapper exited {code}"


def _failure_summary(failure: dict[str, Any] | None) -> str:
    """'exit 1: <last stderr line>' — what a person wants to see first."""
    if not failure:
        return ""
    if failure.get("workload_exit_code") is not None:
        head = f"exit {failure['workload_exit_code']}"
    elif failure.get("workload_signal"):
        return killed_by(failure["workload_signal"], failure.get("killed_by"))
    else:
        return failure.get("message") or ""
    tail = [line for line in failure.get("stderr_tail") or [] if line.strip()]
    return f"{head}: {tail[-1].strip()[:200]}" if tail else head


def killed_by(signal: str, record: dict[str, Any] | None) -> str:
    """'killed by SIGKILL from the kernel's OOM killer (...)': the signal and what sent it, as far as is known."""
    if not record:
        return f"killed by {signal}"
    if record.get("oom_killer") is True:
        return f"killed by {signal} from the kernel's OOM killer: out of memory, ask for more (--mem) or use less"
    if record.get("oom_killer") is False and signal == "SIGKILL":
        return f"killed by {signal}, not by the OOM killer (its memory cgroup counted no OOM kill): sent from outside"
    how = record.get("how") or ""
    if record.get("oom_killer") is None:
        return f"killed by {signal} (whether by the OOM killer cannot be told here: {how})" if how \
            else f"killed by {signal}"
    return f"killed by {signal}: {how}" if how else f"killed by {signal}"
