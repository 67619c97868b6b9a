"""What to do next for one run: a pure function of what the daemon can see.

`decide(situation, admit)` takes the run's meta and control, the files of its in-flight attempt,
the backend's view of that attempt, the time and a jitter value, and returns a `Plan`
(fray.core.run_plan): the updated meta, the actions for the daemon to carry out (submit, cancel,
finish, reactivate, suspect a node) and the events to log with their reasons. Time and randomness
are inputs, so every branch is testable as values. `record_submit_failure` is its answer to a
submission the backend refused or failed.

This module decides when an attempt has ended (and why); what that costs the run (its retry
budgets, the backoff, ending it when a budget is spent) is fray.core.budgets'. The plan's types
are exported from here too, since the daemon reads them off the plan this module returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from fray.core import partition_policy
from fray.core.budgets import attempt_ended, supersede
from fray.core.exit_causes import classify_exit
from fray.core.observation import BackendView, ViewState
from fray.core.placement.reporting import TaskEnd, reporting_task, siblings_finishing
from fray.core.model import Attempt, AttemptState, Cause, Control, EndStatus, Meta, Mode, Phase, RunSpec
from fray.core.run_plan import Action, Cancel, ClearSuspicion, Event, Finish, Plan, Reactivate, Submit, SuspectNode
from fray.core.capacity import Request, run_request
from fray.core.scheduler import Admission
from fray.core.status import PAUSED_REASON, backoff_reason, progress_stalled_for
from fray.core.values import format_duration

__all__ = [
    "decide", "record_submit_failure", "Situation", "AttemptFiles", "SAFE_OVERRIDES", "SUBMIT_RESOLVE_SEC",
    "Plan", "Event", "Action", "Submit", "Cancel", "Finish", "Reactivate", "SuspectNode", "ClearSuspicion",
]

# An attempt stuck in SUBMITTING this long (the daemon died mid-submit and the
# backend does not know it) is given up and resubmitted.
SUBMIT_RESOLVE_SEC = 30.0
# The node's measured clock offset is written into meta.json only when it moves this much.
OFFSET_STEP_SEC = 0.5
# After the stop grace, allow this long for the wrapper's own kill before force.
STOP_MARGIN_SEC = 5.0
FORCED_DETAIL = "killed: did not stop within the grace period"
LATE_RECORD_DETAIL = "ended on the backend; waiting for its exit record"

# What `fray control config-set` may change on a live run.
SAFE_OVERRIDES = frozenset({
    "max_retries", "max_retries_preemption", "keep_alive_sec", "clean_exit_ok", "heartbeat_interval_sec",
    "heartbeat_timeout_sec", "startup_grace_sec", "stop_grace_sec", "backoff_base_sec", "backoff_max_sec",
    "progress_timeout_sec", "restart_on_progress_stall", "retry_window_sec",
})


@dataclass(frozen=True)
class AttemptFiles:
    """What the wrapper wrote for the in-flight attempt, every time in it on the daemon's clock: the daemon hands
    the policy when it saw a heartbeat or a step change, and the node's start and ends less its clock offset
    (fray.daemon.sightings), so no decision compares two machines' clocks."""

    started: dict[str, Any] | None = None
    heartbeat_at: float | None = None  # when the daemon last saw the heartbeat change
    heartbeat_problem: str | None = None  # the heartbeat file exists but cannot be read: said if it comes to a stall
    clock_offset: float | None = None  # the node's clock minus the daemon's, as measured
    gone_since: float | None = None  # when the daemon first saw the backend no longer have the attempt
    exit: dict[str, Any] | None = None
    final: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    tasks: tuple[TaskEnd, ...] = ()  # read once task 0 ended or is gone: the other tasks that ended
    task_count: int = 1


@dataclass(frozen=True)
class Situation:
    meta: Meta
    control: Control
    files: AttemptFiles
    backend: BackendView
    now: float
    jitter: float = 0.5  # uniform in [0, 1), drawn by the daemon
    partitions: partition_policy.Candidates | None = None  # the backend's partitions for this run, best first
    first_sight: bool = False  # this daemon has not seen the in-flight attempt before (a previous one started it)
    # How late a file the attempt's node wrote may reach the daemon (its host's caches of a shared file system):
    # an attempt the backend no longer has waits this long for its exit record before it is judged lost.
    file_latency: float = 0.0


