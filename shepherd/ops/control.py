"""A person's request for a run: stop, start, restart, pause, unpause, and banning the node it is on.

`dependents_of` finds the runs that wait for one (`--after`), for `fray control stop --with-dependents`.
`request_group` asks the same of every run of a group (a sweep: `fray control stop --group GROUP`);
the points of a new sweep whose runs the daemon has not written yet are asked through the sweep's
record, which each of them starts from (fray.state.sweeps.unwritten).

`fray control ...` and the dashboard's keys (r, s, p, b) both act through
here, and both say what will happen in the same words (`effect`). Requests
go into the run's control.json (runs.request, which also audits them); the
daemon acts on them, so each front end then makes sure one serves FRAY_HOME
(fray.ops.daemon.ensure_running; the dashboard does it in a thread).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from fray.core import dependencies
from fray.core.model import Control, Meta
from fray.core.sweeps import lookup
from fray.errors import UsageError
from fray.ops import human, nodes, views
from fray.state import blacklist, runs
from fray.state.sweeps import unwritten
from fray.state.layout import Home

# What a person may ask of a run (runs.request checks it): each front end offers these as commands or keys.
CONTROL_OPS = runs.CONTROL_OPS


@dataclass(frozen=True)
class Requested:
    """What was asked of a run, the control record written, and what the daemon will do about it."""

    run_id: str
    meta: Meta
    control: Control
    effect: str


def request(home: Home, run_id: str, op: str) -> Requested:
    """Record `op` (one of CONTROL_OPS) for the run."""
    meta = runs.read_meta(home, run_id)  # before the request: a daemon that acts at once has not changed it yet
    record = runs.request(home, run_id, op)
    return Requested(run_id, meta, record, effect(op, meta))


@dataclass(frozen=True)
class GroupRequested:
    """`op` asked of every run of a group it applies to, and the runs it did not (with why)."""

    group: str
    op: str
    requested: list[Requested]
    skipped: list[tuple[str, str, str]]  # (run id, name, why)


def request_group(home: Home, group: str, op: str) -> GroupRequested:
    """Record `op` for each run of the group (core.sweeps.lookup.resolve): stop, pause and restart skip the
    runs that have ended, start those that have not. The points of a new sweep not written yet are asked
    through its record at once (fray.state.sweeps.unwritten.ask_unwritten), without waiting for the daemon."""
    group_id, members = lookup.resolve(views.list_view(home, fold=False)["runs"], group)
    requested: list[Requested] = []
    skipped: list[tuple[str, str, str]] = []
    open_rows = []
    for row in members:
        ended = row.get("phase") == "ended"
        may_not_apply = ended if op in ("stop", "restart", "pause") else (op == "start" and not ended)
        why = _why_not_now(home, row, op) if may_not_apply else None
        if why is not None:
            skipped.append((row["run_id"], row["name"], why))
        else:
            open_rows.append(row)
    points: dict[str, Meta] = {}
    if any(not os.path.isfile(home.meta_file(row["run_id"])) for row in open_rows):
        asked, points = unwritten.ask_unwritten(home, group_id, op, [row["run_id"] for row in open_rows])
    written, refused = runs.request_many(home, [row["run_id"] for row in open_rows if row["run_id"] not in points], op)
    for row in open_rows:
        run_id = row["run_id"]
        meta = points.get(run_id)
        if meta is not None:
            requested.append(Requested(run_id, meta, asked, effect(op, meta)))
        elif run_id in written:
            meta, control = written[run_id]
            requested.append(Requested(run_id, meta, control, effect(op, meta)))
        else:  # it changed since the listing (ended meanwhile)
            skipped.append((run_id, row["name"], refused[run_id]))
    return GroupRequested(group_id, op, requested, skipped)


def _why_not_now(home: Home, row: dict[str, Any], op: str) -> str | None:
    """Why `op` does not apply to a run its listed row says it may not apply to, judged on the run read now: the
    row may be older than the daemon's last commit (a start it applied reopened an ended run; a run ended).
    A run that cannot be read now (a point not written yet) is as its row says."""
    try:
        control = runs.read_control(home, row["run_id"])
        return runs.why_not(op, runs.read_meta(home, row["run_id"]), control)
    except UsageError:
        return "has not ended" if op == "start" else f"already ended ({row['status']})"


def dependents_of(home: Home, run_id: str) -> list[tuple[str, str]]:
    """(run id, name) of every run not ended that waits, directly or through others, for `run_id` (--after)."""
    rows = views.list_view(home, fold=False)["runs"]
    waits = {row["run_id"]: [dependencies.edge_key(edge) for edge in row.get("after", ())] for row in rows}
    sweeps = {row["run_id"]: "group:" + row["group"]["id"] for row in rows
              if row.get("group") and row["group"]["kind"] == "sweep"}
    names = {row["run_id"]: (row["name"], row.get("phase")) for row in rows}
    return [(i, names[i][0]) for i in dependencies.dependents(waits, sweeps, [run_id]) if names[i][1] != "ended"]


def effect(op: str, meta: Meta) -> str:
    """What the daemon will do about `op`, for this run as it is now."""
    attempt = meta.in_flight
    grace = human.duration(meta.spec.stop_grace_sec)
    if op == "stop":
        if attempt:
            return (f"attempt {attempt.number} is asked to stop (killed if still running after {grace}); "
                    "the run then ends as stopped_manual")
        return "no attempt starts; the run ends as stopped_manual"
    if op == "start":
        return f"the run becomes active again with fresh retry budgets; attempt {len(meta.attempts) + 1} starts"
    if op == "restart":
        if attempt:
            return f"attempt {attempt.number} is stopped and attempt {attempt.number + 1} starts right after"
        return "any backoff is skipped: the next attempt starts now"
    if op == "pause":
        if attempt:
            return (f"attempt {attempt.number} is asked to stop (it should checkpoint; killed after {grace}); "
                    "no attempt starts until `fray control unpause`")
        return "no attempt starts until `fray control unpause`"
    return "the run may start attempts again"


def node_of(meta: Meta) -> str | None:
    """The node the run's latest attempt that had one ran on."""
    return next((a.node for a in reversed(meta.attempts) if a.node), None)


