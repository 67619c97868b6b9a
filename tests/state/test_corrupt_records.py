"""No single damaged record leaves a run unstoppable or nameless: real daemon, real wrappers, the real CLI.

`[1,2]` written over a live run's meta.json (what the issue saw leave an attempt
nothing could stop): `fray status` still shows the run by its name, `fray
control stop` still stops it, the daemon puts meta.json back from its last good
copy and says so, and nothing of the run is left running. The same with the
daemon killed first, so that the copy is all there is until one is back.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from conftest import run_fray, running, schema_validate, start_daemon, stop_daemon, wait_until
from fray.state import runs
from fray.state.layout import Home
from fray.wrapper import tags

pytestmark = pytest.mark.slow

SERVES = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --heartbeat-timeout 1h --stop-grace 1
trap 'exit 0' TERM
setsid sleep 300 </dev/null >/dev/null 2>&1 &
while true; do sleep 0.2; done
"""


def serving(home: Home, tmp_path: Path) -> tuple[str, dict]:
    script = tmp_path / "serve.sh"
    script.write_text(SERVES)
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id
    started = wait_until(lambda: home.run(run_id).attempt(1).started.exists()
                         and json.loads(home.run(run_id).attempt(1).started.read_text()), what="attempt 1")
    # The daemon's own write of the start (a cycle later) would replace a meta.json damaged before it.
    wait_until(lambda: json.loads(home.run(run_id).meta.read_text())["attempts"][0]["state"] == "running",
               what="the daemon to record attempt 1 as running")
    return run_id, started


def stops_cleanly(home: Home, run_id: str, started: dict) -> None:
    stop = run_fray("control", "stop", run_id, "--json", home=home.root)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    meta = wait_until(lambda: (m := json.loads(home.run(run_id).meta.read_text()))["phase"] == "ended" and m,
                      timeout=30, what="the stop")
    assert meta["end"]["status"] == "stopped_manual" and len(meta["attempts"]) == 1
    wait_until(lambda: not running(started["pid"]) and not running(started["workload_pid"])
               and not tags.tagged(str(home.root)), what="every process of the run to be gone")


def test_a_live_run_whose_meta_json_is_overwritten_keeps_its_name_and_stops(home, daemon, tmp_path):
    run_id, started = serving(home, tmp_path)
    home.run(run_id).meta.write_text("[1,2]\n")
    shown = run_fray("status", run_id, "--json", home=home.root)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    document = json.loads(shown.stdout)
    schema_validate("cli-status", document)
    assert document["run"]["name"] == "serve" and document["run"]["status"] != "error_unknown"
    assert any(Path(p).name.startswith("meta.json.corrupt-") for p in document["corrupt_files"])
    assert run_fray("status", "serve", home=home.root).returncode == 0  # still found by its name
    wait_until(lambda: any("restored from its last good copy" in line for line in
                           home.run(run_id).events.read_text().splitlines()), what="the daemon to restore meta.json")
    stops_cleanly(home, run_id, started)


def test_with_the_daemon_killed_a_corrupt_meta_json_still_lets_stop_reach_the_attempt(home, tmp_path):
    daemon = start_daemon(home)
    try:
        run_id, started = serving(home, tmp_path)
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait()
        home.run(run_id).meta.write_text("[1,2]\n")
        shown = run_fray("status", run_id, "--json", home=home.root)
        assert shown.returncode == 0 and json.loads(shown.stdout)["run"]["name"] == "serve", shown.stdout
        # `fray control stop` starts a daemon when none runs; it restores meta.json and stops the attempt.
        stops_cleanly(home, run_id, started)
    finally:
        if daemon.poll() is None:
            stop_daemon(daemon)
        lease = json.loads(home.daemon_lease.read_text()) if home.daemon_lease.exists() else None
        if lease and lease.get("pid") and not lease.get("stopping"):
            try:
                os.kill(lease["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_a_corrupt_nodes_json_is_moved_aside_and_written_again_by_the_daemon_at_once(home, daemon):
    wait_until(lambda: home.nodes.exists(), what="the daemon's first inventory")
    home.nodes.write_text("[1,2]\n")
    wait_until(lambda: list(home.root.glob("nodes.json.corrupt-*")), timeout=5, what="nodes.json to be moved aside")
    listed = wait_until(lambda: (r := run_fray("nodes", "list", "--json", home=home.root)).returncode == 0
                        and json.loads(r.stdout)["nodes"] and json.loads(r.stdout), timeout=5,
                        what="the inventory to be written again")
    schema_validate("cli-nodes", listed)
    assert listed["inventory_problem"] is None


def test_fray_nodes_list_says_a_corrupt_inventory_is_corrupt_not_that_no_node_is_known(home):
    from fray.state import store

    store.ensure_home(home)
    home.nodes.write_text("{garbage\n")
    shown = run_fray("nodes", "list", home=home.root)
    assert shown.returncode == 0 and "corrupt" in shown.stdout and "nodes.json" in shown.stdout, shown.stdout


def test_an_audit_log_of_garbage_is_reported_corrupt_not_empty(home):
    from fray.state import store

    store.ensure_home(home)
    home.audit.write_bytes(b"\x00\x01 not json\n{\"half\": \n")
    shown = run_fray("audit", "show", home=home.root)
    assert shown.returncode == 0 and "is corrupt" in shown.stdout and "no control actions" not in shown.stdout, shown.stdout
    document = json.loads(run_fray("audit", "show", "--json", home=home.root).stdout)
    schema_validate("cli-audit-show", document)
    assert document["entries"] == [] and len(document["unreadable"]) == 2