def decide(s: Situation, admit: Callable[[Request], Admission]) -> Plan:
    plan = Plan(s.meta.copy(), s.now)
    plan.step = (s.files.progress or {}).get("step")
    _apply_control(plan, s)
    meta = plan.meta
    if meta.phase == Phase.ENDED:
        return plan
    attempt = meta.in_flight
    if attempt is not None:
        _watch(plan, attempt, s)
    if meta.phase != Phase.ENDED and meta.in_flight is None:
        _queued(plan, s, admit)
    return plan


def record_submit_failure(meta: Meta, attempt_number: int, error: str, now: float, jitter: float,
                          final: bool = False) -> Plan:
    """The backend refused or failed a submission: end the attempt, count it, back off; `final` (a refusal
    no retry can change) ends the run `failed_config` with the backend's words."""
    plan = Plan(meta.copy(), now)
    attempt = plan.meta.attempts[attempt_number - 1]
    if final and len(meta.spec.partitions) <= 1:  # with a chain, the next partition may take it (fallback)
        attempt_ended(plan, attempt, Cause.CONFIG_REFUSED, None,
                       f"the {meta.spec.backend} backend refused the submission: {error}", jitter)
    else:
        attempt_ended(plan, attempt, Cause.SUBMIT_FAILED, None, f"submission failed: {error}", jitter)
    return plan


def _apply_control(plan: Plan, s: Situation) -> None:
    meta, control = plan.meta, s.control
    _apply_overrides(plan, control)
    if control.start_nonce > meta.applied.start_nonce:
        meta.applied.start_nonce = control.start_nonce
        if meta.phase == Phase.ENDED:
            meta.phase = Phase.QUEUED
            meta.end = None
            meta.next_attempt_at = None
            meta.counters.workload_failures = meta.counters.node_failures = 0
            meta.counters.consecutive_fast_failures = 0
            meta.counters.since = s.now
            plan.actions.append(Reactivate())
            plan.log("reactivated", f"started again by {control.updated_by or 'a user'}")
    if control.restart_nonce > meta.applied.restart_nonce:
        meta.applied.restart_nonce = control.restart_nonce
        attempt = meta.in_flight
        if attempt is not None and meta.phase != Phase.ENDED:
            _stop(plan, attempt, Cause.RESTARTED, f"restart requested by {control.updated_by or 'a user'}")
        elif meta.phase == Phase.QUEUED:
            meta.next_attempt_at = None
            meta.counters.consecutive_fast_failures = 0
            plan.log("waiting", "restart requested: starting without waiting for the backoff")
    if meta.phase == Phase.ENDED:
        return
    attempt = meta.in_flight
    if control.stop_requested:
        if attempt is None:
            plan.end(EndStatus.STOPPED_MANUAL, f"stopped by {control.updated_by or 'a user'}")
        elif attempt.stop_reason != Cause.STOPPED:
            _stop(plan, attempt, Cause.STOPPED, f"stop requested by {control.updated_by or 'a user'}")
    elif control.paused and attempt is not None and attempt.state != AttemptState.STOPPING:
        _stop(plan, attempt, Cause.PAUSED, f"pause requested by {control.updated_by or 'a user'}")


def _apply_overrides(plan: Plan, control: Control) -> None:
    """`fray control config-set`: safe settings a person changed on a live run."""
    if not control.overrides:
        return
    wanted = {k: v for k, v in control.overrides.items() if k in SAFE_OVERRIDES}
    current = plan.meta.spec.to_dict()
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changed:
        plan.meta.spec = RunSpec.from_dict({**current, **changed})
        settings = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
        plan.log("config", f"settings changed by {control.updated_by or 'a user'}: {settings}")


def _stop(plan: Plan, attempt: Attempt, cause: str, why: str) -> None:
    already = attempt.state == AttemptState.STOPPING
    attempt.stop_reason = cause
    if already:
        plan.log("cancel", f"{why} (a stop is already under way)", attempt.number)
        return
    attempt.state = AttemptState.STOPPING
    attempt.stop_requested_at = plan.now
    plan.actions.append(Cancel(attempt.number))
    plan.log("cancel", why, attempt.number)


