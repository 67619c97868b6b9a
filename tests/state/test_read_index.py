"""`fray status RUN` finds a run's children in an index (fray.state.parents_index), and `fray list` reads
through the row cache: each must show exactly the runs on disk, whatever changed behind its back and
wherever a writer of the index was killed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from fray.state import parents_index, runs, store
from fray.state.layout import Home
from tests.conftest import run_fray, schema_validate


def make_run(home: Home, tmp_path: Path, name: str, parent: str | None = None) -> str:
    """A run as `fray submit` writes it; with `parent`, as a job launched through the cluster API."""
    script = tmp_path / f"{name}.py"
    script.write_text("print('hi')\n")
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=name))
    if parent is not None:
        paths = home.run(meta.run_id)
        document = {**json.loads(paths.meta.read_text()), "parent_run_id": parent, "parent_attempt": 1,
                    "namespace": parent}
        store.write_json(paths.meta, document, "meta")
    return meta.run_id


def fray(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    """The `fray` console script itself (fray.cli.entry: its JSON fast paths, then click), as a user runs it."""
    return subprocess.run([sys.executable, "-m", "fray.cli.entry", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FRAY_HOME": str(home.root)})


def children_shown(home: Home, run_id: str) -> list[str]:
    status = json.loads(fray(home, "status", run_id, "--json").stdout)
    schema_validate("cli-status", status)
    return [child["name"] for child in status["family"]["children"]]


def test_status_shows_the_children_on_disk_however_the_index_was_left(home, tmp_path):
    parent = make_run(home, tmp_path, "parent")
    first = make_run(home, tmp_path, "first", parent=parent)
    make_run(home, tmp_path, "stranger")
    assert children_shown(home, parent) == ["first"]
    assert home.parents_index.is_file()

    second = make_run(home, tmp_path, "second", parent=parent)  # a child launched after the index was written
    assert children_shown(home, parent) == ["first", "second"]
    shutil.rmtree(home.run(first).dir)  # a run deleted by hand
    assert children_shown(home, parent) == ["second"]
    status = json.loads(fray(home, "status", second, "--json").stdout)
    assert status["family"]["parent"]["name"] == "parent"
    assert "Family" in run_fray("status", second, home=home.root, check=True).stdout  # the text, through click

    invented = {"version": parents_index.VERSION, "parents": {first: parent, "20991231-000000-ghost-0000": parent}}
    for damaged in (b"", b"{not json", json.dumps({"version": 0, "parents": {}}).encode(),
                    json.dumps(invented).encode()):
        home.parents_index.write_bytes(damaged)
        assert children_shown(home, parent) == ["second"], damaged
    assert not list(home.run(parent).dir.glob("*.corrupt-*"))  # the index is not state: nothing was quarantined


def age_runs_folder(home: Home, seconds: float) -> int:
    """Set runs/'s mtime `seconds` into the past (as if no run had come or gone since); returns it."""
    past = time.time_ns() - int(seconds * 1e9)
    os.utime(home.runs_dir, ns=(past, past))
    return past


def test_status_answers_from_the_children_file_while_runs_is_unchanged(home, tmp_path):
    """With runs/ unchanged for a while, `fray status` takes the children from cache/children.json without
    listing runs/; a run folder that comes or goes changes runs/'s mtime and the listing is read again."""
    parent = make_run(home, tmp_path, "parent")
    first = make_run(home, tmp_path, "first", parent=parent)
    age_runs_folder(home, 10)
    assert children_shown(home, parent) == ["first"]
    cached = json.loads(home.children_index.read_text())
    assert cached["children"] == {parent: [first]} and cached["runs_mtime_ns"] == home.runs_dir.stat().st_mtime_ns

    # Trusted now: a child recorded in the file (and still on disk) is shown without a listing...
    decoy = make_run(home, tmp_path, "decoy")
    mtime = age_runs_folder(home, 10)
    home.children_index.write_text(json.dumps({**cached, "runs_mtime_ns": mtime,
                                              "children": {parent: [first, decoy]}}))
    assert sorted(children_shown(home, parent)) == ["decoy", "first"]  # proof that the file was believed
    # ...but never a run whose folder is gone, even one the file names.
    shutil.rmtree(home.run(decoy).dir)
    os.utime(home.runs_dir, ns=(mtime, mtime))  # as if the removal had not moved the mtime
    assert children_shown(home, parent) == ["first"]

    second = make_run(home, tmp_path, "second", parent=parent)  # runs/ changes: the listing is read again
    assert sorted(children_shown(home, parent)) == ["first", "second"]
    assert sorted(json.loads(home.children_index.read_text())["children"][parent]) == sorted([first, second])


