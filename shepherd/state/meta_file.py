"""meta.json and its last good copy: a run survives the loss of its meta.json.

Every write of meta.json writes the same document to meta.last-good.json
beside it, by the same atomic writer, so the two hold the same run. A reader
that finds meta.json corrupt (moved aside by store.read_json) or missing reads
the copy instead: the run keeps its name, its attempts and its spec, `fray
status` shows it and `fray control stop` reaches it. The daemon, meta.json's one
writer, also puts the copy back in meta.json's place (`restore=True`), and the
wrappers' fence reads the copy meanwhile (fray.wrapper.fence). The file moved
aside stays listed with the run's corrupt files.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fray.errors import CorruptFileError
from fray.state import store
from fray.state.layout import RunPaths

if TYPE_CHECKING:  # readers (`fray list`, `fray status`) need no ctypes: only the daemon stages batches
    from fray.state.commit_batch import CommitBatch


def write(paths: RunPaths, document: dict[str, Any], sync: bool = True) -> None:
    """meta.json, then its copy (validated once: the copy is the same bytes)."""
    store.write_json(paths.meta, document, "meta", sync)
    store.write_bytes_atomic(paths.meta_copy, store.dumps(document), sync)


def stage(batch: CommitBatch, paths: RunPaths, document: dict[str, Any]) -> None:
    """meta.json and its copy as the next versions in the daemon's group commit (durable and visible together
    with the cycle's other writes when the batch is committed)."""
    batch.write_json(paths.meta, document, "meta")
    batch.write_bytes(paths.meta_copy, store.dumps(document))


def read(paths: RunPaths, on_restored: Callable[[str], None] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(meta, problem): meta.json, else its last good copy; `problem` says why neither could be read (None
    when one was). With `on_restored` (the daemon only) the copy is written back in meta.json's place and
    `on_restored(what happened)` is called."""
    try:
        raw = store.read_json(paths.meta, "meta")
        if raw is not None:
            return raw, None
        aside = [p.name for p in paths.corrupt_files() if p.name.startswith(paths.meta.name + ".")]
        problem = f"meta.json was corrupt and moved aside ({max(aside)})" if aside else "meta.json is missing"
    except CorruptFileError as exc:
        moved = exc.moved_to.name if exc.moved_to else "?"
        problem = f"meta.json was corrupt ({exc.problem}); moved aside to {moved}"
    try:
        copy = store.read_json(paths.meta_copy, "meta")
    except CorruptFileError as exc:
        return None, f"{problem}, and its last good copy too ({exc.problem})"
    if copy is None:
        return None, problem
    if on_restored is not None:
        try:
            store.write_json(paths.meta, copy, "meta")
            on_restored(f"{problem}; restored from its last good copy ({paths.meta_copy.name})")
        except OSError as exc:
            on_restored(f"{problem}; read from its last good copy, which cannot be put back: {exc}")
    return copy, None
