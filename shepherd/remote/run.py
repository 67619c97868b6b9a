"""`fray ARGS --json` on a remote host: connect, make sure fray is there, run, keep the exit code.

The front ends call this with their own argv; they render the JSON that comes
back exactly as they render a local run's, so output is identical.
"""

from __future__ import annotations

from collections.abc import Sequence

from fray.remote import bootstrap, command
from fray.remote.command import Result
from fray.remote.connection import connect

DEFAULT_TIMEOUT = 300.0


def run_fray(
    target: str, argv: Sequence[str], *, home: str | None = None, json: bool = True, timeout: float = DEFAULT_TIMEOUT
) -> Result:
    """Run `fray *argv` (with `--json` unless told not to) on `target`; its exit code is returned."""
    conn = connect(target)
    remote = bootstrap.ensure(conn, home)
    args = [remote.executable, *argv]
    if json and "--json" not in args:
        args.append("--json")
    return command.run(conn, args, env={"FRAY_HOME": remote.home}, timeout=timeout)
