"""The daemon process: `python -m fray.daemon --home DIR` (what `fray daemon start` spawns) and `fray daemon run`.

Takes the daemon lock (one daemon per FRAY_HOME), logs to daemon.log, turns
SIGTERM/SIGINT/SIGHUP into a clean stop after the current cycle.

Two daemons never act for one home: the lock is an flock on locks/daemon.lock,
held for the process's life. A process that shows as a second `fray.daemon`
for an instant is the daemon's own child between fork and exec (starting a
wrapper, sbatch, gcloud): it runs no daemon code and closes the lock's
descriptor as it execs. What the flock cannot see is its file being deleted or
replaced (a cleaned-up locks folder): a new daemon would lock the new file. So
before each cycle the daemon checks that the file at the lock's path is still
the one it locked, and exits if not.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import signal
import threading
from typing import Protocol

from fray import __version__
from fray.daemon.loop import Daemon
from fray.state import store
from fray.state.layout import Home

log = logging.getLogger("fray.daemon")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fray.daemon", description="Run the fray daemon in the foreground.")
    parser.add_argument("--home", help="FRAY_HOME (default: $FRAY_HOME or ~/.fray)")
    args = parser.parse_args(argv)
    home = Home.resolve(args.home)
    store.ensure_home(home)
    _configure_logging(home)
    from filelock import Timeout

    lock = store.lock(home, "daemon", timeout=2.0)
    try:
        lock.acquire()
    except Timeout:
        log.info("another daemon holds %s; exiting", home.lock_file("daemon"))
        print(f"fray daemon: another daemon is already running for {home.root}")
        return 0
    locked = _identity(home.lock_file("daemon"))
    daemon = Daemon(home)
    daemon.holds_lock = lambda: _still_locked(home, locked)
    stop_on_signals(daemon)
    log.info("daemon %s started for %s (pid %d)", __version__, home.root, os.getpid())
    try:
        daemon.serve()
    finally:
        log.info("daemon stopping; attempts keep running and will be adopted by the next daemon")
        lock.release()
    return 0


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


def _identity(path: os.PathLike[str]) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def _still_locked(home: Home, locked: tuple[int, int] | None) -> bool:
    if _identity(home.lock_file("daemon")) == locked:
        return True
    log.error("the daemon lock file %s was removed or replaced: another daemon may hold it now; exiting",
              home.lock_file("daemon"))
    return False


def _configure_logging(home: Home) -> None:
    handler = logging.handlers.RotatingFileHandler(home.daemon_log, maxBytes=5_000_000, backupCount=2)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("fray")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
