"""The restart policy as values: meta + control + files + backend view + time in, plan out."""

from __future__ import annotations

import dataclasses

import pytest

from fray.core import budgets, policy
from fray.core.model import Control, Meta, RunSpec
from fray.core.policy import AttemptFiles, Situation, decide
from fray.core.observation import BackendView
from fray.core.placement.reporting import TaskEnd
from fray.core.capacity import Capacity, Request
from fray.core.scheduler import Admission, Ledger
from fray.core.status import Status, normalized_status

T0 = 1_800_000_000.0


def make_meta(**spec_overrides) -> Meta:
    return Meta(run_id="20261122-101010-job-abcd", name="job", created_at=T0,
                submitted_by={"user": "u", "host": "h", "cwd": "/"},
                script={"source": "/job.py", "frozen": "script.py", "sha256": "0" * 64},
                spec=dataclasses.replace(RunSpec(), **spec_overrides))


def always(request: Request) -> Admission:
    return Admission(True)


def step(meta: Meta, now: float, *, control: Control | None = None, files: AttemptFiles | None = None,
         view: str = "running", jitter: float = 0.0, admit=always) -> policy.Plan:
    return decide(Situation(meta, control or Control(), files or AttemptFiles(), BackendView(view), now, jitter), admit)


def running(meta: Meta, now: float) -> Meta:
    """Submit and start an attempt."""
    meta = step(meta, now).meta
    attempt = meta.in_flight
    attempt.state = "running"
    attempt.started_at = now
    return meta


def exited(code: int, final: bool = False, signal: str | None = None, at: float | None = None) -> AttemptFiles:
    record = {"exit_code": code, "ended_at": at, "received_signal": signal}
    return AttemptFiles(exit=record, final={"result": None} if final else None,
                        failure=None if code == 0 else {"message": f"workload exited {code}"})


def kinds(plan: policy.Plan) -> list[str]:
    return [e.kind for e in plan.events]


def test_a_new_run_is_submitted_when_admitted():
    plan = step(make_meta(), T0)
    assert plan.actions == [policy.Submit(1)]
    assert plan.meta.phase == "active" and plan.meta.attempts[0].state == "submitting"


def test_a_run_that_does_not_fit_waits_with_the_reason():
    ledger = Ledger(Capacity(cpus=2, mem_mb=None, gpus=0))
    ledger.hold(Request(2, None, 0))
    plan = step(make_meta(cpus=1), T0, admit=ledger.admit)
    assert plan.actions == []
    assert plan.meta.wait_reason == "waiting for resources: 1 CPUs wanted, 0 of 2 free"
    assert normalized_status(plan.meta, None, T0).status is Status.PENDING


def test_a_waiting_runs_counts_are_rewritten_every_few_seconds_and_never_logged_its_new_wait_is_at_once():
    # A 1,000-function sweep waits behind a machine whose queue length moves every cycle: rewriting each waiting
    # run's meta.json (and logging an event) for every new count cost the daemon a write per waiting run per cycle.
    def waiting(reason: str):
        return lambda _request: Admission(False, reason)

    meta = step(make_meta(), T0, admit=waiting("waiting for resources: 1 CPUs wanted, 0 of 2 free, 6 queued")).meta
    meta.updated_at = T0
    plan = step(meta, T0 + 1, admit=waiting("waiting for resources: 1 CPUs wanted, 0 of 2 free, 30 queued"))
    assert plan.meta == meta and kinds(plan) == []  # no change at all: nothing to write
    later = step(meta, T0 + policy.WAIT_COUNTS_REFRESH_SEC + 1,
                 admit=waiting("waiting for resources: 1 CPUs wanted, 0 of 2 free, 30 queued"))
    assert later.meta.wait_reason.endswith("30 queued") and kinds(later) == []
    other = step(meta, T0 + 1, admit=waiting("waiting for its dependencies: train"))
    assert other.meta.wait_reason == "waiting for its dependencies: train" and kinds(other) == ["waiting"]


def test_a_request_larger_than_the_machine_says_it_can_never_start():
    plan = step(make_meta(gpus=4), T0, admit=Ledger(Capacity(cpus=8, mem_mb=1000, gpus=1)).admit)
    assert "can never start here" in plan.meta.wait_reason and "4 GPUs" in plan.meta.wait_reason


