"""A lock that holds across every host sharing FRAY_HOME, on any file system: a lock file created exclusively.

`flock` cannot be that lock: on NFS mounted `nolock`/`local_lock`, Lustre with
`-o localflock`, BeeGFS by default and every FUSE client it is node-local (two
login hosts both "hold" it), and on Lustre without `-o flock` it answers
ENOSYS. An exclusive create is atomic at the file server everywhere: the lock
is `locks/<name>.lock`, linked into place whole (fray.wrapper.records.create_bytes,
which also checks the link count, as NFS may answer a retransmitted link with
EEXIST), naming its holder's host, pid and a random token. It is not fsync'd: a lock
matters only while its holder lives, its name is at the file server once the
link returns, and a file left empty by a crash of its host is judged stale as
a torn one is (fray control pause of 10,000 points took a lock each, and paid
an fsync for every one).

The sections it guards are short (a read-modify-write of control.json, the
blacklist, a line of the audit log), so a lock file is stale when its holder
cannot be holding it any more: its process is gone on this host, or, for a
holder on another host, the file has stood unchanged for `stale_after` seconds
on this host's own monotonic clock (no comparing of clocks). A stale lock is
broken by renaming it aside under the breaker's token and checking it took the
file it judged (another breaker, or a new holder, may have got there first:
a file taken by mistake is put back unless a newer one holds the name).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from fray.errors import LockTimeout
from fray.state import this_host
from fray.wrapper import face as wrapper

log = logging.getLogger("fray.state")

STALE_AFTER_SEC = 30.0
POLL_SEC = 0.01


class SharedLock:
    """`with SharedLock(path, timeout):` one holder at a time, across processes and hosts."""

    def __init__(self, path: Path | str, timeout: float = 10.0, stale_after: float = STALE_AFTER_SEC,
                 host_id: str | None = None) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self.stale_after = stale_after
        self.host_id = host_id or this_host.host_id()
        self._token: str | None = None

    def acquire(self) -> None:
        token = secrets.token_hex(8)
        record = orjson.dumps({"host_id": self.host_id, "pid": os.getpid(), "token": token})
        deadline = time.monotonic() + self.timeout
        seen: tuple[bytes, float] | None = None  # the holder's file as first read, and when (this host's clock)
        while True:
            try:
                if wrapper.create_bytes(self.path, record, sync=False):
                    self._token = token
                    return
            except FileNotFoundError:
                wrapper.make_private_dir(Path(self.path).parent)
                continue
            held = _read(self.path)
            now = time.monotonic()
            if held is not None:
                if seen is None or seen[0] != held:
                    seen = (held, now)
                if self._stale(held, now - seen[1]):
                    self._break(held, token)
                    seen = None
                    continue
            if now >= deadline:
                raise LockTimeout(f"{self.path} is held by {_holder(held)}; waited {self.timeout:.0f}s. If no fray "
                                  f"command is running, remove it.")
            time.sleep(POLL_SEC)

    def _stale(self, held: bytes, unchanged_for: float) -> bool:
        try:
            holder = orjson.loads(held)
        except orjson.JSONDecodeError:  # cut by a crash of its writer's host (it is linked whole otherwise)
            return unchanged_for >= self.stale_after
        if holder.get("host_id") == self.host_id:
            return not _alive(int(holder.get("pid", 0)))
        return unchanged_for >= self.stale_after

    def _break(self, held: bytes, token: str) -> None:
        aside = f"{self.path}.broken-{token}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return  # released or broken meanwhile
        if _read(aside) == held:
            log.warning("broke the stale lock %s (%s)", self.path, _holder(held))
            os.unlink(aside)
            return
        try:  # a new holder's file, taken by mistake: back in place unless another holds the name by now
            os.link(aside, self.path)
        except OSError:
            pass
        os.unlink(aside)

    def release(self) -> None:
        token, self._token = self._token, None
        if token is None:
            return
        held = _read(self.path)
        if held is not None and orjson.loads(held).get("token") == token:
            os.unlink(self.path)
        else:
            log.warning("the lock %s was broken while this process held it (it took too long)", self.path)

    def __enter__(self) -> "SharedLock":
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    @property
    def held_by_anyone(self) -> bool:
        return os.path.exists(self.path)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(4096)
    except FileNotFoundError:
        return None


def _holder(held: bytes | None) -> str:
    try:
        holder: dict[str, Any] = orjson.loads(held or b"")
    except orjson.JSONDecodeError:
        return "an unreadable holder"
    return f"pid {holder.get('pid')} on {str(holder.get('host_id', '?')).split('/')[0]}"


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

