"""The daemon's doorbell: a command on the daemon's own host tells it at once that runs changed.

The daemon hears of a new run or a request through its file watcher
(fray.daemon.watching), but a watcher that reacts within milliseconds wakes
hundreds of times a second, and each wake takes the GIL: on a 2-core node
where a training job keeps both cores busy, that watcher alone cost 2.2% of a
core (tests/bench/bench_nanogpt.py), and a job with threads on every core
loses more than that to it. So a command that made a run (fray.state.runs), asked
something of one (a control request) or made a sweep rings this bell as its last step:
one datagram to an abstract unix socket named after the home and the host,
carrying the run ids (or nothing: "look"). The daemon wakes on it at once and
the watcher can take its time (its events still come, for every change the bell
does not carry: another host's commands, a wrapper's files).

Ringing never fails a command: no daemon on this host (it serves from another
login node, or has not started), a full queue, another network namespace, a
system without abstract sockets: the datagram is dropped and the watcher, or
the poll timer, sees the change as before. Linux only; elsewhere `ring` does
nothing.

The name is the host guard's (fray.daemon.host_guard) with its own prefix: a
hash of the home's real path and this host's id, so two homes, or one home
seen from two hosts, never share a bell.
"""

from __future__ import annotations

import _socket  # not socket: its imports (selectors, enum) cost a command ~7 ms, and a ring needs none of it
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from fray.state.layout import Home
from fray.state.this_host import host_id

MAX_PAYLOAD = 8192  # below every system's datagram limit; more run ids than fit ring as "look" (empty)
RECV_TIMEOUT_SEC = 1.0  # how often the listening thread looks whether it should stop


def abstract_name(home: Home, role: str) -> str:
    """An abstract socket name for `role` of this home on this host (at most 108 bytes: the path is hashed, by
    FNV-1a twice, not hashlib, whose import `fray list` would pay for)."""
    key = f"{os.path.realpath(home.root)}\0{host_id()}".encode()
    return f"\0fray-{role}/{_fnv(key, 0xcbf29ce484222325):016x}{_fnv(key, 0x84222325cbf29ce4):016x}"


def _fnv(data: bytes, basis: int) -> int:
    value = basis
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value


def payload(run_ids: Iterable[str]) -> bytes:
    """The run ids, one per line, or b"" (look at everything new) when they would not fit one datagram."""
    data = "\n".join(run_ids).encode()
    return data if len(data) <= MAX_PAYLOAD else b""


def parse(data: bytes) -> set[str]:
    """The run ids a datagram carries (none: a plain wake). A name with a path separator or a leading dot is
    never a run (a stray datagram must not make the daemon look outside runs/)."""
    ids = set(data.decode(errors="replace").split("\n")) if data else set()
    return {run_id for run_id in ids if run_id and "/" not in run_id and not run_id.startswith(".")}


def ring(home: Home, run_ids: Iterable[str] = ()) -> bool:
    """Tell this host's daemon that these runs changed; whether a daemon heard it. Never raises."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    except OSError:
        return False
    try:
        sock.setblocking(False)
        sock.sendto(payload(run_ids), abstract_name(home, "doorbell"))
        return True
    except OSError:  # nobody listens here (ECONNREFUSED), its queue is full (EAGAIN): the watcher covers for it
        return False
    finally:
        sock.close()


class Bell:
    """The daemon's end: bound for its life; `listen` hands each ring's run ids to `on_ring` until `stop`."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._sock: Any = None

    def open(self) -> bool:
        """Bind the bell; False where there is none (not Linux, or the name is taken: the watcher alone then)."""
        if not sys.platform.startswith("linux"):
            return False
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
        try:
            sock.bind(abstract_name(self.home, "doorbell"))
        except OSError:
            sock.close()
            return False
        sock.settimeout(RECV_TIMEOUT_SEC)
        self._sock = sock
        return True

    def listen(self, on_ring: Callable[[set[str]], None], stopping: Callable[[], bool]) -> None:
        sock = self._sock
        while sock is not None and not stopping():
            try:
                data = sock.recv(MAX_PAYLOAD + 1)
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            on_ring(parse(data))

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
