"""Interactive remote commands (`fray tui`, `fray logs -f`, `fray nodes`) over a PTY.

The remote command gets a pseudo-terminal of this terminal's size and TERM;
keys go over as typed (the local terminal is in raw mode, so Ctrl-C reaches
the remote program as it would locally), window-size changes are forwarded,
and the terminal is restored however the command ends. A connection that
drops is reported (ConnectionDropped), not waited on forever: the keepalive
notices a dead peer.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence

from fray.remote.command import shell_line
from fray.remote.connection import Connection
from fray.remote.errors import ConnectionDropped

_CHUNK = 65536


def interactive(conn: Connection, argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run `argv` on a remote PTY wired to this terminal; the remote exit code."""
    transport = conn.client.get_transport()
    if transport is None or not transport.is_active():
        raise ConnectionDropped(f"the connection to {conn.spec.alias} is closed")
    channel = transport.open_session(timeout=conn.spec.connect_timeout)
    size = shutil.get_terminal_size()
    channel.get_pty(term=os.environ.get("TERM", "xterm-256color"), width=size.columns, height=size.lines)
    channel.exec_command(shell_line(argv, env))
    stdin = sys.stdin.fileno()
    restore = _raw(stdin)
    previous = signal.getsignal(signal.SIGWINCH)

    def resize(_signum: int, _frame: object) -> None:
        now = shutil.get_terminal_size()
        channel.resize_pty(width=now.columns, height=now.lines)

    signal.signal(signal.SIGWINCH, resize)
    out = sys.stdout.buffer
    try:
        watched = [channel, stdin]
        while True:
            readable, _, _ = select.select(watched, [], [], 0.5)
            if channel in readable:
                data = channel.recv(_CHUNK)
                if not data and channel.exit_status_ready():
                    break
                out.write(data)
                out.flush()
            if stdin in readable:
                keys = os.read(stdin, 1024)
                if keys:
                    channel.sendall(keys)
                else:
                    watched = [channel]  # our stdin ended: keep showing the remote's output
            if channel.exit_status_ready() and not channel.recv_ready():
                break
            if not transport.is_active():
                raise ConnectionDropped(f"the connection to {conn.spec.alias} dropped")
    finally:
        signal.signal(signal.SIGWINCH, previous)
        restore()
    code = channel.recv_exit_status()
    if code == -1:  # the channel closed without the remote's exit status: the link went down
        raise ConnectionDropped(f"the connection to {conn.spec.alias} dropped while running {argv[0]}")
    return code


def _raw(fd: int):  # noqa: ANN202 - returns the function that undoes it
    """Put a terminal in raw mode; the function restoring it (a no-op when not a terminal)."""
    if not os.isatty(fd):
        return lambda: None
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    return lambda: termios.tcsetattr(fd, termios.TCSADRAIN, saved)