def _watch(plan: Plan, attempt: Attempt, s: Situation) -> None:
    """One cycle's look at the attempt in flight: each step below either settles it this cycle (returns True:
    resolved, ended, left to wait or stopped) or hands it on to the next, down to the stall checks."""
    if attempt.state == AttemptState.SUBMITTING and not _resolve_submission(plan, attempt, s):
        return
    _note_sightings(plan, attempt, s)
    if _ended_by_record(plan, attempt, s):
        return
    if s.backend.state == ViewState.GONE:
        _gone(plan, attempt, s)
        return
    if s.backend.state == ViewState.UNKNOWN:
        return  # the backend could not tell this cycle; look again next cycle
    if attempt.state == AttemptState.SUBMITTED and s.backend.state == ViewState.PENDING and _pending(plan, attempt, s):
        return
    if attempt.state == AttemptState.STOPPING:
        _stopping(plan, attempt, s)
        return
    if _expired(plan.meta, s.now):
        _stop(plan, attempt, Cause.EXPIRED, f"keep-alive of {plan.meta.spec.keep_alive_sec:.0f}s has passed")
        return
    _check_stall(plan, attempt, s.files, s.backend, s.now, s.jitter)


def _resolve_submission(plan: Plan, attempt: Attempt, s: Situation) -> bool:
    """An attempt a daemon was submitting: adopted once anything shows the backend had it (True: watch it on),
    failed once it is gone without a trace for SUBMIT_RESOLVE_SEC, else left for the next cycle."""
    files, view = s.files, s.backend
    # The wrapper's own records prove the backend had it, even once it is gone again (a
    # daemon killed right after submitting; the attempt finished before the next one looked).
    if view.state in (ViewState.PENDING, ViewState.RUNNING) or files.started is not None or files.exit is not None:
        attempt.state = AttemptState.SUBMITTED
        attempt.backend_ref = view.ref or attempt.backend_ref
        plan.log("adopted", "found the attempt a previous daemon was submitting", attempt.number)
        return True
    if view.state == ViewState.GONE and files.started is None and s.now - attempt.submitted_at > SUBMIT_RESOLVE_SEC:
        attempt_ended(plan, attempt, Cause.SUBMIT_FAILED, None, "the submission never reached the backend", s.jitter)
    return False


def _note_sightings(plan: Plan, attempt: Attempt, s: Situation) -> None:
    """What this cycle saw of where and when it runs: its node's clock offset, its node, its start."""
    files, view = s.files, s.backend
    if files.clock_offset is not None and (attempt.clock_offset_sec is None
                                           or abs(files.clock_offset - attempt.clock_offset_sec) >= OFFSET_STEP_SEC):
        attempt.clock_offset_sec = round(files.clock_offset, 1)  # rewritten only when it moves: not every beat
    if view.node:
        # The scheduler's name for the node wins over the host the wrapper saw (the blacklist and
        # sbatch --exclude speak Slurm's names), also for an attempt that ends before it was seen running.
        attempt.node = view.node
    if attempt.state == AttemptState.SUBMITTED and files.started is not None:
        _started(plan, attempt, view, files)  # also for an attempt that ended before it was seen running


def _ended_by_record(plan: Plan, attempt: Attempt, s: Situation) -> bool:
    """The wrapper's exit records end the attempt (True), or make it wait for its tasks still finishing (True)."""
    files = s.files
    # Task 0's exit record speaks for the attempt once its siblings ended; in a group that failed, the task
    # that failed it (even where task 0 was killed before it could write one); in a group fray stopped, task 0.
    task0 = TaskEnd(0, files.exit, files.failure) if files.exit is not None else None
    gone = s.backend.state == ViewState.GONE
    if task0 and not attempt.stop_reason and siblings_finishing(task0, files.tasks, files.task_count, gone, s.now,
                                                                plan.meta.spec.stop_grace_sec):
        return True
    end, task = reporting_task(task0, () if attempt.stop_reason else files.tasks, files.task_count)
    if end is None:
        return False
    if not attempt.node:  # it ended before anyone saw it running: the wrapper's records say where
        attempt.node = _recorded_node(files)
    cause, detail = classify_exit(end.exit, files.final, end.failure, attempt)
    attempt.probe = (end.failure or {}).get("probe")  # a preflight probe's failure: judged across nodes (budgets)
    attempt_ended(plan, attempt, cause, end.exit["exit_code"], task + detail, s.jitter,
                  ended_at=end.exit.get("ended_at"))
    return True


def _gone(plan: Plan, attempt: Attempt, s: Situation) -> None:
    """The backend no longer has it and no exit record ended it: stopped, waited for, the backend's verdict, or lost."""
    view = s.backend
    if attempt.state == AttemptState.STOPPING and attempt.stop_reason:
        attempt_ended(plan, attempt, attempt.stop_reason, None, attempt.detail or "stopped", s.jitter)
    elif _record_may_be_late(attempt, s.files, view, s):
        if attempt.detail != LATE_RECORD_DETAIL:
            attempt.detail = LATE_RECORD_DETAIL
            plan.log("waiting", f"the backend no longer has attempt {attempt.number}: waiting up to "
                                f"{s.file_latency:.0f}s for its exit record, which a shared file system may show "
                                "late", attempt.number)
    elif view.cause:
        attempt_ended(plan, attempt, view.cause, None, view.detail or view.cause, s.jitter)
    else:
        waited = f" within {s.file_latency:.0f}s" if s.file_latency else ""
        attempt_ended(plan, attempt, Cause.LOST, None,
                      f"the attempt vanished without an exit record{waited} (killed, out of memory, node lost?)",
                      s.jitter)


