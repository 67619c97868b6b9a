"""The daemon's list summary (fray.state.list_summary): `fray list` shows the same with it as without, and a stale
one never hides what a person asked since.

Real daemon, real CLI: a sweep waiting behind --max-parallel beside a run of its own, all on the local backend.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from conftest import run_fray, schema_validate, wait_until
from fray.state import list_summary
from fray.state.layout import Home

MOVING = ("uptime_sec", "heartbeat_age_sec")  # a running run's row moves with time between two listings
POINTS = 12


def _listing(home: Home, *args: str) -> dict:
    data = json.loads(run_fray("list", "--json", *args, home=home.root, check=True).stdout)
    schema_validate("cli-list", data)
    data.pop("generated_at")
    data.pop("daemon")
    for row in data["runs"]:
        for key in MOVING:
            row.pop(key, None)
    return data


def _without_summary(home: Home, *args: str) -> dict:
    """The listing as every run's files give it: the summary moved aside for the time of it."""
    aside = list_summary.path(home).with_name("summary-aside")
    os.replace(list_summary.path(home), aside)
    try:
        return _listing(home, *args)
    finally:
        os.replace(aside, list_summary.path(home))


def _summarized(home: Home) -> set[str]:
    """The runs the summary on disk gives rows of, when a listing may trust it."""
    summary = list_summary.load(home)
    if summary is None or list_summary.changed_since(home, summary) is None:
        return set()
    return set(summary.entries)


def _waiting_sweep(home: Home, tmp_path: Path) -> tuple[str, list[str], str]:
    """(the sweep's group, its members' run ids, a run of its own): two members and the run running, the
    other members waiting for room, every waiting one in the daemon's summary."""
    script = tmp_path / "point.sh"
    script.write_text("#!/bin/bash\n#FRAY --heartbeat-interval 0.5 --stop-grace 2 --cpus 0\nsleep 600\n")
    sweep = json.loads(run_fray("submit", str(script), "--sweep", f"i=0..{POINTS - 1}", "--max-parallel", "2",
                                "--json", home=home.root, check=True).stdout)
    alone = json.loads(run_fray("submit", str(script), "--name", "alone", "--json", home=home.root,
                                check=True).stdout)["run_id"]
    members = [run["run_id"] for run in sweep["runs"]]

    def settled() -> bool:
        rows = _listing(home, "--group", sweep["group"])["runs"]
        running = [r for r in rows if r["status"] == "healthy_running"]
        waiting = {r["run_id"] for r in rows if r["status"] == "pending"}
        return len(running) == 2 and len(waiting) == POINTS - 2 and waiting <= _summarized(home)

    wait_until(settled, timeout=60, what="two members running, the others waiting and summarized")
    wait_until(lambda: _listing(home)["counts"]["healthy_running"] == 3, timeout=30, what="the run of its own running")
    return sweep["group"], members, alone


def test_a_listing_is_the_same_with_the_daemons_summary_and_without(home, daemon, tmp_path) -> None:
    group, members, alone = _waiting_sweep(home, tmp_path)
    document = json.loads(list_summary.path(home).read_bytes())
    schema_validate("list-summary", document)
    assert alone not in document["rows"]  # running: read live by every listing
    for args in ((), ("--group", group), ("--tree",), ("--active",)):
        assert _listing(home, *args) == _without_summary(home, *args), args
    folded = _listing(home)["runs"]
    sweep_row = next(r for r in folded if r.get("kind") == "group")
    assert sweep_row["counts"] == {"healthy_running": 2, "pending": POINTS - 2}


def test_a_stale_summary_never_hides_a_pause_an_unpause_or_a_stop(home, daemon, tmp_path) -> None:
    group, members, _ = _waiting_sweep(home, tmp_path)
    waiting = [r["run_id"] for r in _listing(home, "--group", group)["runs"] if r["status"] == "pending"]
    target, stopped = waiting[0], waiting[1]
    stale = list_summary.path(home).read_bytes()
    os.kill(daemon.pid, signal.SIGSTOP)  # the summary can be neither rewritten nor the requests acted on
    try:
        run_fray("control", "pause", target, home=home.root, check=True)
        rows = {r["run_id"]: r for r in _listing(home, "--group", group)["runs"]}
        assert rows[target]["paused"] is True and rows[target]["reason"].startswith("paused")
        assert list_summary.path(home).read_bytes() == stale
        assert _listing(home, "--group", group) == _without_summary(home, "--group", group)
        run_fray("control", "unpause", target, home=home.root, check=True)
        rows = {r["run_id"]: r for r in _listing(home, "--group", group)["runs"]}
        assert rows[target]["paused"] is False and not rows[target]["reason"].startswith("paused")
        run_fray("control", "stop", stopped, home=home.root, check=True)
        assert list_summary.path(home).read_bytes() == stale
        assert _listing(home, "--group", group) == _without_summary(home, "--group", group)
    finally:
        os.kill(daemon.pid, signal.SIGCONT)

    def ended_by_hand() -> bool:
        rows = {r["run_id"]: r for r in _listing(home, "--group", group)["runs"]}
        return rows[stopped]["status"] == "stopped_manual"

    wait_until(ended_by_hand, timeout=30, what="the stopped member to show stopped_manual")
    wait_until(lambda: stopped in _summarized(home), timeout=30, what="the summary to have the stopped member")
    assert _listing(home, "--group", group) == _without_summary(home, "--group", group)


def test_the_first_listing_after_a_sweep_ended_reads_no_run_of_it(home, daemon, tmp_path) -> None:
    script = tmp_path / "quick.sh"
    script.write_text("#!/bin/bash\n#FRAY --cpus 0\nexit 0\n")
    sweep = json.loads(run_fray("submit", str(script), "--sweep", "i=0..7", "--json", home=home.root,
                                check=True).stdout)
    members = {run["run_id"] for run in sweep["runs"]}
    wait_until(lambda: members <= _summarized(home), timeout=60, what="every point ended and summarized")
    home.list_cache.unlink(missing_ok=True)
    listed = _listing(home)
    (row,) = listed["runs"]
    assert row["counts"] == {"completed_success": 8}
    assert not home.list_cache.exists()  # every row came from the summary: no run read, nothing to cache
    assert listed == _without_summary(home)
