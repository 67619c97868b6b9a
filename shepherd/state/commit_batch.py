"""Group commit: the daemon's writes of one cycle made durable together, by one barrier, not an fsync each.

A file written alone is temp file + fsync + rename (fray.state.store): one
journal commit per file, about a millisecond each, most of the daemon's time
when hundreds of runs change at once (a sweep starting, `fray.map`, a group
stopped). A batch keeps the same guarantees at the cost of two barriers:

1. `write` puts each new version in a temp file beside its target (a dotfile
   no reader lists), not synced, and remembers it; readers still see the old file;
2. `commit` makes every temp file's data durable with one barrier, renames each
   over its target (a reader sees the old file or the new one, never half), then
   makes the renames durable with a second barrier.

After a crash each target is its old version (its temp file was lost or never
renamed) or its new one, complete; the daemon being the one writer of the files
it batches, a version written twice in one batch keeps only the newest. The
barrier is syncfs(2) on the file system of FRAY_HOME, which also flushes the
folders the renames changed (one call instead of an fsync per folder); where
there is no syncfs (not Linux) it is sync(2). Nothing that must follow a file's
durability may happen before `commit` returns: the daemon commits before it asks
a backend to start or stop anything (fray.daemon.submitting).

Before the first barrier the run ids of the meta.json files about to be
replaced go into the journal `fray list` reads instead of a stat per run, and
after the second a line saying those renames are over (fray.state.run_changes).

A daemon killed between `write` and `commit` leaves its temp files behind
(hidden, never read); `remove_left_behind` removes those of meta.json and its
copy that another process wrote: one daemon per FRAY_HOME writes them, so
another pid's temp file can only be a dead daemon's.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable

from fray.core import validation
from fray.state import store
from fray.state.layout import Home
from fray.state.run_changes import Journal
from fray.wrapper import contract
from fray.wrapper import face as wrapper

BATCHED = (contract.META, contract.META_COPY)  # what the daemon commits in batches


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs, found at the first barrier: find_library runs ldconfig, which no reader should pay for."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.syncfs  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def barrier(folder: Path) -> None:
    """Everything written so far on `folder`'s file system, data and names, on disk when this returns."""
    syncfs = _syncfs()
    if syncfs is not None:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    os.sync()


class CommitBatch:
    """Writes staged in temp files until `commit` makes them durable and visible together."""

    def __init__(self, root: Path, journal: Journal | None = None, fence: Callable[[], None] = lambda: None) -> None:
        self.root = root  # any folder on the file system the batched files live on (FRAY_HOME)
        self._journal = journal  # told which runs' meta.json each commit replaces (None: no reader relies on it)
        # Raises (and nothing is renamed) once the writer may no longer write: a daemon whose lease passed to another
        # (fray.daemon.lease_keeper). Checked before the first barrier and again after it, just before the renames.
        self.fence = fence
        self._staged: dict[str, str] = {}  # target path -> its temp file, in the order first staged
        self._listeners: list[Callable[[list[str]], None]] = []

    def on_commit(self, listener: Callable[[list[str]], None]) -> None:
        """Call `listener(targets)` after each commit with the targets now in place and durable."""
        self._listeners.append(listener)

    def __len__(self) -> int:
        return len(self._staged)

    def write_bytes(self, path: Path | str, data: bytes) -> None:
        """Stage `data` as the next version of `path` (raises OSError, nothing staged, when it cannot)."""
        target = os.fspath(path)
        tmp = wrapper.temp_beside(target, data, sync=False)
        earlier = self._staged.pop(target, None)
        if earlier is not None:
            wrapper.discard(earlier)  # two versions in one batch: the newer is the one that counts
        self._staged[target] = tmp

    def write_json(self, path: Path | str, document: Any, schema: str) -> None:
        """Stage a validated document (store.write_json's refusal of an invalid one, before any write)."""
        problems = validation.errors(schema, document)
        if problems:
            raise ValueError(f"refusing to write {path} that violates schema {schema!r}: {'; '.join(problems)}")
        self.write_bytes(path, store.dumps(document))

    def commit(self) -> int:
        """Barrier, renames, barrier; how many files were committed. A rename that fails drops that file's new
        version (its temp file removed) and, once the others are in place, raises the first such OSError."""
        staged, self._staged = self._staged, {}
        if not staged:
            return 0
        failed: OSError | None = None
        try:
            self.fence()
            if self._journal is not None:
                self._journal.intend(_run_ids(staged))
            barrier(self.root)
            self.fence()
        except Exception:  # unannounced, or the data may not be on disk, or fenced: renaming now could hide a change,
            # leave an empty file after a crash, or overwrite a newer daemon's decision
            for tmp in staged.values():
                wrapper.discard(tmp)
            raise
        placed = []
        for target, tmp in staged.items():
            try:
                os.replace(tmp, target)
                placed.append(target)
            except OSError as exc:
                wrapper.discard(tmp)
                failed = failed or exc
        barrier(self.root)
        if self._journal is not None:
            self._journal.done()
        for listener in self._listeners:
            listener(placed)
        if failed is not None:
            raise failed
        return len(staged)

    def discard(self) -> None:
        """Drop every staged version (their targets keep the versions they had)."""
        staged, self._staged = self._staged, {}
        for tmp in staged.values():
            wrapper.discard(tmp)


def _run_ids(staged: dict[str, str]) -> list[str]:
    """The runs whose meta.json is among the targets (a run folder's name is its id)."""
    return [os.path.basename(os.path.dirname(target)) for target in staged
            if os.path.basename(target) == contract.META]


def remove_left_behind(home: Home, writer: int) -> int:
    """Remove the temp files of meta.json and its copy in every run folder that a process other than
    `writer` (this daemon) staged and never committed; how many."""
    prefixes = tuple(f".{name}.tmp-" for name in BATCHED)
    ours = tuple(f"{prefix}{writer}-" for prefix in prefixes)  # wrapper.temp_beside: .<name>.tmp-<pid>-<hex>
    removed = 0
    for run_id in home.run_ids():
        try:
            entries = os.scandir(home.run_folder(run_id))
        except OSError:  # removed meanwhile
            continue
        with entries:
            for entry in entries:
                if entry.name.startswith(prefixes) and not entry.name.startswith(ours):
                    wrapper.discard(entry.path)
                    removed += 1
    return removed
