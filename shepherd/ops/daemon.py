"""The daemon that serves FRAY_HOME, as a person starts, stops, runs or inspects it.

Each use case answers the same view: FRAY_HOME, what was asked, whether it
changed anything, and the daemon's health and lease (schemas/cli-daemon.json).
"""

from __future__ import annotations

from typing import Any

from fray.daemon import lease
from fray.state.layout import Home


def daemon_view(home: Home, action: str = "status", changed: bool = False) -> dict[str, Any]:
    """The daemon judged on this host's clock, and every host's daemon (`fray daemon status` on any host)."""
    return {"home": str(home.root), "action": action, "changed": changed, **lease.confirmed_view(home)}


def ensure_running(home: Home) -> dict[str, Any]:
    """Start a daemon in the background unless one serves FRAY_HOME; its lease. Every action records
    intent that the daemon carries out, so each front end's last step after one is this."""
    return lease.ensure_running(home)


def start(home: Home) -> dict[str, Any]:
    """Start this host's daemon in the background unless one runs here: it acts, or stands by behind a live daemon
    of another login host, ready to take over (several login hosts: start one on each)."""
    started = lease.start_here(home)
    return daemon_view(home, "start", changed=started)


def stop(home: Home) -> dict[str, Any]:
    """Ask the daemon to exit; attempts keep running and the next daemon adopts them."""
    return daemon_view(home, "stop", changed=lease.stop(home) is not None)


def run(home: Home) -> int:
    """The daemon itself, in the foreground, until interrupted; its exit code."""
    from fray.daemon import process  # the whole daemon: only `fray daemon run` loads it

    return process.main(["--home", str(home.root)])