def test_success_needs_exit_zero_and_final_json():
    meta = running(make_meta(), T0)
    done = step(meta, T0 + 5, files=exited(0, final=True), view="gone")
    assert done.meta.end.status == "completed_success"
    assert policy.Finish("completed_success", "attempt 1 succeeded") in done.actions

    no_marker = step(meta, T0 + 5, files=exited(0, final=False), view="gone")
    assert no_marker.meta.end is None
    assert no_marker.meta.attempts[0].cause == "clean_exit"
    assert no_marker.meta.counters.workload_failures == 1


def test_workload_failures_are_retried_until_max_retries_then_fail():
    meta = make_meta(max_retries=2, backoff_base_sec=0)
    for n in range(1, 4):
        meta = running(meta, T0 + 10 * n)
        meta = step(meta, T0 + 10 * n + 1, files=exited(50), view="gone").meta
    assert meta.end.status == "failed"
    assert "3 workload failures, more than --max-retries 2" in meta.end.reason
    assert [a.cause for a in meta.attempts] == ["workload_failure"] * 3


def test_node_failures_draw_on_their_own_budget():
    meta = make_meta(max_retries=0, max_retries_preemption=5, backoff_base_sec=0)
    meta = running(meta, T0)
    meta = step(meta, T0 + 1, files=exited(42), view="gone").meta
    assert meta.end is None
    assert meta.counters.node_failures == 1 and meta.counters.workload_failures == 0
    assert meta.attempts[0].cause == "node_fault"


def test_a_vanished_process_is_lost_and_retried():
    meta = running(make_meta(backoff_base_sec=0), T0)
    plan = step(meta, T0 + 1, view="gone")
    assert plan.meta.attempts[0].cause == "lost"
    assert plan.meta.counters.node_failures == 1


def test_backoff_grows_exponentially_with_a_cap_and_jitter():
    spec = RunSpec(backoff_base_sec=2, backoff_max_sec=10)
    assert [budgets.backoff_delay(spec, n, jitter=0.999999) for n in (1, 2, 3, 4)] == pytest.approx([2, 4, 8, 10], rel=1e-3)
    assert budgets.backoff_delay(spec, 3, jitter=0.0) == pytest.approx(4)  # half is fixed, half random


def test_a_failed_attempt_waits_for_its_backoff_before_the_next():
    meta = running(make_meta(backoff_base_sec=4, backoff_max_sec=100), T0)
    failed = step(meta, T0 + 1, files=exited(50), view="gone", jitter=0.0)
    assert failed.meta.next_attempt_at == pytest.approx(T0 + 1 + 2)
    waiting = step(failed.meta, T0 + 2)
    assert waiting.actions == [] and waiting.meta.wait_reason.startswith("backing off")
    assert step(failed.meta, T0 + 3.5).actions == [policy.Submit(2)]


def test_fast_failures_in_a_row_show_as_crash_loop():
    meta = make_meta(backoff_base_sec=0)
    for n in range(3):
        meta = running(meta, T0 + n)
        meta = step(meta, T0 + n + 0.5, files=exited(50), view="gone").meta
    assert meta.counters.consecutive_fast_failures == 3
    assert normalized_status(meta, None, T0 + 10).status is Status.CRASH_LOOP


def test_a_healthy_period_ends_the_failure_streak_and_restarts_without_backoff():
    meta = running(make_meta(backoff_base_sec=10), T0)
    meta.counters.consecutive_fast_failures = 5
    after = step(meta, T0 + 3600, files=exited(50), view="gone").meta
    assert after.counters.consecutive_fast_failures == 0 and after.next_attempt_at is None


