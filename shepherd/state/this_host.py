"""Who this host is, for the records that say which host holds something (the daemon's lease, a shared lock).

A host is its name plus its boot id: a login node rebooted under the same name
is another host, whose old processes this one can no longer see, and a reader
on the same host (same id) may judge a holder by its process, with its own clock.
"""

from __future__ import annotations

import functools
import os


def hostname() -> str:
    return os.uname().nodename  # socket.gethostname()'s answer, without importing socket (7 ms) on every read


@functools.cache
def host_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()[:8]
    except OSError:
        boot = "noboot"
    return f"{hostname()}/{boot}"
