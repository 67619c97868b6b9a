"""Checkpoints two attempts never write at once: staged per attempt, promoted whole while current.

    with report.checkpoint("step-1000") as folder:   # a fresh folder of this attempt's own
        torch.save(state, folder / "state.pt")
    # leaving the block renames it to $FRAY_CHECKPOINT_DIR/step-1000, if this attempt is still current
    latest = report.latest_checkpoint()                # the newest promoted checkpoint, or None

A checkpoint is written in `$FRAY_CHECKPOINT_DIR/.staging/attempt-<n>/<name>/`
and promoted with one rename(2) into `$FRAY_CHECKPOINT_DIR/<name>`, after
checking that the attempt is still the run's current one (fray.wrapper.fence).
A superseded attempt's checkpoint is never promoted: `Superseded` is raised.

The race, and why it is harmless: the daemon closes an attempt before it submits
the next. A promotion whose check passed just before the close can land just
after it: whole (one rename), under its own name. The next attempt, listing the
folder when it resumes, sees it or does not; it never sees half of it, and no
two attempts ever write in one folder. Names are never reused: promoting onto an
existing checkpoint raises FileExistsError (name them by step). "Newest" is the
promoted folder with the latest mtime (set at promotion).

Outside a fray job there is nothing to fence: the folder is `./checkpoints/<name>`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from . import contract, fence

STAGING = ".staging"


class Superseded(RuntimeError):
    """This attempt is no longer the run's current one: its checkpoint was not promoted."""


def _root() -> Path | None:
    value = os.environ.get(contract.ENV_CHECKPOINT_DIR)
    return Path(value) if value else None


def _still_current() -> bool:
    home, run_id, attempt = (os.environ.get(contract.ENV_HOME), os.environ.get(contract.ENV_RUN_ID),
                             os.environ.get(contract.ENV_ATTEMPT))
    if not (home and run_id and attempt and attempt.isdigit()):
        return True  # not a run fray manages: nothing can supersede it
    return fence.current(home, run_id, int(attempt))


@contextlib.contextmanager
def checkpoint(name: str) -> Iterator[Path]:
    """A folder to write checkpoint `name` into; promoted when the block ends without an exception."""
    if not name or name.startswith(".") or os.sep in name:
        raise ValueError(f"a checkpoint name is one plain folder name, like step-1000, not {name!r}")
    root = _root()
    if root is None:
        folder = Path("checkpoints") / name
        folder.mkdir(parents=True, exist_ok=False)
        yield folder
        return
    staging = root / STAGING / f"attempt-{os.environ.get(contract.ENV_ATTEMPT, '0')}" / name
    shutil.rmtree(staging, ignore_errors=True)  # what a crash of this attempt left
    staging.mkdir(parents=True, mode=0o700)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    target = root / name
    if target.exists():
        shutil.rmtree(staging, ignore_errors=True)
        raise FileExistsError(f"checkpoint {target} exists already: give each checkpoint a new name (its step)")
    if not _still_current():
        raise Superseded(f"not promoting checkpoint {name!r}: this attempt has been superseded "
                         f"(it stays in {staging})")
    now = time.time()
    os.utime(staging, (now, now))
    os.rename(staging, target)


def latest_checkpoint() -> Path | None:
    """The most recently promoted checkpoint folder, or None when there is none."""
    root = _root() or Path("checkpoints")
    try:
        folders = [entry for entry in os.scandir(root) if entry.is_dir() and not entry.name.startswith(".")]
    except FileNotFoundError:
        return None
    if not folders:
        return None
    newest = max(folders, key=lambda entry: (entry.stat().st_mtime_ns, entry.name))
    return Path(newest.path)
