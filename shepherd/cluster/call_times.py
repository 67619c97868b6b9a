"""How long a function's calls take, as its last chunk run measured them: what `fray.map` packs its calls by.

    functions/<key>.json    schemas/call-time.json: the function, the mean seconds of one call, how many calls

The key names the function by its module, qualified name and code (a lambda or a function redefined in a
notebook gets a key of its own). The job writes it at the end of each chunk run (fray.cluster.chunks), atomically
but without an fsync: it is advice, and a lost or stale one only makes the next map plan as for a function never
measured (fray.core.batching).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable

FUNCTIONS_DIR = "functions"
SCHEMA = "call-time"


def key_of(fn: Callable[..., Any]) -> tuple[str, str]:
    """(key, description) of `fn`: its module and qualified name, and a hash of them and its code."""
    target = getattr(fn, "func", fn)  # functools.partial: its function's calls
    code = getattr(target, "__code__", None)
    if code is None:  # a callable object: its class's __call__
        code = getattr(getattr(type(target), "__call__", None), "__code__", None)
    name = f"{getattr(target, '__module__', None) or '?'}.{getattr(target, '__qualname__', type(target).__qualname__)}"
    digest = hashlib.sha256(name.encode())
    if code is not None:
        digest.update(code.co_code)
        digest.update(repr(code.co_consts).encode())
    return digest.hexdigest()[:24], name


def path(root: Path, key: str) -> Path:
    return root / FUNCTIONS_DIR / f"{key}.json"


def read(root: Path, key: str) -> float | None:
    """The measured seconds of one call of the function `key`; None when never measured (or unreadable)."""
    from fray.errors import CorruptFileError
    from fray.state import store

    try:
        document = store.read_json(path(root, key), SCHEMA)
    except (CorruptFileError, OSError):
        return None
    return None if document is None else float(document["call_sec"])


def write(root: Path, key: str, function: str, call_sec: float, calls: int) -> None:
    """Record what a chunk run measured; an error is no reason to fail the run (it is advice)."""
    from fray.state import store

    try:
        store.make_dirs(root / FUNCTIONS_DIR)
        store.write_json(path(root, key), {"function": function, "call_sec": max(0.0, call_sec), "calls": calls,
                                           "updated_at": time.time()}, SCHEMA, sync=False)
    except OSError:
        pass
