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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO

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
    out, err = bytearray(), bytearray()
    code = _pump(conn, argv, env, stdin, timeout, out.extend, err.extend)
    return Result(code, bytes(out), bytes(err))


def stream(conn: Connection, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
           out: BinaryIO, err: BinaryIO) -> int:
    """Run `argv` on the remote, writing its output here as it comes; its exit code.

    No deadline: a stream (`submit --wait`, `logs -f` into a pipe) lasts as long as the remote command;
    a dead link is still noticed (the connection's keepalive) and raised as ConnectionDropped.
    """

    def writer(target: BinaryIO) -> Callable[[bytes], None]:
        def write(data: bytes) -> None:
            target.write(data)
            target.flush()

        return write

    return _pump(conn, argv, env, None, None, writer(out), writer(err))


def _pump(conn: Connection, argv: Sequence[str], env: Mapping[str, str] | None, stdin: bytes | None,
          timeout: float | None, on_out: Callable[[bytes], object], on_err: Callable[[bytes], object]) -> int:
    transport = conn.client.get_transport()
    if transport is None or not transport.is_active():
        raise ConnectionDropped(f"the connection to {conn.spec.alias} is closed")
    channel = transport.open_session(timeout=conn.spec.connect_timeout)
    channel.settimeout(1.0)
    channel.exec_command(shell_line(argv, env))
    if stdin:
        channel.sendall(stdin)
    channel.shutdown_write()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        drained = _drain(channel, on_out, on_err)
        if channel.exit_status_ready() and not drained:
            break
        if not transport.is_active():
            raise ConnectionDropped(f"the connection to {conn.spec.alias} dropped while running {argv[0]}")
        if deadline is not None and time.monotonic() > deadline:
            channel.close()
            raise RemoteCommandFailed(f"{argv[0]} on {conn.spec.alias} did not finish within {timeout:.0f}s")
        if not drained:
            channel.status_event.wait(0.01)
    code = channel.recv_exit_status()
    channel.close()
    if code == -1:
        raise ConnectionDropped(f"{argv[0]} on {conn.spec.alias} ended without an exit status")
    return code


def _drain(channel, on_out: Callable[[bytes], object], on_err: Callable[[bytes], object]) -> bool:  # noqa: ANN001
    """Hand on what is waiting on both streams of the (paramiko) channel; whether anything was."""
    got = False
    while channel.recv_ready():
        on_out(channel.recv(_CHUNK))
        got = True
    while channel.recv_stderr_ready():
        on_err(channel.recv_stderr(_CHUNK))
        got = True
    return got
