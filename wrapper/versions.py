"""Write-once records: the attempt files' layout for a FRAY_HOME without atomic rename (gcsfuse).

The default layout rewrites a record by rename (fray.wrapper.records): a reader
sees the old file or the new one. A Cloud Storage bucket mounted with gcsfuse
has no atomic rename (it is a copy and a delete) and no hard links, and every
rewrite of a name makes a new object generation that a reader on another host
may still hold stale metadata for. So in the write-once layout (FRAY_RECORDS=write-once)
a record `<name>` is a folder `<name>.d/` of files written once each and
never renamed or rewritten: `<name>.d/000000042` is the 42nd version.

- The writer lists the folder, creates the next number (O_EXCL), writes,
  fsyncs and closes, then deletes the versions more than `KEEP` behind it, so
  the folder holds at most KEEP + 1 files however long the attempt runs.
- Every version ends with a newline, its end marker (a JSON document and a
  heartbeat alike). A reader takes the newest version that has its end marker
  and parses; one without (still being written or uploaded, or cut short by a
  host that died) is skipped, and the one before it is read instead. A version
  deleted between the listing and the read is skipped the same way.

`newest_first` and `complete` decide; `write` and `read_newest` are the IO.
One reader serves both layouts: `fray.wrapper.records.read_json` and the shepherd's
`fray.state.store.read_json`/`read_heartbeat` try the plain file first and come
here when there is none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

SUFFIX = ".d"
KEEP = 3  # versions kept behind the newest: a slow reader still finds the one it listed
DIGITS = 9
FILE_MODE = 0o600
_CREATE_TRIES = 8  # another writer took the number: try the next (records have one writer; this is a safety net)
_LIST_TRIES = 3  # every listed version vanished (pruned under a slow reader): list again


def versions_dir(path: str | os.PathLike[str]) -> str:
    """The folder of `path`'s versions: `<path>.d`."""
    return os.fspath(path) + SUFFIX


def version_name(seq: int) -> str:
    return f"{seq:0{DIGITS}d}"


def seq_of(name: str) -> int | None:
    """The number of a version file, None for anything else in the folder."""
    return int(name) if name.isdigit() and name.isascii() else None


def newest_first(names: Iterable[str]) -> list[str]:
    """The version files among `names`, newest first."""
    numbered = [(seq, name) for name in names if (seq := seq_of(name)) is not None]
    return [name for _, name in sorted(numbered, reverse=True)]


def next_seq(names: Iterable[str]) -> int:
    return max((seq for name in names if (seq := seq_of(name)) is not None), default=0) + 1


def to_prune(names: Iterable[str], written: int, keep: int = KEEP) -> list[str]:
    """The versions at least `keep` + 1 behind version `written`: deleted once it is whole."""
    return [name for name in names if (seq := seq_of(name)) is not None and seq < written - keep]


def complete(data: bytes) -> bool:
    """Whether a version has its end marker: the trailing newline every writer puts last."""
    return data.endswith(b"\n")


def write(path: str | os.PathLike[str], data: bytes, keep: int = KEEP) -> str:
    """Write `data` (which must end with a newline) as the next version of `path`; the version's file path.

    Raises OSError (and ValueError for data without its end marker); an OSError
    may leave a partial version behind, which readers skip and a later write prunes.
    """
    if not complete(data):
        raise ValueError("a version must end with a newline, its end marker")
    folder = versions_dir(path)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        os.mkdir(folder, 0o700)
        names = []
    seq = next_seq(names)
    for _ in range(_CREATE_TRIES):
        target = os.path.join(folder, version_name(seq))
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            break
        except FileExistsError:
            seq += 1
    else:
        raise FileExistsError(f"{folder}: versions {seq - _CREATE_TRIES}..{seq - 1} all exist")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())  # on gcsfuse: the upload; the version is whole in the bucket from here on
    for name in to_prune(names, seq, keep):
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:
            pass
    return target


def read_newest(path: str | os.PathLike[str], parse: Callable[[str, bytes], T]) -> T | None:
    """`parse(file, data)` of the newest complete version of `path`; None when there is none.

    A version without its end marker, or that `parse` refuses with ValueError,
    is skipped: it may be mid-write. Raises nothing for a missing folder.
    """
    folder = versions_dir(path)
    for _ in range(_LIST_TRIES):
        try:
            names = newest_first(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return None
        vanished = False
        for name in names:
            version = os.path.join(folder, name)
            try:
                with open(version, "rb") as handle:
                    data = handle.read()
            except FileNotFoundError:
                vanished = True  # pruned since the listing: an older one may still be here
                continue
            if not complete(data):
                continue
            try:
                return parse(version, data)
            except ValueError:
                continue
        if not vanished:
            return None
    return None
