"""Which run launched which: run id -> parent run id for every run, so `fray status RUN` finds its children
without reading every run.

A run's parent is part of its identity: written into meta.json when the run is
created (fray.cluster.launching) and never changed. So the index only has to
learn the run folders it has not seen yet and forget those that are gone: a
read costs one listing of runs/ and a read of each new run's meta.json, however
many runs there are.

Like the row cache it is derived data, not state: unreadable or from another
version, it is ignored and rebuilt; written atomically (the last writer wins),
so a writer killed at any point leaves the old version or the new one. Either
is checked against the listing of runs/ on every read, so the index can neither
hide a run (a folder it has not seen is read) nor invent one (an id with no
folder is dropped). A run whose meta.json cannot be read is not remembered:
it is read again next time, as `fray list` does.
"""

from __future__ import annotations

from typing import Any

import orjson

from fray.state import meta_file, store
from fray.state.layout import Home

VERSION = 1


def parents(home: Home, run_ids: list[str] | None = None) -> dict[str, str | None]:
    """run id -> parent run id (None: launched by a person) of every run folder in runs/ whose meta.json
    could be read; `run_ids` is the listing of runs/ when the caller has it already."""
    listed = home.run_ids() if run_ids is None else run_ids
    known = _load(home)
    index: dict[str, str | None] = {}
    learned = False
    for run_id in listed:
        if run_id in known:
            index[run_id] = known[run_id]
            continue
        raw, _ = meta_file.read(home.run(run_id))
        if raw is not None:
            index[run_id] = raw.get("parent_run_id")
            learned = True
    if learned or len(index) != len(known):
        _save(home, index)
    return index


def children(home: Home, run_id: str, run_ids: list[str] | None = None) -> list[str]:
    """The ids of the runs `run_id` launched, oldest first."""
    return sorted(child for child, parent in parents(home, run_ids).items() if parent == run_id)


def _load(home: Home) -> dict[str, str | None]:
    try:
        data: Any = orjson.loads(home.parents_index.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("parents"), dict)):
        return {}
    return {k: v for k, v in data["parents"].items() if v is None or isinstance(v, str)}


def _save(home: Home, index: dict[str, str | None]) -> None:
    """Write the index; a failure only costs speed (the next read learns the same runs again)."""
    try:
        store.make_dirs(home.cache_dir)
        store.write_bytes_atomic(home.parents_index, orjson.dumps({"version": VERSION, "parents": index}),
                                 sync=False)
    except OSError:
        pass
