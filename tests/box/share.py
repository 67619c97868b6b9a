"""The shared folder: a plain folder on the "file server" (this machine), served by a real sshd, and one
sshfs client of it per host, mounted inside the host's mount namespace at the same path on every host.

Each client is its own FUSE mount, so each host has its own attribute and name caches (a file written on
one host reaches another late, as over NFS) and its own locks: the kernel keeps FUSE `flock`/`fcntl`
locks per mount, so a lock taken on one host does not exclude another (as NFS `local_lock=all` or
`nolock`, Lustre `-o localflock`, BeeGFS by default). rename, O_EXCL create, link() and fsync reach the
server (OpenSSH's posix-rename, hardlink and fsync extensions), so what NFS makes atomic is atomic here.

The client runs in the root PID namespace, not the host's: like the kernel's NFS client, it is no process
of the host, so freezing or killing the host's processes leaves the mount up.
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.box import procs
from tests.box.host import Host
from tests.box.polling import wait_until


@dataclass(frozen=True)
class Cache:
    """How long a host's client trusts what it saw, in seconds (0: asks the server every time).

    The defaults are short so tests stay fast, long enough that every test meets a stale cache."""

    # Size and times of a file (FUSE attr_timeout). 0 by default: NFS revalidates them at every open
    # (close-to-open), which fray relies on, and sshfs would otherwise read a replaced file cut at its old size.
    attributes: float = 0.0
    names: float = 2.0  # a name found in a folder (FUSE entry_timeout; NFS acdirmin/acdirmax)
    missing_names: float = 2.0  # a name looked up and not found (FUSE negative_timeout; NFS lookupcache=all)
    listings: float = 2.0  # folder listings and the client's own stat cache (sshfs dcache_timeout)

    def options(self) -> list[str]:
        opts = [f"attr_timeout={self.attributes:g}", f"entry_timeout={self.names:g}",
                f"negative_timeout={self.missing_names:g}"]
        opts += [f"dcache_timeout={self.listings:g}"] if self.listings else ["dir_cache=no"]
        return opts


@dataclass(frozen=True)
class FileServer:
    """The sshd that serves `export` (the server-side folder) to every host's client; its keys, config
    and log in `folder`."""

    export: Path
    folder: Path
    port: int

    @property
    def user_key(self) -> Path:
        return self.folder / "user_key"

    def known_hosts(self) -> Path:
        path = self.folder / "known_hosts"
        if not path.exists():
            key_type, key = (self.folder / "host_key.pub").read_text().split()[:2]
            path.write_text(f"[127.0.0.1]:{self.port} {key_type} {key}\n")
        return path


def start_server(export: Path, folder: Path) -> tuple[FileServer, subprocess.Popen[bytes]]:
    """sshd on a free 127.0.0.1 port, keys and config under `folder` (the suite's, tests/remote_support.py)."""
    from tests.remote_support import (
        start_sshd,  # imports pytest: only for starting, not for using a box
    )

    export.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    sshd, proc = start_sshd(folder)
    return FileServer(export=export, folder=folder, port=sshd.port), proc


def mount(host: Host, server: FileServer, cache: Cache, timeout: float = 20) -> None:
    """Mount the shared folder at `host.mount` inside `host`, with its own client; wait until it serves."""
    host.mount.mkdir(parents=True, exist_ok=True)  # the mount point, empty on the machine's own disk
    ssh = [f"port={server.port}", f"IdentityFile={server.user_key}",
           f"UserKnownHostsFile={server.known_hosts()}", "StrictHostKeyChecking=yes", "BatchMode=yes"]
    argv = ["nsenter", "-t", str(host.init_pid), "-m", "--",  # its mount namespace only: no fork, pid is sshfs's
            "sshfs", "-f", "-o", ",".join(ssh + cache.options()),
            f"root@127.0.0.1:{server.export}", str(host.mount)]
    with open(host.folder / "sshfs.log", "ab") as log:
        client = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    host.handles.append(client)
    host.sshfs_pid = client.pid
    host.cache = cache
    wait_until(lambda: client.poll() is not None or mounted(client.pid, host.mount), timeout=timeout,
               what=f"the shared folder on {host.name}")
    if client.poll() is not None:
        raise RuntimeError(f"sshfs on {host.name} exited {client.returncode}: "
                           f"{(host.folder / 'sshfs.log').read_text()[-2000:]}")


def mounted(pid: int, where: Path) -> bool:
    """Whether the mount namespace of process `pid` has an sshfs mount at `where`."""
    try:
        lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    except OSError:
        return False
    # mountinfo: id parent major:minor root MOUNT_POINT options ... - FSTYPE source super-options
    return any(line.split()[4] == str(where) and " - fuse.sshfs " in line for line in lines)


def unmount(host: Host, timeout: float = 10) -> None:
    """Unmount the host's client (lazily: a process still in the folder keeps it until it leaves)."""
    pid = host.sshfs_pid
    if pid is None or not procs.alive(pid):
        return
    host.heal()  # a stopped client would never answer the unmount
    subprocess.run(["nsenter", "-t", str(pid), "-m", "--", "fusermount3", "-u", "-z", str(host.mount)],
                   capture_output=True, timeout=timeout)
    try:
        wait_until(lambda: not procs.alive(pid), timeout=timeout, what=f"sshfs of {host.name} to exit")
    except AssertionError:
        procs.send([pid], signal.SIGKILL)
    for handle in [h for h in host.handles if h.pid == pid]:  # reap it, when it is our child
        handle.wait(timeout=timeout)
        host.handles.remove(handle)
    host.sshfs_pid = None


def remount(host: Host, server: FileServer, cache: Cache) -> None:
    """Replace the host's client by one with other cache times. A process with a file open on the old one
    (or its working folder there) keeps the old one until it lets go."""
    unmount(host)
    mount(host, server, cache)
