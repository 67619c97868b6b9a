"""Runs that wait for runs: the pure gate (values), and `--after` parsing at submit (nothing written on bad input)."""

from __future__ import annotations


import pytest

from fray.core import dependencies
from fray.core.model import Attempt, End, Meta, RunSpec

NOW = 1_000_000.0


def meta(run_id: str, name: str, after: list[dict] | None = None, phase: str = "queued", end: str | None = None,
         attempts: int = 0, sweep: dict | None = None) -> Meta:
    m = Meta(run_id=run_id, name=name, created_at=NOW, submitted_by={"user": "u", "host": "h"},
             script={"source": "x.py", "frozen": "script.py"}, spec=RunSpec(after=after or []), phase=phase)
    m.attempts = [Attempt(number=i + 1, state="running" if phase == "active" and i == attempts - 1 else "ended",
                          backend="local", submitted_at=NOW) for i in range(attempts)]
    if end:
        m.phase, m.end = "ended", End(status=end, reason=f"it {end}", at=NOW)
    m.group = sweep
    return m


def up(run_id: str = "r-train", on: str = "ok", name: str = "train") -> dict:
    return {"ref": name, "on": on, "name": name, "run_id": run_id}


def gate(dependent: Meta, *others: Meta, present: set[str] | None = None):
    metas = {m.run_id: m for m in (dependent, *others)}
    ids = set(metas) if present is None else present
    return dependencies.gate(dependent, metas, ids.__contains__, lambda m: "healthy_running")


def test_a_run_waits_for_its_upstream_with_its_status_and_attempt():
    train = meta("r-train", "train", phase="active", attempts=2)
    verdict = gate(meta("r-eval", "eval", [up()]), train)
    assert verdict == dependencies.Gate(False, "waiting for train (healthy_running, attempt 2)")


@pytest.mark.parametrize("on, status, start", [
    ("ok", "completed_success", True), ("ok", "failed", False), ("ok", "stopped_manual", False),
    ("fail", "failed", True), ("fail", "failed_dependency", True), ("fail", "completed_success", False),
    ("fail", "stopped_manual", False), ("any", "stopped_manual", True), ("any", "failed", True),
])
def test_each_condition_holds_or_breaks_once_the_upstream_ended(on, status, start):
    verdict = gate(meta("r-eval", "eval", [up(on=on)]), meta("r-train", "train", end=status))
    assert verdict is not None and verdict.start is start
    assert verdict.broken is (not start)
    if not start:
        assert "train" in verdict.reason and status in verdict.reason


def test_an_upstream_whose_folder_is_gone_breaks_the_dependency():
    verdict = gate(meta("r-eval", "eval", [up()]), present={"r-eval"})
    assert verdict is not None and verdict.broken and "no longer exists" in verdict.reason


def test_an_unreadable_upstream_makes_it_wait_not_fail():
    dependent = meta("r-eval", "eval", [up()])
    verdict = dependencies.gate(dependent, {"r-eval": dependent, "r-train": None}, {"r-eval", "r-train"}.__contains__,
                                lambda m: "x")
    assert verdict is not None and not verdict.start and not verdict.broken


def test_a_run_that_started_or_has_no_after_has_no_gate():
    assert gate(meta("r-eval", "eval")) is None
    started = meta("r-eval", "eval", [up()], phase="active", attempts=1)
    assert gate(started, meta("r-train", "train", end="failed")) is None


def test_one_broken_upstream_of_several_ends_it_even_while_another_waits():
    dependent = meta("r-eval", "eval", [up("r-a", name="a"), up("r-b", name="b")])
    verdict = gate(dependent, meta("r-a", "a", phase="active", attempts=1), meta("r-b", "b", end="failed"))
    assert verdict is not None and verdict.broken and "b ended failed" in verdict.reason


def sweep_point(index: int, end: str | None = None) -> Meta:
    return meta(f"r-sw-{index}", f"sw-{index}", end=end, phase="active" if end is None else "queued",
                attempts=1, sweep={"kind": "sweep", "id": "sw-abc", "name": "sw", "size": 3, "index": index})