def test_a_stale_heartbeat_stops_the_attempt_as_a_node_suspect():
    meta = running(make_meta(heartbeat_interval_sec=1, heartbeat_timeout_sec=10, startup_grace_sec=5), T0)
    fresh = step(meta, T0 + 9, files=AttemptFiles(heartbeat_at=T0 + 8))
    assert fresh.actions == []
    stale = step(meta, T0 + 20, files=AttemptFiles(heartbeat_at=T0 + 8))
    # Closed and replaced in the same cycle: the frozen attempt is fenced, not waited for.
    assert stale.actions == [policy.Cancel(1, force=True), policy.Submit(2)]
    first = stale.meta.attempts[0]
    assert (first.state, first.cause, first.stop_reason) == ("ended", "heartbeat_stall", "heartbeat_stall")
    assert stale.meta.counters.node_failures == 1 and kinds(stale) == ["cancel", "attempt_ended"]
    late = step(stale.meta, T0 + 21, files=exited(0, final=True, at=T0 + 21), view="running")
    assert late.meta.attempts[0] == first  # what the closed attempt's wrapper writes late changes nothing


def test_heartbeat_age_shows_degraded_then_unresponsive_before_the_restart():
    meta = running(make_meta(heartbeat_interval_sec=10, heartbeat_timeout_sec=120), T0)
    assert normalized_status(meta, T0 + 100, T0 + 105).status is Status.HEALTHY_RUNNING
    assert normalized_status(meta, T0 + 100, T0 + 140).status is Status.RUNNING_DEGRADED
    assert normalized_status(meta, T0 + 100, T0 + 170).status is Status.UNRESPONSIVE


def test_a_stop_that_is_ignored_is_forced_after_the_grace_period():
    meta = running(make_meta(stop_grace_sec=10), T0)
    stopping = step(meta, T0 + 1, control=Control(stop_requested=True))
    assert stopping.actions == [policy.Cancel(1)]
    patient = step(stopping.meta, T0 + 12, control=Control(stop_requested=True))
    assert patient.actions == []
    forced = step(stopping.meta, T0 + 17, control=Control(stop_requested=True))
    assert forced.actions == [policy.Cancel(1, force=True)]
    ended = step(forced.meta, T0 + 18, control=Control(stop_requested=True), view="gone")
    assert ended.meta.end.status == "stopped_manual"


def test_restart_does_not_count_against_budgets_and_skips_backoff():
    meta = running(make_meta(backoff_base_sec=100), T0)
    plan = step(meta, T0 + 1, control=Control(restart_nonce=1))
    assert plan.actions == [policy.Cancel(1)]
    after = step(plan.meta, T0 + 2, control=Control(restart_nonce=1), files=exited(143, signal="SIGTERM"), view="gone")
    assert after.meta.attempts[0].cause == "restarted"
    assert after.meta.counters.workload_failures == after.meta.counters.node_failures == 0
    assert after.actions == [policy.Submit(2)]


def test_pause_releases_the_attempt_and_holds_until_unpaused():
    meta = running(make_meta(), T0)
    paused = Control(paused=True)
    plan = step(meta, T0 + 1, control=paused)
    gone = step(plan.meta, T0 + 2, control=paused, view="gone")
    assert gone.meta.attempts[0].cause == "paused" and gone.actions == []
    assert step(gone.meta, T0 + 50, control=paused).actions == []
    assert step(gone.meta, T0 + 51, control=Control(paused=False)).actions == [policy.Submit(2)]


def test_start_reactivates_an_ended_run_with_fresh_budgets():
    meta = running(make_meta(max_retries=0), T0)
    failed = step(meta, T0 + 1, files=exited(50), view="gone").meta
    assert failed.end.status == "failed"
    plan = step(failed, T0 + 10, control=Control(start_nonce=1))
    assert plan.actions[0] == policy.Reactivate()
    assert policy.Submit(2) in plan.actions
    assert plan.meta.counters.workload_failures == 0 and plan.meta.end is None


def test_an_external_sigterm_is_a_preemption():
    meta = running(make_meta(backoff_base_sec=0), T0)
    plan = step(meta, T0 + 1, files=exited(143, signal="SIGTERM"), view="gone")
    assert plan.meta.attempts[0].cause == "preempted"
    assert plan.meta.counters.node_failures == 1


def test_indefinite_runs_restart_on_clean_exit_and_expire_after_keep_alive():
    meta = running(make_meta(mode="indefinite", keep_alive_sec=100, clean_exit_ok=True, backoff_base_sec=0), T0)
    restarted = step(meta, T0 + 10, files=exited(0, final=True), view="gone")
    assert restarted.meta.end is None and restarted.actions == [policy.Submit(2)]
    live = running(restarted.meta, T0 + 11)
    expiring = step(live, T0 + 101)
    assert expiring.actions == [policy.Cancel(2)] and expiring.meta.attempts[1].stop_reason == "expired"
    done = step(expiring.meta, T0 + 102, files=exited(143, signal="SIGTERM"), view="gone")
    assert done.meta.end.status == "ended_expired"


