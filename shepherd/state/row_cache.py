"""A cache of `fray list` inputs, keyed by the stat of the files they came from.

Ended runs: their row, keyed by the stat of meta.json. An ended run's row
depends only on its meta.json, and the daemon replaces that file (new inode, new
mtime) whenever anything about the run changes, so a row whose key still matches
is exactly what a fresh read would give. Listing 1,000 runs then costs one stat
per ended run instead of a read, a parse and a validation. Ended rows are kept
as a shape and what is each run's own: most of a row (its status, reason,
backend, mode...) is what hundreds of other ended runs show too, so each
distinct shape is kept once, in "shapes", and a run's entry holds only its name,
creation time and place in its group. In the bench's home of 10,000 runs
(tests/bench/bench_scale.py) the cache shrank from 5.0 to 1.9 MB, and reading it
from 40 to 19 ms.

Runs still going: their validated meta.json and whether they are paused, keyed
by the stats of meta.json and control.json. Their rows move with time, heartbeat
and progress, which are always read; what the cache saves is reading, parsing
and validating the two files that change only when the run does. A meta's spec
is most of it, and runs submitted alike (a sweep, the same script) have the
same one, so each distinct spec is kept once, in "specs", and the runs that
have it share one RunSpec when they are read: `fray list` with 1,000 runs going
parses and builds a few specs, not 1,000 (a run's spec is replaced whole when
it changes, never changed in place: fray.core.model.Meta.copy shares it too).

Between listings almost no ended run changes, and a stat per run is still 25
to 75 ms at 10,000 runs. So the cache also keeps where it stopped reading the
daemon's journal of replaced meta.json files (fray.state.run_changes): an
ended row is trusted without a stat unless its run is named in the journal
since, and every row is checked by stat when there is no journal to trust (no
daemon yet, a new daemon's journal, a damaged one).

The cache is derived data, not state: when it is unreadable or from another
version it is ignored and rebuilt, never reported as corrupt. Any `fray list`
may rewrite it (atomically; the last writer wins, each version whole).
"""

from __future__ import annotations

import os
from collections.abc import Container
from typing import Any, Callable

import orjson

from fray.core.model import Meta, RunSpec
from fray.state import store
from fray.state.layout import Home

VERSION = 9  # 2: rows carry parent_run_id (cluster API families); 3: runs still going keep their meta; 4: priority;
# 5: group (sweeps); 6: after (dependency edges); 7: the specs of runs still going, each kept once; 8: ended rows
# as a shared shape and their own fields; 9: the position in the daemon's journal of changed runs
StatKey = list[int]
OWN_FIELDS = ("run_id", "name", "created_at", "group")  # what an ended row does not share with others (None in
# its shape); the run id is the entry's key, the rest its last items


def stat_key(path: os.PathLike[str] | str) -> StatKey | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_size]


