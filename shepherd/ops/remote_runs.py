"""The other clusters' runs for the dashboard, and the dashboard's actions on a run where it lives.

The dashboard shows this machine's runs live (fray.ops.live) and, when it spans
clusters (`fray tui --remote a,b`, `--remote all`, the user config's `remotes`),
the runs of each host as `fray list` there gives them (fray.ops.clusters: asked
in parallel, each within the per-host timeout). Each host's rows are keyed
`@HOST/RUN_ID` (run ids are unique per FRAY_HOME only) and carry `cluster`; a
host that could not answer is one row of kind `cluster` saying why, listed first.

What the dashboard does to a host's run runs on that host, as `fray ... --remote
HOST` would: `status` for its screen, `logs`, `control OP` (a sweep's row:
`control OP --group`). A host that fails is a FrayError with its words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fray.errors import FrayError
from fray.ops import clusters as views
from fray.remote import clusters

LOCAL = clusters.LOCAL
KEY_PREFIX = "@"
LOG_LINES = 500  # what the logs screen of a host's run shows: the tail


@dataclass(frozen=True)
class RemoteRuns:
    """One asking of the hosts: their rows by key, and how each host answered (as `fray list` says)."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    clusters: list[dict[str, Any]] = field(default_factory=list)


def chosen(given: str | None) -> list[str] | None:
    """The clusters a dashboard spans (`local` first) for what `--clusters` said, or None for this one only."""
    return clusters.chosen(given)


def key_of(cluster: str, run_id: str) -> str:
    return f"{KEY_PREFIX}{cluster}/{run_id}"


def ask(hosts: list[str]) -> RemoteRuns:
    """Every host's runs at once; none waits past remote_timeout, a host that fails is one row."""
    data = views.list_view(hosts, ["list"])
    rows = {key_of(row["cluster"], row["run_id"]): row for row in data["runs"]}
    for state in data["clusters"]:
        if state["state"] != "ok":
            rows[key_of(state["cluster"], "")] = down_row(state["cluster"], state["detail"])
    return RemoteRuns(rows, data["clusters"])


def down_row(cluster: str, detail: str) -> dict[str, Any]:
    """The row of a host that did not answer: first in the newest-first order, acted on by nothing."""
    return {"kind": "cluster", "cluster": cluster, "run_id": key_of(cluster, ""), "name": cluster, "icon": "✗",
            "status": "unavailable", "phase": None, "reason": f"{cluster} is unavailable: {detail}",
            "created_at": math.inf, "mode": None, "node": None, "attempt": None, "uptime_sec": None,
            "heartbeat_age_sec": None, "step": None, "loss": None, "backend": None}


def _on(cluster: str, argv: list[str]) -> dict[str, Any]:
    """`fray *argv --json` on `cluster`'s host: its document, or a FrayError with what went wrong."""
    answer = clusters.ask_one(cluster, argv, clusters.timeout_sec())
    doc = answer.document
    if isinstance(doc, dict) and "error" in doc:
        raise FrayError(f"{cluster}: {doc['error'].get('message', 'failed')}")
    if not isinstance(doc, dict) or answer.exit_code not in (0, None):
        raise FrayError(f"{cluster}: {answer.error or f'exit {answer.exit_code}'}")
    return doc


def status(cluster: str, run_id: str) -> dict[str, Any]:
    """`fray status RUN` on the run's host (schemas/cli-status.json)."""
    return _on(cluster, ["status", run_id])


def logs(cluster: str, run_id: str, stderr: bool = False) -> dict[str, Any]:
    """The tail of the run's latest attempt's stdout (or stderr) on its host (schemas/cli-logs.json)."""
    return _on(cluster, ["logs", run_id, "-n", str(LOG_LINES), *(["--stderr"] if stderr else [])])


def control(cluster: str, row: dict[str, Any], op: str) -> str:
    """`fray control OP RUN` (a sweep's row: `--group`) on the run's host; what was done, in words."""
    if row.get("kind") == "group":
        doc = _on(cluster, ["control", op, "--group", row["group"]])
        return f"{cluster}: requested {op} for {len(doc['runs'])} runs of {row['name']}"
    doc = _on(cluster, ["control", op, row["run_id"]])
    return f"{cluster}: requested {op} for {doc['name']}: {doc['effect']}"


def ban(cluster: str, row: dict[str, Any], node: str, ttl: str, reason: str) -> str:
    """`fray control blacklist-add RUN --node NODE` on the run's host: ban it there, move the run off it."""
    argv = ["control", "blacklist-add", row["run_id"], "--reason", reason]
    doc = _on(cluster, argv + (["--node", node] if node else []) + (["--ttl", ttl] if ttl else []))
    return f"{cluster}: {doc['name']}: {doc['effect']}"
