"""The file system FRAY_HOME lives on, as this host mounts it, and what it does (for `fray doctor`).

`mount_of` finds the mount in /proc/self/mounts (its type, source and options:
what decides caching and locking); `atomic_failures` tries, in a scratch folder,
each operation fray's writes rely on; `flock_works` whether this client has flock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
from pathlib import Path
from typing import NamedTuple


class Mount(NamedTuple):
    point: str
    fstype: str
    source: str
    options: list[str]


def mount_of(path: Path) -> Mount:
    """The mount that holds `path` (the longest mount point that prefixes its real path)."""
    real = os.path.realpath(path)
    best = Mount("/", "unknown", "?", [])
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return best
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best.point):
            best = Mount(point, fields[2], fields[0], fields[3].split(","))
    return best


def atomic_failures(folder: Path) -> dict[str, str]:
    """Each of rename-over, O_EXCL create and link() that fails in a scratch folder under `folder`: why."""
    scratch = folder / f".doctor-{secrets.token_hex(4)}"
    failed: dict[str, str] = {}
    try:
        scratch.mkdir(mode=0o700)
        a, b = scratch / "a", scratch / "b"
        a.write_bytes(b"1")
        b.write_bytes(b"2")
        try:
            os.replace(a, b)
            if b.read_bytes() != b"1":
                failed["rename"] = "the renamed file does not hold what was written"
        except OSError as exc:
            failed["rename"] = exc.strerror or str(exc)
        try:
            os.close(os.open(scratch / "x", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            try:
                os.close(os.open(scratch / "x", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                failed["exclusive create"] = "a second O_EXCL create of the same name succeeded"
            except FileExistsError:
                pass
        except OSError as exc:
            failed["exclusive create"] = exc.strerror or str(exc)
        try:
            os.link(scratch / "x", scratch / "y")
        except OSError as exc:
            failed["link"] = exc.strerror or str(exc)
    except OSError as exc:
        failed["writing"] = exc.strerror or str(exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return failed


def flock_works(path: Path) -> str:
    """"yes", or why this host's flock fails on `path` (ENOSYS: a Lustre client without -o flock)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return "yes"
    except BlockingIOError:
        return "yes"  # someone holds it: it works
    except OSError as exc:
        return f"{errno.errorcode.get(exc.errno or 0, '?')}: {exc.strerror}"
    finally:
        os.close(fd)
