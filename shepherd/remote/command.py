"""Running a command on the remote host: argv quoted, output and exit code kept.

The remote side is a POSIX shell (what sshd runs a command with), so each
argument is single-quoted (shlex.quote): names with spaces, quotes, `$()`,
backticks, `;` or newlines reach the remote program unchanged and nothing in
them is executed. Output is read from both streams as it comes, so a chatty
stderr can never block the command, and every wait is bounded.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fray.remote.connection import Connection
from fray.remote.errors import ConnectionDropped, RemoteCommandFailed

DEFAULT_TIMEOUT = 120.0
_CHUNK = 65536


@dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: bytes
    stderr: bytes


def shell_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The command line a POSIX shell runs as exactly `argv` with `env` set."""
    assignments = [f"{name}={shlex.quote(value)}" for name, value in (env or {}).items()]
    # `env` keeps the assignments out of the shell's own parsing of the program name.
    prefix = ["env", *assignments] if assignments else []
    return " ".join([*prefix, *(shlex.quote(arg) for arg in argv)])


def run(
    conn: Connection,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Result:
    """Run `argv` on the remote and wait for it; the remote exit code is returned, not raised."""
    transport = conn.client.get_transport()
    if transport is None or not transport.is_active():
        raise ConnectionDropped(f"the connection to {conn.spec.alias} is closed")
    channel = transport.open_session(timeout=conn.spec.connect_timeout)
    channel.settimeout(1.0)
    channel.exec_command(shell_line(argv, env))
    if stdin:
        channel.sendall(stdin)
    channel.shutdown_write()
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout
    while True:
        drained = _drain(channel, out, err)
        if channel.exit_status_ready() and not drained:
            break
        if not transport.is_active():
            raise ConnectionDropped(f"the connection to {conn.spec.alias} dropped while running {argv[0]}")
        if time.monotonic() > deadline:
            channel.close()
            raise RemoteCommandFailed(f"{argv[0]} on {conn.spec.alias} did not finish within {timeout:.0f}s")
        if not drained:
            channel.status_event.wait(0.01)
    code = channel.recv_exit_status()
    channel.close()
    if code == -1:
        raise ConnectionDropped(f"{argv[0]} on {conn.spec.alias} ended without an exit status")
    return Result(code, bytes(out), bytes(err))


def _drain(channel, out: bytearray, err: bytearray) -> bool:  # noqa: ANN001 - paramiko Channel
    """Read what is waiting on both streams; whether anything was."""
    got = False
    while channel.recv_ready():
        out += channel.recv(_CHUNK)
        got = True
    while channel.recv_stderr_ready():
        err += channel.recv_stderr(_CHUNK)
        got = True
    return got
