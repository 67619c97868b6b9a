"""Write-once records (FRAY_RECORDS=write-once): what a FRAY_HOME on gcsfuse needs.

A reader never sees a torn record even while a slow writer is halfway through
one; the versions folder stays small however long an attempt beats; the real
wrapper, in a process that cannot rename or link inside FRAY_HOME (the gcloud
simulator's bucket hook), still leaves every record the shepherd reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import wait_until
from fray.errors import CorruptFileError
from fray.state import store
from fray.wrapper import contract, records, versions

BUCKET_HOOK = Path(__file__).parents[1] / "fakes" / "gcloud" / "bucket"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def write_once(monkeypatch):
    monkeypatch.setenv(contract.ENV_RECORDS, contract.RECORDS_WRITE_ONCE)


def progress(step: int) -> bytes:
    return records.dumps({"step": step, "updated_at": 1000.0 + step, "extra": {}}).encode()


# -- the pure decision -----------------------------------------------------------------


def test_versions_are_taken_newest_first_and_anything_else_in_the_folder_is_ignored():
    names = ["000000002", "000000010", "000000009.corrupt-x", ".tmp", "000000001"]
    assert versions.newest_first(names) == ["000000010", "000000002", "000000001"]
    assert versions.next_seq(names) == 11 and versions.next_seq([]) == 1
    assert versions.to_prune(names, written=10, keep=3) == ["000000002", "000000001"]
    assert versions.complete(b"1.5\n") and not versions.complete(b"1.5")


# -- a reader racing a writer ----------------------------------------------------------


def test_a_version_still_being_written_is_skipped_and_the_one_before_it_is_read(tmp_path, write_once):
    path = tmp_path / contract.PROGRESS
    records.write_record(path, progress(1))
    # The writer of version 2 has written half of it and stalls (a slow upload, a host about to die).
    half = progress(2)[: len(progress(2)) // 2]
    handle = open(os.path.join(versions.versions_dir(path), versions.version_name(2)), "xb")
    handle.write(half)
    handle.flush()
    assert store.read_json(path, "progress")["step"] == 1  # the daemon's reader
    assert records.read_json(path)["step"] == 1  # the wrapper's own (report.progress reads the last one)
    handle.write(progress(2)[len(half):])
    handle.close()
    assert store.read_json(path, "progress")["step"] == 2


def test_a_heartbeat_cut_short_before_its_end_marker_is_not_read_as_a_smaller_number(tmp_path, write_once):
    beat = tmp_path / contract.HEARTBEAT
    records.write_record(beat, b"1700000000.000\n")
    with open(os.path.join(versions.versions_dir(beat), versions.version_name(2)), "xb") as handle:
        handle.write(b"17000")  # "17000" is a number too: only the missing newline says it is not the beat
    assert store.read_heartbeat(beat) == 1700000000.0


def test_a_reader_polling_a_slow_writer_only_ever_sees_whole_records_in_order(tmp_path, write_once):
    """A writer that writes each version a few bytes at a time, as an upload arrives; the reader never stops."""
    path = tmp_path / contract.PROGRESS
    records.write_record(path, progress(0))
    done = threading.Event()

    def slow_writer() -> None:
        folder = versions.versions_dir(path)
        for step in range(1, 30):
            data = progress(step)
            with open(os.path.join(folder, versions.version_name(step + 1)), "xb") as handle:
                for i in range(0, len(data), 7):
                    handle.write(data[i:i + 7])
                    handle.flush()
                    time.sleep(0.0005)  # not synchronisation: the slowness of the write under test
            for name in versions.to_prune(os.listdir(folder), step + 1):
                os.unlink(os.path.join(folder, name))
        done.set()

    writer = threading.Thread(target=slow_writer)
    writer.start()
    seen: list[int] = []
    while not done.is_set():
        document = store.read_json(path, "progress")  # raises CorruptFileError on a torn record
        assert document is not None
        seen.append(document["step"])
    writer.join()
    assert seen == sorted(seen) and len(seen) > 100, seen[-5:]
    assert store.read_json(path, "progress")["step"] == 29


def test_a_whole_version_that_breaks_the_schema_is_corrupt_and_moved_aside(tmp_path, write_once):
    path = tmp_path / contract.PROGRESS
    records.write_record(path, progress(1))
    records.write_record(path, records.dumps({"step": "seven"}).encode())
    with pytest.raises(CorruptFileError) as caught:
        store.read_json(path, "progress")
    assert caught.value.moved_to is not None and caught.value.moved_to.exists()
    assert store.read_json(path, "progress")["step"] == 1


# -- pruning ---------------------------------------------------------------------------


def test_the_writer_keeps_the_versions_folder_small_however_many_beats(tmp_path, write_once):
    beat = tmp_path / contract.HEARTBEAT
    for n in range(200):
        records.write_record(beat, f"{n}.000\n".encode())
    names = os.listdir(versions.versions_dir(beat))
    assert len(names) == versions.KEEP + 1, names
    assert store.read_heartbeat(beat) == 199.0
    assert not beat.exists()  # never a plain file, never a rename


def test_the_default_layout_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.delenv(contract.ENV_RECORDS, raising=False)
    beat = tmp_path / contract.HEARTBEAT
    records.write_record(beat, b"5.000\n")
    assert beat.read_bytes() == b"5.000\n" and not os.path.exists(versions.versions_dir(beat))
    assert store.read_heartbeat(beat) == 5.0


# -- the real wrapper where rename and link are refused ---------------------------------


def run_wrapper_in_bucket(tmp_path: Path, home: Path, mode: str | None) -> subprocess.CompletedProcess[str]:
    attempt = home / "runs" / "r-test" / "attempts" / "1"
    attempt.mkdir(parents=True)
    script = tmp_path / "job.sh"
    script.write_text(f"for s in 1 2 3; do {sys.executable} -m fray.wrapper.report progress --step $s; done\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_")}
    env.update(PYTHONPATH=os.pathsep.join([str(BUCKET_HOOK), str(REPO)]), FRAY_SIM_BUCKET=str(home),
               FRAY_GCLOUD_SIM=str(tmp_path))
    if mode is not None:
        env[contract.ENV_RECORDS] = mode
    argv = [sys.executable, "-m", "fray.wrapper", "run", "--run-id", "r-test", "--attempt", "1",
            "--attempt-dir", str(attempt), "--script", str(script), "--heartbeat-interval", "0.05",
            "--probes", "none"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_in_a_bucket_without_rename_the_write_once_wrapper_leaves_every_record(tmp_path):
    home = tmp_path / "home"
    result = run_wrapper_in_bucket(tmp_path, home, contract.RECORDS_WRITE_ONCE)
    assert result.returncode == 0, result.stderr
    attempt = home / "runs" / "r-test" / "attempts" / "1"
    assert not (tmp_path / "bucket-refusals.log").exists()
    assert store.read_json(attempt / contract.EXIT, "exit")["exit_code"] == 0
    assert store.read_json(attempt / contract.FINAL, "final") is not None
    assert store.read_json(attempt / contract.STARTED, "started") is not None
    assert store.read_json(attempt / contract.PROGRESS, "progress")["step"] == 3
    assert store.read_heartbeat(attempt / contract.HEARTBEAT) is not None
    plain = {contract.HEARTBEAT, contract.EXIT, contract.FINAL, contract.STARTED, contract.PROGRESS}
    assert not plain & set(os.listdir(attempt))
    assert all(len(os.listdir(attempt / (name + versions.SUFFIX))) <= versions.KEEP + 1 for name in plain)


def test_in_a_bucket_without_rename_the_default_wrapper_cannot_write_its_records(tmp_path):
    """What the simulator's bucket proves: the rename layout does not survive there."""
    home = tmp_path / "home"
    run_wrapper_in_bucket(tmp_path, home, None)
    attempt = home / "runs" / "r-test" / "attempts" / "1"
    assert "os.rename" in (tmp_path / "bucket-refusals.log").read_text()
    assert store.read_json(attempt / contract.EXIT, "exit") is None
    assert store.read_heartbeat(attempt / contract.HEARTBEAT) is None


def test_an_unknown_records_mode_is_refused_before_anything_is_written(tmp_path):
    result = run_wrapper_in_bucket(tmp_path, tmp_path / "home", "atomic")
    assert result.returncode == contract.EXIT_USAGE
    assert "FRAY_RECORDS='atomic' is not one of rename, write-once" in result.stderr
    assert os.listdir(tmp_path / "home" / "runs" / "r-test" / "attempts" / "1") == []
