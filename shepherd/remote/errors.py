"""Errors of the SSH transport, each saying what to do next."""

from __future__ import annotations

import shlex

from fray.errors import FrayError


class RemoteError(FrayError):
    """Anything that kept a remote command from running (exit code 255, as ssh)."""

    exit_code = 255


class UnreachableHost(RemoteError):
    pass


class AuthenticationFailed(RemoteError):
    pass


class UnknownHostKey(RemoteError):
    """The host presented a key known_hosts does not list: refused, never added silently."""

    def __init__(self, host: str, key_type: str, fingerprint: str, known_hosts: str) -> None:
        self.host = host
        self.fingerprint = fingerprint
        super().__init__(
            f"host {host} is not in {known_hosts}; it presented a {key_type} key with fingerprint "
            f"{fingerprint}.\n  If that is the right fingerprint, trust it with: fray remote trust {shlex.quote(host)}"
        )


class ChangedHostKey(RemoteError):
    """The host presented a key different from the one known_hosts lists: possibly an attack."""

    def __init__(self, host: str, key_type: str, fingerprint: str, known_hosts: str, name: str) -> None:
        self.host = host
        self.fingerprint = fingerprint
        super().__init__(
            f"WARNING: THE HOST KEY OF {host} HAS CHANGED. Someone could be intercepting the "
            f"connection, or the host was reinstalled. It now presents a {key_type} key with "
            f"fingerprint {fingerprint}, which does not match {known_hosts}. Refusing to connect.\n"
            f"  If the change is expected (the host was reinstalled), compare the fingerprint with the one "
            f"its administrators publish, then replace the recorded key with:\n"
            f"    fray remote trust {shlex.quote(host)} --replace\n"
            f"  (or by hand: ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(known_hosts)} && "
            f"fray remote trust {shlex.quote(host)})"
        )


class RemoteCommandFailed(RemoteError):
    pass


class ConnectionDropped(RemoteError):
    pass


def from_transport(exc: BaseException, host: str) -> RemoteError | None:
    """A RemoteError for a failure of the link itself that escaped the layers that name their errors
    (paramiko's SSHException, an EOF or a reset mid-command); None for anything else."""
    import socket
    import sys

    paramiko = sys.modules.get("paramiko")
    link = (EOFError, socket.timeout, ConnectionError) + ((paramiko.SSHException,) if paramiko else ())
    if isinstance(exc, BrokenPipeError) or not isinstance(exc, link):
        return None
    return ConnectionDropped(f"the connection to {host} failed: {exc or type(exc).__name__}. Check that "
                             f"`ssh {host}` works, then run the command again.")
