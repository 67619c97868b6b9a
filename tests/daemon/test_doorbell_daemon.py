"""The daemon's end of the doorbell (fray.state.doorbell, fray.daemon.watching.hear_doorbell): a daemon whose
file watcher never reports still starts a new run at once, where it would otherwise wait for its poll timer.
"""

from __future__ import annotations

import json
import threading

from conftest import wait_until
from test_daemon_start import _run
from fray.daemon import loop, watching
from fray.daemon.loop import Daemon
from fray.state import runs, store


def test_a_daemon_whose_watcher_never_reports_starts_a_new_run_at_once(home, tmp_path, monkeypatch):
    """The poll timer is 60 s and the watcher is dead: only the ring can wake the loop in time."""
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0, "poll_interval_sec": 60}}))
    monkeypatch.setattr(watching, "watch_runs", lambda home, wake, stop, on_change, watching: stop.wait())
    monkeypatch.setattr(loop.watching_runs, "await_watch", lambda *args: None)
    daemon = Daemon(home)
    serving = threading.Thread(target=daemon.serve, daemon=True)
    serving.start()
    try:
        wait_until(lambda: daemon.cycles >= 1, what="a first cycle")
        cycles = daemon.cycles
        run_id = _run(home, tmp_path, "rung")  # runs.create_run rings as its last step
        wait_until(lambda: daemon.cycles > cycles, timeout=10, what="a cycle woken by the ring")
        wait_until(lambda: runs.read_meta(home, run_id).attempts, timeout=10, what="the run's first attempt")
    finally:
        daemon.request_stop()
        serving.join(30)