def test_a_children_file_written_right_after_runs_changed_is_not_trusted(home, tmp_path):
    """runs/'s mtime is only as fine as the file system's clock: a file written within STABLE_NS of the last
    change could have missed a run created in the same tick, so the next status lists runs/ again."""
    parent = make_run(home, tmp_path, "parent")
    make_run(home, tmp_path, "first", parent=parent)
    assert children_shown(home, parent) == ["first"]  # runs/ changed just now
    cached = json.loads(home.children_index.read_text())
    sneaked = make_run(home, tmp_path, "sneaked", parent=parent)
    mtime = cached["runs_mtime_ns"]
    os.utime(home.runs_dir, ns=(mtime, mtime))  # a run created in the same clock tick as the listing
    assert sorted(children_shown(home, parent)) == ["first", "sneaked"], sneaked


def test_a_parent_deleted_by_hand_shows_as_no_such_run(home, tmp_path):
    parent = make_run(home, tmp_path, "parent")
    child = make_run(home, tmp_path, "child", parent=parent)
    shutil.rmtree(home.run(parent).dir)
    status = json.loads(fray(home, "status", child, "--json").stdout)
    assert (status["family"]["parent"]["run_id"], status["family"]["parent"]["reason"]) == (parent, "no such run")


WRITER = """
import sys, time
from pathlib import Path
from fray.state import parents_index, runs
from fray.state.layout import Home

home, parent, script = Home(Path(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
print("ready", flush=True)
while True:  # new runs, and a listing and the parents index rewritten after each
    runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name="more"))
    views.list_view(home)
    parents_index.parents(home)
"""


def test_readers_killed_while_writing_the_indexes_leave_nothing_hidden_or_invented(home, tmp_path):
    """SIGKILL a process that keeps creating runs and rewriting both indexes, 30 times at random moments;
    after each, `fray list --json` and `fray status` show exactly the run folders on disk."""
    parent = make_run(home, tmp_path, "parent")
    children = {make_run(home, tmp_path, f"child-{i}", parent=parent) for i in range(3)}
    script = tmp_path / "more.py"
    script.write_text("print('more')\n")
    rng = random.Random(23)
    for kill in range(30):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(home.root), parent, str(script)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.3))  # the moment of the kill is the point, not a synchronization
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        if kill % 3 == 0:  # a child appears and one goes while no reader runs
            children.add(make_run(home, tmp_path, f"late-{kill}", parent=parent))
            gone = sorted(children)[0]
            shutil.rmtree(home.run(gone).dir)
            children.discard(gone)
        on_disk = set(home.run_ids())
        listing = json.loads(fray(home, "list", "--json").stdout)
        assert {row["run_id"] for row in listing["runs"]} == on_disk, f"after kill {kill}"
        assert sum(listing["counts"].values()) == len(on_disk)
        status = json.loads(fray(home, "status", parent, "--json").stdout)
        assert {child["run_id"] for child in status["family"]["children"]} == children, f"after kill {kill}"


def test_the_dashboards_first_paint_reads_the_newest_runs_and_the_next_scan_every_run(home, tmp_path):
    from fray.ops.live import RunsModel

    made = [make_run(home, tmp_path, f"run-{i}") for i in range(5)]
    model = RunsModel(home)
    first = model.scan(newest=2)
    assert set(first.rows) == set(made[-2:]) and not first.full and sum(first.counts.values()) == 2
    everything = model.scan()
    assert set(everything.rows) == set(made) and everything.full and sum(everything.counts.values()) == 5
    assert everything.changed == set(made[:3])  # the newest two were read once, for the first paint


def test_the_json_fast_paths_leave_many_cluster_configs_to_the_full_command(home, tmp_path, monkeypatch):
    """`fray list --json` and `fray status RUN --json` skip click only when no `remotes` are configured:
    with them, the listing spans clusters and a run is looked for on each (fray.cli.clusters_view)."""
    run_id = make_run(home, tmp_path, "here")
    assert json.loads(fray(home, "status", run_id, "--json").stdout)["run"]["run_id"] == run_id
    config = tmp_path / "xdg" / "fray" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('remotes = "east"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for argv in (["list", "--json"], ["status", run_id, "--json"]):
        proc = fray(home, *argv)
        error = json.loads(proc.stdout)["error"]
        assert proc.returncode == 2 and "remotes must be a list of ssh host names" in error["message"], argv


def test_a_meta_json_edited_in_place_by_hand_is_listed_as_edited(home, tmp_path):
    """Same inode, same size: the row cache still sees the new modification time and reads the file again."""
    run_id = make_run(home, tmp_path, "aaaa")
    assert [row["name"] for row in json.loads(fray(home, "list", "--json").stdout)["runs"]] == ["aaaa"]
    meta = home.run(run_id).meta
    before = meta.stat()
    with open(meta, "r+b") as handle:  # what an editor that writes in place does
        text = handle.read().replace(b'"name": "aaaa"', b'"name": "bbbb"')
        handle.seek(0)
        handle.write(text)
    os.utime(meta, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))  # edited a second later
    assert (meta.stat().st_ino, meta.stat().st_size) == (before.st_ino, before.st_size)
    assert [row["name"] for row in json.loads(fray(home, "list", "--json").stdout)["runs"]] == ["bbbb"]
