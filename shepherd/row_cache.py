"""A cache of `fray list` rows for ended runs, keyed by the stat of their meta.json.

An ended run's row depends only on its meta.json, and the daemon replaces that
file (new inode, new mtime) whenever anything about the run changes, so a row
whose key still matches is exactly what a fresh read would give. Listing 1,000
runs then costs one stat per ended run instead of a read, a parse and a
validation. The cache is derived data, not state: when it is unreadable or from
another version it is ignored and rebuilt, never reported as corrupt. Any
`fray list` may rewrite it (atomically; the last writer wins, each version whole).
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from shepherd import store
from shepherd.layout import Home

VERSION = 2  # 2: rows carry parent_run_id (cluster API families)
StatKey = list[int]


def stat_key(path: os.PathLike[str] | str) -> StatKey | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_size]


class RowCache:
    def __init__(self, home: Home, entries: dict[str, list[Any]]) -> None:
        self.home = home
        self._entries = entries  # run_id -> [stat key, row]
        self._dirty = False

    @classmethod
    def load(cls, home: Home) -> "RowCache":
        try:
            data = orjson.loads(home.list_cache.read_bytes())
            if isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("rows"), dict):
                return cls(home, data["rows"])
        except (OSError, orjson.JSONDecodeError):
            pass
        return cls(home, {})

    def get(self, run_id: str, key: StatKey | None) -> dict[str, Any] | None:
        hit = self._entries.get(run_id)
        if key is not None and isinstance(hit, list) and len(hit) == 2 and hit[0] == key:
            return hit[1]
        return None

    def put(self, run_id: str, key: StatKey | None, row: dict[str, Any]) -> None:
        if key is not None:
            self._entries[run_id] = [key, row]
            self._dirty = True

    def save(self, live_ids: set[str]) -> None:
        """Write the cache if it gained rows or lost runs; a failure only costs speed."""
        stale = [run_id for run_id in self._entries if run_id not in live_ids]
        for run_id in stale:
            del self._entries[run_id]
        if not (self._dirty or stale):
            return
        try:
            store.make_dirs(self.home.cache_dir)
            store.write_bytes_atomic(self.home.list_cache, orjson.dumps({"version": VERSION, "rows": self._entries}))
        except OSError:
            pass
