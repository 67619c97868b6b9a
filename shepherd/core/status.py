"""The normalized status of a run: one pure function with a fixed priority.

Inputs are what any reader can see (meta, control, heartbeat time, now), so the
CLI, the TUI and the daemon all agree. `failed` is added to the design's list:
a run_once run whose retry budget is spent is neither an unknown error nor a
manual stop, and users must be able to tell it apart at a glance. So is
`failed_config`: the backend refused the submission for a reason no retry
fixes (a bad option, a partition that does not exist); the fix is the person's.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from fray.core.model import Attempt, AttemptState, Cause, Meta, Phase, RunSpec


class Status(str, Enum):
    HEALTHY_RUNNING = "healthy_running"
    RUNNING_DEGRADED = "running_degraded"
    UNRESPONSIVE = "unresponsive"
    PENDING = "pending"
    RESTARTING = "restarting"
    CRASH_LOOP = "crash_loop"
    COMPLETED_SUCCESS = "completed_success"
    ENDED_EXPIRED = "ended_expired"
    STOPPED_MANUAL = "stopped_manual"
    FAILED = "failed"
    FAILED_CONFIG = "failed_config"
    FAILED_DEPENDENCY = "failed_dependency"
    ERROR_UNKNOWN = "error_unknown"


ICONS: dict[Status, str] = {
    Status.HEALTHY_RUNNING: "●",
    Status.RUNNING_DEGRADED: "◐",
    Status.UNRESPONSIVE: "◐",
    Status.PENDING: "○",
    Status.RESTARTING: "↻",
    Status.CRASH_LOOP: "↻",
    Status.COMPLETED_SUCCESS: "✓",
    Status.ENDED_EXPIRED: "■",
    Status.STOPPED_MANUAL: "■",
    Status.FAILED: "✗",
    Status.FAILED_CONFIG: "⊘",
    Status.FAILED_DEPENDENCY: "⊗",
    Status.ERROR_UNKNOWN: "✗",
}

# A heartbeat this many intervals old shows as degraded, then unresponsive; the
# restart itself happens only at heartbeat_timeout (policy).
DEGRADED_AFTER_INTERVALS = 3
UNRESPONSIVE_AFTER_INTERVALS = 6
CRASH_LOOP_AFTER = 3  # consecutive fast failures
PAUSED_REASON = "paused: `fray control unpause` resumes it"
BACKING_OFF = "backing off: next attempt at "


def backoff_reason(at: float) -> str:
    """'backing off: next attempt at 12:03:04': an absolute time, so the reason does not change every cycle."""
    import time

    return BACKING_OFF + time.strftime("%H:%M:%S", time.localtime(at))


class RunStatus(NamedTuple):
    """A run's normalized status and the one line that explains it."""

    status: Status
    reason: str

    @property
    def icon(self) -> str:
        return ICONS[self.status]


def heartbeat_age(meta: Meta, heartbeat_at: float | None, now: float) -> float | None:
    """Seconds since the running attempt last showed life (None when nothing is running). `heartbeat_at` is the
    node's epoch, as its file says: put on the daemon's clock by the offset the daemon measured for that node."""
    attempt = meta.in_flight
    if attempt is None or attempt.state not in (AttemptState.RUNNING, AttemptState.STOPPING):  # members: no `.value` call
        return None
    beat = None if heartbeat_at is None else heartbeat_at - (attempt.clock_offset_sec or 0.0)
    last = max(x for x in (beat, attempt.started_at, attempt.submitted_at) if x is not None)
    return max(0.0, now - last)


def progress_stalled_for(spec: RunSpec, progress: dict[str, Any] | None, started_at: float | None,
                         now: float, offset: float | None = None) -> float | None:
    """Seconds the reported step has not advanced, when that exceeds --progress-timeout; else None. `offset`: the
    node's clock minus `now`'s, for a progress.json as its node wrote it (the daemon's own copy needs none)."""
    if not spec.progress_timeout_sec or not progress or progress.get("step") is None:
        return None
    changed_at = (progress.get("step_changed_at") or progress["updated_at"]) - (offset or 0.0)
    stalled = now - max(changed_at, started_at or 0.0)
    return stalled if stalled > spec.progress_timeout_sec else None


