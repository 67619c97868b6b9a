"""The daemon process: `python -m fray.daemon --home DIR` (what `fray daemon start` spawns) and `fray daemon run`.

Takes the daemon lock (one daemon per FRAY_HOME), logs to daemon.log, turns
SIGTERM/SIGINT/SIGHUP into a clean stop after the current cycle.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import signal

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
    daemon = Daemon(home)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: daemon.request_stop())
    log.info("daemon %s started for %s (pid %d)", __version__, home.root, os.getpid())
    try:
        daemon.serve()
    finally:
        log.info("daemon stopping; attempts keep running and will be adopted by the next daemon")
        lock.release()
    return 0


def _configure_logging(home: Home) -> None:
    handler = logging.handlers.RotatingFileHandler(home.daemon_log, maxBytes=5_000_000, backupCount=2)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("fray")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
