"""audit.jsonl: every control action, hash-chained so an edit or a gap shows.

Each line carries `prev_hash` (the previous line's `entry_hash`) and its own
`entry_hash`, a SHA-256 over its canonical JSON (sorted keys, without
entry_hash); `verify` walks the chain and names every line that breaks it.
Shared by every CLI and TUI process, so appends happen under locks/audit.lock.
"""

from __future__ import annotations

import getpass
import hashlib
import socket
import time
from typing import Any

import orjson

from fray.state import store
from fray.state.layout import Home

GENESIS = "0" * 64


def record(home: Home, action: str, run_id: str | None, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return record_many(home, action, [run_id], details)[0]


def record_many(home: Home, action: str, run_ids: list[str | None],
                details: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One line per run, chained, appended under one lock in one write (a group's request: 10,000 lines)."""
    if not run_ids:
        return []
    user, host = getpass.getuser(), socket.gethostname()
    with store.lock(home, "audit"):
        previous = _last_hash(home)
        entries = []
        for run_id in run_ids:
            entry: dict[str, Any] = {"at": time.time(), "user": user, "host": host, "action": action,
                                     "run_id": run_id, "details": details or {}, "prev_hash": previous}
            entry["entry_hash"] = previous = _digest(entry)
            entries.append(entry)
        store.append_jsonl_lines(home.audit, entries, "audit")
    return entries


def verify(home: Home) -> list[str]:
    """Every break in the chain, as 'line N: problem' (empty when intact)."""
    return verify_lines(home)[1]


def verify_lines(home: Home) -> tuple[int, list[str]]:
    """(lines read, every break in the chain as 'line N: problem')."""
    problems: list[str] = []
    previous = GENESIS
    count = 0
    for line in store.read_jsonl(home.audit, "audit"):
        count += 1
        if line.record is None:
            problems.append(f"line {line.line_no}: {line.problem}")
            previous = ""
            continue
        entry = line.record
        if entry["prev_hash"] != previous:
            problems.append(f"line {line.line_no}: does not follow the line before it (prev_hash differs)")
        if entry["entry_hash"] != _digest({k: v for k, v in entry.items() if k != "entry_hash"}):
            problems.append(f"line {line.line_no}: its content does not match its entry_hash")
        previous = entry["entry_hash"]
    return count, problems


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
            return orjson.loads(raw)["entry_hash"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
    return GENESIS


def _digest(entry: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)).hexdigest()