def test_a_sweep_group_is_satisfied_when_all_its_points_are():
    group = {"ref": "sw", "on": "ok", "name": "sw", "group": "sw-abc", "size": 3}
    dependent = meta("r-eval", "eval", [group])
    waiting = gate(dependent, sweep_point(0, "completed_success"), sweep_point(1), sweep_point(2, "completed_success"))
    assert waiting is not None and not waiting.start and "2 of 3 points ended" in waiting.reason
    unwritten = gate(dependent, sweep_point(0, "completed_success"))
    assert unwritten is not None and not unwritten.start and not unwritten.broken
    done = gate(dependent, *(sweep_point(i, "completed_success") for i in range(3)))
    assert done == dependencies.Gate(True)
    broken = gate(dependent, sweep_point(0, "completed_success"), sweep_point(1, "failed"), sweep_point(2))
    assert broken is not None and broken.broken and "sw point 1" in broken.reason


@pytest.mark.parametrize("text, expected", [
    ("train", ("train", "ok")), ("train:fail", ("train", "fail")), ("train:any", ("train", "any")),
    ("20261122-101530-train-3fa2", ("20261122-101530-train-3fa2", "ok")), ("group:sw-abc", ("group:sw-abc", "ok")),
])
def test_after_texts_split_into_ref_and_condition(text, expected):
    assert dependencies.split(text) == expected


@pytest.mark.parametrize("text", ["", ":ok", "a b", "-x", "train:soon"])
def test_bad_after_texts_are_refused_with_the_syntax(text):
    with pytest.raises(ValueError, match=r"RUN\[:ok\|:fail\|:any\]"):
        dependencies.split(text)


def test_a_run_of_another_cluster_is_refused_by_name():
    with pytest.raises(ValueError, match="another cluster"):
        dependencies.split("gpu-login/train:ok")


def test_env_names_are_upper_case_with_underscores():
    assert dependencies.env_name("train-big.v2") == "FRAY_AFTER_TRAIN_BIG_V2"


def test_dependents_follow_chains_and_sweep_groups():
    waits = {"r-b": ["r-a"], "r-c": ["r-b"], "r-sw-0": ["r-c"], "r-d": ["group:sw-abc"], "r-e": ["r-x"]}
    groups = {"r-sw-0": "group:sw-abc", "r-sw-1": "group:sw-abc"}
    assert dependencies.dependents(waits, groups, ["r-a"]) == ["r-b", "r-c", "r-sw-0", "r-d"]
    assert dependencies.dependents(waits, groups, ["r-sw-1"]) == ["r-d"]
    assert dependencies.dependents(waits, groups, ["r-d"]) == []
    assert dependencies.edge_key({"group": "sw-abc"}) == "group:sw-abc"


def test_the_policy_holds_a_dependent_then_ends_it_failed_dependency_with_the_reason_as_is():
    from fray.core import policy
    from fray.core.model import Control
    from fray.core.observation import BackendView
    from fray.core.scheduler import Admission
    from fray.core.status import Status, normalized_status

    def step(m: Meta, admission: Admission) -> policy.Plan:
        situation = policy.Situation(m, Control(), policy.AttemptFiles(), BackendView("running"), NOW)
        return policy.decide(situation, lambda _request: admission)

    dependent = meta("r-eval", "eval", [up()])
    held = step(dependent, Admission(False, "waiting for train (healthy_running, attempt 2)"))
    assert held.actions == [] and held.meta.wait_reason == "waiting for train (healthy_running, attempt 2)"
    assert normalized_status(held.meta, None, NOW).status is Status.PENDING
    ended = step(held.meta, Admission(False, "upstream train ended failed (x)", unschedulable=True,
                                      final="failed_dependency"))
    assert ended.actions == [policy.Finish("failed_dependency", "upstream train ended failed (x)")]
    shown = normalized_status(ended.meta, None, NOW)
    assert shown.status is Status.FAILED_DEPENDENCY and shown.icon == "⊗"
    timed_out = step(dependent, Admission(False, "no node has 9 GPUs", unschedulable=True))
    assert timed_out.actions == [policy.Finish("failed", "unschedulable: no node has 9 GPUs")]
