"""Host keys: checked against known_hosts, added only when the user says so.

An unknown host is refused with the fingerprint it presented and the command
that trusts it; a key that differs from the recorded one is refused loudly.
Nothing here ever adds a key on its own: `trust` is what `fray remote trust
HOST` runs, after the user has compared the fingerprint.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
from pathlib import Path
from typing import Any

from fray.remote.errors import ChangedHostKey, UnknownHostKey, UnreachableHost
from fray.remote.ssh_config import HostSpec


def fingerprint(key: Any) -> str:
    """OpenSSH's SHA256 fingerprint of a paramiko public key (what `ssh-keygen -l` prints)."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def reject_policy(spec: HostSpec) -> Any:
    """A paramiko MissingHostKeyPolicy that refuses an unknown host with its fingerprint."""
    import paramiko

    class _Refuse(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client, hostname, key):  # noqa: ANN001 - paramiko's signature
            raise UnknownHostKey(spec.alias, key.get_name(), fingerprint(key), spec.known_hosts[0])

    return _Refuse()


def changed_key_error(spec: HostSpec, key: Any) -> ChangedHostKey:
    return ChangedHostKey(spec.alias, key.get_name(), fingerprint(key), spec.known_hosts[0])


def load_known_hosts(client: Any, spec: HostSpec) -> None:
    """Every known_hosts file the config names, read-only: fray never writes them here."""
    for path in spec.known_hosts:
        if os.path.isfile(path):
            client.get_host_keys().load(path)


def server_key(spec: HostSpec, sock: Any = None) -> Any:
    """The key the server presents, fetched without authenticating."""
    import paramiko

    try:
        sock = sock or socket.create_connection((spec.hostname, spec.port), timeout=spec.connect_timeout)
    except OSError as exc:
        raise UnreachableHost(f"cannot reach {spec.alias} ({spec.hostname}:{spec.port}): {exc}") from None
    transport = paramiko.Transport(sock)
    try:
        transport.start_client(timeout=spec.connect_timeout)
        return transport.get_remote_server_key()
    finally:
        transport.close()


def trust(spec: HostSpec, sock: Any = None) -> tuple[str, str]:
    """Record the host's current key in the first known_hosts file; (key type, fingerprint).

    A host already recorded with a different key is refused: the old entry must
    be removed on purpose first.
    """
    import paramiko

    key = server_key(spec, sock)
    path = Path(spec.known_hosts[0])
    known = paramiko.HostKeys()
    if path.is_file():
        known.load(str(path))
    recorded = known.lookup(spec.known_hosts_name) or {}
    if key.get_name() in recorded:
        if recorded[key.get_name()] != key:
            raise changed_key_error(spec, key)
        return key.get_name(), fingerprint(key)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("a") as f:
        f.write(f"{spec.known_hosts_name} {key.get_name()} {key.get_base64()}\n")
    return key.get_name(), fingerprint(key)
