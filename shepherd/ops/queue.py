"""The queue: runs waiting for an attempt to start, in the order they will be tried, each with why it waits.

The dashboard's queue screen shows it over the rows it already holds (its
live RunsModel); without rows it is computed from `fray list`'s.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from fray.core.placement.priority import Band
from fray.core.status import Status
from fray.errors import CorruptFileError
from fray.ops.views import list_view
from fray.state import store
from fray.state.layout import Home

WAITING_STATUSES = frozenset({Status.PENDING.value, Status.RESTARTING.value, Status.CRASH_LOOP.value})
_BAND_ORDER = {band.label: band.value for band in Band}


def queue_view(home: Home, rows: Iterable[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Runs waiting for an attempt to start, in the order they will be tried, each with why it waits.

    First those already handed to a backend (its queue decides), then the queued
    ones as the daemon admits them: by priority band (production, interactive,
    batch), oldest first within a band, those backing off when their delay is
    over, paused ones only after unpause. `rows` (any runs' rows, from
    list_view or the TUI) saves reading every run again; only the waiting runs' meta is read.
    """
    now = time.time()
    rows = list_view(home, include_ended=False, fold=False)["runs"] if rows is None else rows
    waiting = []
    for row in rows:
        submitted = row["phase"] == "active" and row["status"] in WAITING_STATUSES
        if row["phase"] != "queued" and not submitted:
            continue
        try:
            raw = store.read_json(home.run(row["run_id"]).meta, "meta") or {}
        except CorruptFileError:
            raw = {}
        next_at = raw.get("next_attempt_at")
        if submitted:
            why, rank = f"submitted, waiting for {row['backend']} to start it: {row['reason']}", 0
        elif row["paused"]:
            why, rank = "paused: no attempt starts until unpause", 3
        elif next_at is not None and next_at > now:
            why, rank = f"backing off after failures: next attempt in {next_at - now:.0f}s", 2
        else:
            why, rank = raw.get("wait_reason") or row["reason"], 1
        band = _BAND_ORDER.get(row.get("priority") or "", len(_BAND_ORDER))
        order = (rank, band if rank == 1 else 0, next_at if rank == 2 else 0.0, row["created_at"] or 0.0, row["run_id"])
        waiting.append((order, {"run_id": row["run_id"], "name": row["name"], "status": row["status"],
                                "icon": row["icon"], "attempt": row["attempt"], "backend": row["backend"],
                                "priority": row.get("priority"), "created_at": row["created_at"], "next_attempt_at": next_at, "reason": why}))
    waiting.sort(key=lambda pair: pair[0])
    queue = [{"position": position, **item} for position, (_, item) in enumerate(waiting, start=1)]
    return {"generated_at": now, "queue": queue}
