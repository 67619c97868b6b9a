"""The lock for shared files holds across processes and hosts without flock, and a dead holder never blocks for long.

Real processes and real files; "another host" is a holder record with another host id (what a lock file
written by a process of another login host looks like here).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fray.errors import LockTimeout
from fray.state.shared_lock import SharedLock

COUNTER = """
import sys, time
from fray.state.shared_lock import SharedLock
path, counter, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(rounds):
    with SharedLock(path, timeout=60):
        value = int(open(counter).read())
        time.sleep(0.0005)  # widens the window a lost update needs
        open(counter, "w").write(str(value + 1))
"""


def test_processes_that_read_modify_write_under_the_lock_lose_no_update(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    lock = tmp_path / "locks" / "counter.lock"
    procs = [subprocess.Popen([sys.executable, "-c", COUNTER, str(lock), str(counter), "50"]) for _ in range(4)]
    assert [p.wait(120) for p in procs] == [0, 0, 0, 0]
    assert counter.read_text() == "200"
    assert not lock.exists()  # released by its last holder


def test_a_lock_left_by_a_dead_process_of_this_host_is_broken_at_once(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    first = SharedLock(path)
    path.write_text(json.dumps({"host_id": first.host_id, "pid": int(dead.stdout), "token": "gone"}))
    started = time.monotonic()
    with SharedLock(path, timeout=5):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert time.monotonic() - started < 1.0


def test_another_hosts_lock_is_broken_only_after_standing_unchanged_for_its_stale_time(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    path.write_text(json.dumps({"host_id": "login-b/00000000", "pid": 1, "token": "theirs"}))
    with pytest.raises(LockTimeout, match="held by pid 1 on login-b"):
        SharedLock(path, timeout=0.3, stale_after=5).acquire()  # its pid means nothing here: only time tells
    started = time.monotonic()
    with SharedLock(path, timeout=5, stale_after=0.5):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert 0.5 <= time.monotonic() - started < 2.0
    assert [p.name for p in tmp_path.iterdir()] == []  # broken, then released: nothing left behind


def _hold(path: str, held: "multiprocessing.synchronize.Event", release: "multiprocessing.synchronize.Event") -> None:
    with SharedLock(path, timeout=5):
        held.set()
        release.wait(10)


def test_a_live_holder_is_waited_for_then_the_lock_is_taken(tmp_path: Path) -> None:
    path = str(tmp_path / "x.lock")
    held, release = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(path, held, release))
    holder.start()
    try:
        assert held.wait(10)
        with pytest.raises(LockTimeout):
            SharedLock(path, timeout=0.2).acquire()
        release.set()
        with SharedLock(path, timeout=10):
            pass
    finally:
        release.set()
        holder.join(10)
