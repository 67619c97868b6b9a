"""The log of every control action: whether its hash chain is intact, and its latest entries."""

from __future__ import annotations

from typing import Any

from fray.state import audit, store
from fray.state.layout import Home


def verify_view(home: Home) -> dict[str, Any]:
    """Whether any line of audit.jsonl was edited, removed or inserted (schemas/cli-audit-verify.json)."""
    count, problems = audit.verify_lines(home)
    return {"path": str(home.audit), "lines": count, "ok": not problems, "problems": problems,
            "first_bad_line": int(problems[0].split(":")[0].split()[1]) if problems else None}


def show_view(home: Home, limit: int) -> dict[str, Any]:
    """The latest `limit` actions, newest last, and the lines that could not be read (schemas/cli-audit-show.json)."""
    lines = list(store.read_jsonl(home.audit, "audit"))
    entries = [line.record for line in lines if line.record is not None]
    unreadable = [f"line {line.line_no}: {line.problem}" for line in lines if line.record is None]
    return {"path": str(home.audit), "entries": entries[-limit:] if limit > 0 else [], "unreadable": unreadable}
