"""`fray ARGS --json` on a remote host: connect, make sure fray is there, run, keep the exit code.

The front ends call this with their own argv; they render the JSON that comes
back exactly as they render a local run's, so output is identical. A master
(fray.remote.master) left by an earlier command is used when there is one;
otherwise this process connects, and leaves a master for the next command.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from fray.remote import bootstrap, command, master, sync
from fray.remote.command import Result
from fray.remote.sync import SyncResult
from fray.remote.connection import connect

DEFAULT_TIMEOUT = 300.0


def run_fray(
    target: str,
    argv: Sequence[str],
    *,
    home: str | None = None,
    json: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    reuse: bool | None = None,
    cwd: str | None = None,
) -> Result:
    """Run `fray *argv` (with `--json` unless told not to) on `target`, from `cwd` there when given;
    its exit code is returned.

    `reuse` (default: unless FRAY_REMOTE_NO_MASTER is set) uses and leaves a background master.
    """
    args = list(argv)
    if json and "--json" not in args:
        args.append("--json")
    if reuse is None:
        reuse = reusing()
    if reuse:
        served = master.ask(target, home, args, timeout, cwd)
        if served is not None:
            return served
    conn = connect(target)
    remote = bootstrap.ensure(conn, home)
    result = command.run(conn, master.in_folder([remote.executable, *args], cwd),
                         env={"FRAY_HOME": remote.home, "FRAY_REMOTE": ""}, timeout=timeout)
    if reuse:
        master.spawn(target, home)
    return result


def sync_project(target: str, project: Path, *, home: str | None = None, force: bool = False) -> SyncResult:
    """`project` synced to its code folder on `target`, through the master when one serves."""
    reuse = reusing()
    if reuse:
        served = master.ask_sync(target, home, project, force)
        if served is not None:
            return served
    conn = connect(target)
    remote = bootstrap.ensure(conn, home)
    done = sync.sync(conn, project, sync.code_folder(remote.home, project), force=force)
    if reuse:
        master.spawn(target, home)
    return done


def reusing() -> bool:
    return not os.environ.get("FRAY_REMOTE_NO_MASTER")
