"""Endpoint files: namespaces/<ns>/actors/<name>/<actor_id>.json (schemas/endpoint.json).

Each file is written once, by the ActorServer that registered the actor, and
removed by it on unregister or shutdown, or by the daemon when the job behind
it has ended or moved on to a later attempt. Several actors (from several jobs)
may share a name: the folder holds one file per actor.

Because a file never changes once written, `Directory` caches records by file
name: a lookup costs one `scandir` of the name's folder plus a read of the
files it has not seen yet.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from fray.state import store
from fray.errors import CorruptFileError, UsageError
from fray.state import layout
from fray.state.layout import Home

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise UsageError(f"{what} {value!r} is not valid: use 1-128 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return value


@dataclass(frozen=True)
class Endpoint:
    actor_id: str
    name: str
    namespace: str
    host: str
    port: int
    pid: int
    node: str
    run_id: str | None
    attempt: int | None
    registered_at: float
    metadata: dict[str, Any]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Endpoint":
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def write(home: Home, endpoint: Endpoint) -> Path:
    path = home.endpoint(endpoint.namespace, endpoint.name, endpoint.actor_id)
    store.make_dirs(path.parent)
    store.create_json(path, endpoint.to_dict(), "endpoint")
    return path


def remove(home: Home, namespace: str, name: str, actor_id: str) -> bool:
    try:
        os.unlink(home.endpoint(namespace, name, actor_id))
        return True
    except FileNotFoundError:
        return False


class Directory:
    """Reads the endpoints registered under a name, remembering files already read.

    Per folder it keeps the records by actor id and the sorted answer: while the
    folder lists the same files, a lookup is one `listdir` and a set comparison.
    """

    def __init__(self, home: Home) -> None:
        self.home = home
        self._known: dict[Path, dict[str, Endpoint | None]] = {}
        self._answers: dict[Path, tuple[frozenset[str], tuple[Endpoint, ...]]] = {}
        self._lock = threading.Lock()

    def lookup(self, namespace: str, name: str) -> tuple[Endpoint, ...]:
        """The endpoints under `name`, oldest registration first (unreadable files are skipped)."""
        folder = self.home.actor_dir(namespace, name)
        try:
            listing = frozenset(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            listing = frozenset()
        with self._lock:
            answer = self._answers.get(folder)
            if answer is not None and answer[0] == listing:
                return answer[1]
            known = self._known.setdefault(folder, {})
        ids = {i for i in map(layout.record_id, listing) if i is not None}
        fresh = {i: _read(self.home.endpoint(namespace, name, i)) for i in ids if i not in known}
        with self._lock:
            known.update(fresh)
            for gone in [i for i in known if i not in ids]:
                del known[gone]
            records = tuple(sorted((r for r in known.values() if r is not None),
                                   key=lambda e: (e.registered_at, e.actor_id)))
            self._answers[folder] = (listing, records)
        return records


def _read(path: Path | str) -> Endpoint | None:
    raw = read_record(path)
    return Endpoint.from_dict(raw) if raw is not None else None


def read_record(path: Path | str) -> dict[str, Any] | None:
    """An endpoint file's validated record; None when it is gone or was corrupt (moved aside)."""
    try:
        return store.read_json(path, "endpoint")
    except (CorruptFileError, OSError):
        return None  # moved aside as corrupt, or gone meanwhile


def scan(home: Home) -> Iterator[Endpoint]:
    """Every endpoint in FRAY_HOME (for the daemon's clean-up and `fray actors list`).

    Paths come from the folder listings themselves (os.scandir), one listing per name and no path built per
    file: `fray actors list` with 10,000 names costs the reads, not 90,000 pathlib joins.
    """
    try:
        namespaces = sorted(e.name for e in os.scandir(home.namespaces_dir) if e.is_dir())
    except FileNotFoundError:
        return
    for namespace in namespaces:
        try:
            names = sorted((e for e in os.scandir(home.actors_dir(namespace)) if e.is_dir()), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            try:
                files = [e.path for e in os.scandir(name.path) if layout.record_id(e.name) is not None]
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed meanwhile
            records = [r for r in map(_read, files) if r]
            yield from sorted(records, key=lambda e: (e.registered_at, e.actor_id))
