"""A sweep folded into one row of a listing: its members' counts per status. Pure.

`fray list` and the dashboard show a sweep's runs as one row (`fold`) whose
status is the one that most needs a person among its members (a live one
before an ended one: a sweep still going reads as going), and whose reason
counts its members per status: `20 runs: 4 healthy_running, 15 pending, 1 failed`.
`fray list --group GROUP` shows the members themselves.

A group row has `kind: "group"`, the group's id in `group` and its name in
`name`; `run_id` is `group:<id>` (never a run id: those start with a date),
so tables keyed by run id hold it beside runs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from fray.core.status import ICONS, Status

Row = dict[str, Any]
KEY_PREFIX = "group:"
# Which member status a group row shows: the first here that any member has.
_SHOWN = [Status.ERROR_UNKNOWN, Status.CRASH_LOOP, Status.UNRESPONSIVE, Status.RUNNING_DEGRADED, Status.RESTARTING,
          Status.HEALTHY_RUNNING, Status.PENDING, Status.FAILED, Status.STOPPED_MANUAL, Status.ENDED_EXPIRED,
          Status.COMPLETED_SUCCESS]
_ORDER = {status.value: index for index, status in enumerate(_SHOWN)}


def sweep_of(row: Row) -> dict[str, Any] | None:
    group = row.get("group")
    return group if group and group.get("kind") == "sweep" else None


def group_key(group_id: str) -> str:
    return KEY_PREFIX + group_id


def group_row(group: dict[str, Any], members: list[Row]) -> Row:
    """The row of a sweep from its members' rows (at least one)."""
    counts = Counter(row["status"] for row in members)
    shown = min(counts, key=lambda status: _ORDER.get(status, len(_ORDER)))
    ordered = sorted(counts.items(), key=lambda item: _ORDER.get(item[0], len(_ORDER)))
    phases = {row.get("phase") for row in members}
    phase = "ended" if phases == {"ended"} else "active" if "active" in phases else "queued"
    reason = f"{len(members)} runs: " + ", ".join(f"{n} {status}" for status, n in ordered)
    if len(members) < group["size"]:
        reason += f" ({group['size'] - len(members)} of {group['size']} missing)"
    first = min(members, key=lambda row: row.get("created_at") or 0.0)
    return {
        "kind": "group", "run_id": group_key(group["id"]), "group": group["id"], "name": group["name"],
        "size": group["size"], "counts": dict(ordered), "status": shown, "icon": ICONS[Status(shown)],
        "reason": reason, "phase": phase, "backend": first.get("backend"), "mode": first.get("mode"),
        "created_at": first.get("created_at"), "paused": all(row.get("paused") for row in members),
        "attempt": None, "node": None, "uptime_sec": None, "heartbeat_age_sec": None, "step": None, "loss": None,
    }


def fold(rows: Iterable[Row]) -> list[Row]:
    """The rows with each sweep's members replaced by its group row, where its first member was."""
    out: list[Row | str] = []
    members: dict[str, list[Row]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        group = sweep_of(row)
        if group is None:
            out.append(row)
            continue
        if group["id"] not in members:
            out.append(group["id"])  # the group row goes here once its members are all seen
            members[group["id"]] = []
            groups[group["id"]] = group
        members[group["id"]].append(row)
    return [group_row(groups[item], members[item]) if isinstance(item, str) else item for item in out]


def members_of(rows: Iterable[Row], group_id: str) -> list[Row]:
    """A group's member rows in index order."""
    found = [row for row in rows if (row.get("group") or {}).get("id") == group_id]
    return sorted(found, key=lambda row: row["group"]["index"])
