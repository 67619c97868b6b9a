"""A real OpenSSH server on 127.0.0.1 for the `--remote` tests.

`sshd` (session scope) starts `/usr/sbin/sshd -D` on a free port with a
temporary host key and a temporary authorized user key (keys only, StrictModes
off so the temporary folder's modes do not matter). `remote_host` (per test)
points fray at it through an ssh config file (FRAY_SSH_CONFIG) whose alias
`fray-test` names the port, the user key and a known_hosts file of the test's
own, already trusting the server's key.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import wait_until
from tests.slurm.fixture import DEFAULT_DIR as SLURM_DIR

SSHD = "/usr/sbin/sshd"
ALIAS = "fray-test"


@dataclass
class Sshd:
    port: int
    host_key_pub: Path
    user_key: Path
    root: Path

    def known_hosts_line(self) -> str:
        key_type, key_b64 = self.host_key_pub.read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {key_type} {key_b64}\n"


@dataclass
class RemoteHost:
    alias: str
    sshd: Sshd
    config: Path
    known_hosts: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _accepts(port: int) -> bool:
    """Whether sshd answers with its banner (listening is not enough: it must be serving)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.settimeout(1)
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def start_sshd(root: Path, sftp: bool = True) -> tuple[Sshd, subprocess.Popen[bytes]]:
    """sshd serving on a free 127.0.0.1 port with keys made under `root`; it and its process.

    `sftp=False`: no `Subsystem sftp` line, as on login nodes that disable it.
    """
    _keygen(root / "host_key")
    _keygen(root / "user_key")
    shutil.copy(root / "user_key.pub", root / "authorized_keys")
    port = _free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\nPidFile {root / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "StrictModes no\nUsePAM no\nLogLevel ERROR\nMaxSessions 50\nMaxStartups 50\n"
        + ("Subsystem sftp internal-sftp\n" if sftp else "") +
        # As on a login node, sessions find the cluster's Slurm (the test cluster's, when it runs).
        f"SetEnv SLURM_CONF={SLURM_DIR / 'etc' / 'slurm.conf'}\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=open(root / "sshd.log", "wb"))
    wait_until(lambda: proc.poll() is not None or _accepts(port), what="sshd to serve")
    if proc.poll() is not None:
        raise RuntimeError(f"sshd exited: {(root / 'sshd.log').read_text()}")
    return Sshd(port, root / "host_key.pub", root / "user_key", root), proc


def require_sshd() -> None:
    """Skip without openssh-server, except in CI (which installs it): there a missing sshd is a failure."""
    if not os.path.exists(SSHD):
        if os.environ.get("CI"):
            pytest.fail("openssh-server is not installed -- CI is set, so this is a failure, not a skip",
                        pytrace=False)
        pytest.skip("openssh-server is not installed")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Iterator[Sshd]:
    require_sshd()
    server, proc = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def write_ssh_config(path: Path, server: Sshd, known_hosts: Path, alias: str = ALIAS) -> None:
    path.write_text(
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {server.port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {server.user_key}\n  UserKnownHostsFile {known_hosts}\n  ConnectTimeout 10\n"
    )


@pytest.fixture(scope="session")
def sshd_without_sftp(tmp_path_factory) -> Iterator[Sshd]:
    """A second sshd whose config has no SFTP subsystem: files must travel over exec channels."""
    require_sshd()
    server, proc = start_sshd(tmp_path_factory.mktemp("sshd-no-sftp"), sftp=False)
    try:
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def remote_host(sshd: Sshd, tmp_path: Path, monkeypatch) -> Iterator[RemoteHost]:
    from fray.remote import connection

    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line())
    config = tmp_path / "ssh_config"
    write_ssh_config(config, sshd, known_hosts)
    monkeypatch.setenv("FRAY_SSH_CONFIG", str(config))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield RemoteHost(ALIAS, sshd, config, known_hosts)
    connection.close_all()
