"""The daemon's summary of the runs not running: `fray list` costs the rows it prints plus the runs running.

A sweep waiting (paused, `--max-parallel`, `--after`) has thousands of runs that
are not ended, and a listing would read every one of their meta.json files to
print one folded row. The daemon holds all of them in memory (fray.daemon.run_index),
so it writes, now and then, the row of every run whose row does not move with
time: ended, or not ended with no attempt in flight and no backoff timer
(fray.daemon.summary_writer). A reader takes those rows from here and reads the
others (the runs running, those the summary does not name) as before.

Why a stale summary never hides a change:

- It names where the daemon's journal of replaced meta.json files
  (fray.state.run_changes) stood when it was written; every run the journal
  names after that is read live. A summary of another journal (another
  daemon's, one replaced by hand) is not used at all.
- It names how far it read audit.jsonl, where every control request (pause,
  unpause, stop, restart, start, config-set) is appended after its
  control.json is written; every run named in a line after that is read
  live. The daemon leaves out a run named in a line it read until it has read
  that run's new control.json (fray.daemon.summary_writer).
- A run not in it (new, deferred, unreadable, running) is read as before; a run
  in it whose folder is gone is not listed (runs/ is listed every time).

A meta.json changed by another hand than the daemon's (edited, restored from its
copy) is journaled once the daemon's scan sees it (fray.state.run_changes):
until then the summary, like the row cache, shows the row it had.

The file (cache/list-summary.json, schemas/list-summary.json) is derived data
with one writer, the daemon holding the lease, written atomically: unreadable,
of another version or of another journal, it is ignored, never reported.
Rows are kept as in fray.state.row_cache: each distinct shape once, and per run
only what is its own.
"""

from __future__ import annotations

import os
from collections.abc import Container
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from fray.state import run_changes
from fray.state.layout import Home

NAME = "list-summary.json"  # in the cache folder, beside the journal (fray.state.run_changes)
VERSION = 1
OWN_FIELDS = ("run_id", "name", "created_at")  # a row's own fields, None in its shape; and its place in its group
Row = dict[str, Any]


class Summary(NamedTuple):
    """A summary as read: rows by run id (each [shape index, name, created_at, index in its group or None]), and
    where it stood."""

    entries: dict[str, list[Any]]
    shapes: list[Row]
    journal: list[Any]  # [token, offset] in fray.state.run_changes' journal
    audit: int  # bytes of audit.jsonl read

    def row(self, run_id: str) -> Row | None:
        """The run's row (None: not in the summary, or its entry damaged: read the run)."""
        entry = self.entries.get(run_id)
        if type(entry) is not list or len(entry) != 4 or type(entry[0]) is not int \
                or not 0 <= entry[0] < len(self.shapes):
            return None
        row = self.shapes[entry[0]].copy()
        row["run_id"], row["name"], row["created_at"] = run_id, entry[1], entry[2]
        if entry[3] is not None:
            group = row["group"]
            if type(group) is not dict:
                return None
            row["group"] = {**group, "index": entry[3]}
        return row


    def rows_of(self, run_ids: list[str], stale: Container[str], shared: bool = False) -> list[Row | None]:
        """Each run's row (None: read the run: in `stale`, not here, or its entry damaged), in one loop (`fray
        list` does this for 10,000 runs). `shared`: the listing folds sweeps' members into their sweep's row
        (core.sweeps.folding reads their status, phase, paused flag, creation time, backend, mode and group),
        so the members alike share one row instead of one built for each of 10,000 points."""
        entries, row = self.entries, self.row
        swept = [shared and type(g := shape.get("group")) is dict and g.get("kind") == "sweep" for shape in self.shapes]
        alike: dict[tuple[Any, Any], Row] = {}  # (shape, created_at) -> the row its points share
        found: list[Row | None] = []
        for run_id in run_ids:
            entry = entries.get(run_id)
            if entry is None or run_id in stale:
                found.append(None)
                continue
            if shared:
                try:  # a shared row is what folding reads, all of it in the key: a point's damaged name is not
                    key = (entry[0], entry[2])
                    hit = alike.get(key)
                except (IndexError, KeyError, TypeError):
                    key, hit = None, None
                if hit is not None:
                    found.append(hit)
                    continue
            built = row(run_id)  # checks the entry
            if built is not None and shared and swept[entry[0]] and type(entry[2]) in (float, int):
                alike[key] = built
            found.append(built)
        return found


def path(home: Home) -> Path:
    return home.cache_dir / NAME


def encode(rows: dict[str, Row], journal: tuple[str, int], audit: int, generation: int | None,
           written_at: float) -> bytes:
    """The file's bytes for these rows (the daemon's side)."""
    shapes: list[Row] = []
    index_of: dict[bytes, int] = {}
    entries: dict[str, list[Any]] = {}
    for run_id, row in rows.items():
        shape = {**row, **dict.fromkeys(OWN_FIELDS)}
        group = row.get("group")
        if group is not None:
            shape["group"] = {**group, "index": None}  # the same for every member: in the shape, once
        index = index_of.setdefault(orjson.dumps(shape), len(shapes))
        if index == len(shapes):
            shapes.append(shape)
        entries[run_id] = [index, row["name"], row["created_at"], group["index"] if group is not None else None]
    return orjson.dumps({"version": VERSION, "generation": generation, "written_at": written_at,
                         "journal": list(journal), "audit": audit, "shapes": shapes, "rows": entries})


def load(home: Home) -> Summary | None:
    """The summary on disk, None when there is none or it cannot be used."""
    try:
        data = orjson.loads(path(home).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("rows"), dict)
            and isinstance(data.get("shapes"), list) and all(type(s) is dict for s in data["shapes"])
            and isinstance(data.get("journal"), list) and type(data.get("audit")) is int):
        return None
    return Summary(data["rows"], data["shapes"], data["journal"], data["audit"])


def changed_since(home: Home, summary: Summary) -> frozenset[str] | None:
    """The runs that may have changed since the summary was written, to be read live; None: it cannot be
    trusted at all (another journal, audit.jsonl replaced or with a line that cannot be read), so every run
    is read as without it."""
    changes = run_changes.read_since(home, summary.journal)
    if changes.run_ids is None:
        return None
    requested = requested_since(home, summary.audit)
    if requested is None or requested.unreadable:
        return None
    return changes.run_ids | requested.run_ids if requested.run_ids else changes.run_ids


class Requests(NamedTuple):
    """What audit.jsonl says was asked after an offset."""

    run_ids: frozenset[str]  # the runs named
    offset: int  # where its last complete line ends
    unreadable: bool  # a line that is not JSON (a request cut off by a crash): which run it was is unknown


def requested_since(home: Home, offset: int) -> Requests | None:
    """The requests appended to audit.jsonl after `offset`; None when the file is shorter than that (replaced)."""
    try:
        size = os.stat(home.audit).st_size
    except FileNotFoundError:
        size = 0
    if size == offset:
        return Requests(frozenset(), offset, False)
    if size < offset:
        return None
    try:
        with open(home.audit, "rb") as handle:
            handle.seek(offset)
            data = handle.read(size - offset)
    except OSError:
        return None
    complete = data.rfind(b"\n") + 1  # a line still being appended: its run is read once it is whole
    run_ids, unreadable = set(), False
    for line in data[:complete].splitlines():
        if not line.strip():
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            unreadable = True
            continue
        run_id = entry.get("run_id") if isinstance(entry, dict) else None
        if isinstance(run_id, str):
            run_ids.add(run_id)
    return Requests(frozenset(run_ids), offset + complete, unreadable)
