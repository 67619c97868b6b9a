"""A daemon writes only while it holds the lease, and a newer one undoes what a superseded one slipped in.

A real daemon cycle in this process over a real run (its local attempt a real wrapper), fenced by a lease a
test holds and takes away (fray.daemon.lease_keeper's Fence): what another host's takeover looks like from
inside the daemon that loses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import wait_until
from fray.daemon.loop import Daemon
from fray.errors import LeaseLost
from fray.state import runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

SERVE = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --stop-grace 2
trap 'exit 0' TERM
while true; do sleep 0.1; done
"""


class Lease:
    """A lease this test holds for the daemon, and can take away."""

    def __init__(self, generation: int) -> None:
        self.generation: int | None = generation
        self.lost = False

    def check(self) -> None:
        if self.lost:
            raise LeaseLost(f"generation {self.generation} was taken by the daemon on login-b (a test)")

    def valid(self) -> bool:
        return not self.lost

    def alive(self) -> None:
        pass

    def publish(self, fields: dict[str, Any]) -> None:
        pass


def a_run(home: Home, tmp_path: Path) -> str:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"warm_functions": False}}))
    script = tmp_path / "serve.sh"
    script.write_text(SERVE)
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id


def test_a_daemon_that_lost_its_lease_writes_no_meta_json_and_submits_nothing(home: Home, tmp_path: Path) -> None:
    run_id = a_run(home, tmp_path)
    lease = Lease(generation=3)
    daemon = Daemon(home, lease=lease)
    meta = home.run(run_id).meta
    before = meta.read_bytes()
    lease.lost = True  # another host took generation 4 while this daemon was paused
    with pytest.raises(LeaseLost):
        daemon.cycle()
    assert meta.read_bytes() == before  # the run it would have submitted: untouched
    assert not home.run(run_id).attempts_dir.exists()
    assert not [p for p in home.run(run_id).dir.iterdir() if p.name.startswith(".meta.json.tmp")]


def test_a_meta_json_a_superseded_daemon_slipped_in_after_the_takeover_is_put_back(home: Home,
                                                                                   tmp_path: Path) -> None:
    run_id = a_run(home, tmp_path)
    daemon = Daemon(home, lease=Lease(generation=5))
    meta = home.run(run_id).meta
    try:
        written = wait_until(lambda: (daemon.cycle() and False) or
                             ((m := json.loads(meta.read_text()))["attempts"] and m["attempts"][-1]["state"] == "running"
                              and m), timeout=30, what="generation 5 to start the run")
        assert written["lease_generation"] == 5
        stale = {**written, "lease_generation": 4, "attempts": [], "phase": "queued"}  # what generation 4 believed
        store.write_json(meta, stale, "meta")
        daemon.cycle()  # sees a meta.json it did not write, by an older generation
        back = json.loads(meta.read_text())
        assert back["lease_generation"] == 5 and back["attempts"] == written["attempts"]
        events = [json.loads(line) for line in home.run(run_id).events.read_text().splitlines()]
        assert any("this daemon's version is put back" in e["reason"] for e in events)
        assert len(back["attempts"]) == 1  # no second attempt for a run the stale version said was queued
    finally:
        runs.request(home, run_id, "stop")
        wait_until(lambda: (daemon.cycle() and False) or json.loads(meta.read_text())["phase"] == "ended",
                   timeout=30, what="the run to stop")


def test_an_ended_json_a_superseded_daemon_slipped_in_is_replaced_by_the_end_this_daemon_commits(
        home: Home, tmp_path: Path) -> None:
    run_id = a_run(home, tmp_path)
    daemon = Daemon(home, lease=Lease(generation=5))
    paths = home.run(run_id)
    wait_until(lambda: (daemon.cycle() and False) or
               ((m := json.loads(paths.meta.read_text()))["attempts"] and m["attempts"][-1]["state"] == "running"),
               timeout=30, what="generation 5 to start the run")
    # Generation 4, paused between its check and its create, ends the run in a record no commit backs.
    store.create_json(paths.ended, {"run_id": run_id, "status": "failed", "reason": "what 4 believed",
                                    "ended_at": 1.0, "attempts": 1, "final_attempt": 1, "result": None}, "ended")
    runs.request(home, run_id, "stop")  # the home's teardown kills the wrapper should the stop not come
    meta = wait_until(lambda: (daemon.cycle() and False) or
                      ((m := json.loads(paths.meta.read_text()))["phase"] == "ended" and m),
                      timeout=30, what="the run to stop")
    assert meta["end"]["status"] == "stopped_manual"
    ended = json.loads(paths.ended.read_text())
    assert (ended["status"], ended["reason"]) == ("stopped_manual", meta["end"]["reason"])
    events = [json.loads(line) for line in paths.events.read_text().splitlines()]
    assert any("ended.json said failed in" in e["reason"] for e in events)
