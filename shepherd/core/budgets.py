"""Retry budgets and backoff (pure): what an ended attempt costs a run, and how long it waits before the next try.

Workload failures (exit 50, or exit 0 where that is not success, or a
progress stall, or a hang) draw on `max_retries`; node-side failures (node
fault exits, lost process, stalled heartbeat, preemption, failed submission)
on `max_retries_preemption`. Manual restarts, pauses and stops draw on neither.
A budget counts only the failures inside the sliding `retry_window_sec` (as
Kubernetes forgets a crash-loop back-off after a healthy while), so a service
kept alive for weeks is not ended by crashes days apart. Each ended attempt
that drew on a budget says which (`counted_as`); the counts are recomputed
from the attempts inside the window, never kept as a running total that could
drift.

Backoff is for loops, not for progress: an attempt that made progress (its
step went past every earlier attempt's, or it ran `healthy_period`) restarts
at once and ends the streak; the backoff grows only over the attempts in a row
that made none, capped, half of it random so runs do not restart in lockstep.
A transient submission failure (the controller unreachable, a submit limit)
draws on no budget (`counted_as` "submit"): it is retried with its own
backoff, over the failed submissions in a row, and never ends the run.

A preflight probe that fails the same way on a second node for the same run
blames the job, not the nodes (fray.core.lemons): the run ends `failed_config`
with a verdict naming the probe, the nodes and the fix, and no node is banned.

`attempt_ended` is where every attempt is closed (fray.core.policy calls it
for each way an attempt can end): it ends the run, makes it wait, or counts
the failure and backs off, writing into the run's `Plan` (fray.core.run_plan).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from fray.core.lemons import same_failure_elsewhere
from fray.core.model import Attempt, AttemptState, Cause, EndStatus, Meta, Mode, Phase, RunSpec
from fray.core.status import healthy_period
from fray.core.values import format_duration

if TYPE_CHECKING:  # the policy's plan: `fray status` counts budgets (budgets_used) without loading its actions
    from fray.core.run_plan import Plan

WORKLOAD_BUDGET, NODE_BUDGET, SUBMIT_BUDGET = "workload", "node", "submit"
WORKLOAD_CAUSES = frozenset({Cause.WORKLOAD_FAILURE, Cause.CLEAN_EXIT, Cause.SUCCESS,
                             Cause.PROGRESS_STALL, Cause.HANG_STOPPED, Cause.HANG_IDLE})
# Causes that make the node a suspect: it goes on the blacklist for a while.
SUSPECT_CAUSES = frozenset({Cause.NODE_FAULT, Cause.HEARTBEAT_STALL})


class BudgetsUsed(NamedTuple):
    """Failures that count against each retry budget now."""

    workload: int
    node: int


def budgets_used(meta: Meta, now: float) -> BudgetsUsed:
    """Failures inside the retry window (and since the run was last (re)started), per budget."""
    since = meta.counters.since or float("-inf")
    if meta.spec.retry_window_sec:
        since = max(since, now - meta.spec.retry_window_sec)
    workload = node = 0
    for attempt in meta.attempts:
        if attempt.counted_as in (None, SUBMIT_BUDGET) or (attempt.ended_at or now) < since:
            continue
        if attempt.counted_as == WORKLOAD_BUDGET:
            workload += 1
        else:
            node += 1
    return BudgetsUsed(workload, node)


def backoff_delay(spec: RunSpec, streak: int, jitter: float) -> float:
    """Exponential in the failure streak, capped, with 'equal jitter' (half fixed, half random)."""
    if streak <= 0 or spec.backoff_base_sec <= 0:
        return 0.0
    ceiling = min(spec.backoff_max_sec, spec.backoff_base_sec * 2 ** min(streak - 1, 32))
    return ceiling * (0.5 + 0.5 * jitter)


def attempt_ended(plan: Plan, attempt: Attempt, cause: str, exit_code: int | None, detail: str, jitter: float,
                  ended_at: float | None = None, replace_now: bool = False) -> None:
    """Close `attempt` with its cause, and settle what that means for the run: it ends (success, a stop,
    a refusal, the keep-alive passed), waits (paused, restarted), or draws on a budget and backs off."""
    meta, now = plan.meta, plan.now
    attempt.state = AttemptState.ENDED
    attempt.ended_at = ended_at or now
    attempt.cause = cause
    attempt.exit_code = exit_code
    attempt.detail = detail
    if plan.step is not None and attempt.step is None:
        attempt.step = plan.step
    meta.phase = Phase.QUEUED
    plan.log("attempt_ended", f"{cause}: {detail}", attempt.number, exit_code=exit_code)
    if cause in SUSPECT_CAUSES and attempt.node:
        from fray.core.run_plan import ClearSuspicion, SuspectNode

        lemon = same_failure_elsewhere(meta, attempt)
        if lemon is not None:
            # A lemon job, not lemon nodes: no more bans, and those it laid for this probe are lifted.
            plan.actions.append(ClearSuspicion(lemon.probe, lemon.nodes))
            plan.end(EndStatus.FAILED_CONFIG, lemon.verdict())
            return
        plan.actions.append(SuspectNode(attempt.node, f"{cause}: {detail}", cause, attempt.probe))
    spec = meta.spec
    if cause == Cause.SUCCESS and spec.mode == Mode.RUN_ONCE:
        plan.end(EndStatus.COMPLETED_SUCCESS, f"attempt {attempt.number} succeeded")
    elif cause == Cause.STOPPED:
        plan.end(EndStatus.STOPPED_MANUAL, "stopped on request")
    elif cause == Cause.UNSCHEDULABLE:
        plan.end(EndStatus.FAILED, f"unschedulable: {detail}")
    elif cause in (Cause.CONFIG_REFUSED, Cause.SNAPSHOT_LEFT_OUT):
        # Retrying the same submission gets the same answer: end now, not after a budget of backoffs.
        plan.end(EndStatus.FAILED_CONFIG, detail)
    elif cause == Cause.EXPIRED:
        plan.end(EndStatus.ENDED_EXPIRED, f"keep-alive of {spec.keep_alive_sec:.0f}s has passed")
    elif cause == Cause.PAUSED:
        meta.wait_reason = "paused"
    elif cause == Cause.RESTARTED:
        meta.next_attempt_at = None
    elif cause in (Cause.SUCCESS, Cause.CLEAN_EXIT) and spec.mode == Mode.INDEFINITE and spec.clean_exit_ok:
        meta.counters.consecutive_fast_failures = 0
        meta.next_attempt_at = now + backoff_delay(spec, 1, jitter)
    else:
        _count_failure(plan, attempt, cause, jitter, replace_now)


def made_progress(meta: Meta, attempt: Attempt, now: float) -> str:
    """Why `attempt` counts as progress ("" when it does not): its step went past every earlier attempt's,
    or it ran a healthy period. Such an attempt's end restarts the run without backoff."""
    ran = (attempt.ended_at or now) - attempt.started_at if attempt.started_at else 0.0
    if ran >= healthy_period(meta.spec):
        return f"it ran {format_duration(ran)}"
    if attempt.step is not None:
        before = [a.step for a in meta.attempts if a.number < attempt.number and a.step is not None]
        if not before or attempt.step > max(before):
            return f"its step reached {attempt.step}" + (f" (from {max(before)})" if before else "")
    return ""