def test_an_indefinite_clean_exit_is_a_failure_unless_allowed():
    meta = running(make_meta(mode="indefinite", backoff_base_sec=0), T0)
    plan = step(meta, T0 + 10, files=exited(0, final=True), view="gone")
    assert plan.meta.counters.workload_failures == 1


def test_a_submission_lost_by_a_crashed_daemon_is_adopted_or_given_up():
    meta = step(make_meta(), T0).meta  # recorded as submitting, then the daemon died
    adopted = decide(Situation(meta, Control(), AttemptFiles(), BackendView("running", ref={"pid": 7}), T0 + 1), always)
    assert adopted.meta.attempts[0].state == "submitted" and "adopted" in kinds(adopted)
    waiting = step(meta, T0 + 5, view="gone")
    assert waiting.meta.attempts[0].state == "submitting"
    given_up = step(meta, T0 + policy.SUBMIT_RESOLVE_SEC + 1, view="gone")
    assert given_up.meta.attempts[0].cause == "submit_failed"


def test_an_unknown_backend_view_changes_nothing():
    meta = running(make_meta(), T0)
    plan = step(meta, T0 + 1, view="unknown")
    assert plan.actions == [] and plan.meta.to_dict() == meta.to_dict()


def test_a_node_fault_or_stall_makes_the_node_a_suspect_but_a_workload_failure_does_not():
    meta = running(make_meta(backoff_base_sec=0), T0)
    meta.in_flight.node = "n3"
    fault = step(meta, T0 + 1, files=exited(42), view="gone")
    suspects = [a for a in fault.actions if isinstance(a, policy.SuspectNode)]
    assert [a.node for a in suspects] == ["n3"] and suspects[0].reason.startswith("node_fault")
    crash = step(meta, T0 + 1, files=exited(50), view="gone")
    assert not any(isinstance(a, policy.SuspectNode) for a in crash.actions)


def test_a_step_that_stops_advancing_degrades_the_status_and_optionally_restarts():
    meta = running(make_meta(progress_timeout_sec=60, restart_on_progress_stall=False), T0)
    progress = {"updated_at": T0 + 200, "step": 7, "step_changed_at": T0 + 10}
    assert normalized_status(meta, T0 + 200, T0 + 50, progress=progress).status is Status.HEALTHY_RUNNING
    degraded = normalized_status(meta, T0 + 200, T0 + 200, progress=progress)
    assert degraded.status is Status.RUNNING_DEGRADED and "step 7 has not advanced" in degraded.reason
    assert step(meta, T0 + 200, files=AttemptFiles(heartbeat_at=T0 + 200, progress=progress)).actions == []

    meta.spec.restart_on_progress_stall = True
    plan = step(meta, T0 + 200, files=AttemptFiles(heartbeat_at=T0 + 200, progress=progress))
    assert plan.actions == [policy.Cancel(1, force=True), policy.Submit(2)]
    assert plan.meta.attempts[0].cause == "progress_stall"


def test_config_set_changes_only_the_safe_settings_of_a_live_run():
    meta = running(make_meta(max_retries=1), T0)
    control = Control(overrides={"max_retries": 9, "cpus": 64}, updated_by="ana")
    plan = step(meta, T0 + 1, control=control)
    assert plan.meta.spec.max_retries == 9
    assert plan.meta.spec.cpus == 1  # not a safe override: ignored
    assert [e.reason for e in plan.events] == ["settings changed by ana: max_retries=9"]
    assert step(plan.meta, T0 + 2, control=control).events == []  # applied once


def test_a_new_daemon_asks_again_for_a_stop_its_predecessor_decided():
    meta = running(make_meta(stop_grace_sec=10), T0)
    stopping = step(meta, T0 + 1, control=Control(stop_requested=True)).meta  # then the daemon died
    again = decide(Situation(stopping, Control(stop_requested=True), AttemptFiles(), BackendView("running"), T0 + 3,
                             first_sight=True), always)
    assert again.actions == [policy.Cancel(1)]  # polite, not a kill
    assert step(stopping, T0 + 4, control=Control(stop_requested=True)).actions == []  # once is enough


