"""Running fray on a cluster's login node over SSH (`--remote HOST`).

The transport sits beside the backends: it knows SSH, the remote fray and the
project folder, and nothing of the front ends. Modules by job:

    ssh_config   where HOST really is (~/.ssh/config: HostName, User, Port, IdentityFile, ProxyJump)
    host_keys    host keys checked against known_hosts; `trust` adds one on purpose, `--replace` swaps it
    connection   one paramiko client per host, agent and default keys, timeouts, ProxyJump
    command      quoting an argv and running `fray ... --json` remotely, exit codes kept
    files        the remote's files over SFTP, or over exec channels where sshd has no SFTP
    sync         the project folder copied by content hash, ignore rules, a size guard
    submit_args  a remote submit's SCRIPT named inside the synced copy
    wheels       the wheels an install needs (fray's, its dependencies', pip's), made once and cached here
    bootstrap    fray found on the remote, or installed from those wheels
    session      the one owner of the SSH session: connection, host keys, bootstrap, master reuse;
                 every remote path (the CLI, sync, RemoteCluster, the master) goes through it
    master       the background process that holds a session for the next commands
    pty          a remote screen on this terminal
    forward      which host a command runs on, and running it there (`--remote HOST`)
    clusters     every cluster in one view (`--remote a,b`, `--remote all`, `remotes`)
    user_config  ~/.config/fray/config.toml: the default host, the hosts to span, remote homes
    errors       what goes wrong, said so a person can act on it

paramiko is imported only when a connection is made, so commands that never
go remote start as fast as before.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RemoteError"]


def __getattr__(name: str) -> Any:
    """`fray.remote.RemoteError`, loaded when asked for (PEP 562): every command asks fray.remote.forward
    whether it runs here, and `fray list` and `fray status` never need the errors (nor their shlex)."""
    if name == "RemoteError":
        from fray.remote.errors import RemoteError

        return RemoteError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
