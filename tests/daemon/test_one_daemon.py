"""One daemon acts for a FRAY_HOME, whatever happens to the others and to the lock file.

Real daemon processes. A second `fray.daemon` seen for an instant in a storm of
kills is the daemon's own child between fork and exec (fray.daemon.process);
these tests cover what could really make two act: daemons started at once, and
a lease taken over by another host (tests/box/test_many_hosts.py has real hosts).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import start_daemon, stop_daemon, wait_until
from fray.state import store, this_host

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


def test_a_daemon_whose_generation_another_host_took_stops_writing_then_takes_a_newer_one(home):
    """What a daemon sees when another login host took its lease over (here: written as that host would):
    it stops before writing anything more and stands by; once that host's lease stands unchanged for its
    timeout, on this host's clock, it takes the next generation."""
    store.ensure_home(home)
    home.config.write_text(json.dumps({"daemon": {"lease_timeout_sec": 2}}))
    first = start_daemon(home)
    try:
        wait_until(lambda: (l := lease(home)) and l.get("cycles", 0) >= 1, what="it to serve")
        assert lease(home)["generation"] == 1
        taken = {"generation": 2, "host": "login-b", "host_id": "login-b/00000000", "pid": 4242, "taken_at": time.time(),
                 "why": "a test plays login-b"}
        (home.root / "daemon" / "generation-2.json").write_text(json.dumps(taken))
        theirs = {**lease(home), **{k: taken[k] for k in ("generation", "host", "host_id", "pid")}, "renewals": 1,
                  "stopping": False}
        home.daemon_lease.write_text(json.dumps(theirs))
        record = home.root / "daemon" / "hosts" / f"{socket.gethostname()}.json"
        wait_until(lambda: json.loads(record.read_text())["role"] == "standby", what="it to stand by")
        assert json.loads(home.daemon_lease.read_text()) == theirs  # it did not write over the newer lease
        wait_until(lambda: (l := lease(home)) and l["generation"] == 3 and l["pid"] == first.pid, timeout=15,
                   what="it to take generation 3 once login-b's lease stood still for 2 s")
        why = json.loads((home.root / "daemon" / "generation-3.json").read_text())["why"]
        assert "login-b" in why and "unchanged for" in why
        assert first.poll() is None
    finally:
        stop_daemon(first)


def _write_atomically(path, document: dict) -> None:
    tmp = path.with_name(path.name + ".test-tmp")
    tmp.write_text(json.dumps(document))
    os.replace(tmp, path)


@pytest.mark.parametrize("stale", ["its own renewal", "a superseded host's stop"])
def test_a_stale_lease_landing_after_a_takeover_is_no_reason_to_take_over_at_once(home, stale):
    """A daemon paused between its renewal's check and its rename (a frozen VM) lands that lease after another
    host took the next generation. Read back by the same daemon, now standing by, it named this host and this
    very pid, which the standby took for "the daemon on this host is gone": it took a generation at once and two
    daemons acted together (the box's churn test saw one attempt number run twice in every run). A stale
    `stopping` from a superseded host is no more its holder's word. Only the timeout may judge either."""
    store.ensure_home(home)
    home.config.write_text(json.dumps({"daemon": {"lease_timeout_sec": 2}}))
    first = start_daemon(home)
    try:
        wait_until(lambda: (l := lease(home)) and l.get("cycles", 0) >= 1, what="it to serve")
        taken = {"generation": 2, "host": "login-b", "host_id": "login-b/00000000", "pid": 4242,
                 "taken_at": time.time(), "why": "a test plays login-b"}
        (home.root / "daemon" / "generation-2.json").write_text(json.dumps(taken))
        theirs = {**lease(home), **{k: taken[k] for k in ("generation", "host", "host_id", "pid")}, "renewals": 1,
                  "stopping": False}
        _write_atomically(home.daemon_lease, theirs)
        record = home.root / "daemon" / "hosts" / f"{socket.gethostname()}.json"
        wait_until(lambda: json.loads(record.read_text())["role"] == "standby", what="it to stand by")
        paused = {**theirs, "generation": 1, "renewals": 99}
        paused.update({"host": socket.gethostname(), "host_id": this_host.host_id(), "pid": first.pid}
                      if stale == "its own renewal" else
                      {"host": "login-c", "host_id": "login-c/00000000", "pid": 77, "stopping": True})
        _write_atomically(home.daemon_lease, paused)
        deadline = time.monotonic() + 1.5  # three standby polls read the stale lease, under the 2 s timeout
        while time.monotonic() < deadline:
            assert not (home.root / "daemon" / "generation-3.json").exists(), "took over on a stale lease"
            time.sleep(0.1)
        for renewal in range(2, 8):  # login-b renews over it, as a live holder does
            _write_atomically(home.daemon_lease, {**theirs, "renewals": renewal})
            time.sleep(0.4)
            assert not (home.root / "daemon" / "generation-3.json").exists(), "took over from a live holder"
        wait_until(lambda: (l := lease(home)) and l["generation"] == 3 and l["pid"] == first.pid, timeout=15,
                   what="it to take generation 3 once login-b's lease stood still for 2 s")
        assert "unchanged for" in json.loads((home.root / "daemon" / "generation-3.json").read_text())["why"]
    finally:
        stop_daemon(first)


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
