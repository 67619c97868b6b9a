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
from operator import itemgetter
from typing import Any, Iterable

from fray.core.status import ICONS, Status

Row = dict[str, Any]
KEY_PREFIX = "group:"
# Which member status a group row shows: the first here that any member has.
_SHOWN = [Status.ERROR_UNKNOWN, Status.CRASH_LOOP, Status.UNRESPONSIVE, Status.RUNNING_DEGRADED, Status.RESTARTING,
          Status.HEALTHY_RUNNING, Status.PENDING, Status.FAILED_CONFIG, Status.FAILED, Status.FAILED_DEPENDENCY,
          Status.STOPPED_MANUAL, Status.ENDED_EXPIRED, Status.COMPLETED_SUCCESS]
_ORDER = {status.value: index for index, status in enumerate(_SHOWN)}
_STATUS, _PHASE, _PAUSED = itemgetter("status"), itemgetter("phase"), itemgetter("paused")


def sweep_of(row: Row) -> dict[str, Any] | None:
    group = row.get("group")
    return group if group and group.get("kind") == "sweep" else None


def group_key(group_id: str) -> str:
    return KEY_PREFIX + group_id


def group_row(group: dict[str, Any], members: list[Row]) -> Row:
    """The row of a sweep from its members' rows (at least one)."""
    # Each member's fields through itemgetter (every run row has them): `fray list` folds 10,000 points here.
    counts = Counter(map(_STATUS, members))
    shown = min(counts, key=lambda status: _ORDER.get(status, len(_ORDER)))
    ordered = sorted(counts.items(), key=lambda item: _ORDER.get(item[0], len(_ORDER)))
    phases = set(map(_PHASE, members))
    phase = "ended" if phases == {"ended"} else "active" if "active" in phases else "queued"
    reason = f"{len(members)} runs: " + ", ".join(f"{n} {status}" for status, n in ordered)
    if len(members) < group["size"]:
        reason += f" ({group['size'] - len(members)} of {group['size']} missing)"
    first = min(members, key=lambda row: row.get("created_at") or 0.0)
    return {
        "kind": "group", "run_id": group_key(group["id"]), "group": group["id"], "name": group["name"],
        "size": group["size"], "counts": dict(ordered), "status": shown, "icon": ICONS[Status(shown)],
        "reason": reason, "phase": phase, "backend": first.get("backend"), "mode": first.get("mode"),
        "created_at": first.get("created_at"), "paused": all(map(_PAUSED, members)),
        "attempt": None, "node": None, "uptime_sec": None, "heartbeat_age_sec": None, "step": None, "loss": None,
    }


def fold(rows: Iterable[Row]) -> list[Row]:
    """The rows with each sweep's members replaced by its group row, where its first member was."""
    out: list[Row | str] = []
    members: dict[str, list[Row]] = {}
    groups: dict[str, dict[str, Any]] = {}
    last: Row | None = None
    into: list[Row] = []
    for row in rows:
        if row is last:  # points alike may share one row object (fray.state.list_summary): the same group again
            into.append(row)
            continue
        group = row.get("group")  # sweep_of, inline: `fray list` folds 10,000 rows, most in no group
        if not group or group.get("kind") != "sweep":
            out.append(row)
            continue
        if group["id"] not in members:
            out.append(group["id"])  # the group row goes here once its members are all seen
            members[group["id"]] = []
            groups[group["id"]] = group
        last, into = row, members[group["id"]]
        into.append(row)
    return [group_row(groups[item], members[item]) if isinstance(item, str) else item for item in out]


def members_of(rows: Iterable[Row], group_id: str) -> list[Row]:
    """A group's member rows in index order."""
    found = [row for row in rows if (row.get("group") or {}).get("id") == group_id]
    return sorted(found, key=lambda row: row["group"]["index"])


class Folder:
    """A live table's rows with each sweep folded, kept up to date from what changed (the dashboard).

    `apply` takes every run's row and which changed or went, and returns the
    rows to show (group rows instead of folded members) with which of those
    changed or went. A group in `expanded` shows its row and its members.
    """

    def __init__(self) -> None:
        self.expanded: set[str] = set()
        self._members: dict[str, dict[str, Row]] = {}  # group id -> run id -> row
        self._group_of: dict[str, str] = {}  # member run id -> group id
        self._groups: dict[str, dict[str, Any]] = {}
        self._rows: dict[str, Row] = {}  # group id -> its row
        self._shown: set[str] = set()

    def toggle(self, key: str) -> None:
        """Expand a folded group, or fold an expanded one (`key`: its row's run_id)."""
        group_id = key.removeprefix(KEY_PREFIX)
        self.expanded.symmetric_difference_update({group_id})

    def apply(self, rows: dict[str, Row], changed: set[str], removed: set[str]) -> tuple[dict[str, Row], set[str], set[str]]:
        touched: set[str] = set()
        for run_id in changed | removed:
            old = self._group_of.pop(run_id, None)
            if old is not None:
                self._members[old].pop(run_id, None)
                touched.add(old)
            row = rows.get(run_id)
            group = sweep_of(row) if row is not None and run_id not in removed else None
            if group is not None:
                self._group_of[run_id] = group["id"]
                self._members.setdefault(group["id"], {})[run_id] = row  # type: ignore[assignment]
                self._groups[group["id"]] = group
                touched.add(group["id"])
        for group_id in touched:
            members = self._members.get(group_id)
            if members:
                self._rows[group_id] = group_row(self._groups[group_id], list(members.values()))
            else:
                self._members.pop(group_id, None)
                self._rows.pop(group_id, None)
        shown = {run_id: row for run_id, row in rows.items()
                 if self._group_of.get(run_id) is None or self._group_of[run_id] in self.expanded}
        shown.update({group_key(group_id): row for group_id, row in self._rows.items()})
        keys = set(shown)
        out_changed = ({run_id for run_id in changed if run_id in keys} | {group_key(g) for g in touched if g in self._rows}
                       | (keys - self._shown))
        out_removed = self._shown - keys
        self._shown = keys
        return shown, out_changed, out_removed
