"""What `--after` names, settled at submit, and what a dependent run is told about its upstreams.

`resolve` turns each `RUN[:ok|:fail|:any]` into the spec's record
(fray.core.dependencies): a run id (an id, a unique id prefix, or a name, as
every command reads them) or a sweep group (its id, `group:<id>`, or its
name). Unknown names, a run naming itself and a run of another cluster are
refused (UsageError, exit 2) before anything is written.

`environment` is what a dependent attempt finds in its environment, one pair
per upstream (NAME: the upstream's name upper-cased, other characters `_`):

    FRAY_AFTER_<NAME>             the upstream run's folder ($FRAY_HOME/runs/<run id>);
                                  for a sweep, its points' folders in index order, joined by ':'
    FRAY_AFTER_<NAME>_CHECKPOINT  its latest promoted checkpoint (the folder that run's own
                                  report.latest_checkpoint() gives), '' when it has none; for a
                                  sweep, one per point joined by ':'
"""

from __future__ import annotations

from typing import Any, Callable

from fray.core import dependencies
from fray.core.model import Meta
from fray.errors import CorruptFileError, RunLookupError, UsageError
from fray.state import store
from fray.state.layout import Home


def resolve(home: Home, texts: list[str], own_name: str, lookup: Callable[[Home, str], str]) -> list[dict[str, Any]]:
    """The spec's `after` records for `texts`; `lookup(home, ref)` finds a run id as every command does."""
    found = []
    for text in texts:
        ref, on = dependencies.split(text)
        found.append({"ref": ref, "on": on, **_target(home, ref, own_name, lookup)})
    return found


def _target(home: Home, ref: str, own_name: str, lookup: Callable[[Home, str], str]) -> dict[str, Any]:
    group = _group(home, ref.removeprefix("group:"))
    if group is not None and (ref.startswith("group:") or group["group"] == ref):
        return group
    try:
        run_id = lookup(home, ref)
    except RunLookupError as exc:
        if group is not None:
            return group
        if ref == own_name:
            raise UsageError(f"--after {ref}: a run cannot wait for itself (and a sweep not for its own points); "
                             "name the run it should wait for") from None
        raise UsageError(f"--after {ref}: {exc}") from None
    meta = _meta(home, run_id)
    return {"name": meta.name if meta is not None else ref, "run_id": run_id}


def _group(home: Home, ref: str) -> dict[str, Any] | None:
    """The sweep group `ref` names (id or name; when several share a name, the newest), or None."""
    from fray.state.sweeps import unwritten  # only an --after naming a sweep: a plain submit imports none of it

    groups: dict[str, dict[str, Any]] = {}
    for record, _launch in unwritten.pending(home):
        groups[record["id"]] = {"name": record["name"], "group": record["id"], "size": record["size"],
                                "created_at": record["created_at"]}
    for run_id in home.run_ids():
        meta = _meta(home, run_id)
        if meta is not None and meta.sweep is not None:
            sweep = meta.sweep
            groups.setdefault(sweep["id"], {"name": sweep.get("name", sweep["id"]), "group": sweep["id"],
                                            "size": sweep["size"], "created_at": meta.created_at})
    named = [g for g in groups.values() if g["group"] == ref] or [g for g in groups.values() if g["name"] == ref]
    if not named:
        return None
    chosen = max(named, key=lambda g: g["created_at"])
    return {k: v for k, v in chosen.items() if k != "created_at"}


def _meta(home: Home, run_id: str) -> Meta | None:
    try:
        raw = store.read_json(home.run(run_id).meta, "meta")
    except CorruptFileError:
        return None
    return Meta.from_dict(raw) if raw is not None else None


def environment(home: Home, meta: Meta) -> dict[str, str]:
    """FRAY_AFTER_* for `meta`'s attempt (see the module docstring)."""
    from fray.wrapper.face import latest_checkpoint  # the daemon's, for a run with --after: not submit's

    env: dict[str, str] = {}
    for upstream in meta.spec.after:
        if upstream.get("run_id"):
            ids = [upstream["run_id"]]
        else:
            members = [m for m in _metas(home) if m.sweep is not None and m.sweep["id"] == upstream["group"]]
            ids = [m.run_id for m in sorted(members, key=lambda m: m.sweep["index"])]  # type: ignore[index]
        key = dependencies.env_name(upstream["name"])
        env[key] = ":".join(str(home.run(i).dir) for i in ids)
        env[key + "_CHECKPOINT"] = ":".join(str(latest_checkpoint(home.run(i).checkpoints_dir) or "") for i in ids)
    return env


def _metas(home: Home) -> list[Meta]:
    return [m for m in (_meta(home, i) for i in home.run_ids()) if m is not None]
