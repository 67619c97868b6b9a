"""audit.jsonl: every control action, hash-chained so an edit or a gap shows.

Each line carries the hash of the previous line; `verify` walks the chain.
Shared by every CLI and TUI process, so appends happen under locks/audit.lock.
"""

from __future__ import annotations

import getpass
import hashlib
import socket
import time
from typing import Any

import orjson

from shepherd import store
from shepherd.layout import Home

GENESIS = "0" * 64


def record(home: Home, action: str, run_id: str | None, details: dict[str, Any] | None = None) -> dict[str, Any]:
    with store.lock(home, "audit"):
        previous = _last_hash(home)
        entry: dict[str, Any] = {
            "at": time.time(), "user": getpass.getuser(), "host": socket.gethostname(),
            "action": action, "run_id": run_id, "details": details or {}, "prev": previous,
        }
        entry["hash"] = _digest(entry)
        store.append_jsonl(home.audit, entry, "audit")
    return entry


def verify(home: Home) -> list[str]:
    """Every break in the chain, as 'line N: problem' (empty when intact)."""
    problems: list[str] = []
    previous = GENESIS
    for line in store.read_jsonl(home.audit, "audit"):
        if line.record is None:
            problems.append(f"line {line.line_no}: {line.problem}")
            previous = ""
            continue
        entry = line.record
        if entry["prev"] != previous:
            problems.append(f"line {line.line_no}: does not follow the line before it")
        if entry["hash"] != _digest({k: v for k, v in entry.items() if k != "hash"}):
            problems.append(f"line {line.line_no}: its content does not match its hash")
        previous = entry["hash"]
    return problems


def _last_hash(home: Home) -> str:
    try:
        with open(home.audit, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return GENESIS
    for raw in reversed(lines):
        try:
            return orjson.loads(raw)["hash"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
    return GENESIS


def _digest(entry: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)).hexdigest()
