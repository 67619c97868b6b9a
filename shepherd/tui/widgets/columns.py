"""The runs table's columns (pure): which fit a width, how cells read, how rows sort.

Cells are formatted by the words every front end shares (fray.ops.human), so the
table reads like `fray list`. Columns drop out by priority on a narrow
terminal (80 columns keeps the icon, name, status, node, attempt, ages and the
reason) and the reason takes the room a wide terminal gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from fray.core.status import Status
from fray.ops import human

Row = dict[str, Any]
GAP = 1
STATUS_ORDER = {status.value: index for index, status in enumerate(
    [Status.ERROR_UNKNOWN, Status.FAILED_CONFIG, Status.FAILED, Status.FAILED_DEPENDENCY, Status.CRASH_LOOP,
     Status.UNRESPONSIVE, Status.RUNNING_DEGRADED, Status.RESTARTING, Status.PENDING, Status.HEALTHY_RUNNING,
     Status.STOPPED_MANUAL, Status.ENDED_EXPIRED, Status.COMPLETED_SUCCESS])}


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int  # natural width (the name column grows to its longest value, up to max_width)
    priority: int  # 0 always shown; higher numbers drop out first on narrow terminals
    align: str = "<"
    min_width: int = 0
    max_width: int = 0
    flex: bool = False  # takes the width that is left


COLUMNS: tuple[Column, ...] = (
    Column("icon", "", 1, 0),
    Column("name", "NAME", 12, 0, min_width=12, max_width=28),
    Column("mode", "MODE", 10, 6),
    Column("status", "STATUS", 17, 0),
    Column("node", "NODE", 10, 1, min_width=8, max_width=20),
    Column("attempt", "#", 3, 1, ">"),
    Column("uptime", "UPTIME", 6, 2, ">"),
    Column("heartbeat", "BEAT", 6, 2, ">"),
    Column("step", "STEP", 7, 3, ">"),
    Column("loss", "LOSS", 7, 4, ">"),
    Column("where", "WHERE", 8, 5, max_width=14),
    Column("reason", "REASON", 16, 1, min_width=16, flex=True),
)
# Shown first when the dashboard spans clusters (fray.ops.remote_runs): which cluster holds the run.
CLUSTER = Column("cluster", "CLUSTER", 7, 0, min_width=5, max_width=12)
REASON_WANTS = 30  # columns of lower priority give way until the reason has this much room
SORTS = ("created", "name", "status", "node", "attempt", "uptime", "heartbeat", "step", "loss", "mode", "where")


def cells_of(row: Row) -> dict[str, str]:
    """The text of each cell of a row (as `fray list` writes it)."""
    status = row["status"]
    if row.get("paused") and row.get("phase") != "ended":
        status += " (paused)"
    return {
        "cluster": row.get("cluster") or "local",
        "icon": row["icon"], "name": " ".join(filter(None, (row["name"], human.edges(row.get("after"))))), "mode": row.get("mode") or human.MISSING, "status": status,
        "node": row.get("node") or human.MISSING, "attempt": human.number(row.get("attempt")),
        "uptime": human.duration(row.get("uptime_sec")), "heartbeat": human.duration(row.get("heartbeat_age_sec")),
        "step": human.number(row.get("step")), "loss": human.number(row.get("loss")),
        "where": row.get("where") or row.get("backend") or human.MISSING,
        "reason": (row.get("reason") or "").replace("\n", " "),
    }


def sort_key(name: str) -> Callable[[Row], Any]:
    def missing_last(value: Any) -> tuple[int, Any]:
        return (1, 0) if value is None else (0, value)

    if name == "created":
        return lambda r: (r.get("created_at") or 0.0, r["run_id"])
    if name == "status":
        return lambda r: (STATUS_ORDER.get(r["status"], 99), r["run_id"])
    if name == "name":
        return lambda r: (r["name"].lower(), r["run_id"])
    field = {"uptime": "uptime_sec", "heartbeat": "heartbeat_age_sec"}.get(name, name)
    return lambda r: (missing_last(r.get(field)), r["run_id"])


def layout(columns: tuple[Column, ...], width: int, name_width: int, node_width: int = 10) -> list[tuple[Column, int]]:
    """The columns that fit in `width`, with their widths, in display order.

    Columns are taken by priority while their minimum widths fit; then the
    least important columns give way until the reason has REASON_WANTS and the
    name and node their natural width (their longest value, capped); the
    reason takes whatever is left.
    """
    natural = {c.key: c.width for c in columns}
    natural["name"] = max(12, min(name_width, 28))
    natural["node"] = max(8, min(node_width, 20))
    minimum = {c.key: c.min_width or natural[c.key] for c in columns}
    chosen: list[Column] = []
    for column in sorted(columns, key=lambda c: c.priority):
        need = sum(minimum[c.key] for c in chosen) + minimum[column.key] + GAP * len(chosen)
        if need <= width or column.priority == 0:
            chosen.append(column)

    def spare_of(picked: list[Column]) -> int:
        return width - sum(minimum[c.key] for c in picked) - GAP * (len(picked) - 1)

    flex = next((c for c in chosen if c.flex), None)

    def wanted(picked: list[Column]) -> int:
        keys = {c.key for c in picked}
        extra = sum(natural[k] - minimum[k] for k in ("name", "node") if k in keys)
        return extra + (REASON_WANTS - minimum[flex.key] if flex is not None else 0)

    while flex is not None and spare_of(chosen) < wanted(chosen):
        droppable = [c for c in chosen if c.priority >= 4]
        if not droppable:
            break
        chosen.remove(max(droppable, key=lambda c: (c.priority, columns.index(c))))
    ordered = [c for c in columns if c in chosen]
    widths = {c.key: minimum[c.key] for c in ordered}
    spare = spare_of(ordered)
    if flex is not None and spare > 0:
        grow = min(spare, REASON_WANTS - widths[flex.key])
        if grow > 0:
            widths[flex.key] += grow
            spare -= grow
    for column in sorted(ordered, key=lambda c: c.key != "node"):  # node names matter for `b`: they grow first
        if spare <= 0:
            break
        if not column.flex and widths[column.key] < natural[column.key]:
            grow = min(spare, natural[column.key] - widths[column.key])
            widths[column.key] += grow
            spare -= grow
    if flex is not None and spare > 0:
        widths[flex.key] += spare
    return [(c, widths[c.key]) for c in ordered]


def fit(text: str, width: int, align: str) -> str:
    text = human.truncate(text, width)
    return text.rjust(width) if align == ">" else text.ljust(width)