def test_by_default_a_hung_workload_is_restarted_once_it_has_reported_progress():
    """The heartbeat comes from the wrapper's thread: only a step that stops advancing shows a hang."""
    meta = running(make_meta(), T0)
    timeout = RunSpec().progress_timeout_sec
    assert timeout and RunSpec().restart_on_progress_stall
    beating = AttemptFiles(heartbeat_at=T0 + timeout + 100)
    assert step(meta, T0 + timeout + 100, files=beating).actions == []  # never reported: nothing to judge
    progress = {"updated_at": T0 + 10, "step": 3, "step_changed_at": T0 + 10}
    reported = AttemptFiles(heartbeat_at=T0 + timeout + 5, progress=progress)
    assert step(meta, T0 + timeout + 5, files=reported).actions == []  # not yet past the timeout
    late = AttemptFiles(heartbeat_at=T0 + timeout + 20, progress=progress)
    plan = step(meta, T0 + timeout + 20, files=late)
    assert plan.actions == [policy.Cancel(1, force=True), policy.Submit(2)]
    attempt = plan.meta.attempts[0]
    assert attempt.cause == "progress_stall" and "step 3 has not advanced" in attempt.detail


def fail_at(meta: Meta, at: float) -> Meta:
    """Run an attempt that exits 50 at `at` (started just before), and let the backoff pass."""
    meta = step(meta, at - 1).meta
    attempt = meta.in_flight
    attempt.state, attempt.started_at = "running", at - 1
    meta = step(meta, at, files=exited(50, at=at), view="gone").meta
    meta.next_attempt_at = None
    return meta


def test_failures_count_against_the_budget_only_inside_the_retry_window():
    day = 86400.0
    meta = make_meta(mode="indefinite", max_retries=2, retry_window_sec=day)
    for n in range(6):  # six crashes, two days apart: never more than one in the window
        meta = fail_at(meta, T0 + n * 2 * day)
        assert meta.phase != "ended", meta.end
    assert meta.counters.workload_failures == 6
    assert budgets.budgets_used(meta, T0 + 10 * day).workload == 1
    for n in range(1, 3):  # three within an hour: more than --max-retries 2
        meta = fail_at(meta, T0 + 10 * day + n * 60)
    assert meta.phase == "ended" and meta.end.status == "failed"
    assert "3 workload failures, more than --max-retries 2 within --retry-window 1d" in meta.end.reason


def test_without_a_retry_window_every_failure_since_the_start_counts():
    meta = make_meta(mode="indefinite", max_retries=2, retry_window_sec=None)
    for n in range(3):
        meta = fail_at(meta, T0 + n * 86400.0 * 30)
    assert meta.phase == "ended" and "3 workload failures, more than --max-retries 2; last:" in meta.end.reason


def test_starting_an_ended_run_again_starts_the_budgets_afresh():
    meta = make_meta(max_retries=0, retry_window_sec=None)
    meta = fail_at(meta, T0 + 10)
    assert meta.phase == "ended"
    plan = step(meta, T0 + 20, control=Control(start_nonce=1))
    assert plan.meta.counters.since == T0 + 20
    assert budgets.budgets_used(plan.meta, T0 + 20).workload == 0


def test_a_paused_run_is_pending_with_the_pause_as_its_reason_not_restarting():
    meta = running(make_meta(), T0)
    paused = Control(paused=True, updated_by="ana")
    plan = step(meta, T0 + 1, control=paused)  # the attempt is stopped for the pause...
    meta = step(plan.meta, T0 + 2, control=paused, files=exited(143, signal="SIGTERM", at=T0 + 2), view="gone").meta
    assert meta.in_flight is None and meta.attempts
    status = normalized_status(meta, None, T0 + 3, paused=True)
    assert status.status is Status.PENDING and status.reason.startswith("paused")