def healthy_period(spec: RunSpec) -> float:
    """An attempt that ran this long was no fast failure: it resets the failure streak (and the backoff)."""
    return max(60.0, 3 * spec.heartbeat_interval_sec)


def normalized_status(meta: Meta | None, heartbeat_at: float | None, now: float, problem: str | None = None,
                      progress: dict[str, Any] | None = None, paused: bool = False) -> RunStatus:
    """The one status of a run. `problem` reports an unreadable state file; `paused` is control.json's."""
    if meta is None:
        return RunStatus(Status.ERROR_UNKNOWN, problem or "meta.json is missing")
    if meta.phase == Phase.ENDED and meta.end is not None:  # members equal their strings (`fray list` runs this per run)
        return RunStatus(Status(meta.end.status), meta.end.reason)
    if problem:
        return RunStatus(Status.ERROR_UNKNOWN, problem)
    attempt = meta.in_flight
    if attempt is None:
        return _between_attempts(meta, now, paused)
    if attempt.state == AttemptState.STOPPING:
        return RunStatus(Status.RESTARTING if attempt.stop_reason in ("restarted", "heartbeat_stall") else _running(meta, heartbeat_at, now).status,
                         f"stopping attempt {attempt.number}: {attempt.stop_reason or 'requested'}")
    if attempt.state in (AttemptState.SUBMITTING, AttemptState.SUBMITTED):
        return _submitted(meta, attempt)
    running = _running(meta, heartbeat_at, now)
    stalled = progress_stalled_for(meta.spec, progress, attempt.started_at, now, attempt.clock_offset_sec)
    if running.status is Status.HEALTHY_RUNNING and stalled is not None:
        return RunStatus(Status.RUNNING_DEGRADED, f"step {progress['step']} has not advanced for {stalled:.0f}s")  # type: ignore[index]
    return running


def _between_attempts(meta: Meta, now: float, paused: bool) -> RunStatus:
    """No attempt in flight: paused, in a crash loop, waiting for the backend to take it, held back, restarting
    (an attempt ended), or not started yet."""
    if paused:  # held on purpose: waiting to start again, not restarting
        return RunStatus(Status.PENDING, PAUSED_REASON)
    if meta.counters.consecutive_fast_failures >= CRASH_LOOP_AFTER:
        return RunStatus(Status.CRASH_LOOP, _queued_reason(meta, crash_loop=True))
    failed_submits = _failed_submits(meta)
    if failed_submits:
        # The backend could not take it yet (controller down, a submit limit): waiting, not restarting.
        return RunStatus(Status.PENDING, failed_submits)
    if not meta.attempts:
        return RunStatus(Status.PENDING, meta.wait_reason or "waiting for the daemon")
    backing_off = meta.next_attempt_at is not None and now < meta.next_attempt_at
    held = meta.wait_reason is not None and not meta.wait_reason.startswith(BACKING_OFF)
    if not backing_off and held:
        # Not restarting: held back by something outside the run (resources, a ban).
        return RunStatus(Status.PENDING, _queued_reason(meta))
    # One reason from the attempt's end to the next submission: the backoff is part of it from the start.
    return RunStatus(Status.RESTARTING, _queued_reason(meta))


def _submitted(meta: Meta, attempt: Attempt) -> RunStatus:
    """An attempt being submitted, or submitted and not started: pending until some attempt ran, restarting after."""
    if meta.counters.consecutive_fast_failures >= CRASH_LOOP_AFTER:
        return RunStatus(Status.CRASH_LOOP, _queued_reason(meta, crash_loop=True))
    # Restarting only once some attempt ran: until then it has not started yet, however many submissions failed.
    ran = any(a.started_at is not None for a in meta.attempts[:-1])
    status = Status.RESTARTING if attempt.number > 1 and ran else Status.PENDING
    failed = _failed_submits(meta, meta.attempts[:-1]) if attempt.state == AttemptState.SUBMITTING else ""
    if failed:
        return RunStatus(status, f"submitting attempt {attempt.number}; {failed.rsplit('; ', 1)[0]}")
    # A backend's own queue (the local warm worker's) takes it before a CPU does: it says so in its ref.
    queued = "queued on the machine, waiting for a free CPU" if (attempt.backend_ref or {}).get("queued") \
        else "submitted, waiting for it to start"
    return RunStatus(status, attempt.detail or f"attempt {attempt.number} {queued}")


