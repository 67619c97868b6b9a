"""Runtime commands from the login side: check them, write each once, audit, read them back.

`fray control tune|terminate|pause --in-process|resume RUN` ends here. A
command is an envelope `{id, type, issued_at, actor{type,id}, payload}`
written once, by the CLI, as runs/<id>/commands/<id>.json
(schemas/command.json); the workload reads it and writes the receipts
(<id>.delivered.json, <id>.ack.json) through fray.wrapper.report - see
fray.wrapper.commands for who writes what. Issuing the same id again is
idempotent: the same command is a no-op, a different one is refused.
`views.commands_view` reads them back for `fray status`.

    problems(type, payload)  -> every violated field, named (pure)
    parse_settings(["learning_rate=1e-4", ...]) -> (payload, problems) (pure)
    issue(home, run_id, type, payload, command_id) -> (envelope, created)   UsageError (exit 2)
"""

from __future__ import annotations

import difflib
import getpass
import math
import re
import secrets
import time
from typing import Any

from fray.state import audit, runs, store
from fray.errors import UsageError
from fray.state.layout import Home
from fray.core.model import Phase
from fray.wrapper import contract

# tune: field -> (low, low_inclusive, high); every bound is inclusive but learning_rate's low.
TUNE_BOUNDS: dict[str, tuple[float, bool, float]] = {
    "learning_rate": (0.0, False, 1.0),
    "entropy_coef": (0.0, True, 0.1),
    "clip_epsilon": (0.05, True, 0.3),
}
NOTES_MAX = 1024
REASON_MAX = 256
FIELDS: dict[str, tuple[str, ...]] = {
    "tune": (*TUNE_BOUNDS, "notes"),
    "terminate": ("reason", "final_checkpoint"),
    "pause": ("reason",),
    "resume": ("reason",),
}
_ID = re.compile(contract.COMMAND_ID_PATTERN)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text_problem(name: str, value: Any, limit: int, required: bool) -> str | None:
    if not isinstance(value, str):
        return f"{name}: must be text, not {value!r}"
    if required and not value.strip():
        return f"{name}: must not be empty"
    if len(value) > limit:
        return f"{name}: at most {limit} characters, not {len(value)}"
    return None


def problems(command_type: str, payload: dict[str, Any]) -> list[str]:
    """Every way `payload` is not a valid `command_type` command, each naming its field."""
    if command_type not in FIELDS:
        return [f"type: {command_type!r} is not one of {', '.join(contract.COMMAND_TYPES)}"]
    found: list[str | None] = []
    for name in payload:
        if name not in FIELDS[command_type]:
            guess = difflib.get_close_matches(name, FIELDS[command_type], n=1)
            hint = f"did you mean {guess[0]}? " if guess else ""
            found.append(f"{name}: not a {command_type} field; {hint}valid: {', '.join(FIELDS[command_type])}")
    if command_type == "tune":
        for name, (low, inclusive, high) in TUNE_BOUNDS.items():
            if name not in payload:
                continue
            value = payload[name]
            if not _is_number(value) or not (value >= low if inclusive else value > low) or value > high:
                shown = f"{low:g} {'<=' if inclusive else '<'} {name} <= {high:g}"
                found.append(f"{name}: must be a number with {shown}, not {value!r}")
        if not any(name in payload for name in TUNE_BOUNDS):
            found.append(f"tune needs at least one of {', '.join(TUNE_BOUNDS)}")
        if "notes" in payload:
            found.append(_text_problem("notes", payload["notes"], NOTES_MAX, required=False))
    elif command_type == "terminate":
        if "reason" not in payload:
            found.append("reason: required (say why, in at most 256 characters)")
        else:
            found.append(_text_problem("reason", payload["reason"], REASON_MAX, required=True))
        if "final_checkpoint" in payload and not isinstance(payload["final_checkpoint"], bool):
            found.append(f"final_checkpoint: must be true or false, not {payload['final_checkpoint']!r}")
    elif "reason" in payload:
        found.append(_text_problem("reason", payload["reason"], REASON_MAX, required=False))
    return [p for p in found if p]


def parse_settings(pairs: list[str]) -> tuple[dict[str, Any], list[str]]:
    """`KEY=VALUE` settings of `fray control tune --set` as a payload: numbers as numbers, notes as text."""
    payload: dict[str, Any] = {}
    found: list[str] = []
    for pair in pairs:
        key, has_value, raw = pair.partition("=")
        key = key.strip()
        if not has_value or not key:
            found.append(f"--set {pair!r}: expected KEY=VALUE, like learning_rate=1e-4")
            continue
        if key in payload:
            found.append(f"{key}: set twice; keep one")
            continue
        if key == "notes" or key not in TUNE_BOUNDS:
            payload[key] = raw  # problems() names an unknown key
            continue
        try:
            payload[key] = float(raw)
        except ValueError:
            found.append(f"{key}: must be a number, not {raw!r}")
    return payload, found


def new_id(now: float) -> str:
    """Sortable and unique: `<UTC time>-<6 hex>`."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}-{secrets.token_hex(3)}"


def issue(home: Home, run_id: str, command_type: str, payload: dict[str, Any], command_id: str | None = None,
          now: float | None = None, found: list[str] | None = None) -> tuple[dict[str, Any], bool]:
    """Write the command for the workload of `run_id`; (envelope, False) when this id already said the same.

    `found`: problems the caller met already (parsing `--set`), reported with the rest.
    """
    now = time.time() if now is None else now
    found = [*(found or []), *problems(command_type, payload)]
    if command_id is not None and not _ID.fullmatch(command_id):
        found.insert(0, f"id: {command_id!r} must be 1-64 letters, digits, _ or -, starting with a letter or digit")
    if found:
        raise UsageError(f"invalid {command_type} command:\n  - " + "\n  - ".join(found))
    meta = runs.read_meta(home, run_id)
    if meta.phase == Phase.ENDED.value:
        raise UsageError(f"run {run_id} has ended ({meta.end.status if meta.end else 'ended'}); no workload will read "
                         "this command. `fray control start` runs it again")
    command_id = command_id or new_id(now)
    paths = home.run(run_id)
    envelope = {"id": command_id, "type": command_type, "issued_at": now,
                "actor": {"type": "user", "id": getpass.getuser()}, "payload": payload}
    store.make_dirs(paths.commands_dir)
    created = store.create_json(paths.command(command_id), envelope, "command")
    if not created:
        existing = store.read_json(paths.command(command_id), "command")
        if existing is None or (existing["type"], existing["payload"]) != (command_type, payload):
            raise UsageError(f"command id {command_id} was already used for another command "
                             f"({existing['type'] if existing else 'unreadable'}); choose another --id")
        envelope = existing
    audit.record(home, f"command.{command_type}", run_id,
                 {"id": command_id, "payload": payload, **({} if created else {"duplicate": True})})
    return envelope, created