def _pending(plan: Plan, attempt: Attempt, s: Situation) -> bool:
    """A submitted attempt the scheduler still holds: why, in words (told once per change, shown by status and a
    wait's exit 3); stopped as unschedulable (True) once --scheduling-timeout has passed."""
    view, limit = s.backend, plan.meta.spec.scheduling_timeout_sec
    if view.held and attempt.detail != view.held:
        attempt.detail = view.held
        plan.log("waiting", view.held, attempt.number)
    if limit and s.now - attempt.submitted_at >= limit:
        # Still in the scheduler's (or the cloud's) queue: fray's own placement timed out elsewhere.
        attempt.detail = f"not placed within {format_duration(limit)}: still pending ({view.detail or 'queued'})"
        _stop(plan, attempt, Cause.UNSCHEDULABLE, attempt.detail)
        return True
    return False


def _stopping(plan: Plan, attempt: Attempt, s: Situation) -> None:
    """An attempt asked to stop and still there: asked again after a daemon's crash, killed after the grace, and
    ended once a kill that cannot reach it has left it silent a heartbeat timeout."""
    files, now, spec = s.files, s.now, plan.meta.spec
    waited = now - (attempt.stop_requested_at or now)
    silent = now - max(x for x in (files.heartbeat_at, attempt.started_at, attempt.submitted_at) if x is not None)
    if attempt.detail == FORCED_DETAIL and silent > spec.heartbeat_timeout_sec:
        # Killed, and still there a cycle later: no kill reaches it (a node lost, another login host's
        # process) and it shows no life: its own fence has stopped it by now (it gives up after half a
        # heartbeat timeout without FRAY_HOME).
        attempt_ended(plan, attempt, attempt.stop_reason or Cause.STOPPED, None,
                      f"{attempt.detail or 'stopped'}; no sign of life for {silent:.0f}s", s.jitter)
    elif s.first_sight and waited <= spec.stop_grace_sec + STOP_MARGIN_SEC:
        # The daemon that decided the stop may have died before asking: ask again,
        # so a graceful stop does not turn into a kill after a crash.
        plan.actions.append(Cancel(attempt.number))
        plan.log("cancel", "asking again for the stop a previous daemon decided", attempt.number)
    elif waited > spec.stop_grace_sec + STOP_MARGIN_SEC:
        plan.actions.append(Cancel(attempt.number, force=True))
        if attempt.detail != FORCED_DETAIL:
            attempt.detail = FORCED_DETAIL
            plan.log("cancel", f"still there {waited:.0f}s after the stop request: killing it", attempt.number)


# What the backend says of an attempt that ended when its wrapper's own record, if any, says it better: it ended by
# itself (completed, failed) or vanished. A failed node or a preemption is the backend's verdict, record or not.
RECORD_DECIDES = frozenset({None, Cause.LOST, Cause.WORKLOAD_FAILURE})


def _record_may_be_late(attempt: Attempt, files: AttemptFiles, view: BackendView, s: Situation) -> bool:
    """Whether the attempt the backend no longer has may still have its exit record on the way (a shared file
    system shows it late), within the file latency of losing it, where that record would decide the verdict."""
    gone_for = s.now - (files.gone_since or s.now)
    return bool(s.file_latency) and gone_for < s.file_latency and view.cause in RECORD_DECIDES


def _started(plan: Plan, attempt: Attempt, view: BackendView, files: AttemptFiles) -> None:
    """The wrapper's first heartbeat (started.json) is the start: it needs no word from the scheduler."""
    attempt.state = AttemptState.RUNNING
    attempt.started_at = files.started["started_at"]  # type: ignore[index]
    attempt.node = view.node or _recorded_node(files)  # the scheduler's node name, where it has one
    plan.log("started", f"running on {attempt.node}", attempt.number)


def _recorded_node(files: AttemptFiles) -> str | None:
    """Where the wrapper says it ran: the scheduler's node name when it knew one, else its hostname."""
    record = files.started or files.exit or {}
    return record.get("node") or record.get("host")


