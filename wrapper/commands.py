"""Runtime commands from the workload's side: read them, stamp delivery, acknowledge.

`fray control tune|terminate|pause --in-process|resume RUN` writes an
envelope into the run's commands folder ($FRAY_COMMANDS_DIR); the workload
reads it with `report.commands()` and answers with `command.ack()`. Every
file there has one writer and is written once, so the login node and the
compute node never write the same file and need no lock between them:

    <id>.json            {id, type, issued_at, actor, payload}   the CLI (schemas/command.json)
    <id>.delivered.json  {id, delivered_at, attempt, host, pid}  the workload, when it first reads it
    <id>.ack.json        {id, acknowledged_at, ..., result}       the workload, when it has acted on it

A receipt is a job-side write: a superseded attempt writes none
(fray.wrapper.fence.guard raises `Superseded`). The receipts are created with link(2), so of two processes racing (two ranks
of one job) the first stamp stays. Delivery is at least once: a command that
is not acknowledged is read again by the next process that asks - after a
crash, the next attempt - but each process sees it once. `fray status` shows
the commands not yet acknowledged and how old they are.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from typing import Any

from . import contract, fence, records

_ID = re.compile(contract.COMMAND_ID_PATTERN)


def _attempt() -> int | None:
    value = os.environ.get(contract.ENV_ATTEMPT, "")
    return int(value) if value.isdigit() and int(value) >= 1 else None


def _receipt(command_id: str) -> dict[str, Any]:
    return {"id": command_id, "attempt": _attempt(), "host": socket.gethostname(), "pid": os.getpid()}


class Command:
    """One runtime command: `type` is tune, pause, resume or terminate; `payload` its settings."""

    def __init__(self, folder: str, envelope: dict[str, Any]) -> None:
        self.folder = folder
        self.id: str = envelope["id"]
        self.type: str = envelope["type"]
        self.issued_at: float = envelope["issued_at"]
        self.actor: dict[str, Any] = envelope.get("actor") or {}
        self.payload: dict[str, Any] = envelope["payload"]

    def __repr__(self) -> str:
        return f"Command(id={self.id!r}, type={self.type!r}, payload={self.payload!r})"

    def path(self, suffix: str) -> str:
        return os.path.join(self.folder, self.id + suffix)

    @property
    def acknowledged(self) -> bool:
        return os.path.exists(self.path(contract.ACK_SUFFIX))

    def mark_delivered(self) -> bool:
        """Stamp <id>.delivered.json unless an earlier reader did; True if this call did."""
        receipt = {**_receipt(self.id), "delivered_at": time.time()}
        fence.guard()
        return records.create_json(self.path(contract.DELIVERED_SUFFIX), receipt)

    def ack(self, **result: Any) -> bool:
        """Say the command was acted on (`result`: anything JSON, e.g. applied=True); False if already acknowledged."""
        document = {**_receipt(self.id), "acknowledged_at": time.time(), "result": result}
        try:
            records.dumps(document)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"cannot acknowledge {self.id} with this result: {exc}; use JSON values") from None
        fence.guard()
        return records.create_json(self.path(contract.ACK_SUFFIX), document)


def _envelope(path: str) -> dict[str, Any] | None:
    """The envelope at `path` if it is one the workload can act on; a warning on stderr if not."""
    try:
        document = records.read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        print(f"fray report: ignoring the command {path}: {exc}", file=sys.stderr)
        return None
    if (
        not isinstance(document, dict)
        or document.get("type") not in contract.COMMAND_TYPES
        or not isinstance(document.get("payload"), dict)
        or not isinstance(document.get("issued_at"), (int, float))
        or document.get("id") != os.path.basename(path)[: -len(contract.COMMAND_SUFFIX)]
    ):
        print(f"fray report: ignoring the command {path}: not a command envelope (schemas/command.json)",
              file=sys.stderr)
        return None
    return document


def pending(folder: str) -> list[Command]:
    """Commands in `folder` not yet acknowledged, oldest first."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[Command] = []
    for name in names:
        command_id = name[: -len(contract.COMMAND_SUFFIX)]
        # Receipts (<id>.ack.json) and temp files (.<name>.tmp-...) have dots an id cannot have.
        if not name.endswith(contract.COMMAND_SUFFIX) or not _ID.fullmatch(command_id):
            continue
        if os.path.exists(os.path.join(folder, command_id + contract.ACK_SUFFIX)):
            continue
        envelope = _envelope(os.path.join(folder, name))
        if envelope is not None:
            found.append(Command(folder, envelope))
    found.sort(key=lambda c: (c.issued_at, c.id))
    return found
