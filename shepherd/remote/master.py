"""The background master: one SSH session held for the next commands to reuse.

Like OpenSSH's ControlMaster: after a command has connected, a detached
`python -m fray.remote.master HOST HOME` (started by fray.remote.session.spawn)
holds one Session (the connection and the remote fray it found) and serves
later commands over a Unix socket in a private folder; it exits after
IDLE_SECONDS without a request. Requests and replies are one JSON line each
(fray.remote.session asks): `{"argv", "timeout", "cwd"?}` runs fray there (in
`cwd`: the synced copy a submit runs in); `{"sync": {"project", "force"}}`
syncs a local project folder (this user's, on this machine, as the master is)
to its code folder there.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from fray.errors import UsageError
from fray.remote import session
from fray.remote.errors import RemoteError

IDLE_SECONDS = 60.0


def serve(target: str, home: str | None) -> None:
    held = session.connect(target, home)
    path = session.socket_path(target, home)
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
        while held.alive():
            try:
                client, _ = listener.accept()
            except socket.timeout:
                break  # idle: let the connection go
            with client:
                _handle(client, held)
    finally:
        listener.close()
        try:
            if os.stat(path).st_ino == mine:  # not a newer master's socket
                path.unlink()
        except OSError:
            pass


def _handle(client: socket.socket, held: session.Session) -> None:
    client.settimeout(10)
    reply: dict[str, Any]
    try:
        request = json.loads(session.read_line(client))
        if "sync" in request:
            done = held.sync(Path(request["sync"]["project"]), force=bool(request["sync"]["force"]))
            reply = {"synced": {**dataclasses.asdict(done), "sent": list(done.sent), "removed": list(done.removed)}}
        else:
            result = held.run(request["argv"], cwd=request.get("cwd"), timeout=float(request["timeout"]))
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


if __name__ == "__main__":
    try:
        serve(sys.argv[1], sys.argv[2] or None)
    except RemoteError:
        sys.exit(255)
