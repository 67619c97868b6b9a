"""One daemon acts for a FRAY_HOME, whatever happens to the others and to the lock file.

Real daemon processes. A second `fray.daemon` seen for an instant in a storm of
kills is the daemon's own child between fork and exec (fray.daemon.process);
these tests cover what could really make two act: daemons started at once, and
the lock file deleted under a running daemon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import start_daemon, stop_daemon, wait_until
from fray.state import store

pytestmark = pytest.mark.slow


def lease(home) -> dict | None:
    try:
        return json.loads(home.daemon_lease.read_text())
    except (OSError, ValueError):
        return None


def test_daemons_started_at_once_leave_exactly_one_serving(home):
    store.ensure_home(home)
    procs = [subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
             for _ in range(5)]
    try:
        wait_until(lambda: sum(p.poll() is None for p in procs) == 1 and lease(home), timeout=30,
                   what="all but one daemon to give way")
        (survivor,) = [p for p in procs if p.poll() is None]
        assert all(p.returncode == 0 for p in procs if p is not survivor)
        wait_until(lambda: (l := lease(home)) and l["pid"] == survivor.pid and l["cycles"] > 2,
                   what="the survivor to serve")
    finally:
        for proc in procs:
            if proc.poll() is None:
                stop_daemon(proc)


def test_a_daemon_whose_lock_file_is_replaced_exits_and_leaves_the_lease_to_the_new_one(home):
    first = start_daemon(home)
    second = None
    try:
        home.lock_file("daemon").unlink()  # a cleaned-up locks folder: the flock no longer guards anything
        second = start_daemon(home)
        assert first.wait(10) == 0  # it saw the lock file is not the one it locked, before its next cycle
        cycles = lease(home)["cycles"]
        wait_until(lambda: (l := lease(home)) and l["cycles"] > cycles + 2, what="the new daemon to keep cycling")
        assert lease(home)["pid"] == second.pid and not lease(home)["stopping"]
        assert second.poll() is None
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                stop_daemon(proc)


STOP_WHILE_LOCKED = """
import os, signal, threading
from fray.daemon import process

class Daemon:
    def __init__(self):
        self.wake = threading.Event()
        self.stopped = threading.Event()

    def request_stop(self):
        self.wake.set()  # what the real daemon does: takes the event's lock
        self.stopped.set()

daemon = Daemon()
process.stop_on_signals(daemon)
with daemon.wake._cond:  # where the main thread is, inside Event.wait(), when a SIGTERM lands
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10000):
        pass  # the Python-level handler runs here, between two bytecodes, with the lock held
assert daemon.stopped.wait(5), "the stop was never asked for"
print("stopped")
"""


def test_a_sigterm_landing_while_the_main_thread_holds_the_wake_lock_still_stops_the_daemon():
    """A SIGTERMed daemon once hung for good: its handler took the wake event's lock, which the main thread
    held inside Event.wait() at that instant. Reproduced deterministically by holding the lock."""
    proc = subprocess.run([sys.executable, "-c", STOP_WHILE_LOCKED], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "stopped" in proc.stdout, proc.stderr


def test_a_storm_of_sigterms_stops_a_daemon_and_it_says_so_in_its_lease(home):
    daemon = start_daemon(home)
    for _ in range(50):
        try:
            os.kill(daemon.pid, signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(0.002)
    # 0, or killed by a SIGTERM of the storm that arrived while the interpreter was exiting (handlers reset)
    assert daemon.wait(15) in (0, -signal.SIGTERM)
    assert lease(home)["stopping"]  # it stopped cleanly first
