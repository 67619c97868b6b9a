"""The journal of changed runs (fray.state.run_changes): `fray list` trusts its cache for every run it does not name.

The journal itself: what a reader learns from each position, a batch whose
renames may not be over named again until a "." follows, and a journal it
cannot trust (none, another daemon's, a torn line) making it check every run.
The commit: a run is named before its meta.json is replaced. `fray list`: it
stats only the runs named since it last looked, and with a real daemon it
still follows runs that end and one started again; a meta.json edited by hand once
the daemon's scan has seen it.
"""

from __future__ import annotations

import json
import os

from conftest import run_fray, wait_until
from fray.core.model import End
from fray.daemon.loop import Daemon
from fray.ops import views
from fray.state import row_cache, run_changes
from fray.state.commit_batch import CommitBatch
from fray.state.layout import Home
from fray.wrapper import contract
from tests.state.test_list_cache import make_run, rewrite_meta


def test_a_reader_learns_the_runs_named_since_its_position_and_then_nothing(home):
    assert run_changes.read_since(home, None) == run_changes.Changes(None, None)  # no daemon yet: check every run
    journal = run_changes.Journal(home)
    journal.start()
    first = run_changes.read_since(home, None)
    assert first.run_ids is None  # no position in this journal yet: every run checked once
    journal.intend(["run-a", "run-b"])
    journal.done()
    after = run_changes.read_since(home, first.position)
    assert after.run_ids == {"run-a", "run-b"}
    assert run_changes.read_since(home, after.position).run_ids == frozenset()
    assert run_changes.read_since(home, after.position).position == after.position


def test_runs_named_before_their_renames_are_over_are_named_again_until_a_dot_follows(home):
    journal = run_changes.Journal(home)
    journal.start()
    start = run_changes.read_since(home, None).position
    journal.intend(["run-a"])  # a batch renaming (or a daemon killed while it did)
    pending = run_changes.read_since(home, start)
    assert pending.run_ids == {"run-a"} and pending.position == start
    assert run_changes.read_since(home, pending.position).run_ids == {"run-a"}  # a file read before its rename
    journal.done()
    settled = run_changes.read_since(home, pending.position)
    assert settled.run_ids == {"run-a"} and settled.position != start
    assert run_changes.read_since(home, settled.position).run_ids == frozenset()


def test_another_daemons_journal_a_torn_line_or_a_damaged_position_mean_every_run_is_checked(home, monkeypatch):
    journal = run_changes.Journal(home)
    journal.start()
    position = run_changes.read_since(home, None).position
    run_changes.Journal(home).start()  # the next daemon's
    assert run_changes.read_since(home, position).run_ids is None
    position = run_changes.read_since(home, None).position
    for damaged in ("nonsense", [position[0]], [position[0], "12"], 7):
        assert run_changes.read_since(home, damaged).run_ids is None, damaged
    with open(journal.path, "ab") as handle:
        handle.write(b"\0\0\0run-a\n.\n")  # what a crash can leave at a file's end
    assert run_changes.read_since(home, position).run_ids is None
    grown = run_changes.Journal(home)
    grown.start()
    position = run_changes.read_since(home, None).position
    monkeypatch.setattr(run_changes, "ROTATE_AT_BYTES", run_changes.HEADER_LEN + 8)  # past it, a new journal
    grown.intend(["run-b"])
    grown.done()
    assert run_changes.read_since(home, position).run_ids == {"run-b"}  # still under the size when named
    grown.intend(["run-c"])
    assert run_changes.read_since(home, position).run_ids is None  # over it: started again, checked in full
    assert run_changes.read_since(home, None).position[0] != position[0]
    journal.path.write_bytes(b"not a journal\n")
    assert run_changes.read_since(home, position) == run_changes.Changes(None, None)


def test_a_commit_names_each_run_before_its_meta_json_is_replaced_and_settles_them_after(home, tmp_path, monkeypatch):
    run_ids = [make_run(home, tmp_path, name) for name in ("one", "two")]
    journal = run_changes.Journal(home)
    journal.start()
    position = run_changes.read_since(home, None).position
    batch = CommitBatch(home.root, journal)
    for run_id in run_ids:
        meta = json.loads(home.run(run_id).meta.read_text())
        batch.write_json(home.run(run_id).meta, {**meta, "name": "renamed"}, "meta")
    batch.write_bytes(home.run(run_ids[0]).dir / "notes.txt", b"not a meta.json")
    seen_at_renames = []
    real_replace = os.replace

    def replace(source: str, target: str) -> None:
        seen_at_renames.append((os.path.basename(target), run_changes.read_since(home, position)))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    assert batch.commit() == 3
    for name, seen in seen_at_renames:
        assert seen.run_ids == set(run_ids) and seen.position == position, name  # named, not yet settled
    assert [name for name, _ in seen_at_renames].count(contract.META) == 2
    after = run_changes.read_since(home, position)
    assert after.run_ids == set(run_ids) and after.position != position


