"""A run as one row of `fray list` (schemas/cli-list.json), from what was read: pure.

The list, the dashboard (which keeps the inputs and recomputes rows as time
passes) and the daemon's alert payloads all build rows here, so they agree.
"""

from __future__ import annotations

from typing import Any

from fray.core.model import Meta
from fray.core.status import RunStatus, heartbeat_age, normalized_status


def row_of(run_id: str, meta: Meta | None, paused: bool, problem: str | None, heartbeat_at: float | None,
           progress: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """A row from what was read (pure): the TUI keeps these inputs and recomputes rows as time passes."""
    if meta is None:
        st = normalized_status(None, None, now, problem)
        return {"run_id": run_id, "name": run_id, "status": st.status.value, "icon": st.icon,
                "reason": st.reason, "mode": None, "backend": None, "phase": None,
                "attempt": None, "node": None, "created_at": None, "uptime_sec": None, "heartbeat_age_sec": None,
                "step": None, "loss": None, "paused": paused, "priority": None}
    attempt = meta.in_flight
    st: RunStatus = normalized_status(meta, heartbeat_at, now, problem, progress, paused)
    current = meta.current
    started = attempt.started_at if attempt else None
    age = heartbeat_age(meta, heartbeat_at, now)
    return {
        "run_id": meta.run_id, "name": meta.name, "status": st.status.value, "icon": st.icon, "reason": st.reason,
        "mode": meta.spec.mode, "backend": meta.spec.backend, "phase": meta.phase,
        "attempt": current.number if current else None,
        "node": current.node if current else None,
        "created_at": meta.created_at,
        "uptime_sec": round(now - started, 3) if started else None,
        "heartbeat_age_sec": round(age, 3) if age is not None else None,
        "step": (progress or {}).get("step"), "loss": (progress or {}).get("loss"),
        "paused": paused,
        "parent_run_id": meta.parent_run_id,
        "priority": meta.spec.priority,
        "group": _group(meta.group),
        **({"after": [_edge(u) for u in meta.spec.after]} if meta.spec.after else {}),
    }


def _edge(upstream: dict[str, Any]) -> dict[str, Any]:
    """One dependency edge (--after): the upstream run or sweep group, its name and the condition."""
    target = {"run_id": upstream["run_id"]} if upstream.get("run_id") else {"group": upstream["group"]}  # edge_key's two forms
    return {**target, "name": upstream["name"], "on": upstream["on"]}


def _group(group: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a listing needs of the run's group: which one, what kind, and where the run is in it."""
    if group is None:
        return None
    return {"id": group["id"], "kind": group.get("kind", "gang"), "name": group.get("name", group["id"]),
            "index": group["index"], "size": group["size"]}
