"""`fray actors list`'s reading of every endpoint file, with the records it already validated kept in a cache.

An endpoint file is written once and never changed (fray.state.endpoints), so
a record read and validated once is what a fresh read of the same file would
give: the cache keeps each record by its path and inode, both of which the
folder listing (os.scandir) already carries. Listing 10,000 names then costs
their folder listings, not 10,000 opens, parses, validations and dataclasses.
A file removed is not listed and so not shown; a file written anew (a new
actor id, a new inode) is read. The cache is derived data: unreadable or from
another version, it is ignored and rebuilt; any listing may rewrite it
(atomically, the last writer winning, each version whole), and a listing killed
before it wrote the cache has lost only speed.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from fray.state.endpoints import read_record
from fray.state import layout, store
from fray.state.layout import Home

VERSION = 1
CACHE_NAME = "endpoints.json"


def records(home: Home) -> list[dict[str, Any]]:
    """Every endpoint record (schemas/endpoint.json), by namespace, then name, then registration (oldest first)."""
    cached = _load(home)
    seen: dict[str, list[Any]] = {}
    found: list[dict[str, Any]] = []
    hits = 0
    suffix = layout.RECORD_SUFFIX
    for name_dir in _name_dirs(home):  # one loop, no call per file but the listing's: 10,000 names in a bench
        mine = []
        try:
            with os.scandir(name_dir) as listed:
                for entry in listed:
                    name = entry.name
                    if not name.endswith(suffix) or name.startswith("."):  # layout.record_id's test
                        continue
                    path, inode = entry.path, entry.inode()
                    hit = cached.get(path)
                    if type(hit) is list and len(hit) == 2 and hit[0] == inode and type(hit[1]) is dict:
                        hits += 1
                        seen[path] = hit
                        mine.append(hit[1])
                        continue
                    record = read_record(path)
                    if record is not None:
                        seen[path] = [inode, record]
                        mine.append(record)
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed meanwhile
        if len(mine) > 1:
            mine.sort(key=_registration)
        found += mine
    if hits != len(seen) or hits != len(cached):  # a file read anew, or one gone
        _save(home, seen)
    return found


def _registration(record: dict[str, Any]) -> tuple[Any, Any]:
    return record["registered_at"], record["actor_id"]


def _name_dirs(home: Home) -> list[str]:
    """namespaces/<ns>/actors/<name>/ of every namespace and name, sorted, from the folder listings."""
    try:
        namespaces = sorted(e.path for e in os.scandir(home.namespaces_dir) if e.is_dir())
    except FileNotFoundError:
        return []
    found: list[str] = []
    for namespace in namespaces:
        try:
            found += sorted(e.path for e in os.scandir(os.path.join(namespace, "actors")) if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            continue
    return found


def _load(home: Home) -> dict[str, list[Any]]:
    try:
        data = orjson.loads((home.cache_dir / CACHE_NAME).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("files"), dict)):
        return {}
    return data["files"]  # type: ignore[no-any-return]  # each entry checked where it is used (`records`)


def _save(home: Home, files: dict[str, list[Any]]) -> None:
    """Write the cache (no fsync: after a crash it is old, empty or gone, and each is rebuilt); a failure costs
    only speed."""
    try:
        store.make_dirs(home.cache_dir)
        store.write_bytes_atomic(home.cache_dir / CACHE_NAME, orjson.dumps({"version": VERSION, "files": files}),
                                 sync=False)
    except OSError:
        pass
