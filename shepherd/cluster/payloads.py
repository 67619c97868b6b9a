"""Cloudpickle files inside FRAY_HOME: a launched callable, its result, its resume call.

Unpickling runs code, so `load` first checks that the file lies inside
FRAY_HOME (after resolving links), is a regular file owned by this user and
readable by no one else, and that every folder from FRAY_HOME down to it is
ours and private (0700): whoever could have written the file could already run
code as this user, and a result is read only by the owner of FRAY_HOME. `dump`
writes 0600, atomically.
"""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path
from typing import Any

from fray.state import store
from fray.errors import StateError


def dumps(value: Any) -> bytes:
    import cloudpickle

    return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def dump(path: Path, value: Any) -> None:
    store.write_bytes_atomic(path, dumps(value))


def check_private_folders(folder: Path, root: Path) -> None:
    """Raise StateError unless `root` and each folder below it down to `folder` is ours and 0700.

    Both paths are resolved already, and `folder` is `root` or inside it.
    """
    uid = os.getuid()
    current = folder
    while True:
        info = os.lstat(current)
        if not stat.S_ISDIR(info.st_mode):
            raise StateError(f"refusing to unpickle inside {current}: not a folder")
        if info.st_uid != uid:
            raise StateError(f"refusing to unpickle inside {current}: the folder belongs to uid {info.st_uid}, "
                             "not to you")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise StateError(f"refusing to unpickle inside {current}: others may enter it (mode "
                             f"{stat.S_IMODE(info.st_mode):o}; fray makes its folders 700: chmod 700 {current})")
        if current == root:
            return
        current = current.parent


def load(path: Path, home: Path, span: tuple[int, int] | None = None, raw: bool = False) -> Any:
    """The value pickled at `path` (with `span`: in its bytes [start, end), one of a batch's values,
    fray.cluster.call_book), after checking it is a private file of ours inside `home`, in private folders;
    with `raw`, the file's bytes, unpickled by the caller."""
    real = Path(os.path.realpath(path))
    root = Path(os.path.realpath(home))
    if root not in real.parents:
        raise StateError(f"refusing to unpickle {path}: it is not inside FRAY_HOME ({home})")
    check_private_folders(real.parent, root)
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise StateError(f"refusing to unpickle {path}: not a regular file")
        if info.st_uid != os.getuid():
            raise StateError(f"refusing to unpickle {path}: it belongs to uid {info.st_uid}, not to you")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise StateError(f"refusing to unpickle {path}: others may read or write it "
                             f"(mode {stat.S_IMODE(info.st_mode):o}; fray writes 600)")
        if span is not None:
            handle.seek(span[0])
        data = handle.read() if span is None else handle.read(span[1] - span[0])
    return data if raw else pickle.loads(data)
