"""The box's native helpers (tests/box/c), compiled with gcc on first use, and the system tools it needs.

- `init`: PID 1 of a host (names it, reaps its orphans);
- `enter`: runs a command inside a host, forwarding signals and dying with its caller;
- `noflock.so`: an LD_PRELOAD shim under which flock/lockf/fcntl locks fail with ENOSYS;
- `clockshift.so`: an LD_PRELOAD shim under which the wall clock runs off by FRAY_BOX_CLOCK_OFFSET seconds.

Builds are cached under a folder named by the hash of the sources, so a second session (or a second
box) compiles nothing; a changed source gets a new folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "c"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fray-box"
SBIN = "/usr/sbin:/sbin"  # sshd, slurmd, slurmctld, munged
# What the box runs, and the Debian package each comes from (.ci/run installs them).
REQUIRED = {
    "gcc": "gcc", "unshare": "util-linux", "nsenter": "util-linux", "sshfs": "sshfs",
    "fusermount3": "fuse3", "sshd": "openssh-server", "ssh-keygen": "openssh-client",
    "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "sbatch": "slurm-wlm", "munged": "munge",
}


class BoxUnavailable(RuntimeError):
    """This machine cannot host a box: a tool, a kernel feature or a privilege is missing."""


@dataclass(frozen=True)
class Tools:
    init: Path
    enter: Path
    noflock: Path
    clockshift: Path


def missing() -> list[str]:
    """What this machine lacks for a box, each with how to get it; empty when it has everything."""
    path = f"{os.environ.get('PATH', '')}{os.pathsep}{SBIN}"
    found = [f"{tool} (apt-get install {package})" for tool, package in REQUIRED.items()
             if shutil.which(tool, path=path) is None]
    if not Path("/dev/fuse").exists():
        found.append("/dev/fuse (a kernel with FUSE, and the device in this container)")
    if os.geteuid() != 0:
        found.append("root (namespaces, mounts and slurmd need it)")
    elif shutil.which("unshare"):
        probe = subprocess.run(["unshare", "--mount", "--pid", "--uts", "--fork", "--mount-proc", "true"],
                               capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            found.append(f"namespaces (unshare --mount --pid --uts: {probe.stderr.strip()})")
    return found


def build(cache: Path = CACHE) -> Tools:
    """The compiled helpers, built now unless this version of the sources is in the cache."""
    sources = sorted(SOURCES.glob("*.c"))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()[:16]
    folder = cache / digest
    tools = Tools(init=folder / "init", enter=folder / "enter", noflock=folder / "noflock.so",
                  clockshift=folder / "clockshift.so")
    if all(p.exists() for p in (tools.init, tools.enter, tools.noflock, tools.clockshift)):
        return tools
    cache.mkdir(parents=True, exist_ok=True)
    # Built in a scratch folder renamed into place: two sessions building at once both end with whole files.
    scratch = Path(tempfile.mkdtemp(dir=cache, prefix=f".{digest}-"))
    _gcc("-o", scratch / "init", SOURCES / "init.c")
    _gcc("-o", scratch / "enter", SOURCES / "enter.c")
    _gcc("-shared", "-fPIC", "-o", scratch / "noflock.so", SOURCES / "noflock.c", "-ldl")
    _gcc("-shared", "-fPIC", "-o", scratch / "clockshift.so", SOURCES / "clockshift.c", "-ldl")
    try:
        scratch.rename(folder)
    except OSError:  # another build won the race; its files are the same
        shutil.rmtree(scratch, ignore_errors=True)
    return tools


def _gcc(*args: object) -> None:
    proc = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise BoxUnavailable(f"gcc {' '.join(map(str, args))} failed:\n{proc.stderr}")
