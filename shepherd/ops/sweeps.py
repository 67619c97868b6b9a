"""`fray submit SCRIPT --sweep NAME=VALUES ...`: one run per point, as one group, and what it became.

The points and what each passes to the script are fray.core.sweeps.grid's; the
sweep's record is written whole by fray.state.sweeps.creating (after every check);
the daemon then writes its runs and starts them (on Slurm as one job array,
submitted before the runs' folders are written; at most `--max-parallel` at
a time): fray.daemon.sweeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from fray.backends import offers
from fray.core.model import Meta
from fray.core.sweeps import grid, record as sweep_record
from fray.daemon import lease
from fray.state import runs
from fray.state.sweeps import creating
from fray.state.layout import Home


def publish(home: Home, script: Path | None, sweeps: Sequence[str], args: Sequence[str] = (),
            overrides: dict[str, Any] | None = None, name: str | None = None,
            max_parallel: int | None = None, module: str | None = None, force: bool = False) -> dict[str, Any]:
    """Publish the sweep's record (schemas/group.json) and return it (everything is checked first: bad axes,
    script or directives write nothing). Every point runs one code snapshot."""
    parsed = grid.parse_axes(list(sweeps))
    grid.check_max_parallel(max_parallel)
    ready = runs.prepare(runs.SubmitOptions(script=script, overrides=overrides or {}, name=name or None,
                                            args=tuple(args), module=module, force=force), home,
                           check=lambda prepared: offers.check_prepared(home, prepared))
    return creating.publish_sweep(home, ready, grid.points(parsed), max_parallel)


def submit_sweep(home: Home, script: Path, sweeps: Sequence[str], args: Sequence[str] = (),
                 overrides: dict[str, Any] | None = None, name: str | None = None,
                 max_parallel: int | None = None) -> list[Meta]:
    """`publish`, and the members as they start out, in index order."""
    return sweep_record.members_of(publish(home, script, sweeps, args, overrides, name, max_parallel))


def sweep_view(home: Home, record: dict[str, Any], prefix: str = "fray") -> dict[str, Any]:
    """A new sweep: its group, its runs with their points, the daemon serving it (schemas/cli-sweep.json).
    Built from the record, not from 1,000 metas: the points' arguments are all that differ."""
    template = record["template"]
    spec = template["spec"]
    runs_view = []
    for index, member in enumerate(record["members"]):
        point = sweep_record.point(record, index)
        runs_view.append({"run_id": member["run_id"], "name": member["name"], "index": index, "params": point.values,
                          "args": [*spec["args"], *grid.point_args(point)]})
    return {
        "group": record["id"], "name": record["name"], "size": record["size"], "max_parallel": record["max_parallel"],
        "mode": spec["mode"], "backend": spec["backend"], "script": template["script"]["source"],
        "runs": runs_view, "daemon": lease.view(home),
        "next": [f"{prefix} list --group {record['id']}", f"{prefix} control stop --group {record['id']}"],
    }
