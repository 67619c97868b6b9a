"""A sweep's record (groups/<id>/group.json) and the member runs it stands for. Pure.

`fray submit --sweep` writes the record alone: the meta every member starts
from (the template) once, and per point only its run id, run name and values
as typed, so submitting costs one folder whatever the size. Member i's meta
is the template with the point's arguments after the script's own, its
environment (fray.core.sweeps.grid.point_env), its id, name and group. The daemon
writes each member's run folder from the record (fray.daemon.sweeps);
until it has, readers show the members from the record (`members_of`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fray.core.model import SWEEP, Attempt, AttemptState, Meta, Phase
from fray.core.sweeps import grid

SCHEMA_VERSION = 1


def make_record(template: Meta, group_id: str, name: str, max_parallel: int | None,
                members: list[tuple[str, str, grid.Point]]) -> dict[str, Any]:
    """The record of a sweep of `members` (run id, run name, point), in index order."""
    return {"schema_version": SCHEMA_VERSION, "id": group_id, "kind": SWEEP, "name": name[:128],
            "size": len(members), "max_parallel": max_parallel, "created_at": template.created_at,
            "template": template.to_dict(),
            "members": [{"run_id": run_id, "name": run_name[:128], "point": [list(pair) for pair in point.params]}
                        for run_id, run_name, point in members]}


def point(record: dict[str, Any], index: int) -> grid.Point:
    return grid.Point(index, tuple((pair[0], pair[1]) for pair in record["members"][index]["point"]))


def group_of(record: dict[str, Any], index: int) -> dict[str, Any]:
    """Member `index`'s meta.group."""
    return {"id": record["id"], "kind": SWEEP, "name": record["name"], "size": record["size"], "index": index,
            "max_parallel": record["max_parallel"], "params": point(record, index).values}


def member_meta(record: dict[str, Any], index: int) -> Meta:
    """Member `index` as a run not yet started: what `fray submit` used to write for it."""
    member, at = record["members"][index], point(record, index)
    meta = Meta.from_dict(record["template"])
    env = {**meta.spec.env, **grid.point_env(index, at.values, record["size"], record["id"])}
    meta.spec = dataclasses.replace(meta.spec, args=[*meta.spec.args, *grid.point_args(at)], env=env)
    meta.run_id, meta.name, meta.group = member["run_id"], member["name"], group_of(record, index)
    return meta


def members_of(record: dict[str, Any]) -> list[Meta]:
    return [member_meta(record, index) for index in range(record["size"])]


def launched(meta: Meta, at: float, ref: dict[str, Any], partition: str | None) -> Meta:
    """`meta` with its first attempt submitted (as one task of the sweep's job array), as the daemon records it."""
    meta.attempts = [Attempt(number=1, state=AttemptState.SUBMITTED.value, backend=meta.spec.backend, submitted_at=at,
                             backend_ref=ref, partition=partition)]
    meta.phase, meta.wait_reason, meta.updated_at = Phase.ACTIVE.value, None, at
    return meta