def test_list_stats_only_the_runs_the_journal_names_and_shows_their_change(home, tmp_path, monkeypatch):
    run_ids = [make_run(home, tmp_path, f"run{i}") for i in range(5)]
    for run_id in run_ids:
        rewrite_meta(home, run_id, phase="ended", end=vars(End(status="completed_success", reason="done", at=1.0)))
    journal = run_changes.Journal(home)
    journal.start()
    views.list_view(home)  # a journal it has no position in: every run checked, the position saved
    stats: list[str] = []
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        if str(path).endswith(contract.META):
            stats.append(str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(row_cache.os, "stat", counting_stat)
    assert {row["status"] for row in views.list_view(home)["runs"]} == {"completed_success"}
    assert stats == []
    journal.intend([run_ids[2]])  # what the daemon's commit does around the rename
    rewrite_meta(home, run_ids[2], name="renamed")
    journal.done()
    names = {row["run_id"]: row["name"] for row in views.list_view(home)["runs"]}
    assert names[run_ids[2]] == "renamed" and stats == [home.meta_file(run_ids[2])]


def _ended(home: Home, run_id: str) -> bool:
    return json.loads(home.run(run_id).meta.read_text())["phase"] == "ended"


def _listed(home: Home) -> dict[str, dict]:
    proc = run_fray("list", "--json", home=home.root, check=True)
    return {row["run_id"]: row for row in json.loads(proc.stdout)["runs"]}


def test_with_a_daemon_list_follows_runs_that_end_and_one_started_again(home, tmp_path, daemon):
    script = tmp_path / "quick.sh"
    script.write_text("#!/bin/bash\necho done\n")
    submitted = [json.loads(run_fray("submit", str(script), "--backend", "local", "--name", f"quick{i}", "--json",
                                     home=home.root, check=True).stdout)["run_id"] for i in range(3)]
    wait_until(lambda: all(_ended(home, run_id) for run_id in submitted), timeout=60, what="the runs ended")
    assert run_changes.read_since(home, None).position is not None  # the daemon keeps a journal
    wait_until(lambda: {row["status"] for row in _listed(home).values()} == {"completed_success"}, timeout=10,
               what="every run listed as ended")
    again = submitted[1]
    run_fray("control", "start", again, "--json", home=home.root, check=True)
    wait_until(lambda: _listed(home)[again]["attempt"] == 2 and _listed(home)[again]["phase"] == "ended",
               timeout=60, what="its second attempt listed, ended")
    assert [row["attempt"] for _, row in sorted(_listed(home).items())] == [1, 2, 1]


def test_a_meta_json_edited_by_hand_is_listed_once_the_daemons_scan_has_seen_it(home, tmp_path):
    """The daemon did not write it, so no commit named it: its full scan sees the new stat and names the run."""
    run_ids = [make_run(home, tmp_path, name) for name in ("kept", "edited")]
    for run_id in run_ids:
        rewrite_meta(home, run_id, phase="ended", end=vars(End(status="completed_success", reason="done", at=1.0)))
    daemon = Daemon(home)
    daemon.cycle(True)
    assert run_changes.read_since(home, None).position is not None
    assert {row["name"] for row in views.list_view(home)["runs"]} == {"kept", "edited"}
    meta = home.run(run_ids[1]).meta
    before = meta.stat()
    with open(meta, "r+b") as handle:  # an editor writing in place: same inode, same size
        text = handle.read().replace(b'"name": "edited"', b'"name": "EDITED"')
        handle.seek(0)
        handle.write(text)
    os.utime(meta, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    daemon.cycle(True)
    assert {row["name"] for row in views.list_view(home)["runs"]} == {"kept", "EDITED"}


def test_a_cached_run_that_can_no_longer_be_read_is_never_trusted_from_the_cache_again(home, tmp_path):
    """Both its meta.json and the copy damaged: each listing shows the problem, also once its position has
    moved past the journal's line that named the run."""
    run_id, other = make_run(home, tmp_path, "lost"), make_run(home, tmp_path, "other")
    for each in (run_id, other):
        rewrite_meta(home, each, phase="ended", end=vars(End(status="completed_success", reason="done", at=1.0)))
    journal = run_changes.Journal(home)
    journal.start()
    views.list_view(home)
    journal.intend([run_id, other])
    for path in (home.run(run_id).meta, home.run(run_id).meta_copy):
        path.write_bytes(b"{ torn")
    rewrite_meta(home, other, name="renamed")  # a row put again: the cache is saved, with its new position
    journal.done()
    for _ in range(3):
        rows = {row["run_id"]: row for row in views.list_view(home)["runs"]}
        assert rows[other]["name"] == "renamed"
        assert rows[run_id]["status"] != "completed_success" and "meta.json" in rows[run_id]["reason"], rows[run_id]
