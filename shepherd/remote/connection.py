"""One authenticated SSH connection per host, shared by all the calls of a command.

Authentication is what `ssh` would try: the IdentityFile entries of the config,
the SSH agent, then the default keys in ~/.ssh. ProxyJump hops are followed
(each hop is itself resolved through the config and its key checked).
Every network wait is bounded: the TCP connect, the banner, the handshake and
authentication all use the host's ConnectTimeout.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from fray.remote import host_keys
from fray.remote.errors import AuthenticationFailed, UnreachableHost
from fray.remote.ssh_config import HostSpec, resolve

KEEPALIVE_SECONDS = 15


@dataclass
class Connection:
    spec: HostSpec
    client: Any  # paramiko.SSHClient
    jumps: list[Any] = field(default_factory=list)  # clients of the ProxyJump hops, kept open
    sftp_refused: bool = False  # the server has no SFTP subsystem: files go over exec channels (fray.remote.files)

    def alive(self) -> bool:
        transport = self.client.get_transport()
        return bool(transport and transport.is_active())

    def close(self) -> None:
        self.client.close()
        for jump in reversed(self.jumps):
            jump.close()


_open: dict[str, Connection] = {}


def connect(target: str | HostSpec) -> Connection:
    """The open connection to `target`, made on first use and reused after."""
    spec = target if isinstance(target, HostSpec) else resolve(target)
    existing = _open.get(spec.alias)
    if existing and existing.alive():
        return existing
    conn = _connect(spec)
    _open[spec.alias] = conn
    return conn


def close_all() -> None:
    while _open:
        _open.popitem()[1].close()


def _connect(spec: HostSpec) -> Connection:
    jumps: list[Any] = []
    sock = None
    if spec.proxy_jump:
        # `a,b` hops: each opens a tunnel to the next, the last to this host.
        for hop in spec.proxy_jump.split(","):
            previous = jumps[-1] if jumps else None
            hop_spec = resolve(hop)
            hop_conn = _open_client(hop_spec, _tunnel(previous, hop_spec) if previous else None)
            jumps.append(hop_conn)
        sock = _tunnel(jumps[-1], spec)
    client = _open_client(spec, sock)
    return Connection(spec, client, jumps)


def _tunnel(via: Any, spec: HostSpec) -> Any:
    transport = via.get_transport()
    return transport.open_channel(
        "direct-tcpip", (spec.hostname, spec.port), ("127.0.0.1", 0), timeout=spec.connect_timeout
    )


def _open_client(spec: HostSpec, sock: Any) -> Any:
    import paramiko

    client = paramiko.SSHClient()
    host_keys.load_known_hosts(client, spec)
    client.set_missing_host_key_policy(host_keys.reject_policy(spec))
    try:
        client.connect(
            spec.hostname,
            port=spec.port,
            username=spec.user,
            key_filename=list(spec.identity_files) or None,
            timeout=spec.connect_timeout,
            banner_timeout=spec.connect_timeout,
            auth_timeout=spec.connect_timeout,
            channel_timeout=spec.connect_timeout,
            sock=sock,
        )
    except paramiko.BadHostKeyException as exc:
        raise host_keys.changed_key_error(spec, exc.key) from None
    except paramiko.AuthenticationException as exc:
        raise AuthenticationFailed(
            f"cannot log in to {spec.alias} as {spec.user}: {exc}. Check that `ssh {spec.alias}` works "
            "with the same key (IdentityFile in ~/.ssh/config, or a key loaded in the SSH agent)."
        ) from None
    except (OSError, socket.timeout, paramiko.SSHException) as exc:
        raise UnreachableHost(f"cannot reach {spec.alias} ({spec.hostname}:{spec.port}): {exc}") from None
    transport = client.get_transport()
    if transport is not None:
        transport.set_keepalive(KEEPALIVE_SECONDS)
    return client