def test_a_run_held_back_after_an_attempt_is_pending_and_one_backing_off_is_restarting():
    meta = running(make_meta(backoff_base_sec=10), T0)
    meta = step(meta, T0 + 10, files=exited(50, at=T0 + 10), view="gone").meta  # a fast failure: it backs off
    assert normalized_status(meta, None, T0 + 11).status is Status.RESTARTING  # backing off
    full = lambda request: Admission(False, "waiting for resources: 2 CPUs wanted, 0 of 2 free")  # noqa: E731
    meta = step(meta, T0 + 200, admit=full).meta
    held = normalized_status(meta, None, T0 + 200)
    assert held.status is Status.PENDING and "waiting for resources" in held.reason


def test_a_crash_loop_says_how_long_each_attempt_ran():
    meta = make_meta(backoff_base_sec=0)
    for ran in (50.0, 48.0, 3.0):
        meta = step(meta, T0).meta
        attempt = meta.in_flight
        attempt.state, attempt.started_at = "running", T0
        meta = step(meta, T0 + ran, files=exited(50, at=T0 + ran), view="gone").meta
    status = normalized_status(meta, None, T0 + 60)
    assert status.status is Status.CRASH_LOOP
    assert status.reason.startswith("3 failures in a row (attempts ran 50s, 48s, 3s; under 60s is a fast failure)")


def test_an_attempt_that_ends_before_it_was_seen_running_still_logs_its_start():
    meta = step(make_meta(), T0).meta
    meta.in_flight.state = "submitted"
    files = exited(0, final=True, at=T0 + 3)
    files = dataclasses.replace(files, started={"started_at": T0 + 1, "host": "n1"})
    plan = step(meta, T0 + 4, files=files, view="pending")
    assert kinds(plan)[:2] == ["started", "attempt_ended"]
    attempt = plan.meta.attempts[0]
    assert attempt.started_at == T0 + 1 and attempt.cause == "success"


def test_the_first_heartbeat_is_the_start_even_while_the_scheduler_cannot_tell():
    meta = step(make_meta(), T0).meta
    meta.in_flight.state = "submitted"
    plan = step(meta, T0 + 2, files=AttemptFiles(started={"started_at": T0 + 1, "host": "n1"}), view="unknown")
    assert plan.meta.in_flight.state == "running" and kinds(plan) == ["started"]


def test_a_run_refused_for_good_by_placement_ends_unschedulable():
    refused = lambda request: Admission(False, "not placed within 1m: no worker with gpu-type=h100",  # noqa: E731
                                        unschedulable=True)
    plan = step(make_meta(scheduling_timeout_sec=60.0), T0 + 61, admit=refused)
    assert plan.meta.phase == "ended" and plan.meta.attempts == []
    assert (plan.meta.end.status, plan.meta.end.reason) == (
        "failed", "unschedulable: not placed within 1m: no worker with gpu-type=h100")


def test_an_attempt_still_pending_past_the_scheduling_timeout_is_cancelled_and_the_run_ends_unschedulable():
    meta = step(make_meta(scheduling_timeout_sec=30.0), T0).meta
    meta.attempts[0].state = "submitted"
    assert step(meta, T0 + 29, view="pending").actions == []  # within its timeout: it waits
    plan = step(meta, T0 + 30, view="pending")
    assert plan.actions == [policy.Cancel(1)] and plan.meta.attempts[0].stop_reason == "unschedulable"
    ended = step(plan.meta, T0 + 31, view="gone").meta
    assert (ended.phase, ended.end.status) == ("ended", "failed")
    assert ended.end.reason == "unschedulable: not placed within 30s: still pending (queued)"
    assert ended.attempts[0].cause == "unschedulable"


