"""Hangs on the shepherd's side: how a hang the wrapper ended is classified, budgeted, checked at submit and
answered with what to type (pure, as values; the wrapper's options in tests/backends/test_wrapper_hang_options.py,
status's words in tests/ops/test_hang_detail.py)."""

from __future__ import annotations

import dataclasses

from fray.core import policy, submit_checks
from fray.core.recovery import next_steps
from fray.core.model import Meta, RunSpec
from fray.core.observation import BackendView
from fray.core.policy import AttemptFiles, Situation, decide
from fray.core.scheduler import Admission
from fray.wrapper import contract

T0 = 1_800_000_000.0


def make_meta(**spec: object) -> Meta:
    return Meta(run_id="20261126-101010-job-abcd", name="job", created_at=T0,
                submitted_by={"user": "u", "host": "h", "cwd": "/"},
                script={"source": "/job.py", "frozen": "script.py", "sha256": "0" * 64},
                spec=dataclasses.replace(RunSpec(), **spec))


def step(meta: Meta, now: float, files: AttemptFiles | None = None, view: str = "running") -> policy.Plan:
    return decide(Situation(meta, policy.Control(), files or AttemptFiles(), BackendView(view), now, 0.0),
                  lambda request: Admission(True))


def hung(cause: str) -> AttemptFiles:
    failure = {"cause": cause, "message": f"hung: the workload's main process (pid 9) was stopped; hung in worker, "
                                          f"job.py:9 (all stacks: {contract.STACKS})"}
    return AttemptFiles(exit={"exit_code": contract.EXIT_WORKLOAD_FAILURE, "ended_at": T0 + 60,
                              "received_signal": None}, failure=failure)


def test_a_hang_the_wrapper_ended_is_a_workload_failure_restarted_as_a_stall_is():
    for cause in ("hang_stopped", "hang_idle"):
        meta = step(make_meta(max_retries=3, backoff_base_sec=0), T0).meta
        meta.in_flight.state, meta.in_flight.started_at, meta.in_flight.node = "running", T0, "n1"
        plan = step(meta, T0 + 61, hung(cause), view="gone")
        attempt = plan.meta.attempts[0]
        assert attempt.cause == cause and "hung in worker, job.py:9" in attempt.detail
        assert attempt.counted_as == "workload" and plan.meta.counters.workload_failures == 1
        assert not any(isinstance(a, policy.SuspectNode) for a in plan.actions)  # not the node's fault
        assert policy.Submit(2) in plan.actions


def test_an_idle_timeout_under_two_heartbeats_is_refused_at_submit_with_the_fix():
    assert submit_checks.problems(RunSpec(idle_timeout_sec=2.0, heartbeat_interval_sec=0.5), "x",
                                  submit_checks.Offer()) == []
    assert submit_checks.problems(RunSpec(idle_timeout_sec=None), "x", submit_checks.Offer()) == []
    problem, = submit_checks.problems(RunSpec(idle_timeout_sec=15.0, heartbeat_interval_sec=10.0), "x",
                                      submit_checks.Offer())
    assert problem.startswith("--idle-timeout 15s is shorter than two heartbeats") and "20s or more" in problem


def test_a_run_failed_by_hangs_or_stalls_is_pointed_at_its_stacks_not_its_stderr():
    def failed(files: AttemptFiles) -> list[str]:
        meta = step(make_meta(max_retries=0, backoff_base_sec=0), T0).meta
        meta.in_flight.state, meta.in_flight.started_at = "running", T0
        ended = step(meta, T0 + 61, files, view="gone").meta
        assert ended.end.budget == "workload" and ended.end.budget_limit == 0  # the budget spent, as data
        return next_steps("failed", ended.end.reason, "r1", {}, "running", end=vars(ended.end),
                          last_cause=ended.attempts[-1].cause)

    for cause in ("hang_stopped", "hang_idle"):
        assert failed(hung(cause))[0].startswith("fray logs r1 --stacks  # where it hung")
    crashed = failed(AttemptFiles(exit={"exit_code": contract.EXIT_WORKLOAD_FAILURE, "ended_at": T0 + 60,
                                        "received_signal": None}, failure={"cause": "workload_failure",
                                                                           "message": "exit 1: boom"}))
    assert crashed[0].startswith("fray logs r1 --stderr")
    assert crashed[1].startswith("fray control config-set r1 max-retries=1 ")
