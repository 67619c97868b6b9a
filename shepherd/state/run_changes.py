"""The journal of runs whose meta.json the daemon replaces: `fray list` trusts its cache without a stat per run.

`fray list` caches each ended run's row keyed by the stat of its meta.json
(fray.state.row_cache). Checking 10,000 keys is 10,000 stat calls, 25 to 75 ms
on the bench's 2-core VM, paid by every listing although almost no ended run
changes between two of them. The daemon is the one writer of an existing run's
meta.json, and it replaces them in batches (fray.state.commit_batch), so it
can say which ones it replaces: before the renames of a batch it appends their
run ids to this journal, one per line, and after them a line ".". A reader
that remembers where it stopped last time reads what was appended since, checks
only the runs named there (by stat, as before), and trusts every other cached
row. New runs are new folders, which every listing sees (`Home.run_ids`);
deleted ones are folders gone.

Why this never hides a change:

- The ids go in *before* the renames, and the batch's first barrier makes them
  durable with the new files' data: after a crash there is no replaced
  meta.json whose id is not in the journal.
- Ids after the last "." are of a batch that may still be renaming: a reader
  checks them but does not move its position past them, so it checks them
  again next time, until a "." (this daemon's next batch, or the next daemon's)
  says their renames are over. A reader that saw a file before its rename thus
  sees the rename on a later listing.
- Each daemon starts a journal of its own (atomically, under a new random
  token in its first line) before its first batch, and starts a new one when
  it passes ROTATE_AT_BYTES. A reader whose position is in another journal, or
  that finds none, or a line that is not a run id (a tail torn by a crash),
  checks every run by stat, as it did before there was a journal.
- The journal is derived data in the cache folder, like the cache itself: a
  journal deleted or replaced by hand costs one full check, never a wrong row.

A meta.json changed by another hand (edited, restored from its last good copy
by fray.state.meta_file.read) is named by the daemon when its scan sees the new
stat (`Journal.note`): within a cycle when the file watcher reports the folder,
within a full scan (30 s) at most. Until then `fray list` shows the row it had.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple

from fray.state import store
from fray.state.layout import Home

NAME = "meta-changes.log"
HEADER = b"fray meta.json changes "  # + 32 hex digits (this journal's token) + newline
HEADER_LEN = len(HEADER) + 32 + 1
DONE = b"."
ROTATE_AT_BYTES = 1 << 20  # 1 MiB, about 30,000 changes: a reader's catching up stays a few milliseconds
_HEX = frozenset(b"0123456789abcdef")


class Changes(NamedTuple):  # as the records on every command's path: a dataclass costs ten times more to create
    """What a reader learnt from the journal."""

    run_ids: frozenset[str] | None  # the runs whose meta.json may have changed since `position`; None: any run may
    position: tuple[str, int] | None  # (journal token, offset) to read from next time; None: there is no journal


def read_since(home: Home, position: object) -> Changes:
    """The runs named in the journal after `position` (a position an earlier call returned, or anything else:
    then every run must be checked). Never raises for a missing or damaged journal: it says to check them all."""
    try:
        with open(home.cache_dir / NAME, "rb") as journal:
            header = journal.read(HEADER_LEN)
            token = _token(header)
            if token is None:
                return Changes(None, None)
            trusted = (isinstance(position, (list, tuple)) and len(position) == 2 and position[0] == token
                       and type(position[1]) is int and position[1] >= HEADER_LEN)
            start = position[1] if trusted else HEADER_LEN  # type: ignore[index]
            journal.seek(start)
            appended = journal.read()
    except OSError:
        return Changes(None, None)
    run_ids, settled = _parse(appended)
    next_position = (token, start + settled)
    return Changes(frozenset(run_ids) if trusted and run_ids is not None else None, next_position)


def _token(header: bytes) -> str | None:
    if len(header) != HEADER_LEN or not header.startswith(HEADER) or not header.endswith(b"\n"):
        return None
    token = header[len(HEADER):-1]
    return token.decode("ascii") if _HEX.issuperset(token) else None


def _parse(appended: bytes) -> tuple[set[str] | None, int]:
    """(the run ids in the complete lines, None when a line is not one; how many bytes up to the last ".")."""
    lines = appended.split(b"\n")[:-1]  # the last piece is a line still being written, or empty
    run_ids: set[str] | None = set()
    settled = offset = 0
    for line in lines:
        offset += len(line) + 1
        if line == DONE:
            settled = offset
        elif run_ids is not None and _is_run_id(line):
            run_ids.add(line.decode("ascii"))
        else:
            run_ids = None
    return run_ids, settled


def _is_run_id(line: bytes) -> bool:
    """Letters, digits, '.', '_' and '-', starting with a letter or digit: what a run folder's name is made of."""
    return line[:1].isalnum() and line.replace(b"-", b"").replace(b"_", b"").replace(b".", b"").isalnum()


class Journal:
    """The daemon's side: `start` as it begins serving, `intend` before a batch's renames, `done` after them,
    `note` for a change it saw and did not make. Used from the daemon's loop thread only: a "." settles every
    line before it, so another thread's lines could be settled before their renames."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.path = home.cache_dir / NAME
        self._begun = False
        self._size = 0  # bytes in the journal this daemon writes (its one writer): no stat per commit
        self._token = ""

    def start(self) -> None:
        """A journal of this daemon's own in place of any earlier one, whose readers then check every run once
        (so they also see what changed while no daemon ran). When it cannot be written, there is none."""
        try:
            self._create()
        except OSError:
            try:
                self._remove()
            except OSError:  # the cache folder is not writable at all: `intend` will try again, and remove it
                pass

    def intend(self, run_ids: Iterable[str]) -> None:
        """Append the runs whose meta.json are about to be replaced (made durable by the caller's barrier).
        Raises OSError when neither this nor removing the journal (so readers check every run) works."""
        lines = b"".join(run_id.encode("ascii") + b"\n" for run_id in run_ids)
        if not lines:
            return
        try:
            if not self._begun or self._size >= ROTATE_AT_BYTES:
                self._create()
            self._append(lines)
        except OSError:
            self._remove()

    def done(self) -> None:
        """The renames announced are over. A failure leaves them announced: readers keep checking them."""
        if self._begun:
            try:
                self._append(DONE + b"\n")
            except OSError:
                pass

    def position(self) -> tuple[str, int] | None:
        """Where the journal ends now, as `read_since` takes it (None: there is none). Between two batches, so
        every line before it is settled (fray.state.list_summary names it)."""
        return (self._token, self._size) if self._begun else None

    def note(self, run_ids: Iterable[str]) -> None:
        """Runs whose meta.json changed by a hand other than this daemon's batches (its scan saw a new stat):
        named and settled at once, so the next listing reads them again. Never raises: a journal that cannot
        be written is removed, and one that cannot be removed either only leaves the change unannounced."""
        try:
            self.intend(run_ids)
        except OSError:
            return
        self.done()

    def _create(self) -> None:
        store.make_dirs(self.home.cache_dir)
        token = os.urandom(16).hex()
        store.write_bytes_atomic(self.path, HEADER + token.encode("ascii") + b"\n", sync=False)
        self._begun, self._size, self._token = True, HEADER_LEN, token

    def _remove(self) -> None:
        """No journal: every reader checks every run (raises OSError when even that cannot be done)."""
        self._begun = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _append(self, data: bytes) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:  # deleted with the cache folder: a new journal, which readers check in full
            self._create()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            if os.write(fd, data) != len(data):  # a short write (disk full): its half line would join the next
                raise OSError(f"{self.path}: short write")
            self._size += len(data)
        finally:
            os.close(fd)