class RowCache:
    def __init__(self, home: Home, entries: dict[str, list[Any]], live: dict[str, list[Any]],
                 specs: list[Any], shapes: list[Any], position: Any = None) -> None:
        self.home = home
        self.position = position  # where this cache stopped reading fray.state.run_changes' journal
        self._saved_position = position
        self._entries = entries  # ended run id -> [meta.json key, shape index, name, created_at, group]
        self._shapes = shapes  # the ended rows' shapes, each once (their own fields None)
        self._live = live  # going run id -> [meta.json key, control.json key, meta without its spec, paused, spec]
        self._specs = specs  # the specs of runs going, each once (a live entry's last item is its index here)
        self._built: dict[int, RunSpec] = {}  # spec index -> the RunSpec every run with it shares
        self._dirty = False

    @classmethod
    def load(cls, home: Home) -> "RowCache":
        try:
            data = orjson.loads(home.list_cache.read_bytes())
            if (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("rows"), dict)
                    and isinstance(data.get("live"), dict) and isinstance(data.get("specs"), list)
                    and isinstance(data.get("shapes"), list) and all(type(s) is dict for s in data["shapes"])):
                return cls(home, data["rows"], data["live"], data["specs"], data["shapes"], data.get("journal"))
        except (OSError, orjson.JSONDecodeError):
            pass
        return cls(home, {}, {}, [], [])

    def get(self, run_id: str, key: StatKey | None) -> dict[str, Any] | None:
        """The cached row of an ended run whose meta.json still has this key."""
        hit = self._entries.get(run_id)
        return self._row(run_id, hit) if key is not None and type(hit) is list and hit and hit[0] == key else None

    def _row(self, run_id: str, entry: list[Any]) -> dict[str, Any] | None:
        """An ended run's row from its entry (None for a damaged one: the caller reads the files)."""
        if len(entry) != 5 or type(entry[1]) is not int or not 0 <= entry[1] < len(self._shapes):
            return None
        row = self._shapes[entry[1]].copy()  # a copy: its own fields go in their places, in the row's order
        row["run_id"], row["name"], row["created_at"], row["group"] = run_id, entry[2], entry[3], entry[4]
        return row

    def ended_rows(self, run_ids: list[str], meta_file: Callable[[str], str],
                   changed: Container[str] | None = None) -> list[tuple[StatKey | None, Any]]:
        """(meta.json's key, the cached row of the ended run, or None) of each run: `get` for every run at once,
        in one loop with no call per run but the stat and the row (`fray list` does this for 10,000 runs).
        With `changed` (the runs the journal named since this cache's position) a cached row of a run not in
        it is trusted without a stat."""
        entries, found, stat, row = self._entries, [], os.stat, self._row
        for run_id in run_ids:
            if changed is not None and run_id not in changed:
                hit = entries.get(run_id)
                cached = row(run_id, hit) if type(hit) is list and hit else None
                if cached is not None:
                    found.append((hit[0], cached))  # type: ignore[index]
                    continue
            try:
                st = stat(meta_file(run_id))
            except FileNotFoundError:
                self._forget(run_id)
                found.append((None, None))
                continue
            key, hit = [st.st_ino, st.st_mtime_ns, st.st_size], entries.get(run_id)
            cached = row(run_id, hit) if type(hit) is list and hit and hit[0] == key else None
            if cached is None:
                self._forget(run_id)
            found.append((key, cached))
        return found

    def _forget(self, run_id: str) -> None:
        """Drop a stale ended row: the caller reads the run, and `put` it again if it is still ended (what it
        reads may not be, or not be readable; a position saved past the journal's line must not trust it)."""
        if self._entries.pop(run_id, None) is not None:
            self._dirty = True

    def put(self, run_id: str, key: StatKey | None, row: dict[str, Any]) -> None:
        if key is not None:
            shape = {**row, **dict.fromkeys(OWN_FIELDS)}
            self._shapes.append(shape)  # shared with its equals when saved (`_shared`)
            self._entries[run_id] = [key, len(self._shapes) - 1, row["name"], row["created_at"], row.get("group")]
            self._live.pop(run_id, None)
            self._dirty = True

    def get_live(self, run_id: str, meta_key: StatKey | None, control_key: StatKey | None) -> tuple[Meta, bool] | None:
        """(meta, paused) of a run still going, when neither file changed since (None also for a damaged entry:
        the caller reads the files)."""
        hit = self._live.get(run_id)
        if not (meta_key is not None and control_key is not None and isinstance(hit, list) and len(hit) == 5
                and hit[0] == meta_key and hit[1] == control_key and isinstance(hit[2], dict)):
            return None
        try:
            return Meta.from_dict(hit[2], spec=self._spec(hit[4])), hit[3] is True
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            return None

    def _spec(self, index: Any) -> RunSpec:
        built = self._built.get(index)
        if built is None:
            if type(index) is not int or not 0 <= index < len(self._specs):
                raise IndexError(f"no spec {index!r} in the cache")
            built = self._built[index] = RunSpec.from_dict(self._specs[index])
        return built

    def put_live(self, run_id: str, meta_key: StatKey | None, control_key: StatKey | None, meta: Meta,
                 paused: bool) -> None:
        if meta_key is not None and control_key is not None:
            document = meta.to_dict()
            self._specs.append(document.pop("spec"))  # shared with its equals when saved (`_shared`)
            self._live[run_id] = [meta_key, control_key, document, paused, len(self._specs) - 1]
            self._entries.pop(run_id, None)
            self._dirty = True

    def save(self, existing_ids: set[str]) -> None:
        """Write the cache if it changed, lost runs or read on in the journal; a failure only costs speed."""
        stale = _read_on(self._saved_position, self.position)
        for entries in (self._entries, self._live):
            for run_id in [r for r in entries if r not in existing_ids]:
                del entries[run_id]
                stale = True
        if not (self._dirty or stale):
            return
        self._shapes, self._specs = _shared(self._entries, 1, self._shapes), _shared(self._live, 4, self._specs)
        self._built = {}
        try:
            store.make_dirs(self.home.cache_dir)
            document = {"version": VERSION, "rows": self._entries, "shapes": self._shapes, "live": self._live,
                        "specs": self._specs, "journal": self.position}
            store.write_bytes_atomic(self.home.list_cache, orjson.dumps(document))
        except OSError:
            pass


def _read_on(saved: Any, position: Any) -> bool:
    """Whether the journal position moved enough to be worth a write: another journal, or 64 KiB further (a
    listing that does not save it reads those lines again, a stat for each run they name)."""
    if position is None:
        return saved is not None
    try:
        return bool(position[0] != saved[0] or position[1] - saved[1] >= 1 << 16)
    except (TypeError, IndexError, KeyError):  # none saved, or damaged by hand
        return True


def _shared(entries: dict[str, Any], slot: int, items: list[Any]) -> list[Any]:
    """The items the entries refer to (by index, at `slot`), each distinct one once; the entries are renumbered
    to match, and a damaged one is dropped (the next listing reads that run's files)."""
    shared: list[Any] = []
    index_of: dict[bytes, int] = {}
    renumbered: dict[int, int] = {}
    for run_id, entry in list(entries.items()):
        if not (isinstance(entry, list) and len(entry) == 5 and type(entry[slot]) is int
                and 0 <= entry[slot] < len(items)):
            del entries[run_id]
            continue
        index = renumbered.get(entry[slot])
        if index is None:
            index = index_of.setdefault(orjson.dumps(items[entry[slot]], option=orjson.OPT_SORT_KEYS), len(shared))
            if index == len(shared):
                shared.append(items[entry[slot]])
            renumbered[entry[slot]] = index
        entry[slot] = index
    return shared
