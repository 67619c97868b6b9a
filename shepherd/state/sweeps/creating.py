"""Creating a sweep's group of runs: one run per point, written all together or not at all.

A sweep comes to exist in one of two ways. `create_group` writes every
member's run folder at once, from one spec and payload per item: what a
Python front end (`fray.map`) gives it. `publish_sweep` (below) writes only
the sweep's record, from which the daemon writes the same runs: what
`fray submit --sweep` (fray.ops.sweeps) does, where the points share one
script and spec and differ by their arguments. Each member is an ordinary run whose meta carries the group
(`{"kind": "sweep", "id", "name", "size", "index", "max_parallel", "params"}`,
fray.core.model.Meta.sweep) and whose environment says which point it is
(fray.core.sweeps.grid.point_env). Member i is named `<name>-<i>` (zero-padded, so
run ids sort in index order) and the group id is the name's slug plus a
random suffix, so two sweeps of one name never mix.

`publish_sweep` is the lazy form that `fray submit --sweep` uses: one record
(groups/<id>/: group.json and the frozen script, fray.core.sweeps.record)
built under a hidden name and renamed into place, so a crash leaves no group
or a whole one. It writes two files whatever the size: writing 1,000 run
folders took 2.9 s of a 1,000-point sweep's submission (3,000 files and 1,000
folders at about 0.3 ms each here, plus building and validating 1,000
metas), against 0.7 to 1.1 s for submitit's whole map_array. The daemon
writes the members' folders from the record (fray.daemon.sweeps).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fray.core.model import SWEEP, Meta, RunSpec
from fray.core.sweeps import grid, record as sweep_record
from fray.state import doorbell, runs, store
from fray.state.layout import Home


@dataclass(frozen=True)
class PointRun:
    """One member to be: its spec (the point's arguments already in `args`), its point, its folder's files."""

    spec: RunSpec
    params: Mapping[str, Any]
    files: Mapping[str, bytes]  # by name; `frozen` names the one that runs
    frozen: str
    source: str  # where the script came from (shown by `fray status`)
    job: dict[str, Any] | None = None  # a launched job's job.json (fray.map)


def new_group_id(name: str) -> str:
    return f"{runs.slug(name)[:60]}-{secrets.token_hex(3)}"


def member_names(name: str, size: int) -> list[tuple[str, str]]:
    """(run name, run id name part) of each member: `<name>-007`, the index kept whole in the id's 40 characters."""
    width = len(str(max(size - 1, 0)))
    stem = runs.slug(name)[: 39 - width].strip("-") or "sweep"
    return [(f"{name}-{i:0{width}d}", f"{stem}-{i:0{width}d}") for i in range(size)]


def create_group(home: Home, name: str, members: list[PointRun], max_parallel: int | None = None,
                 workdir: str = ".", now: float | None = None, **family: Any) -> list[Meta]:
    """Write every member's run folder (all or none) and return their metas, in index order."""
    if not members:
        raise ValueError("a group needs at least one member")
    grid.check_max_parallel(max_parallel)
    now = time.time() if now is None else now
    group_id = new_group_id(name)
    names = member_names(name, len(members))
    new: list[runs.NewRun] = []
    for index, (member, (run_name, id_name)) in enumerate(zip(members, names)):
        env = {**member.spec.env, **grid.point_env(index, dict(member.params), len(members), group_id)}
        spec = dataclasses.replace(member.spec, env=env)
        group = {"id": group_id, "kind": SWEEP, "name": name[:128], "size": len(members), "index": index,
                 "max_parallel": max_parallel, "params": dict(member.params)}
        data = member.files[member.frozen]
        meta = runs.new_meta(run_name, now, workdir, spec, source=member.source, frozen=member.frozen, script=data,
                             group=group, **family)
        meta.run_id = runs.make_run_id(id_name, now)
        new.append(runs.NewRun(meta, member.files, member.job))
    runs.write_runs(home, new)
    return [item.meta for item in new]


def publish_sweep(home: Home, ready: runs.Prepared, points: list[grid.Point], max_parallel: int | None,
                  now: float | None = None) -> dict[str, Any]:
    """Write a sweep's record (schemas/group.json) whole, under a hidden name renamed into place; return it.
    The members' run ids are drawn here, so `fray submit` can name them before the daemon writes their folders."""
    if not points:
        raise ValueError("a sweep needs at least one point")
    grid.check_max_parallel(max_parallel)
    now = time.time() if now is None else now
    group_id = new_group_id(ready.name)
    names = member_names(ready.name, len(points))
    run_ids = runs.unique_ids(home, [runs.make_run_id(id_name, now) for _, id_name in names])
    template = runs.new_meta(ready.name, now, ready.workdir, ready.spec, source=ready.source, frozen=ready.frozen,
                             in_place=ready.in_place,
                             script=ready.data)
    record = sweep_record.make_record(template, group_id, ready.name, max_parallel,
                                      [(run_id, run_name, point) for run_id, (run_name, _), point
                                       in zip(run_ids, names, points)])
    store.ensure_home(home)
    staging, final = home.new_group(group_id), home.group(group_id)
    store.make_dirs(staging.dir)
    try:
        store.write_bytes_atomic(staging.script(ready.frozen), ready.data)
        store.write_json(staging.record, record, "group")
        os.rename(staging.dir, final.dir)
    except BaseException:
        shutil.rmtree(staging.dir, ignore_errors=True)
        raise
    doorbell.ring(home)  # a new sweep: the daemon writes its points' runs
    return record