def submit_streak(meta: Meta) -> int:
    """The failed submissions in a row, up to the latest attempt."""
    count = 0
    for attempt in reversed(meta.attempts):
        if attempt.cause != Cause.SUBMIT_FAILED:
            break
        count += 1
    return count


def _count_failure(plan: Plan, attempt: Attempt, cause: str, jitter: float, replace_now: bool = False) -> None:
    """Draw on the cause's budget (ending the run when it is spent) and back off before the next attempt.

    `replace_now`: a stalled attempt that had run a healthy while is replaced
    without a backoff (there is no crash loop to slow down).
    """
    meta, now, spec = plan.meta, plan.now, plan.meta.spec
    counters = meta.counters
    if cause == Cause.SUBMIT_FAILED:
        attempt.counted_as = SUBMIT_BUDGET  # the cluster's state now, not the node's fault: no budget ends the run
        streak = submit_streak(meta)
        delay = backoff_delay(spec, streak, jitter)
        meta.next_attempt_at = now + delay
        plan.log("backoff", f"submitting again in {delay:.1f}s ({streak} failed submissions in a row)",
                 attempt.number, delay_sec=round(delay, 3))
        return
    progress = made_progress(meta, attempt, now)
    counters.consecutive_fast_failures = 0 if progress else counters.consecutive_fast_failures + 1
    used = budgets_used(meta, now)
    window = f" within --retry-window {format_duration(spec.retry_window_sec)}" if spec.retry_window_sec else ""
    if cause in WORKLOAD_CAUSES:
        counters.workload_failures += 1
        attempt.counted_as = WORKLOAD_BUDGET
        if used.workload + 1 > spec.max_retries:
            plan.end(EndStatus.FAILED,
                     f"{used.workload + 1} workload failures, more than --max-retries {spec.max_retries}{window}; "
                     f"last: {attempt.detail}", WORKLOAD_BUDGET, spec.max_retries)
            return
    else:
        counters.node_failures += 1
        attempt.counted_as = NODE_BUDGET
        if used.node + 1 > spec.max_retries_preemption:
            plan.end(EndStatus.FAILED,
                     f"{used.node + 1} node-side failures, more than --max-retries-preemption "
                     f"{spec.max_retries_preemption}{window}; last: {attempt.detail}", NODE_BUDGET,
                     spec.max_retries_preemption)
            return
    if progress or (replace_now and counters.consecutive_fast_failures <= 1):
        meta.next_attempt_at = None
        if progress:
            plan.log("backoff", f"restarting at once: attempt {attempt.number} made progress ({progress})",
                     attempt.number, delay_sec=0.0)
        return
    delay = backoff_delay(spec, counters.consecutive_fast_failures, jitter)
    meta.next_attempt_at = now + delay
    streak = counters.consecutive_fast_failures
    plan.log("backoff", f"retrying in {delay:.1f}s ({streak} attempt{'s' if streak != 1 else ''} in a row without "
             "progress)", attempt.number, delay_sec=round(delay, 3))


def supersede(plan: Plan, attempt: Attempt, cause: str, detail: str, jitter: float) -> None:
    """Close a stalled attempt now and let the next one start this very cycle.

    Waiting for a frozen attempt to die could take as long as the node takes to
    come back. Closing it in meta.json fences it instead: its wrapper, if it
    ever runs again, sees it is no longer current and kills its workload without
    writing anything (fray.wrapper.fence). The backend is still told to kill it.
    """
    attempt.stop_reason = cause
    attempt.stop_requested_at = plan.now
    from fray.core.run_plan import Cancel

    plan.actions.append(Cancel(attempt.number, force=True))
    plan.log("cancel", f"{detail}: closing attempt {attempt.number} and starting another", attempt.number)
    attempt_ended(plan, attempt, cause, None, detail, jitter, replace_now=True)
