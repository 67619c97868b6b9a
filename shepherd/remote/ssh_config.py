"""Where a HOST really is, read from the user's OpenSSH client configuration.

`fray ... --remote gpu-login` must reach the same machine `ssh gpu-login`
does: Host aliases, HostName, User, Port, IdentityFile, ProxyJump,
UserKnownHostsFile and ConnectTimeout come from ~/.ssh/config (or the file
FRAY_SSH_CONFIG names). `user@host:port` on the command line wins over it.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_CONNECT_TIMEOUT = 15.0


@dataclass(frozen=True)
class HostSpec:
    alias: str  # what the user typed, used in messages and as the cache key
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()
    proxy_jump: str | None = None
    known_hosts: tuple[str, ...] = field(default_factory=tuple)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def known_hosts_name(self) -> str:
        """The name known_hosts files it under: `host`, or `[host]:port` off port 22."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def config_path() -> Path:
    return Path(os.environ.get("FRAY_SSH_CONFIG") or Path.home() / ".ssh" / "config")


def split_target(target: str) -> tuple[str | None, str, int | None]:
    """`user@host:port` -> (user, host, port); each part but host optional."""
    user, _, rest = target.rpartition("@")
    host, port = rest, None
    if rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
        port = int(port_text) if port_text.isdigit() else None
    return (user or None), host, port


def resolve(target: str) -> HostSpec:
    """The HostSpec for `target` after applying the ssh config file, if there is one."""
    user, alias, port = split_target(target)
    options: dict = {}
    path = config_path()
    if path.is_file():
        import paramiko  # lazy: only a remote command pays for it

        options = paramiko.SSHConfig.from_path(str(path)).lookup(alias)
    known = options.get("userknownhostsfile", "").split() or ["~/.ssh/known_hosts"]
    proxy = options.get("proxyjump")
    return HostSpec(
        alias=target,
        hostname=options.get("hostname", alias),
        port=port or int(options.get("port", 22)),
        user=user or options.get("user") or getpass.getuser(),
        identity_files=tuple(os.path.expanduser(p) for p in options.get("identityfile", [])),
        proxy_jump=None if proxy in (None, "none") else proxy,
        known_hosts=tuple(os.path.expanduser(p) for p in known),
        connect_timeout=float(options.get("connecttimeout", DEFAULT_CONNECT_TIMEOUT)),
    )
