"""Cloudpickle files inside FRAY_HOME: a launched callable and its result.

Unpickling runs code, so `load` first checks that the file lies inside
FRAY_HOME (after resolving links), is a regular file owned by this user and
readable by no one else: whoever could have written it could already run code
as this user. `dump` writes 0600, atomically.
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


def load(path: Path, home: Path) -> Any:
    """The value pickled at `path`, after checking it is a private file of ours inside `home`."""
    real = Path(os.path.realpath(path))
    root = Path(os.path.realpath(home))
    if root not in real.parents:
        raise StateError(f"refusing to unpickle {path}: it is not inside FRAY_HOME ({home})")
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
        data = handle.read()
    return pickle.loads(data)
