"""A group's request (fray.ops.control.request_group): each point asked in one batch, and a stop, pause or
restart that follows a start the daemon has not applied yet stops what the start reopens.

A real in-process daemon on the local backend, real wrappers, a real sweep.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import wait_until
from fray.daemon.loop import Daemon
from fray.ops import control, sweeps, views
from fray.state import audit, runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow


def _points(home: Home) -> list[dict]:
    return [json.loads(Path(home.meta_file(run_id)).read_text()) for run_id in home.run_ids()]


def _ended_sweep(home: Home, tmp_path: Path) -> tuple[Daemon, str]:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0, "warm_functions": False}}))
    script = tmp_path / "point.sh"
    script.write_text("#!/bin/bash\n#FRAY --heartbeat-interval 0.5\necho point\n")
    record = sweeps.publish(home, script, ["i=0..2"], name="quick")
    daemon = Daemon(home)
    wait_until(lambda: daemon.cycle(True) is not None and len(_points(home)) == 3
               and all(m["phase"] == "ended" for m in _points(home)), timeout=60, what="the sweep to end")
    return daemon, record["id"]


def test_a_stop_right_after_a_start_stops_every_reopened_point_before_it_runs_again(home, tmp_path):
    daemon, group = _ended_sweep(home, tmp_path)
    started = control.request_group(home, group, "start")
    stopped = control.request_group(home, group, "stop")  # before the daemon applied the start
    assert len(started.requested) == 3 and len(stopped.requested) == 3 and not stopped.skipped
    wait_until(lambda: daemon.cycle(True) is not None and all(  # full: no file watcher in this process
        m["phase"] == "ended" and m["end"]["status"] == "stopped_manual" for m in _points(home)),
        timeout=30, what="every point stopped")
    assert all(len(m["attempts"]) == 1 for m in _points(home))  # reopened and stopped: no attempt more
    lines = [line.record for line in store.read_jsonl(home.audit, "audit")]
    assert [line["action"] for line in lines].count("control.stop") == 3 and not audit.verify(home)


def test_a_stop_of_an_ended_point_with_nothing_pending_is_refused_and_says_why(home, tmp_path):
    _, group = _ended_sweep(home, tmp_path)
    answer = control.request_group(home, group, "stop")
    assert not answer.requested and len(answer.skipped) == 3
    assert all("already ended (completed_success)" in why for _, _, why in answer.skipped)
    run_id = home.run_ids()[0]
    assert not runs.read_control(home, run_id).stop_requested


def test_a_stop_listed_before_the_daemon_applied_a_start_still_stops_every_reopened_point(home, tmp_path,
                                                                                           monkeypatch):
    daemon, group = _ended_sweep(home, tmp_path)
    control.request_group(home, group, "start")
    listed = views.list_view(home, fold=False)  # the stop's listing: every point still ended
    wait_until(lambda: daemon.cycle(True) is not None and all(m["phase"] != "ended" for m in _points(home)),
               timeout=30, what="the daemon to reopen every point")
    monkeypatch.setattr(views, "list_view", lambda *args, **kwargs: listed)  # read before that commit landed
    stopped = control.request_group(home, group, "stop")
    assert len(stopped.requested) == 3 and not stopped.skipped, stopped.skipped
    assert all(runs.read_control(home, run_id).stop_requested for run_id in home.run_ids())


def test_a_start_listed_before_the_points_ended_still_starts_every_ended_point(home, tmp_path, monkeypatch):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0, "warm_functions": False}}))
    script = tmp_path / "point.sh"
    script.write_text("#!/bin/bash\n#FRAY --heartbeat-interval 0.5\necho point\n")
    group = sweeps.publish(home, script, ["i=0..2"], name="quick")["id"]
    daemon = Daemon(home)
    wait_until(lambda: daemon.cycle(True) is not None and len(_points(home)) == 3, timeout=30, what="the points")
    listed = views.list_view(home, fold=False)  # the start's listing: no point ended yet
    assert not any(row["phase"] == "ended" for row in listed["runs"])
    wait_until(lambda: daemon.cycle(True) is not None and all(m["phase"] == "ended" for m in _points(home)),
               timeout=60, what="the sweep to end")
    monkeypatch.setattr(views, "list_view", lambda *args, **kwargs: listed)
    started = control.request_group(home, group, "start")
    assert len(started.requested) == 3 and not started.skipped, started.skipped
