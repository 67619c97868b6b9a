"""Creating a sweep's group of runs: one run per point, written all together or not at all.

`create_group` is the one way a sweep comes to exist: `fray submit --sweep`
(fray.ops.sweep) gives it the script's spec with each point's arguments, and
a Python front end (`fray.map`) can give it one spec and payload per item.
Each member is an ordinary run whose meta carries the group
(`{"kind": "sweep", "id", "name", "size", "index", "max_parallel", "params"}`,
fray.core.model.Meta.sweep) and whose environment says which point it is
(fray.core.sweep.point_env). Member i is named `<name>-<i>` (zero-padded, so
run ids sort in index order) and the group id is the name's slug plus a
random suffix, so two sweeps of one name never mix.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fray.core import sweep
from fray.core.model import SWEEP, Meta, RunSpec
from fray.state import runs
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
    sweep.check_max_parallel(max_parallel)
    now = time.time() if now is None else now
    group_id = new_group_id(name)
    names = member_names(name, len(members))
    new: list[runs.NewRun] = []
    for index, (member, (run_name, id_name)) in enumerate(zip(members, names)):
        env = {**member.spec.env, **sweep.point_env(index, dict(member.params), len(members), group_id)}
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
