"""One daemon process per host for a FRAY_HOME, guarded without the file system.

Across hosts the lease decides who acts (fray.daemon.lease_keeper). On one host
a faster, exact guard keeps a second daemon from even starting, and tells a
reader on this host whether the daemon the lease names still lives. It cannot be
an flock in FRAY_HOME: on NFS mounted `nolock`/`local_lock`, Lustre
`-o localflock`, BeeGFS and every FUSE client flock is node-local at best, and
where the client has none it answers ENOSYS. So on Linux the guard is an
abstract unix socket named after the home and the host: it touches no file
system, the kernel frees it however its process dies, and the children the
daemon forks (wrappers, sbatch) do not inherit it (Python's sockets are
close-on-exec). Elsewhere it is an flock on a lock file of this host's own.

Who this host is (its name and boot id) is fray.state.this_host's.
"""

from __future__ import annotations

import _socket  # what a probe needs of socket, without its 7 ms of imports (selectors): `fray list` asks
import errno
import sys
from typing import Any

from fray.state import doorbell, store
from fray.state.layout import Home
from fray.state.this_host import hostname


def _address(home: Home) -> str:
    return doorbell.abstract_name(home, "daemon")


class HostGuard:
    """Held by the one daemon process of this home on this host, for its life."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._held: Any = None

    def acquire(self) -> bool:
        """Take the guard; False when another process on this host holds it."""
        if sys.platform.startswith("linux"):
            import socket

            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(_address(self.home))
            except OSError as exc:
                sock.close()
                if exc.errno == errno.EADDRINUSE:
                    return False
                raise
            sock.listen(64)
            import threading

            # Probes connect (held_here); each is accepted and closed so that none waits in the backlog.
            threading.Thread(target=_answer_probes, args=(sock,), name="fray-host-guard", daemon=True).start()
            self._held = sock
            return True
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.home.lock_file(f"daemon-{hostname()}")), timeout=0, mode=store.FILE_MODE)
        try:
            lock.acquire()
        except Timeout:
            return False
        self._held = lock
        return True

    def release(self) -> None:
        held, self._held = self._held, None
        if isinstance(held, _socket.socket):
            try:
                held.shutdown(_socket.SHUT_RDWR)  # wakes the thread blocked in accept(), which holds the socket open
            except OSError:
                pass
            held.close()
        elif held is not None:
            held.release()


def _answer_probes(sock: Any) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:  # the guard was released
            return
        conn.close()


def held_here(home: Home) -> bool:
    """Whether a daemon of this home runs on this host right now. A connect, never a bind: a probe must not take
    the guard from a daemon starting at that instant."""
    if sys.platform.startswith("linux"):
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(_address(home))
        except BlockingIOError:  # its backlog is full: it is there
            return True
        except OSError:  # ECONNREFUSED: nobody listens on that name
            return False
        finally:
            sock.close()
        return True
    return store.held(home, f"daemon-{hostname()}")
