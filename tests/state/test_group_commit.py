"""Group commit (fray.state.commit_batch): a cycle's writes durable together, and whole after any SIGKILL.

The batch itself: nothing staged is visible before `commit`, everything is
after it, a file staged twice keeps its newest version, and a write that
cannot land spoils none of the others. The daemon: killed with SIGKILL thirty
times while one cycle ends or restarts a whole sweep (one large commit), every
file of every run still parses, `fray list` shows exactly the run folders on
disk, and a run whose meta.json says it ended has its ended.json.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_fray, wait_until
from fray.ops.control import request_group
from fray.state import store
from fray.state.commit_batch import CommitBatch
from fray.state.layout import Home

KILLS = 30
POINTS = 60


def test_staged_writes_are_invisible_until_the_commit_and_all_there_after_it(tmp_path):
    batch = CommitBatch(tmp_path)
    old = tmp_path / "a.json"
    old.write_bytes(b'{"v": 0}\n')
    batch.write_bytes(old, b'{"v": 1}\n')
    batch.write_bytes(tmp_path / "b.json", b'{"v": 2}\n')
    assert old.read_bytes() == b'{"v": 0}\n' and not (tmp_path / "b.json").exists()
    assert batch.commit() == 2
    assert old.read_bytes() == b'{"v": 1}\n' and (tmp_path / "b.json").read_bytes() == b'{"v": 2}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]  # no temp file left
    assert oct(os.stat(tmp_path / "b.json").st_mode & 0o777) == "0o600"


def test_a_file_staged_twice_in_one_batch_keeps_only_its_newest_version(tmp_path):
    batch = CommitBatch(tmp_path)
    batch.write_bytes(tmp_path / "a", b"first\n")
    batch.write_bytes(tmp_path / "a", b"second\n")
    assert len(batch) == 1
    batch.commit()
    assert [p.name for p in tmp_path.iterdir()] == ["a"] and (tmp_path / "a").read_bytes() == b"second\n"


def test_a_rename_that_fails_costs_its_own_file_only(tmp_path):
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    gone.mkdir()
    kept.mkdir()
    batch = CommitBatch(tmp_path)
    batch.write_bytes(gone / "x.json", b"1\n")
    batch.write_bytes(kept / "y.json", b"2\n")
    (gone / "x.json").mkdir()  # a folder in the file's place: its rename fails
    with pytest.raises(OSError):
        batch.commit()
    assert (kept / "y.json").read_bytes() == b"2\n"
    assert [p.name for p in gone.iterdir()] == ["x.json"]  # its temp file removed


def test_an_invalid_document_is_refused_before_anything_is_staged(tmp_path):
    batch = CommitBatch(tmp_path)
    with pytest.raises(ValueError, match="violates schema"):
        batch.write_json(tmp_path / "meta.json", {"not": "a meta"}, "meta")
    assert len(batch) == 0 and list(tmp_path.iterdir()) == []


def test_temp_files_a_killed_daemon_left_are_removed_and_this_daemons_own_kept(home):
    from fray.state.commit_batch import remove_left_behind

    store.ensure_home(home)
    folder = Path(home.run_folder("20260101-000000-a-00-0000"))
    folder.mkdir()
    dead = [folder / ".meta.json.tmp-999999999-ab12cd34", folder / ".meta.last-good.json.tmp-999999999-00ff00ff"]
    mine = folder / f".meta.json.tmp-{os.getpid()}-11111111"  # staged by this daemon, not committed yet
    other = folder / ".control.json.tmp-999999999-22222222"  # not a batched file: its writer is the CLI
    for path in [*dead, mine, other]:
        path.write_bytes(b"{}")
    assert remove_left_behind(home, os.getpid()) == 2
    assert sorted(p.name for p in folder.iterdir()) == sorted([mine.name, other.name])


def _start_daemon(home: Home) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_until(lambda: home.daemon_lease.exists() and json.loads(home.daemon_lease.read_text())["pid"] == proc.pid,
               timeout=30, what="the daemon's lease")
    return proc


def _fray_json(home: Home, *args: str) -> dict:
    proc = run_fray(*args, "--json", home=home.root, check=True)
    return json.loads(proc.stdout)


def _inconsistencies(home: Home, group: str) -> list[str]:
    """What a user would see wrong: a run listed that has no folder or the reverse, a file that does not
    parse, a file moved aside as corrupt, an ended run without its ended.json (but while a start request is being applied),
    a status that is not meta's."""
    problems = []
    on_disk = set(home.run_ids())
    listed = {row["run_id"]: row for row in _fray_json(home, "list", "--group", group)["runs"]}
    if set(listed) != on_disk:
        problems.append(f"listed {sorted(set(listed) - on_disk)} without a folder, "
                        f"folders {sorted(on_disk - set(listed))} not listed")
    for run_id in sorted(on_disk):
        folder = home.run_folder(run_id)
        for path in Path(folder).rglob("*.json"):
            if path.name.startswith(".") or ".corrupt-" in path.name:
                continue
            try:
                json.loads(path.read_bytes())
            except ValueError as exc:
                problems.append(f"{path}: {exc}")
        corrupt = [p.name for p in Path(folder).rglob("*.corrupt-*")]
        if corrupt:
            problems.append(f"{run_id}: files moved aside as corrupt: {corrupt}")
        meta = store.read_json(home.meta_file(run_id), "meta")
        ended = home.run(run_id).ended
        control = store.read_json(home.control_file(run_id), "control") or {}
        # Started again: ended.json is archived before the reopened meta.json is committed, and a daemon killed
        # in between applies the start request (its nonce not yet in meta.json) again.
        starting = control.get("start_nonce", 0) > meta["applied"]["start_nonce"]
        if meta["phase"] == "ended" and not ended.exists() and not starting:
            problems.append(f"{run_id}: meta.json says ended, and there is no ended.json")
        row = listed.get(run_id)
        if row is not None and (row["phase"] == "ended") != (meta["phase"] == "ended"):
            problems.append(f"{run_id}: listed {row['phase']}, meta.json says {meta['phase']}")
    return problems


