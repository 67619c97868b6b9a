"""Alert hooks: which status changes fire, coalescing of flapping runs, and a real command on stdin."""

from __future__ import annotations

import json
import sys

from conftest import schema_validate, start_daemon, stop_daemon, wait_until
from fray.state import runs, store
from fray.daemon.alerts import Alerter, Rule

RULE = Rule(command=("notify",), on=frozenset({"failed", "crash_loop", "completed_success"}), min_interval_sec=60)


def test_only_changes_into_a_chosen_status_fire():
    alerter = Alerter([RULE])
    assert alerter.observe("r1", "crash_loop", 0) == []  # first sight: not a transition (daemon restart)
    assert alerter.observe("r1", "crash_loop", 1) == []  # no change
    assert alerter.observe("r1", "healthy_running", 2) == []  # not chosen
    [firing] = alerter.observe("r1", "completed_success", 3)
    assert (firing.run_id, firing.status, firing.previous, firing.held_back) == ("r1", "completed_success", "healthy_running", 0)


def test_a_flapping_run_is_coalesced_and_the_next_alert_says_how_many_were_held_back():
    alerter = Alerter([RULE])
    alerter.observe("r1", "restarting", 0)
    assert len(alerter.observe("r1", "crash_loop", 1)) == 1
    for t in range(2, 12, 2):
        alerter.observe("r1", "restarting", t)
        assert alerter.observe("r1", "crash_loop", t + 1) == []
    alerter.observe("r1", "restarting", 70)
    [firing] = alerter.observe("r1", "crash_loop", 71)
    assert firing.held_back == 5
    assert alerter.observe("r2", "restarting", 71) == [] and len(alerter.observe("r2", "crash_loop", 72)) == 1


def test_the_daemon_runs_the_hook_with_the_status_json_on_stdin(home, tmp_path):

    received = tmp_path / "alerts.jsonl"
    hook = tmp_path / "hook.py"
    hook.write_text(f"import sys\nwith open({str(received)!r}, 'a') as f:\n    f.write(sys.stdin.read() + '\\n')\n")
    store.ensure_home(home)
    home.config.write_text(json.dumps({"alerts": [
        {"command": [sys.executable, str(hook)], "on": ["completed_success", "failed"], "timeout_sec": 10}]}))
    daemon = start_daemon(home, wait=False)
    try:
        ok = tmp_path / "ok.sh"
        ok.write_text("#!/bin/bash\necho fine\n")
        bad = tmp_path / "bad.sh"
        bad.write_text("#!/bin/bash\n#FRAY --max-retries 0\nexit 3\n")
        ids = {runs.create_run(home, runs.SubmitOptions(script=s, overrides={})).run_id: want
               for s, want in ((ok, "completed_success"), (bad, "failed"))}
        lines = wait_until(lambda: received.exists() and len(received.read_text().splitlines()) == 2 and
                           received.read_text().splitlines(), what="two alerts")
        documents = [json.loads(line) for line in lines]
        for document in documents:
            schema_validate("alert", document)
        assert {d["run_id"]: d["status"] for d in documents} == ids
        assert all(d["run"]["status"] == d["status"] for d in documents)
    finally:
        stop_daemon(daemon)