def _running(meta: Meta, heartbeat_at: float | None, now: float) -> RunStatus:
    age = heartbeat_age(meta, heartbeat_at, now) or 0.0
    interval = meta.spec.heartbeat_interval_sec
    unresponsive_after = max(UNRESPONSIVE_AFTER_INTERVALS * interval, meta.spec.heartbeat_timeout_sec / 2)
    if age > unresponsive_after:
        return RunStatus(Status.UNRESPONSIVE, f"no heartbeat for {age:.0f}s (restart at {meta.spec.heartbeat_timeout_sec:.0f}s)")
    if age > DEGRADED_AFTER_INTERVALS * interval:
        return RunStatus(Status.RUNNING_DEGRADED, f"heartbeat {age:.0f}s old")
    return RunStatus(Status.HEALTHY_RUNNING, f"attempt {meta.in_flight.number} running")  # type: ignore[union-attr]


def _queued_reason(meta: Meta, crash_loop: bool = False) -> str:
    last = next((a for a in reversed(meta.attempts) if a.state == AttemptState.ENDED.value), None)
    why = f"attempt {last.number} ended: {last.cause}" if last and last.cause else ""
    if last and last.detail:
        why += f" ({last.detail})"
    if meta.next_attempt_at is not None and (meta.wait_reason is None or meta.wait_reason.startswith(BACKING_OFF)):
        wait = backoff_reason(meta.next_attempt_at)  # the daemon writes the same words a cycle later
    else:
        wait = meta.wait_reason or "submitting the next attempt"
    prefix = f"{_streak(meta)}; " if crash_loop else ""
    return f"{prefix}{why}; {wait}" if why else f"{prefix}{wait}"


def _failed_submits(meta: Meta, attempts: list[Attempt] | None = None) -> str:
    """'submission failed 3 times in a row (transient): <the last answer>; <the wait>' while the latest attempts
    are failed submissions ("" otherwise): the backend has not taken the run, so it is pending, not restarting."""
    attempts = meta.attempts if attempts is None else attempts
    count = 0
    for attempt in reversed(attempts):
        if attempt.cause != Cause.SUBMIT_FAILED.value:
            break
        count += 1
    if not count:
        return ""
    last = attempts[-1]
    times = "once" if count == 1 else f"{count} times in a row"
    detail = (last.detail or "").removeprefix("submission failed: ")
    return f"submission failed {times} (retried with backoff): {detail}; {meta.wait_reason or 'submitting again'}"


def _streak(meta: Meta) -> str:
    """'3 failures in a row (attempts ran 50s, 48s, 3s; under 60s is a fast failure)': what happened, in numbers.
    Attempts that never started are counted once, with why: '3 failures in a row (none started: node_fault; ...)'."""
    count = meta.counters.consecutive_fast_failures
    ended = [a for a in meta.attempts if a.state == AttemptState.ENDED.value][-count:]
    ran = [f"{a.ended_at - a.started_at:.0f}s" for a in ended if a.started_at and a.ended_at]
    never = [a.cause or "unknown" for a in ended if not (a.started_at and a.ended_at)]
    parts = [f"attempts ran {', '.join(ran)}"] if ran else []
    if never:
        which = "none started" if not ran else f"{len(never)} never started"
        parts.append(f"{which}: {', '.join(dict.fromkeys(never))}")
    return f"{count} failures in a row ({'; '.join(parts)}; under {healthy_period(meta.spec):.0f}s is a fast failure)"
