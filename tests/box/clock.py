"""A host's clock offset: the libfaketime environment that makes a process's wall clock run off.

Why libfaketime on the host's processes, not a faked clock for the whole host: slurmd and slurmstepd
exchange munge credentials, which are checked against the clock, and a shared kernel has one clock.
So only the processes a test cares about are skewed: a job's tasks (the box's TaskProlog) and what a
test runs in the host. The monotonic clock and file times stay true, as on a machine whose clock is off
(files get their times from the file server).

libfaketime shares a semaphore and a memory object between the processes of one tree; each tree's first
process creates them in /dev/shm and removes them only if it exits itself (not if it execs or is killed),
so a box left to it would litter /dev/shm. Each host gets one pair instead, made here (FAKETIME_SHARED),
removed when the box stops.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
from pathlib import Path

SHM = Path("/dev/shm")


def environment(offset: float, libfaketime: Path, shared_name: str) -> dict[str, str]:
    """What a process needs to see a wall clock `offset` seconds off (negative: behind)."""
    sem, shm = objects(shared_name)
    _ensure_semaphore(sem)
    _ensure_memory(shm)
    return {
        "LD_PRELOAD": str(libfaketime),
        "FAKETIME": f"{offset:+g}",  # relative: the clock runs at its rate, `offset` away
        "FAKETIME_DONT_FAKE_MONOTONIC": "1", "DONT_FAKE_MONOTONIC": "1",  # 0.9.10 reads both spellings
        "NO_FAKE_STAT": "1",  # file times are the server's, not this host's
        "FAKETIME_SHARED": f"{sem} {shm}",
    }


def shared_name(box_root: Path, host: str) -> str:
    """A name for one host's shared objects, unique to this box (two boxes on one machine differ)."""
    return f"fraybox-{hashlib.sha256(str(box_root).encode()).hexdigest()[:8]}-{host}"


def objects(name: str) -> tuple[str, str]:
    """The POSIX names of the semaphore and the memory object."""
    return f"/{name}-sem", f"/{name}-shm"


def remove(name: str) -> None:
    """Remove one host's objects (they live in /dev/shm as sem.NAME and NAME)."""
    sem, shm = objects(name)
    (SHM / f"sem.{sem[1:]}").unlink(missing_ok=True)
    (SHM / shm[1:]).unlink(missing_ok=True)


def _ensure_memory(name: str) -> None:
    """The shared memory, as libfaketime's own creator lays it out: a process maps it whole (an empty one
    is a SIGBUS), and the -1s mean "no start time recorded yet"."""
    path = SHM / name[1:]
    if path.exists() and path.stat().st_size > 0:
        return
    # struct ft_shared_s: ticks, file_idx, then the start time of four clocks (real, mon, mon_raw, boot).
    layout = struct.pack("<QQ" + "qq" * 4, 0, 0, 0, -1, 0, -1, 0, -1, 0, 0)
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    scratch.write_bytes(layout.ljust(4096, b"\0"))
    scratch.chmod(0o600)
    os.replace(scratch, path)


def _ensure_semaphore(name: str) -> None:
    if (SHM / f"sem.{name[1:]}").exists():
        return
    libc = ctypes.CDLL(None, use_errno=True)  # glibc >= 2.34 has sem_open in libc itself
    libc.sem_open.restype = ctypes.c_void_p
    # Value 1: libfaketime takes it (sem_wait) around its updates of the shared memory.
    sem = libc.sem_open(name.encode(), os.O_CREAT, ctypes.c_uint(0o600), ctypes.c_uint(1))
    if sem is None or sem == ctypes.c_void_p(-1).value:  # SEM_FAILED
        raise OSError(ctypes.get_errno(), f"sem_open {name}: {os.strerror(ctypes.get_errno())}")
    libc.sem_close(ctypes.c_void_p(sem))
