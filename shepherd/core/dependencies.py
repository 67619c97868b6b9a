"""Runs that wait for runs (`--after RUN[:ok|:fail|:any]`): the syntax, the gate, the edges. Pure.

A dependent run names its upstreams at submit; `fray.state.upstreams` resolves
each name once, to a run id or a sweep group, and stores the result in the
spec (`spec.after`: `{ref, on, name, run_id | group and size}`), so a later
run of the same name never changes what it waits for. The condition is about
the upstream *run*, whatever attempts it took and whichever backend ran them:

- `ok` (the default): the upstream ended `completed_success` (or, for an
  indefinite run, `ended_expired`: its keep-alive ran out, as asked);
- `fail`: the upstream ended with a failure (`failed`, `failed_config`,
  `failed_dependency`, `error_unknown`);
- `any`: the upstream ended, however.

A sweep group is satisfied when every one of its points is. Once the
condition can no longer hold (the upstream ended otherwise, was stopped, or
its folder is gone), the dependent run ends `failed_dependency`, naming the
upstream. Dependencies name runs that exist when the dependent is submitted
and never change after, so a cycle can only be a run (or a sweep) naming
itself, which submit refuses. The gate holds only a run that has never started: its retries do
not wait again, so the upstream being started again later changes nothing.

`gate` is evaluated by the daemon every cycle from the metas it read (level
triggered: a daemon killed at any point decides the same again), and the
policy starts the run through its ordinary admission path, which writes the
attempt as `submitting` before anything is submitted: a dependent run starts
exactly once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from fray.core.model import Meta, Phase

CONDITIONS = ("ok", "fail", "any")
OK_ENDS = frozenset({"completed_success", "ended_expired"})
FAIL_ENDS = frozenset({"failed", "failed_config", "failed_dependency", "error_unknown"})
ENV_PREFIX = "FRAY_AFTER_"
_REF = re.compile(r"(group:)?[A-Za-z0-9][A-Za-z0-9._@+-]*")


def parse_after(text: str) -> dict[str, str]:
    """`RUN[:ok|:fail|:any]` checked now, kept as written (a one-entry dict: the option repeats)."""
    ref, on = split(text)
    return {f"{ref}:{on}": f"{ref}:{on}"}


def split(text: str) -> tuple[str, str]:
    """(run reference, condition) of `RUN[:ok|:fail|:any]`."""
    text = text.strip()
    ref, sep, on = text.rpartition(":")
    if not sep or on not in CONDITIONS:
        ref, on = text, "ok"
    if "/" in ref:  # HOST/RUN: another cluster's daemon ends that run, and no daemon sees both
        raise ValueError(f"{text!r}: a run of another cluster cannot be waited for; fray waits only for runs of "
                         "the same FRAY_HOME: submit both runs to one cluster (with the same --remote)")
    if not ref or not _REF.fullmatch(ref):
        raise ValueError(f"{text!r} is not RUN[:ok|:fail|:any]: give a run name, id or sweep group, like "
                         "train or train:ok")
    return ref, on


def env_name(name: str) -> str:
    """FRAY_AFTER_<NAME>: the upstream's name upper-cased, every other character an underscore."""
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


@dataclass(frozen=True)
class Gate:
    """What one dependent run may do this cycle."""

    start: bool
    reason: str = ""
    broken: bool = False  # the condition can never hold: the run ends failed_dependency


def gate(meta: Meta, metas: Mapping[str, Meta | None], present: Callable[[str], bool],
         status_of: Callable[[Meta], str]) -> Gate | None:
    """The gate for `meta`, or None when it has none (no --after, or it started already).

    `metas` holds every run the daemon read (None: unreadable this cycle, so it waits); `present(run_id)`
    says whether a run folder exists; `status_of(meta)` is the upstream's normalized status, for the reason.
    """
    if not meta.spec.after or meta.attempts or meta.phase == Phase.ENDED.value:
        return None
    waiting = []
    for upstream in meta.spec.after:
        verdict = _one(upstream, metas, present, status_of)
        if verdict.broken:
            return verdict
        if not verdict.start:
            waiting.append(verdict.reason)
    if waiting:
        return Gate(False, "; ".join(waiting))
    return Gate(True)


def _one(upstream: dict[str, Any], metas: Mapping[str, Meta | None], present: Callable[[str], bool],
         status_of: Callable[[Meta], str]) -> Gate:
    on, label = upstream["on"], _label(upstream)
    if upstream.get("group"):
        return _group(upstream, metas, status_of)
    run_id = upstream["run_id"]
    if not present(run_id):
        return Gate(False, f"upstream {label} ({run_id}) no longer exists", broken=True)
    found = metas.get(run_id)
    if found is None:
        return Gate(False, f"waiting for {label} (its meta.json cannot be read now)")
    return _ended(found, on, label, status_of)


def _ended(found: Meta, on: str, label: str, status_of: Callable[[Meta], str]) -> Gate:
    if found.phase != Phase.ENDED.value or found.end is None:
        attempt = f", attempt {len(found.attempts)}" if found.attempts else ""
        return Gate(False, f"waiting for {label} ({status_of(found)}{attempt})")
    status = found.end.status
    if on == "any" or (on == "ok" and status in OK_ENDS) or (on == "fail" and status in FAIL_ENDS):
        return Gate(True)
    wanted = {"ok": "to succeed", "fail": "to fail"}[on]
    return Gate(False, f"upstream {label} ended {status} ({found.end.reason}); this run waited for it {wanted}",
                broken=True)


def _group(upstream: dict[str, Any], metas: Mapping[str, Meta | None], status_of: Callable[[Meta], str]) -> Gate:
    group_id, on, label = upstream["group"], upstream["on"], _label(upstream)
    members = [m for m in metas.values() if m is not None and m.sweep is not None and m.sweep["id"] == group_id]
    for member in members:
        verdict = _ended(member, on, f"{label} point {member.sweep['index']}", status_of)  # type: ignore[index]
        if verdict.broken:
            return verdict
    size = upstream.get("size") or len(members)
    done = sum(1 for m in members if m.phase == Phase.ENDED.value)
    if len(members) < size or done < size:
        return Gate(False, f"waiting for sweep {label} ({done} of {size} points ended)")
    return Gate(True)


def _label(upstream: dict[str, Any]) -> str:
    on = upstream["on"]
    return upstream["name"] if on == "ok" else f"{upstream['name']}:{on}"


# -- the graph ------------------------------------------------------------------------------


def edge_key(upstream: dict[str, Any]) -> str:
    """The node an upstream record (or a list row's edge) points at: a run id, or `group:<id>` for a sweep."""
    return upstream["run_id"] if upstream.get("run_id") else "group:" + upstream["group"]


def dependents(waits: Mapping[str, Iterable[str]], groups: Mapping[str, str], roots: Iterable[str]) -> list[str]:
    """Every run that waits, directly or through others, on a run of `roots`, nearest first.

    `waits`: run id -> the nodes it waits for (`edge_key`); `groups`: run id -> `group:<id>` of a sweep's
    point, so a run waiting for a sweep is a dependent of each of its points."""
    found: list[str] = []
    frontier = list(roots)
    reached = set(frontier)
    while frontier:
        names = {x for r in frontier for x in (r, groups.get(r)) if x}
        frontier = sorted(run_id for run_id, ups in waits.items() if run_id not in reached and names & set(ups))
        reached.update(frontier)
        found.extend(frontier)
    return found
