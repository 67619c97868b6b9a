"""The SSH session to a host: the one owner of connecting, host keys, fray there, and master reuse.

Every remote path (the CLI's `--remote HOST`, `fray sync`, a many-cluster view,
RemoteCluster, the background master) goes through here, and only here are a
connection and a remote fray put together:

- `connect(target, home)` is the Session: the connection (fray.remote.connection:
  ~/.ssh/config, agent and keys, ProxyJump, timeouts) with the host-key policy
  (fray.remote.host_keys: an unknown or changed key is refused, never added), and
  the fray to run there (fray.remote.bootstrap: found, or installed from wheels
  made here). One per (host, remote home) per process: a submit that syncs and
  then runs probes the host once.
- a Session runs fray there with the remote FRAY_HOME and an empty FRAY_REMOTE
  (so a config file on the remote can never forward again), from a folder when
  asked: to a result, relayed as a stream, or on a PTY; and syncs a project.
- `run_fray` and `sync_project` ask a background master (fray.remote.master)
  first, like OpenSSH's ControlMaster; with none serving, this process connects
  and leaves one for the next command (unless FRAY_REMOTE_NO_MASTER is set).
  A master answers with one JSON line per request, over a Unix socket in a
  private folder: a master that died costs nothing but speed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fray.core.command_line import JSON_FLAG
from fray.errors import UsageError
from fray.remote import bootstrap, command, connection, sync
from fray.remote.command import Result
from fray.remote.errors import RemoteError
from fray.remote.sync import SyncResult

DEFAULT_TIMEOUT = 300.0
ENV_NO_MASTER = "FRAY_REMOTE_NO_MASTER"
REPLY_TIMEOUT_MARGIN = 30.0
SYNC_TIMEOUT = 600.0


@dataclass(frozen=True)
class Session:
    """An authenticated connection to a host, and the fray to run there."""

    target: str
    conn: connection.Connection
    fray: bootstrap.RemoteFray

    @property
    def env(self) -> dict[str, str]:
        return {"FRAY_HOME": self.fray.home, "FRAY_REMOTE": ""}

    def alive(self) -> bool:
        return self.conn.alive()

    def run(self, argv: Sequence[str], *, cwd: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """`fray *argv` there (in `cwd`), its output and exit code."""
        return command.run(self.conn, self._argv(argv, cwd), env=self.env, timeout=timeout)

    def stream(self, argv: Sequence[str], *, cwd: str | None = None) -> int:
        """`fray *argv` there, its output relayed here as it comes (no deadline); its exit code."""
        return command.stream(self.conn, self._argv(argv, cwd), env=self.env, out=sys.stdout.buffer,
                              err=sys.stderr.buffer)

    def terminal(self, argv: Sequence[str], *, cwd: str | None = None) -> int:
        """`fray *argv` there on a PTY wired to this terminal (a screen); its exit code."""
        from fray.remote import pty

        return pty.interactive(self.conn, self._argv(argv, cwd), self.env)

    def sync(self, project: Path, *, force: bool = False) -> SyncResult:
        """`project` copied to its code folder there (only what changed)."""
        return sync.sync(self.conn, project, sync.code_folder(self.fray.home, project), force=force)

    def _argv(self, argv: Sequence[str], cwd: str | None) -> list[str]:
        full = [self.fray.executable, *argv]
        return full if cwd is None else ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", cwd, *full]


_sessions: dict[tuple[str, str | None], Session] = {}


def connect(target: str, home: str | None = None) -> Session:
    """The session to `target` with the remote FRAY_HOME `home` (None: the remote's own), opened on first use."""
    existing = _sessions.get((target, home))
    if existing is not None and existing.alive():
        return existing
    conn = connection.connect(target)
    opened = Session(target, conn, bootstrap.ensure(conn, home))
    _sessions[(target, home)] = opened
    return opened


def reusing() -> bool:
    return not os.environ.get(ENV_NO_MASTER)


def run_fray(
    target: str,
    argv: Sequence[str],
    *,
    home: str | None = None,
    json: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    reuse: bool | None = None,
    cwd: str | None = None,
) -> Result:
    """Run `fray *argv` (with `--json` unless told not to) on `target`, from `cwd` there when given;
    its exit code is returned.

    `reuse` (default: unless FRAY_REMOTE_NO_MASTER is set) uses and leaves a background master.
    """
    args = list(argv)
    if json and JSON_FLAG not in args:
        args.append(JSON_FLAG)
    if reuse is None:
        reuse = reusing()
    if reuse:
        served = ask(target, home, args, timeout, cwd)
        if served is not None:
            return served
    result = connect(target, home).run(args, cwd=cwd, timeout=timeout)
    if reuse:
        spawn(target, home)
    return result


def sync_project(target: str, project: Path, *, home: str | None = None, force: bool = False) -> SyncResult:
    """`project` synced to its code folder on `target`, through the master when one serves."""
    reuse = reusing()
    if reuse:
        served = ask_sync(target, home, project, force)
        if served is not None:
            return served
    done = connect(target, home).sync(project, force=force)
    if reuse:
        spawn(target, home)
    return done


AF_UNIX_PATH_MAX = 107  # sun_path's 108 bytes less the terminating NUL


def socket_path(target: str, home: str | None) -> Path:
    """The master's socket for (target, remote home, ssh config): in XDG_RUNTIME_DIR, or /tmp where that
    is too long a path for AF_UNIX (a master that cannot bind would die unseen, and every command lose
    the reuse)."""
    key = json.dumps([target, home, os.environ.get("FRAY_SSH_CONFIG", "")])
    name = hashlib.sha256(key.encode()).hexdigest()[:16] + ".sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(runtime or "/tmp") / f"fray-ssh-{os.getuid()}" / name
    # The master binds a temporary name first (the suffix its pid, up to 7 digits: fray.remote.master).
    if runtime and len(os.fsencode(path.with_suffix(".4194304"))) > AF_UNIX_PATH_MAX:
        path = Path("/tmp") / f"fray-ssh-{os.getuid()}" / name
    return path


def ask(target: str, home: str | None, argv: list[str], timeout: float, cwd: str | None = None) -> Result | None:
    """The result of `argv` run by the master (in `cwd` there), or None when no master is serving."""
    request: dict[str, Any] = {"argv": argv, "timeout": timeout}
    if cwd is not None:
        request["cwd"] = cwd
    reply = _ask(target, home, request, timeout)
    if reply is None:
        return None
    return Result(reply["exit_code"], base64.b64decode(reply["stdout"]), base64.b64decode(reply["stderr"]))


def ask_sync(target: str, home: str | None, project: Path, force: bool) -> SyncResult | None:
    """The project synced by the master, or None when no master is serving."""
    reply = _ask(target, home, {"sync": {"project": str(project), "force": force}}, SYNC_TIMEOUT)
    if reply is None:
        return None
    done = reply["synced"]
    return SyncResult(done["remote_path"], done["tree_hash"], tuple(done["sent"]), tuple(done["removed"]),
                      done["bytes_sent"])


def _ask(target: str, home: str | None, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    path = socket_path(target, home)
    if not path.exists():
        return None
    try:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(timeout + REPLY_TIMEOUT_MARGIN)
            conn.connect(str(path))
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(read_line(conn))
    except (OSError, ValueError):
        return None  # gone or broken: the caller connects itself
    if "error" in reply:
        raise (UsageError if reply.get("kind") == "usage" else RemoteError)(reply["error"])
    return reply


_spawned: set[tuple[str, str | None]] = set()


def spawn(target: str, home: str | None) -> None:
    """Start a master for next time (once per process), detached; it serves once it has connected."""
    if (target, home) in _spawned:
        return
    _spawned.add((target, home))
    subprocess.Popen(
        [sys.executable, "-m", "fray.remote.master", target, home or ""],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )


def read_line(conn: socket.socket) -> bytes:
    """One request or reply of the master's protocol: bytes up to a newline (or the peer closing)."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return bytes(data)
