"""Families of runs launched through the cluster API: pure decisions, no IO.

- `stop_orders`: which runs must stop because of their parent. A child stops
  when its parent run has ended, when the parent's attempt that launched it is
  stopping or has ended (a restarted parent launches its children again), or
  when the parent's folder is gone. The daemon applies an order through the
  policy's ordinary stop path: it hands `policy.decide` the child's control
  with `stop_requested` set and the reason as the requester (see
  `effective_control`). Nothing is written to the child's control.json, whose
  only writers are the CLI and TUI; the decision is recomputed every cycle from
  the metas (level-triggered, so a daemon restart loses nothing), and the
  policy's events in the child's events.jsonl record why it stopped. (So a
  child of an ended parent that a person starts again is stopped again.)
- `plan_groups`: all-or-nothing admission of a job group's first start.
- `stale_endpoint`: whether an actor endpoint file outlived its job's attempt.
- `tree`: runs ordered as families for `fray list --tree`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping

from fray.core.model import AttemptState, Control, Meta, Phase
from fray.core.scheduler import Admission

STOPPER = "fray"
_ENDED = Phase.ENDED.value  # (enum attribute lookups add up over 10,000 runs a cycle)


def stop_orders(metas: Mapping[str, Meta | None], present: Collection[str],
                children: Mapping[str, Meta | None] | None = None) -> dict[str, str]:
    """run id -> why it must stop, for every run not ended whose parent says so.

    `metas` holds every run the daemon read (None: unreadable this cycle, so
    nothing is decided from it); `present` every run folder that exists;
    `children` the runs to decide for, when not all of `metas` (those not
    ended, say: the daemon does not pass over the thousands that ended).
    """
    orders: dict[str, str] = {}
    for run_id, meta in (metas if children is None else children).items():
        if meta is None or not meta.parent_run_id or meta.phase == _ENDED:
            continue
        why = _parent_says_stop(meta, metas, present)
        if why:
            orders[run_id] = why
    return orders


def _parent_says_stop(child: Meta, metas: Mapping[str, Meta | None], exists: Collection[str]) -> str | None:
    parent_id = child.parent_run_id
    assert parent_id is not None
    if parent_id not in exists:
        return f"its parent run {parent_id} no longer exists"
    parent = metas.get(parent_id)
    if parent is None:
        return None
    if parent.phase == Phase.ENDED.value:
        status = parent.end.status if parent.end else "ended"
        return f"its parent run {parent_id} ended ({status})"
    number = child.parent_attempt
    if number is None or number > len(parent.attempts):
        return None
    attempt = parent.attempts[number - 1]
    if attempt.state == AttemptState.STOPPING.value:
        return f"its parent run {parent_id} is stopping attempt {number} ({attempt.stop_reason or 'requested'})"
    if attempt.state == AttemptState.ENDED.value:
        return f"attempt {number} of its parent run {parent_id}, which launched it, ended ({attempt.cause})"
    return None


def effective_control(control: Control, order: str | None) -> Control:
    """The control the policy acts on: the person's, plus a stop the daemon ordered (never written)."""
    if not order or control.stop_requested:
        return control
    return dataclasses.replace(control, stop_requested=True, updated_by=f"{STOPPER} ({order})")


# -- job groups --------------------------------------------------------------------------


@dataclass
class GroupPlan:
    granted: dict[str, Admission] = field(default_factory=dict)  # run id -> its admission, this cycle
    waiting: dict[str, str] = field(default_factory=dict)  # run id -> why its group waits
    stop: dict[str, str] = field(default_factory=dict)  # run id -> why its group cannot ever start


def first_start_pending(meta: Meta, control: Control, now: float) -> bool:
    """A group member that has never started and that the policy would admit this cycle."""
    return (meta.phase == Phase.QUEUED.value and not meta.attempts and not control.paused
            and not control.stop_requested and (meta.next_attempt_at is None or meta.next_attempt_at <= now))