def _check_stall(plan: Plan, attempt: Attempt, files: AttemptFiles, view: BackendView, now: float,
                 jitter: float) -> None:
    spec = plan.meta.spec
    if attempt.state == AttemptState.RUNNING and attempt.started_at is not None:
        last = max(x for x in (files.heartbeat_at, attempt.started_at) if x is not None)
        if now - attempt.started_at > spec.startup_grace_sec and now - last > spec.heartbeat_timeout_sec:
            damage = f"; {files.heartbeat_problem}" if files.heartbeat_problem else ""
            supersede(plan, attempt, Cause.HEARTBEAT_STALL,
                       f"no heartbeat for {now - last:.0f}s (timeout {spec.heartbeat_timeout_sec:.0f}s){damage}", jitter)
            return
        stalled = progress_stalled_for(spec, files.progress, attempt.started_at, now)
        if stalled is not None and spec.restart_on_progress_stall:
            supersede(plan, attempt, Cause.PROGRESS_STALL,
                       f"step {files.progress['step']} has not advanced for {stalled:.0f}s", jitter)  # type: ignore[index]
    elif attempt.state == AttemptState.SUBMITTED and view.state == ViewState.RUNNING:
        silent = now - attempt.submitted_at
        if silent > spec.startup_grace_sec + spec.heartbeat_timeout_sec:
            supersede(plan, attempt, Cause.HEARTBEAT_STALL,
                       f"the backend runs it but the wrapper never reported in {silent:.0f}s", jitter)


def _expired(meta: Meta, now: float) -> bool:
    spec = meta.spec
    if spec.mode != Mode.INDEFINITE or not spec.keep_alive_sec:
        return False
    first_start = next((a.started_at for a in meta.attempts if a.started_at is not None), None)
    return first_start is not None and now >= first_start + spec.keep_alive_sec


def _queued(plan: Plan, s: Situation, admit: Callable[[Request], Admission]) -> None:
    meta, now = plan.meta, s.now
    if _expired(meta, now):
        plan.end(EndStatus.ENDED_EXPIRED, f"keep-alive of {meta.spec.keep_alive_sec:.0f}s has passed")
        return
    if s.control.paused:
        _wait(plan, PAUSED_REASON)
        return
    choice = partition_policy.choose(s.partitions, meta.attempts, meta.spec.partition_fallback, now)
    if choice.wait:
        _wait(plan, choice.wait)
        return
    # A switch of partition resubmits at once: the backoff was earned on the other one.
    if meta.next_attempt_at is not None and now < meta.next_attempt_at and not choice.switched:
        _wait(plan, backoff_reason(meta.next_attempt_at), quiet=True)
        return
    spec = meta.spec
    admission = admit(run_request(spec.cpus, spec.mem_mb, spec.gpus, spec.replicas))
    if not admission.admitted:
        if admission.unschedulable:  # past --scheduling-timeout, or an --after that can no longer hold
            plan.end(admission.final or EndStatus.FAILED, admission.end_reason)
        else:
            _wait(plan, admission.reason)
        return
    number = len(meta.attempts) + 1
    meta.attempts.append(Attempt(number=number, state=AttemptState.SUBMITTING, backend=spec.backend,
                                 submitted_at=now, partition=choice.partition))
    if choice.switched:
        plan.log("partition", choice.reason, number, partition=choice.partition)
    meta.phase = Phase.ACTIVE
    meta.wait_reason = None
    meta.next_attempt_at = None
    plan.actions.append(Submit(number, admission.gpu_ids))


def _wait(plan: Plan, reason: str, quiet: bool = False) -> None:
    """Record why the run waits; log it when it changes (`quiet`: already logged elsewhere).

    A reason whose counts alone moved ("0 of 2 free, 12 queued" for "..., 30 queued") is news to no one: it is
    rewritten at most every WAIT_COUNTS_REFRESH_SEC and never logged. Rewriting it every cycle made each of a
    1,000-function sweep's waiting runs a meta.json write and an event per cycle."""
    meta = plan.meta
    if meta.wait_reason == reason:
        return
    same_wait = meta.wait_reason is not None and _DIGITS.sub("#", meta.wait_reason) == _DIGITS.sub("#", reason)
    if same_wait and plan.now - (meta.updated_at or 0.0) < WAIT_COUNTS_REFRESH_SEC:
        return
    if not same_wait and not quiet:
        plan.log("waiting", reason)
    meta.wait_reason = reason


WAIT_COUNTS_REFRESH_SEC = 5.0
_DIGITS = re.compile(r"\d+")
