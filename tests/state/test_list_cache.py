"""`fray list` reads through a stat-keyed cache (fray.state.row_cache): it must never show stale rows.

Ended runs are cached whole; runs still going keep their validated meta and
paused flag, while heartbeat and progress are read every time. Each test changes
a file the way the daemon or a person does and checks that the listing follows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from fray.state import runs, store

from fray.ops import views
from fray.state.layout import Home
from fray.core.model import Attempt, End, Meta


def make_run(home: Home, tmp_path: Path, name: str) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text("print('hi')\n")
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=name)).run_id


def rewrite_meta(home: Home, run_id: str, **changes: object) -> Meta:
    """What the daemon does: a new meta.json, atomically replacing the old one."""
    paths = home.run(run_id)
    meta = Meta.from_dict({**json.loads(paths.meta.read_text()), **changes})
    store.write_json(paths.meta, meta.to_dict(), "meta")
    return meta


def set_running(home: Home, run_id: str, node: str) -> None:
    now = time.time()
    attempt = Attempt(number=1, state="running", backend="local", submitted_at=now - 7300, started_at=now - 7200,
                      node=node, backend_ref={"pid": 1})
    rewrite_meta(home, run_id, phase="active", attempts=[attempt.to_dict()], wait_reason=None)
    paths = home.run(run_id).attempt(1)
    store.make_dirs(paths.dir)
    paths.heartbeat.write_text(f"{now}\n")


def rows(home: Home) -> dict[str, dict]:
    return {row["run_id"]: row for row in views.list_view(home)["runs"]}


def test_an_ended_row_is_cached_until_its_meta_changes(home, tmp_path):
    run_id = make_run(home, tmp_path, "ended")
    end = End(status="completed_success", reason="attempt 1 succeeded", at=time.time())
    rewrite_meta(home, run_id, phase="ended", end=vars(end))
    assert rows(home)[run_id]["status"] == "completed_success"
    assert home.list_cache.is_file()
    rewrite_meta(home, run_id, name="renamed")
    assert rows(home)[run_id]["name"] == "renamed"


def test_a_running_row_follows_pause_meta_heartbeat_and_progress(home, tmp_path):
    run_id = make_run(home, tmp_path, "going")
    set_running(home, run_id, node="n1")
    first = rows(home)[run_id]
    assert (first["status"], first["node"], first["paused"], first["step"]) == ("healthy_running", "n1", False, None)
    assert rows(home)[run_id]["node"] == "n1"  # now from the cache

    runs.request(home, run_id, "pause")  # control.json changes: the cached paused flag must not be used
    assert rows(home)[run_id]["paused"] is True
    set_running(home, run_id, node="n2")  # meta.json changes
    assert rows(home)[run_id]["node"] == "n2"

    attempt = home.run(run_id).attempt(1)
    store.write_json(attempt.progress, {"updated_at": time.time(), "step": 42, "loss": 0.25}, "progress")
    attempt.heartbeat.write_text(f"{time.time() - 3600}\n")  # progress and heartbeat are never cached
    row = rows(home)[run_id]
    assert (row["step"], row["loss"]) == (42, 0.25)
    assert row["heartbeat_age_sec"] > 3000 and row["status"] == "unresponsive"


def test_a_run_that_ends_leaves_the_live_cache_and_a_deleted_one_leaves_the_file(home, tmp_path):
    going, other = make_run(home, tmp_path, "going"), make_run(home, tmp_path, "other")
    set_running(home, going, node="n1")
    set_running(home, other, node="n1")
    rows(home)
    end = End(status="stopped_manual", reason="stopped by request", at=time.time())
    rewrite_meta(home, going, phase="ended", end=vars(end))
    assert rows(home)[going]["status"] == "stopped_manual"
    for path in home.run(other).dir.rglob("*"):
        if path.is_file():
            path.unlink()
    for path in sorted(home.run(other).dir.rglob("*"), reverse=True):
        path.rmdir()
    home.run(other).dir.rmdir()
    assert set(rows(home)) == {going}
    cached = json.loads(home.list_cache.read_text())
    assert set(cached["rows"]) == {going} and cached["live"] == {}


def test_a_damaged_cache_is_ignored_and_rebuilt(home, tmp_path):
    run_id = make_run(home, tmp_path, "going")
    set_running(home, run_id, node="n1")
    expected = rows(home)[run_id]
    cached = json.loads(home.list_cache.read_text())
    entry = cached["live"][run_id]
    for damaged in (b"", b"{not json", json.dumps({**cached, "version": 1}).encode(),
                    json.dumps({**cached, "live": {run_id: [*entry[:2], {"run_id": 5}, False, 0]}}).encode(),
                    json.dumps({**cached, "live": {run_id: [*entry[:4], 7]}}).encode(),  # no such spec
                    json.dumps({**cached, "specs": [{"heartbeat_interval_sec": "soon"}]}).encode(),
                    json.dumps({**cached, "specs": None}).encode()):
        home.list_cache.write_bytes(damaged)
        row = rows(home)[run_id]
        assert (row["status"], row["node"], row["name"]) == (expected["status"], "n1", "going"), damaged
    assert not list(home.run(run_id).dir.glob("*.corrupt-*"))  # the cache is not state: nothing was quarantined


def test_runs_going_with_the_same_spec_share_it_in_the_cache_and_each_keeps_its_own(home, tmp_path):
    """Each distinct spec of the runs going is kept once in the cache; every row still shows its own run's
    spec (mode, priority) whether it came from the files or from the cache, and a changed spec is seen."""
    script = tmp_path / "alike.py"
    script.write_text("print('hi')\n")
    alike = [runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=f"alike-{i}")).run_id
             for i in range(3)]  # one script, one project: one spec
    other = make_run(home, tmp_path, "other")
    for run_id in [*alike, other]:
        set_running(home, run_id, node="n1")
    spec = json.loads(home.run(other).meta.read_text())["spec"]
    rewrite_meta(home, other, spec={**spec, "mode": "indefinite", "priority": "batch"})
    read = rows(home)
    cached = json.loads(home.list_cache.read_text())
    assert len(cached["specs"]) == 2 and len(cached["live"]) == 4
    timeless = lambda shown: {r: {k: v for k, v in row.items() if not k.endswith("_sec")} for r, row in shown.items()}
    assert timeless(rows(home)) == timeless(read)  # the same rows, now from the cache
    assert {read[r]["mode"] for r in alike} == {"run_once"} and read[other]["mode"] == "indefinite"
    assert read[other]["priority"] == "batch"

    rewrite_meta(home, alike[0], spec={**spec, "priority": "production"})
    shown = rows(home)
    assert shown[alike[0]]["priority"] == "production" and shown[alike[1]]["priority"] == "interactive"
    assert len(json.loads(home.list_cache.read_text())["specs"]) == 3


def test_ended_runs_alike_share_one_shape_and_each_keeps_its_own_name_time_and_place(home, tmp_path):
    """Ended rows are cached as a shared shape plus each run's own fields: the listing from the cache is the
    listing from the files, and a damaged entry or shape costs a read, never a wrong row."""
    end = vars(End(status="completed_success", reason="attempt 1 succeeded", at=time.time()))
    alike = [make_run(home, tmp_path, f"alike-{i}") for i in range(3)]
    failed = make_run(home, tmp_path, "failed")
    for run_id in alike:
        rewrite_meta(home, run_id, phase="ended", end=end)
    rewrite_meta(home, failed, phase="ended", end={**end, "status": "failed", "reason": "attempt 1 failed"})
    from_files = rows(home)
    cached = json.loads(home.list_cache.read_text())
    assert len(cached["shapes"]) == 2 and {cached["rows"][r][1] for r in alike} == {cached["rows"][alike[0]][1]}
    from_cache = rows(home)
    assert from_cache == from_files
    assert [from_cache[r]["name"] for r in alike] == ["alike-0", "alike-1", "alike-2"]
    assert from_cache[failed]["status"] == "failed" and from_cache[alike[0]]["status"] == "completed_success"

    entry = cached["rows"][alike[1]]
    for damaged in ({**cached, "rows": {**cached["rows"], alike[1]: [entry[0], 9, *entry[2:]]}},  # no such shape
                    {**cached, "rows": {**cached["rows"], alike[1]: entry[:3]}},  # cut short
                    {**cached, "shapes": [None, *cached["shapes"][1:]]}):
        home.list_cache.write_text(json.dumps(damaged))
        assert rows(home) == from_files, damaged
