"""`fray submit SCRIPT --sweep NAME=VALUES ...`: one run per point, as one group, and what it became.

The points and what each passes to the script are fray.core.sweep's; the
runs are written together by fray.state.groups (all or none, after every
check); the daemon then starts them (on Slurm as one job array, at most
`--max-parallel` at a time).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

from fray.core import sweep
from fray.core.model import Meta
from fray.ops import views
from fray.state import groups, runs
from fray.state.layout import Home


def submit_sweep(home: Home, script: Path, sweeps: Sequence[str], args: Sequence[str] = (),
                 overrides: dict[str, Any] | None = None, name: str | None = None,
                 max_parallel: int | None = None) -> list[Meta]:
    """Create the sweep's runs (everything is checked first: bad axes, script or directives write nothing)."""
    axes = sweep.parse_axes(list(sweeps))
    sweep.check_max_parallel(max_parallel)
    ready = runs.prepare(runs.SubmitOptions(script=script, overrides=overrides or {}, name=name or None,
                                            args=tuple(args)))
    members = [groups.PointRun(spec=dataclasses.replace(ready.spec, args=[*ready.spec.args, *sweep.point_args(point)]),
                               params=point.values, files={ready.frozen: ready.data}, frozen=ready.frozen,
                               source=ready.source)
               for point in sweep.points(axes)]
    return groups.create_group(home, ready.name, members, max_parallel, workdir=ready.workdir)


def sweep_view(home: Home, metas: list[Meta], prefix: str = "fray") -> dict[str, Any]:
    """A new sweep: its group, its runs with their points, the daemon serving it (schemas/cli-sweep.json)."""
    group = metas[0].sweep or {}
    spec = metas[0].spec
    return {
        "group": group["id"], "name": group["name"], "size": len(metas), "max_parallel": group["max_parallel"],
        "mode": spec.mode, "backend": spec.backend, "script": metas[0].script["source"],
        "runs": [{"run_id": m.run_id, "name": m.name, "index": (m.sweep or {})["index"],
                  "params": (m.sweep or {})["params"], "args": m.spec.args} for m in metas],
        "daemon": views.daemon_view(home),
        "next": [f"{prefix} list --group {group['id']}", f"{prefix} control stop --group {group['id']}"],
    }
