"""The `node` probe: the basics every run needs from a node.

- The shared FRAY_HOME is writable from here: a file is created, written,
  fsynced, read back and removed. A stale NFS mount fails (or hangs) here
  rather than hours later at the first checkpoint.
- Free disk on FRAY_HOME's filesystem and on the node's temporary directory
  is at least --min-free-disk: a full local disk is a node fault that
  otherwise surfaces as a workload crash.
"""

from __future__ import annotations

import os
import socket
import tempfile

from .probe import FAILED, PASSED, Finding, ProbeContext


def _write_and_read_back(folder: str) -> str | None:
    """None when a file can be written, fsynced, read back and removed in `folder`; else why not."""
    path = os.path.join(folder, f".fray-probe-{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}")
    payload = b"fray node probe\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        with open(path, "rb") as handle:
            if handle.read() != payload:
                return f"{folder}: a file written there read back different"
        os.unlink(path)
    except OSError as exc:
        return f"cannot write in {folder}: {exc.strerror or exc}"
    return None


def _free_mb(path: str) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize // (1024 * 1024)


def basics(ctx: ProbeContext, deadline: float) -> Finding:
    problems: list[str] = []
    data: dict[str, object] = {"home": ctx.home, "min_free_disk_mb": ctx.min_free_disk_mb}
    if ctx.home is not None:
        problem = _write_and_read_back(ctx.home)
        data["home_writable"] = problem is None
        if problem:
            problems.append(f"FRAY_HOME is not usable: {problem}")
    free: dict[str, int] = {}
    filesystems: set[int] = set()
    for folder in (ctx.home, tempfile.gettempdir()):
        if folder is None:
            continue
        try:
            device = os.stat(folder).st_dev
            if device in filesystems:
                continue  # the same filesystem, already measured
            filesystems.add(device)
            mb = free[folder] = _free_mb(folder)
        except OSError as exc:
            problems.append(f"cannot measure free space on {folder}: {exc.strerror or exc}")
            continue
        if mb < ctx.min_free_disk_mb:
            problems.append(f"{folder} has {mb} MB free, less than --min-free-disk {ctx.min_free_disk_mb} MB")
    data["free_mb"] = free
    if problems:
        return Finding(FAILED, "; ".join(problems), data)
    shown = ", ".join(f"{folder}: {mb} MB free" for folder, mb in free.items())
    return Finding(PASSED, f"FRAY_HOME writable; {shown}" if ctx.home else shown, data)