def plan_groups(members: Mapping[str, list[tuple[Meta, Control]]], now: float,
                admit: Callable[[Meta], Admission], snapshot: Callable[[], Any],
                restore: Callable[[Any], None]) -> GroupPlan:
    """Admit each group whose members have never started all at once, or none of them.

    `members` maps a group id to the metas (with controls) of its members found
    this cycle, ended ones included (a member that ended before the start stops
    the others); `admit` reserves one member's resources, and `snapshot`/`restore`
    undo a trial that did not fit whole.
    """
    plan = GroupPlan()
    for group_id, found in sorted(members.items()):
        metas = [m for m, _ in found]
        if any(m.attempts for m in metas):
            continue  # started once already: members restart on their own
        size = metas[0].group["size"] if metas[0].group else len(metas)
        ids = [m.run_id for m in metas if m.phase != Phase.ENDED.value]
        gone = next((m for m in metas if m.phase == Phase.ENDED.value), None)
        if gone is not None:
            index = gone.group["index"] if gone.group else 0
            for run_id in ids:
                plan.stop[run_id] = f"member {index} of group {group_id} ({gone.name}) ended before the group started"
            continue
        if len(metas) < size:
            for run_id in ids:
                plan.waiting[run_id] = f"waiting for all {size} members of group {group_id} ({len(metas)} so far)"
            continue
        if not all(first_start_pending(m, c, now) for m, c in found):
            for run_id in ids:
                plan.waiting[run_id] = f"group {group_id}: waiting until every member may start"
            continue
        before = snapshot()
        granted: dict[str, Admission] = {}
        refusal = None
        for meta in sorted(metas, key=lambda m: m.group["index"] if m.group else 0):
            admission = admit(meta)
            if not admission.admitted:
                refusal = (meta, admission.reason)
                break
            granted[meta.run_id] = admission
        if refusal is None:
            plan.granted.update(granted)
            continue
        restore(before)
        member, reason = refusal
        index = member.group["index"] if member.group else 0
        if reason.startswith("can never start"):
            for run_id in ids:
                plan.stop[run_id] = f"member {index} of group {group_id} ({member.name}) {reason}; no member starts"
        else:
            for run_id in ids:
                plan.waiting[run_id] = f"group {group_id} starts all together; member {index}: {reason}"
    return plan


# -- actor endpoints ---------------------------------------------------------------------


def stale_endpoint(run_id: str | None, attempt: int | None, meta: Meta | None, run_exists: bool) -> str | None:
    """Why an endpoint registered by (run, attempt) should be removed, or None to keep it."""
    if run_id is None:
        return None  # registered outside a fray job: its server removes it
    if not run_exists:
        return f"run {run_id} no longer exists"
    if meta is None:
        return None  # unreadable this cycle
    if meta.phase == Phase.ENDED.value:
        return f"run {run_id} has ended"
    if attempt is None:
        return None
    current = meta.current
    if current is not None and current.number > attempt:
        return f"run {run_id} is on attempt {current.number}; this endpoint is from attempt {attempt}"
    if current is not None and current.number == attempt and current.state == AttemptState.ENDED.value:
        return f"attempt {attempt} of run {run_id} has ended"
    return None


# -- fray list --tree ----------------------------------------------------------------------


def tree(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(depth, row) with every run under its parent: roots in the given order, children in launch order.

    A run with no parent that waits for others (--after) goes under the first of its upstream runs
    shown. A child whose parent is not among the rows (filtered out, or deleted) is shown as a root.
    """
    ids = {row["run_id"] for row in rows}
    children: dict[str, list[dict[str, Any]]] = {}
    roots = []
    for row in rows:
        upstreams = [edge["run_id"] for edge in row.get("after", ()) if edge.get("run_id") in ids]
        parent = row.get("parent_run_id") or next(iter(upstreams), None)
        if parent and parent in ids and parent != row["run_id"]:
            children.setdefault(parent, []).append(row)
        else:
            roots.append(row)
    ordered: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()

    def visit(row: dict[str, Any], depth: int) -> None:
        if row["run_id"] in seen:
            return
        seen.add(row["run_id"])
        ordered.append((depth, row))
        for child in sorted(children.get(row["run_id"], []), key=lambda r: (r.get("created_at") or 0, r["run_id"])):
            visit(child, depth + 1)

    for root in roots:
        visit(root, 0)
    for row in rows:  # a cycle of parents (hand-edited files) still shows every run once
        visit(row, 0)
    return ordered
