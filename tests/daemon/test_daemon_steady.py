"""A steady cycle costs the runs that changed and the runs going, not the runs that ended (fray.daemon.run_view,
fray.daemon.quiet): a real in-process daemon on the local backend, real wrappers.

Between full scans, a cycle touches no file of an ended run nor of a paused run decided into its pause, yet it
starts a new run, hands an ended parent's child its stop order and starts a paused run the moment it is
unpaused.
"""

from __future__ import annotations

import json

import pytest

from conftest import wait_until
from test_daemon_start import _run
from fray.core import policy
from fray.daemon import loop, run_index
from fray.daemon.loop import Daemon
from fray.state import meta_file, runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

ENDED_RUNS = 30


def _meta(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def test_a_steady_cycle_reads_no_ended_run_and_decides_no_paused_run_again(home, tmp_path, monkeypatch):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0}}))
    ended = {_run(home, tmp_path, f"done-{i}", ended=True) for i in range(ENDED_RUNS)}
    paused = _run(home, tmp_path, "paused")
    runs.request(home, paused, "pause")
    daemon = Daemon(home)
    daemon.cycle(full=True)  # decides the paused run into its pause (meta.json written)
    daemon.cycle(full=True)  # reads what it wrote: nothing left to decide
    assert _meta(home, paused)["wait_reason"] == policy.PAUSED_REASON

    touched: list[str] = []
    decided: list[str] = []
    real_stat, real_read, real_decide = run_index.stat_key, meta_file.read, policy.decide
    monkeypatch.setattr(run_index, "stat_key", lambda path: touched.append(str(path)) or real_stat(path))
    monkeypatch.setattr(run_index.run_meta, "read", lambda paths, **kw: touched.append(str(paths.meta))
                        or real_read(paths, **kw))
    monkeypatch.setattr(loop.policy, "decide", lambda s, admit: decided.append(s.meta.run_id) or real_decide(s, admit))

    fresh = _run(home, tmp_path, "fresh")
    daemon._index.mark_dirty({fresh})  # what the file watcher reports
    daemon.cycle(full=False)
    # The spies see what a steady cycle reads and decides (the new run), so what they do not see was not done.
    assert fresh in decided and [path for path in touched if fresh in path]
    assert not [path for path in touched if any(run_id in path for run_id in ended)]
    assert paused not in decided  # its files unchanged since its pause was decided
    assert not [path for path in touched if paused in path]  # nor looked at: only its control.json can wake it

    wait_until(lambda: daemon.cycle(full=False) is not None and (_meta(home, fresh)["end"] or {}).get("status")
               == "completed_success", timeout=30, what="the new run to start and succeed")
    assert not [path for path in touched if any(run_id in path for run_id in ended)]
    assert paused not in decided

    runs.request(home, paused, "unpause")
    daemon._index.mark_dirty({paused})
    wait_until(lambda: daemon.cycle(full=False) is not None and _meta(home, paused)["phase"] == "ended",
               timeout=30, what="the unpaused run to start and end")
    assert _meta(home, paused)["end"]["status"] == "completed_success"
    assert not [path for path in touched if any(run_id in path for run_id in ended)]


def test_a_steady_cycle_still_stops_the_child_of_an_ended_parent(home, tmp_path):
    store.ensure_home(home)
    parent = _run(home, tmp_path, "parent", ended=True)
    for i in range(ENDED_RUNS):
        _run(home, tmp_path, f"done-{i}", ended=True)
    daemon = Daemon(home)
    daemon.cycle(full=True)
    child = _run(home, tmp_path, "child")
    meta = runs.read_meta(home, child)
    meta.parent_run_id, meta.parent_attempt = parent, 1
    for path in (home.run(child).meta, home.run(child).meta_copy):
        store.write_json(path, meta.to_dict(), "meta")
    daemon._index.mark_dirty({child})
    wait_until(lambda: daemon.cycle(full=False) is not None and _meta(home, child)["phase"] == "ended",
               timeout=30, what="the child to be stopped")
    assert f"its parent run {parent} ended" in _meta(home, child)["end"]["reason"]


def test_the_watcher_wakes_the_daemon_for_a_run_put_in_place_not_for_one_being_built(home):
    import threading

    from fray.daemon import watching

    store.ensure_home(home)
    wake, stop, on = threading.Event(), threading.Event(), threading.Event()
    seen: list[set[str]] = []
    watcher = threading.Thread(target=watching.watch_runs, args=(home, wake, stop, seen.append, on), daemon=True)
    watcher.start()
    try:
        watching.await_watch(home.watch_probe, on, watcher)
        assert on.is_set()
        building = home.runs_dir / ".new-20260101-000000-job-0000"
        building.mkdir()
        (building / "control.json").write_text("{}\n")  # as `fray submit` writes a run before its rename
        building.rename(home.runs_dir / "20260101-000000-job-0000")
        wait_until(lambda: any("20260101-000000-job-0000" in ids for ids in seen), what="the run put in place")
        assert wake.is_set()
        assert not [ids for ids in seen if any(run_id.startswith(".") for run_id in ids)]
    finally:
        stop.set()
        watcher.join(10)
