"""The daemon process: `python -m fray.daemon --home DIR` (what `fray daemon start` spawns) and `fray daemon run`.

One process per host for a FRAY_HOME (the host guard, fray.daemon.host_guard);
of those, across the login hosts that share the home, the one that holds the
lease acts and the others stand by, ready to take over
(fray.daemon.lease_keeper). The process stands by until it holds a generation,
serves with a Daemon fenced by that lease, and stands by again if it loses it
(a paused daemon thawed after another took over). Logs to daemon.log; SIGTERM,
SIGINT and SIGHUP stop it cleanly after the current cycle, handing the lease
over at once.

A process that shows as a second `fray.daemon` for an instant is the daemon's
own child between fork and exec (starting a wrapper, sbatch, gcloud): it runs
no daemon code, and the guard's socket is close-on-exec.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import signal
import threading
from typing import Protocol

from fray.version import __version__
from fray.daemon.host_guard import HostGuard
from fray.state.this_host import hostname
from fray.daemon.lease_keeper import LeaseKeeper, configured_timeout
from fray.daemon.loop import Daemon
from fray.state import store
from fray.state.config import load_config
from fray.state.layout import Home

log = logging.getLogger("fray.daemon")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fray.daemon", description="Run the fray daemon in the foreground.")
    parser.add_argument("--home", help="FRAY_HOME (default: $FRAY_HOME or ~/.fray)")
    args = parser.parse_args(argv)
    home = Home.resolve(args.home)
    store.ensure_home(home)
    _configure_logging(home)
    guard = HostGuard(home)
    if not guard.acquire():
        log.info("another daemon of this home runs on this host (%s); exiting", hostname())
        print(f"fray daemon: another daemon is already running for {home.root} on this host")
        return 0
    try:
        Supervisor(home).run()
    finally:
        guard.release()
    return 0


class Supervisor:
    """Stands by, serves while it holds the lease, stands by again when it loses it; until asked to stop."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.stop = threading.Event()
        self.daemon: Daemon | None = None
        self.keeper = LeaseKeeper(home, configured_timeout(load_config(home)), __version__)

    def request_stop(self) -> None:
        self.stop.set()
        daemon = self.daemon
        if daemon is not None:
            daemon.request_stop()

    def run(self) -> None:
        stop_on_signals(self)
        log.info("daemon %s started for %s (pid %d on %s)", __version__, self.home.root, os.getpid(), hostname())
        while not self.stop.is_set():
            if not self.keeper.acquire(self.stop):
                break
            daemon = self.daemon = Daemon(self.home, lease=self.keeper)
            self.keeper.on_lost = daemon.wake
            if self.stop.is_set():  # asked to stop while it was taking the lease
                daemon.request_stop()
            self.keeper.start_renewing()
            try:
                daemon.serve()
            finally:
                self.daemon = None
                daemon.close()
                self.keeper.release()
                log.info("daemon stopping; attempts keep running and will be adopted by the next daemon")
            if self.keeper.lost_why is not None and not self.stop.is_set():
                log.info("standing by again: %s", self.keeper.lost_why)


class Stoppable(Protocol):
    def request_stop(self) -> None: ...


def stop_on_signals(daemon: Stoppable) -> None:
    """SIGTERM, SIGINT and SIGHUP stop the daemon after its cycle.

    The handler only writes a byte to a pipe; a thread reading it asks the daemon
    to stop. Asking from the handler itself took the wake event's lock, which the
    main thread may hold inside Event.wait() when the signal lands: it waited
    forever for itself, and a SIGTERMed daemon never stopped.
    """
    read_end, write_end = os.pipe()

    def relay() -> None:
        os.read(read_end, 1)
        daemon.request_stop()

    threading.Thread(target=relay, name="fray-stop", daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: os.write(write_end, b"s"))


def _configure_logging(home: Home) -> None:
    handler = logging.handlers.RotatingFileHandler(home.daemon_log, maxBytes=5_000_000, backupCount=2)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("fray")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
