"""Host keys: checked against known_hosts, added only when the user says so.

An unknown host is refused with the fingerprint it presented and the command
that trusts it; a key that differs from the recorded one is refused loudly.
Nothing here ever adds a key on its own: `trust` is what `fray remote trust
HOST` runs, after the user has compared the fingerprint; `--replace` (a host
reinstalled) removes every key recorded under the host's known_hosts name,
`host` or `[host]:port`, hashed entries included, and records the new one,
returning the old fingerprints so they can be shown beside the new.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import tempfile
from dataclasses import dataclass
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
    return ChangedHostKey(spec.alias, key.get_name(), fingerprint(key), spec.known_hosts[0], spec.known_hosts_name)


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


@dataclass(frozen=True)
class Trusted:
    """What `trust` did: the key now recorded, and the keys it replaced (empty unless --replace removed some)."""

    key_type: str
    fingerprint: str
    known_hosts: str  # the file written
    name: str  # the host's name in it: `host` or `[host]:port`
    added: bool  # False: that very key was recorded already
    replaced: tuple[tuple[str, str], ...] = ()  # (key type, fingerprint) of each key removed


def trust(spec: HostSpec, sock: Any = None, replace: bool = False) -> Trusted:
    """Record the host's current key in the first known_hosts file.

    A host already recorded with a different key is refused unless `replace`:
    then every key recorded for it is removed first.
    """
    import paramiko

    key = server_key(spec, sock)
    path = Path(spec.known_hosts[0])
    name = spec.known_hosts_name
    known = paramiko.HostKeys()
    if path.is_file():
        known.load(str(path))
    recorded = known.lookup(name) or {}
    if recorded.get(key.get_name()) == key and (len(recorded) == 1 or not replace):
        return Trusted(key.get_name(), fingerprint(key), str(path), name, added=False)
    if key.get_name() in recorded and not replace:
        raise changed_key_error(spec, key)
    old = tuple((kind, fingerprint(value)) for kind, value in recorded.items()) if replace else ()
    lines = path.read_text().splitlines(keepends=True) if path.is_file() else []
    if replace:
        lines = [line for line in lines if not _names(line, name)]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    lines.append(f"{name} {key.get_name()} {key.get_base64()}\n")
    _write_private(path, "".join(lines))
    return Trusted(key.get_name(), fingerprint(key), str(path), name, added=True, replaced=old)


def _names(line: str, name: str) -> bool:
    """Whether a known_hosts line records a key for `name` (plain, in a comma list, or hashed)."""
    import paramiko

    fields = line.split()
    if not fields or fields[0].startswith("#"):
        return False
    hosts_field = fields[1] if fields[0].startswith("@") and len(fields) > 1 else fields[0]
    for entry in hosts_field.split(","):
        if entry.startswith("|1|"):
            if paramiko.HostKeys.hash_host(name, entry) == entry:
                return True
        elif entry == name:
            return True
    return False


def _write_private(path: Path, text: str) -> None:
    """Replace `path` atomically, keeping its mode (0600 for a new file): known_hosts is the user's."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = path.stat().st_mode & 0o777 if path.is_file() else 0o600
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
