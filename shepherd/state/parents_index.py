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

`fray status RUN` asks only for one run's children, and at 10,000 runs even
listing runs/ costs more than the rest of the command. So beside the index a
second, small file (cache/children.json) keeps each parent's children with
the mtime runs/ had when the listing behind it began. Creating, renaming or
removing a run folder changes that mtime, so while it is unchanged no run has
come or gone and the file is answered without a listing. A timestamp is only
as fine as the file system's clock, so, as git does for its index, the file
is trusted only when runs/ had not changed for STABLE_NS before it was
written (both times from the file system's clock): a change racing the
listing would then have moved the mtime. Each child it names is checked to
still have its folder, so even a hand-edited file cannot invent a run.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from fray.state import meta_file, store
from fray.state.layout import Home

VERSION = 1
STABLE_NS = 2_000_000_000  # how long runs/ must have been unchanged for its mtime to vouch for a listing


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


def children(home: Home, run_id: str) -> list[str]:
    """The ids of the runs `run_id` launched, oldest first: from children.json while runs/ is unchanged, else
    from a listing of runs/ (which rewrites children.json)."""
    try:
        listed_at = os.stat(home.runs_dir).st_mtime_ns  # before the listing: a later change moves it
    except FileNotFoundError:
        return []
    known = _trusted_children(home, listed_at)
    if known is not None:
        return [child for child in known.get(run_id, []) if os.path.isdir(home.run_folder(child))]
    family: dict[str, list[str]] = {}
    for child, parent in parents(home).items():
        if parent is not None:
            family.setdefault(parent, []).append(child)
    _save_children(home, listed_at, family)
    return sorted(family.get(run_id, []))


def _trusted_children(home: Home, runs_mtime_ns: int) -> dict[str, list[str]] | None:
    """children.json's parent -> children, if it was built from a listing of runs/ as it is now, else None."""
    try:
        with open(home.children_index, "rb") as file:
            written_ns = os.fstat(file.fileno()).st_mtime_ns
            data: Any = orjson.loads(file.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not (isinstance(data, dict) and data.get("version") == VERSION and data.get("runs_mtime_ns") == runs_mtime_ns
            and isinstance(data.get("children"), dict) and written_ns - runs_mtime_ns >= STABLE_NS):
        return None
    return {parent: [c for c in kids if isinstance(c, str)] for parent, kids in data["children"].items()
            if isinstance(kids, list)}


def _load(home: Home) -> dict[str, str | None]:
    try:
        data: Any = orjson.loads(home.parents_index.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("parents"), dict)):
        return {}
    return {k: v for k, v in data["parents"].items() if v is None or isinstance(v, str)}


def _save_children(home: Home, runs_mtime_ns: int, family: dict[str, list[str]]) -> None:
    """Write children.json (a failure only costs speed); it vouches for nothing until runs/ has been still for
    STABLE_NS, which the reader judges from the file's own mtime."""
    try:
        store.make_dirs(home.cache_dir)
        store.write_bytes_atomic(home.children_index, orjson.dumps(
            {"version": VERSION, "runs_mtime_ns": runs_mtime_ns, "children": family}), sync=False)
    except OSError:
        pass


def _save(home: Home, index: dict[str, str | None]) -> None:
    """Write the index; a failure only costs speed (the next read learns the same runs again)."""
    try:
        store.make_dirs(home.cache_dir)
        store.write_bytes_atomic(home.parents_index, orjson.dumps({"version": VERSION, "parents": index}),
                                 sync=False)
    except OSError:
        pass