@dataclass(frozen=True)
class NodeChange:
    """A ban or unban made for a run: the node, the run's control record, and what follows."""

    run_id: str
    meta: Meta
    node: str
    control: Control
    effect: str


def ban_run_node(home: Home, run_id: str, node: str, ttl_sec: float | None, reason: str | None) -> NodeChange:
    """Ban `node` for this run, and move the run off it (a restart that costs no retry) if it is there now."""
    target = nodes.node_name(node)
    meta = runs.read_meta(home, run_id)
    blacklist.ban(home, target, (reason or "").strip() or f"bad for run {run_id}", ttl_sec, source_run=run_id)
    attempt = meta.in_flight
    moving = attempt is not None and attempt.node == target
    record = runs.request(home, run_id, "restart") if moving else runs.read_control(home, run_id)
    if meta.spec.backend == "local":
        text = f"{target} is blacklisted; the local backend has only this machine, so runs stay here"
        if moving and attempt:
            text += f" (attempt {attempt.number} restarts)"
    elif moving and attempt:
        text = f"{target} is blacklisted; attempt {attempt.number} restarts elsewhere"
    else:
        text = f"{target} is blacklisted; new attempts avoid it"
    return NodeChange(run_id, meta, target, record, text)


def unban_run_node(home: Home, run_id: str, node: str) -> NodeChange:
    """Lift the ban on the node a run was on."""
    meta = runs.read_meta(home, run_id)
    blacklist.unban(home, node, source_run=run_id)
    return NodeChange(run_id, meta, node, runs.read_control(home, run_id), f"{node} may be used again")
