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

Where FRAY_HOME has no atomic rename (FRAY_RECORDS=write-once: a Cloud
Storage bucket through gcsfuse, where renaming a folder copies and deletes
each object, or is refused) nothing is moved: the staged folder stays where it
was written, and promotion is one small write-once record,
`$FRAY_CHECKPOINT_DIR/.promoted/<name>`, created with O_EXCL after the same
check and naming that folder. `latest_checkpoint()` reads both layouts (the
setting may change between runs); a record without its end newline (still
being uploaded) or naming a folder that is gone is skipped. What the record
gives is what the rename gives: the checkpoint counts once whole, two attempts
never write one folder, a name is taken once.

Outside a fray job there is nothing to fence: the folder is `./checkpoints/<name>`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from . import contract, fence, history, progress_buffer, records, versions
from .fence import Superseded

STAGING = ".staging"
PROMOTED = ".promoted"  # write-once promotion records, one per checkpoint name


def _root() -> Path | None:
    value = os.environ.get(contract.ENV_CHECKPOINT_DIR)
    return Path(value) if value else None


@contextlib.contextmanager
def checkpoint(name: str, step: int | None = None) -> Iterator[Path]:
    """A folder to write checkpoint `name` into; promoted when the block ends without an exception.

    Once promoted, the attempt's history marks that the checkpoint holds `step`
    (by default the last step reported to progress.json)."""
    if not name or name.startswith(".") or os.sep in name:
        raise ValueError(f"a checkpoint name is one plain folder name, like step-1000, not {name!r}")
    root = _root()
    if root is None:
        folder = Path("checkpoints") / name
        folder.mkdir(parents=True, exist_ok=False)
        yield folder
        return
    staging = root / STAGING / f"attempt-{os.environ.get(contract.ENV_ATTEMPT, '0')}" / name
    in_place = records.write_once()
    if in_place:
        _refuse_taken(root, name)  # before clearing the folder: a promoted one is never staged again
    shutil.rmtree(staging, ignore_errors=True)  # what a crash of this attempt left
    staging.mkdir(parents=True, mode=0o700)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        _refuse_taken(root, name)
    except FileExistsError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        fence.guard(strict=True)  # a promotion cannot be taken back: refused also when that cannot be told
    except Superseded as exc:
        raise Superseded(f"not promoting checkpoint {name!r} (it stays in {staging}): {exc}") from None
    if in_place:
        _promote_in_place(root, name, staging)
    else:
        now = time.time()
        os.utime(staging, (now, now))
        os.rename(staging, root / name)
    _mark(name, step)


def _mark(name: str, step: int | None) -> None:
    """Note in the attempt's history which step checkpoint `name` holds; advisory, so never raises."""
    folder = os.environ.get(contract.ENV_ATTEMPT_DIR)
    if not folder:
        return
    if step is None:
        reported = progress_buffer.last(folder)  # this process's report, perhaps not written yet
        try:
            reported = reported or records.read_json(os.path.join(folder, contract.PROGRESS))
        except (OSError, ValueError):
            reported = None
        step = reported.get("step") if isinstance(reported, dict) else None
    try:
        history.mark_checkpoint(folder, name, step if isinstance(step, int) and not isinstance(step, bool) else None)
    except OSError as exc:
        print(f"fray report: checkpoint {name!r} not marked in the history: {exc}", file=sys.stderr)


def _refuse_taken(root: Path, name: str) -> None:
    if (root / name).exists() or (root / PROMOTED / name).exists():
        raise FileExistsError(f"checkpoint {name!r} exists already in {root}: "
                              "give each checkpoint a new name (its step)")


def _promote_in_place(root: Path, name: str, staging: Path) -> None:
    records.make_private_dir(root / PROMOTED)
    promotion = {"folder": staging.relative_to(root).as_posix(), "promoted_at": time.time()}
    if not records.create_json(root / PROMOTED / name, promotion):
        raise FileExistsError(f"checkpoint {name!r} was promoted meanwhile by another writer; "
                              f"this one stays in {staging}")


def latest_checkpoint(root: Path | None = None) -> Path | None:
    """The most recently promoted checkpoint folder, or None when there is none; `root`: another run's
    checkpoint folder (what the daemon tells a run started --after it), else this run's."""
    root = root or _root() or Path("checkpoints")
    promoted = [*_renamed(root), *_recorded(root)]
    if not promoted:
        return None
    return max(promoted)[2]


def _renamed(root: Path) -> list[tuple[float, str, Path]]:
    """Checkpoints promoted by rename, each as (promotion time, name, folder)."""
    try:
        entries = [entry for entry in os.scandir(root) if entry.is_dir() and not entry.name.startswith(".")]
    except FileNotFoundError:
        return []
    return [(entry.stat().st_mtime_ns / 1e9, entry.name, Path(entry.path)) for entry in entries]


def _recorded(root: Path) -> list[tuple[float, str, Path]]:
    """Checkpoints promoted by a write-once record, each as (promotion time, name, folder)."""
    try:
        names = os.listdir(root / PROMOTED)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        try:
            data = (root / PROMOTED / name).read_bytes()
            if not versions.complete(data):
                continue  # still being uploaded
            promotion = json.loads(data)
            folder = root / promotion["folder"]
            if folder.is_dir():
                found.append((float(promotion["promoted_at"]), name, folder))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable or vanished: not a checkpoint to resume from
    return found