def test_a_failed_group_is_a_workload_failure_of_the_task_that_failed_even_without_task_0s_record():
    meta = running(make_meta(replicas=3, max_retries=1), T0)
    task1 = TaskEnd(1, {"exit_code": 50, "ended_at": T0 + 1, "workload_exit_code": 3},
                    {"workload_exit_code": 3, "stderr_tail": ["lost my shard"]})
    task2 = TaskEnd(2, {"exit_code": 143, "ended_at": T0 + 2, "received_signal": "SIGTERM"}, None)
    # srun --kill-on-bad-exit terminated task 0's wrapper: with its record, and before it could write one.
    killed0 = AttemptFiles(exit={"exit_code": 143, "ended_at": T0 + 2, "received_signal": "SIGTERM"},
                           tasks=(task1, task2), task_count=3)
    for files in (killed0, AttemptFiles(tasks=(task1, task2), task_count=3)):
        plan = decide(Situation(meta, Control(), files, BackendView("gone", cause="lost", detail="FAILED"), T0 + 3),
                      always)
        attempt = plan.meta.attempts[0]
        assert (attempt.cause, attempt.counted_as, attempt.exit_code) == ("workload_failure", "workload", 50)
        assert attempt.detail == "task 1 of 3: exit 3: lost my shard"
    # Only killed siblings and no word from task 0: the backend's reading stands.
    plan = decide(Situation(meta, Control(), AttemptFiles(tasks=(task2,), task_count=3),
                            BackendView("gone", cause="lost", detail="FAILED"), T0 + 3), always)
    assert plan.meta.attempts[0].cause == "lost"


def late(meta: Meta, now: float, files: AttemptFiles, cause: str | None = None, latency: float = 30.0) -> policy.Plan:
    view = BackendView("gone", cause=cause, detail=cause)
    return decide(Situation(meta, Control(), files, view, now, 0.0, file_latency=latency), always)


def test_an_attempt_the_backend_lost_waits_for_its_exit_record_up_to_the_file_latency():
    meta = running(make_meta(), T0)
    gone = AttemptFiles(heartbeat_at=T0 + 9, gone_since=T0 + 10)
    waiting = late(meta, T0 + 20, gone, cause="lost")
    assert waiting.meta.in_flight is not None and "waiting" in kinds(waiting)
    assert waiting.meta.in_flight.detail == policy.LATE_RECORD_DETAIL
    arrived = late(waiting.meta, T0 + 25, dataclasses.replace(exited(0, final=True, at=T0 + 9), gone_since=T0 + 10),
                   cause="lost")
    assert arrived.meta.attempts[0].cause == "success"  # the late record decides, not the backend's guess
    never = late(waiting.meta, T0 + 41, gone, cause="lost")
    assert never.meta.attempts[0].cause == "lost"


def test_a_failed_node_or_a_preemption_is_the_backends_verdict_at_once_record_or_not():
    for cause in ("node_fault", "preempted"):
        meta = running(make_meta(heartbeat_interval_sec=2.0), T0)
        cut_off = AttemptFiles(heartbeat_at=T0 + 59, gone_since=T0 + 60)  # a wrapper cut off may beat on
        plan = late(meta, T0 + 61, cut_off, cause=cause)
        assert plan.meta.attempts[0].cause == cause


def test_a_stopping_attempt_nothing_can_reach_ends_once_it_shows_no_life_for_a_heartbeat_timeout():
    meta = running(make_meta(stop_grace_sec=10.0, heartbeat_timeout_sec=60.0), T0)
    stopping = step(meta, T0 + 1, control=Control(stop_requested=True), files=AttemptFiles(heartbeat_at=T0 + 1)).meta
    quiet = AttemptFiles(heartbeat_at=T0 + 1)
    killing = step(stopping, T0 + 30, files=quiet)  # past the stop grace: killed, and not ended before it is
    assert killing.meta.in_flight is not None and any(getattr(a, "force", False) for a in killing.actions)
    silent_but_never_killed = step(stopping, T0 + 62, files=quiet)
    assert silent_but_never_killed.meta.in_flight is not None  # a kill is tried first: it may still reach it
    ended = step(killing.meta, T0 + 62, files=quiet).meta
    assert ended.attempts[0].state == "ended" and ended.attempts[0].cause == "stopped"
    assert "no sign of life for 61s" in ended.attempts[0].detail


def test_the_nodes_clock_offset_is_kept_on_the_attempt_only_when_it_moves():
    meta = running(make_meta(), T0)
    first = step(meta, T0 + 1, files=AttemptFiles(heartbeat_at=T0 + 1, clock_offset=-180.04)).meta
    assert first.in_flight.clock_offset_sec == -180.0
    same = step(first, T0 + 2, files=AttemptFiles(heartbeat_at=T0 + 2, clock_offset=-180.3))
    assert same.meta.in_flight.clock_offset_sec == -180.0 and same.meta == first  # no meta.json write for it