@pytest.mark.slow
def test_sigkill_during_a_large_commit_leaves_every_run_whole_and_listed(home, tmp_path, capsys):
    seed = int(os.environ.get("FRAY_CHAOS_SEED") or random.SystemRandom().randrange(2**32))
    with capsys.disabled():
        print(f"\ngroup commit kill seed: {seed} (FRAY_CHAOS_SEED={seed} replays it)")
    rng = random.Random(seed)
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0, "poll_interval_sec": 0.2}}))
    script = tmp_path / "wait.sh"
    script.write_text("#!/bin/bash\ntrap 'exit 0' TERM\nwhile true; do sleep 0.2; done\n")
    daemon = _start_daemon(home)
    try:
        submitted = _fray_json(home, "submit", str(script), "--backend", "local", "--name", "gc",
                               "--sweep", f"i=1..{POINTS}")
        group = submitted.get("group") or "gc"
        wait_until(lambda: len(home.run_ids()) == POINTS, timeout=60, what="the sweep's runs")
        mid_commit = 0
        for kill in range(KILLS):
            # Alternate: stop the whole sweep (every run ends in one cycle), start it again (every run reopens).
            verb = "stop" if kill % 2 == 0 else "start"
            request_group(home, group, verb)  # what `fray control VERB --group` does, without a CLI start per kill
            time.sleep(rng.uniform(0.0, 0.4))  # the kill's moment, drawn: not a synchronisation
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
            mid_commit += bool(list(home.runs_dir.glob("*/.meta*.tmp-*")))  # killed with a batch staged
            problems = _inconsistencies(home, group)
            assert not problems, f"after kill {kill + 1} ({verb}): " + "; ".join(problems[:10])
            daemon = _start_daemon(home)
        with capsys.disabled():
            print(f"{mid_commit} of {KILLS} kills left a staged batch behind (temp files not yet renamed)")
        stopped = json.loads(run_fray("control", "stop", "--group", group, "--json", home=home.root, check=True).stdout)
        wait_until(lambda: all(store.read_json(home.meta_file(r), "meta")["phase"] == "ended" for r in home.run_ids()),
                   timeout=120, what=f"every run stopped (seed {seed}; the stop skipped {stopped.get('skipped')})")
        assert not _inconsistencies(home, group)
        # What the killed daemons staged and never committed is gone: the last one removed it in its first cycle.
        wait_until(lambda: not list(home.runs_dir.glob("*/.meta*.tmp-*")), timeout=30,
                   what="the killed daemons' temp files removed")
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()


def test_a_commit_tells_its_listeners_which_files_are_now_in_place(tmp_path):
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    gone.mkdir()
    kept.mkdir()
    told: list[list[str]] = []
    batch = CommitBatch(tmp_path)
    batch.on_commit(told.append)
    batch.write_bytes(gone / "x.json", b"1\n")
    batch.write_bytes(kept / "y.json", b"2\n")
    (gone / "x.json").mkdir()  # its rename fails: not in place, not told
    with pytest.raises(OSError):
        batch.commit()
    assert told == [[str(kept / "y.json")]]
