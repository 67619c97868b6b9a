"""A steady cycle decides again only the waiting runs that something could start (fray.daemon.quiet).

A real in-process daemon on the local backend with one CPU, real wrappers: one
run holds the CPU, others wait. Cycles that change nothing for the waiting runs
do not decide them again, yet a stop request reaches a waiting run at once, the
waiting runs start in submission order as room opens (room for one run decides
the oldest and the next in line, not every waiting run), and a full cycle
decides every run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import wait_until
from fray.core import policy
from fray.daemon import loop, run_index
from fray.daemon.loop import Daemon
from fray.state import runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

LONG_RUNNING = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --stop-grace 2
trap 'exit 0' TERM
while true; do sleep 0.1; done
"""


def submit(home: Home, script: Path) -> str:
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(script.parent))).run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def phase(home: Home, run_id: str) -> str:
    return meta_of(home, run_id)["phase"]


def test_waiting_runs_are_not_decided_again_until_room_opens_or_they_change(home, tmp_path, monkeypatch):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 1, "gpus": 0, "warm_functions": False}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(LONG_RUNNING)
    blocker = submit(home, serve)
    waiting = [submit(home, serve) for _ in range(4)]
    decided: list[str] = []
    real_decide = policy.decide

    def counting_decide(situation, admit):
        decided.append(situation.meta.run_id)
        return real_decide(situation, admit)

    monkeypatch.setattr(loop.policy, "decide", counting_decide)
    daemon = Daemon(home)

    def cycle_until(what: str, predicate, full: bool = False) -> None:
        wait_until(lambda: daemon.cycle(full) is not None and predicate(), timeout=30, what=what)

    cycle_until("the first run to take the CPU", lambda: phase(home, blocker) == "active", full=True)
    cycle_until("the others to wait for it", lambda: all(
        (meta_of(home, run_id)["wait_reason"] or "").startswith("waiting for resources") for run_id in waiting))
    daemon.cycle(False)  # the waiting runs' last decisions, as their meta.json now stands
    decided.clear()
    daemon.cycle(False)
    assert not set(decided) & set(waiting)  # nothing changed for them and there is no room: not decided again

    runs.request(home, waiting[1], "stop")  # a change of one waiting run: decided in the next steady cycle
    cycle_until("the stop of a waiting run", lambda: phase(home, waiting[1]) == "ended")
    assert meta_of(home, waiting[1])["end"]["status"] == "stopped_manual"

    decided.clear()
    daemon.cycle(True)  # a full cycle, the safety net, decides every run
    assert {waiting[0], waiting[2], waiting[3]} <= set(decided)

    decided.clear()
    runs.request(home, blocker, "stop")
    cycle_until("the oldest waiting run to start once room is made", lambda: phase(home, waiting[0]) == "active")
    assert phase(home, waiting[2]) == phase(home, waiting[3]) == "queued"  # one CPU: the younger ones wait,
    assert waiting[3] not in decided  # and room for one run is not a reason to decide every waiting run
    for run_id in (waiting[0], waiting[2], waiting[3]):
        runs.request(home, run_id, "stop")
    cycle_until("every run to end", lambda: all(phase(home, r) == "ended" for r in [blocker, *waiting]))


def test_a_skipped_runs_wait_reason_follows_the_room_it_waits_for(home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0, "warm_functions": False}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(LONG_RUNNING)
    first, second = submit(home, serve), submit(home, serve)
    big = runs.create_run(home, runs.SubmitOptions(script=serve, overrides={"cpus": 2}, workdir=str(tmp_path))).run_id
    daemon = Daemon(home)

    def reason() -> str:
        return meta_of(home, big)["wait_reason"] or ""

    wait_until(lambda: daemon.cycle(True) is not None and phase(home, second) == "active", timeout=30,
               what="two runs on the two CPUs")
    wait_until(lambda: daemon.cycle(False) is not None and "2 CPUs wanted, 0 of 2 free" in reason(), timeout=30,
               what="the two-CPU run to wait")
    runs.request(home, second, "stop")  # one CPU free: not enough for it, but its reason says so
    wait_until(lambda: daemon.cycle(False) is not None and "2 CPUs wanted, 1 of 2 free" in reason(), timeout=30,
               what="the reason to follow the room")
    for run_id in (first, big):
        runs.request(home, run_id, "stop")
    wait_until(lambda: daemon.cycle(False) is not None and all(phase(home, r) == "ended" for r in (first, second, big)),
               timeout=30, what="every run to end")


def test_a_sweep_held_by_max_parallel_decides_its_next_points_only_and_starts_them_in_order(home, tmp_path,
                                                                                            monkeypatch):
    """Room for every point on the machine; the sweep's gate is what holds them (a Slurm sweep's case, whose
    backend queues by itself): a steady cycle decides the next in line, not the 18 waiting."""
    from fray.ops import sweeps

    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 4, "gpus": 0, "warm_functions": False}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(LONG_RUNNING.replace("#FRAY --heartbeat", "#FRAY --cpus 0 --heartbeat"))
    sweeps.publish(home, serve, ["i=0..19"], max_parallel=2, name="held")
    decided: list[str] = []
    real_decide = policy.decide
    monkeypatch.setattr(loop.policy, "decide", lambda s, admit: decided.append(s.meta.run_id) or real_decide(s, admit))
    daemon = Daemon(home)

    def points() -> list[dict]:
        found = [meta_of(home, run_id) for run_id in home.run_ids()]
        return sorted((m for m in found if m.get("group")), key=lambda m: m["group"]["index"])

    def active() -> list[int]:
        return [m["group"]["index"] for m in points() if m["phase"] == "active"]

    def cycle_until(what: str, predicate, full: bool = False) -> None:
        wait_until(lambda: daemon.cycle(full) is not None and predicate(), timeout=30, what=what)

    cycle_until("two points running", lambda: len(points()) == 20 and active() == [0, 1], full=True)
    held = "waiting: 2 members of sweep held are in flight (--max-parallel 2)"
    cycle_until("the others held by the gate", lambda: all(m["wait_reason"] == held for m in points()[2:]))
    daemon.cycle(False)  # their last decisions, as their meta.json now stands
    waiting = {m["run_id"] for m in points()[2:]}
    decided.clear()
    daemon.cycle(False)
    assert len(set(decided) & waiting) == 1  # the next in line only: nothing changed, the gate is full
    touched: list[str] = []
    real_stat = run_index.stat_key
    monkeypatch.setattr(run_index, "stat_key", lambda path: touched.append(str(path)) or real_stat(path))
    daemon.cycle(False)
    assert len({run_id for run_id in waiting if any(run_id in path for path in touched)}) <= 1  # they rest

    for m in points()[:2]:  # both points going end: no point of the sweep is going, and its gate holds still
        runs.request(home, m["run_id"], "stop")
    seen: list[list[int]] = []
    cycle_until("the two oldest waiting points to take the room",
                lambda: seen.append(active()) is None and active() == [2, 3])
    assert max(len(going) for going in seen) <= 2, seen  # never more than --max-parallel at once
    assert len(set(decided) & waiting) <= 6  # room for two decided the next few of the 18, not all

    decided.clear()
    daemon.cycle(True)  # the safety net decides every point
    assert waiting - {m["run_id"] for m in points()[2:4]} <= set(decided)
    for m in points():
        if m["phase"] != "ended":
            runs.request(home, m["run_id"], "stop")
    cycle_until("every point to end", lambda: all(m["phase"] == "ended" for m in points()))
