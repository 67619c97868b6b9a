"""A small background master per host, so the next command reuses its connection.

Like OpenSSH's ControlMaster: after a command has connected, a detached
`python -m fray.remote.master HOST HOME` holds one authenticated connection
(and the remote fray it found) and serves later commands over a Unix socket
in a private folder; it exits after IDLE_SECONDS without a request. A command
that finds no master connects itself, so a master that died costs nothing but
speed. Requests and replies are one JSON line each: `{"argv", "timeout",
"cwd"?}` runs fray there (in `cwd`: the synced copy a submit runs in);
`{"sync": {"project", "force"}}` syncs a local project folder (this user's, on
this machine, as the master is) to its code folder there.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from fray.errors import UsageError
from fray.remote import bootstrap, command, sync
from fray.remote.command import Result
from fray.remote.connection import connect
from fray.remote.errors import RemoteError

IDLE_SECONDS = 60.0
REPLY_TIMEOUT_MARGIN = 30.0
SYNC_TIMEOUT = 600.0


def socket_path(target: str, home: str | None) -> Path:
    """The master's socket for (target, remote home, ssh config): short enough for AF_UNIX."""
    key = json.dumps([target, home, os.environ.get("FRAY_SSH_CONFIG", "")])
    folder = Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / f"fray-ssh-{os.getuid()}"
    return folder / (hashlib.sha256(key.encode()).hexdigest()[:16] + ".sock")


def ask(target: str, home: str | None, argv: list[str], timeout: float, cwd: str | None = None) -> Result | None:
    """The result of `argv` run by the master (in `cwd` there), or None when no master is serving."""
    request: dict[str, Any] = {"argv": argv, "timeout": timeout}
    if cwd is not None:
        request["cwd"] = cwd
    reply = _ask(target, home, request, timeout)
    if reply is None:
        return None
    return Result(reply["exit_code"], base64.b64decode(reply["stdout"]), base64.b64decode(reply["stderr"]))


def ask_sync(target: str, home: str | None, project: Path, force: bool) -> sync.SyncResult | None:
    """The project synced by the master, or None when no master is serving."""
    reply = _ask(target, home, {"sync": {"project": str(project), "force": force}}, SYNC_TIMEOUT)
    if reply is None:
        return None
    done = reply["synced"]
    return sync.SyncResult(done["remote_path"], done["tree_hash"], tuple(done["sent"]), tuple(done["removed"]),
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
            reply = json.loads(_read_line(conn))
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


def serve(target: str, home: str | None) -> None:
    conn = connect(target)
    remote = bootstrap.ensure(conn, home)
    path = socket_path(target, home)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path.parent, 0o700)  # only this user may ask the master to run anything
    listener = socket.socket(socket.AF_UNIX)
    temporary = path.with_suffix(f".{os.getpid()}")
    listener.bind(str(temporary))
    listener.listen(16)
    os.replace(temporary, path)  # atomically: a client never sees a socket not yet listening
    mine = os.stat(path).st_ino
    listener.settimeout(IDLE_SECONDS)
    try:
        while conn.alive():
            try:
                client, _ = listener.accept()
            except socket.timeout:
                break  # idle: let the connection go
            with client:
                _handle(client, conn, remote)
    finally:
        listener.close()
        try:
            if os.stat(path).st_ino == mine:  # not a newer master's socket
                path.unlink()
        except OSError:
            pass


def _handle(client: socket.socket, conn, remote: bootstrap.RemoteFray) -> None:  # noqa: ANN001
    client.settimeout(10)
    reply: dict[str, Any]
    try:
        request = json.loads(_read_line(client))
        if "sync" in request:
            project = Path(request["sync"]["project"])
            done = sync.sync(conn, project, sync.code_folder(remote.home, project), force=bool(request["sync"]["force"]))
            reply = {"synced": {**dataclasses.asdict(done), "sent": list(done.sent), "removed": list(done.removed)}}
        else:
            result = command.run(conn, in_folder([remote.executable, *request["argv"]], request.get("cwd")),
                                 env={"FRAY_HOME": remote.home, "FRAY_REMOTE": ""}, timeout=float(request["timeout"]))
            reply = {
                "exit_code": result.exit_code,
                "stdout": base64.b64encode(result.stdout).decode(),
                "stderr": base64.b64encode(result.stderr).decode(),
            }
    except UsageError as exc:
        reply = {"error": str(exc), "kind": "usage"}
    except RemoteError as exc:
        reply = {"error": str(exc)}
    except (OSError, ValueError, KeyError):
        return
    try:
        client.sendall(json.dumps(reply).encode() + b"\n")
    except OSError:
        pass


def in_folder(argv: list[str], cwd: str | None) -> list[str]:
    """`argv`, run from `cwd` on the remote when one is given."""
    return argv if cwd is None else ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", cwd, *argv]


def _read_line(conn: socket.socket) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return bytes(data)


if __name__ == "__main__":
    try:
        serve(sys.argv[1], sys.argv[2] or None)
    except RemoteError:
        sys.exit(255)
