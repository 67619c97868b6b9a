"""Files in an attempt folder as the wrapper writes and reads them.

Every write replaces the file atomically (temp file in the same folder, flush,
fsync, os.replace), so a reader on another node sees the old file or the new
one, never half of one. Files are 0600 and folders 0700, UTF-8 and
newline-terminated. JSON is strict: NaN and Infinity are refused on the way
out and on the way in, because the shepherd's reader (orjson) refuses them.

The attempt's records (heartbeat, progress, health and the once-written
probe/started/final/failure/exit) go through `write_record`, which first
passes the fence (fray.wrapper.fence.guard: a superseded attempt writes
nothing, `Superseded` is raised) and then follows FRAY_RECORDS: by rename as above, or as write-once versions
(fray.wrapper.versions) where FRAY_HOME has no atomic rename (gcsfuse).
`read_json` reads either layout, as the shepherd's store does.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Iterator

from . import contract, fence, versions

DIR_MODE = 0o700
FILE_MODE = 0o600


def make_private_dir(path: str | os.PathLike[str]) -> None:
    """Create `path` and each missing parent 0700 (os.makedirs gives parents the default mode)."""
    path = os.path.abspath(path)
    missing: list[str] = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise


def write_bytes(path: str | os.PathLike[str], data: bytes, sync: bool = True) -> None:
    """Replace `path` with `data` atomically; raises OSError and leaves no temp file behind.

    `sync=False` leaves the fsync to the caller, who writes many files and then
    makes them all durable at once (os.sync) before anyone can see them."""
    path = os.fspath(path)
    tmp = temp_beside(path, data, sync)
    try:
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


@contextlib.contextmanager
def built_folder(target: str, prefix: str) -> Iterator[str]:
    """A temporary folder beside `target` to fill; renamed to `target` when the block ends, or dropped when
    another process made `target` first (the same content: whoever renames first wins) or the block fails.
    A folder at `target` is therefore always whole."""
    import tempfile  # here, not above: with random, 4.6 M instructions of every CLI command that writes state

    staging = tempfile.mkdtemp(prefix=prefix, dir=os.path.dirname(target))
    try:
        yield staging
        try:
            os.rename(staging, target)
        except OSError:
            if not os.path.isdir(target):
                raise
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_once() -> bool:
    """Whether this process writes records as write-once versions (FRAY_RECORDS=write-once)."""
    return os.environ.get(contract.ENV_RECORDS) == contract.RECORDS_WRITE_ONCE


def write_record(path: str | os.PathLike[str], data: bytes, durable: bool = True) -> None:
    """Write an attempt record (ending in a newline) the way FRAY_RECORDS says, if this attempt is still
    current; raises OSError, or fence.Superseded (nothing written). `durable=False` skips the fsync: for a
    record whose loss in a machine's crash costs nothing (the heartbeat: a machine that crashed has no
    attempt left to be alive, and a heartbeat a reader cannot parse counts as old)."""
    fence.guard()
    if write_once():
        versions.write(path, data)
    else:
        write_bytes(path, data, sync=durable)


def write_record_json(path: str | os.PathLike[str], document: object) -> None:
    write_record(path, dumps(document).encode("utf-8"))  # serialised first: a bad document costs no file


def append_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Append `data` (whole lines) to `path` with one O_APPEND write, creating it 0600; raises OSError.

    One write(2) per call, so writers never interleave inside a line; a
    write cut by a kill leaves a last line without its newline, which readers
    skip. Not fsynced: appended files (the progress history) are advisory."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def create_json(path: str | os.PathLike[str], document: object) -> bool:
    """Write `path` only if it does not exist yet (a write-once file); True if this call wrote it."""
    return create_bytes(path, dumps(document).encode("utf-8"))


NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK)  # what link(2) answers where there are none


def create_bytes(path: str | os.PathLike[str], data: bytes, sync: bool = True) -> bool:
    """Write `path` only if it does not exist yet; True if this call wrote it.

    The temp file is linked into place (link(2) fails on an existing name,
    where os.replace would overwrite), so of two racing writers one wins whole.
    In write-once mode there are no hard links (gcsfuse): the file is created
    with O_EXCL and written in place. `sync=False`: not flushed to disk (a lock
    file, which only matters while its holder lives: its name is at the file
    server at once, and close-to-open makes its data visible to other hosts).
    """
    path = os.fspath(path)
    if write_once():
        return _create_in_place(path, data, sync)
    tmp = temp_beside(path, data, sync)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        # NFS retransmits a link whose answer was lost, and the retry finds the name taken by the first try: the
        # temp file's link count says whether that name is ours (the lock-file rule of open(2)'s O_EXCL notes).
        return os.stat(tmp).st_nlink == 2
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise
        return _create_in_place(path, data, sync)  # a file system without hard links (gcsfuse, some FUSE clients)
    finally:
        discard(tmp)


def _create_in_place(path: str, data: bytes, sync: bool = True) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        if sync:
            os.fsync(handle.fileno())
    return True


def temp_beside(path: str, data: bytes, sync: bool = True) -> str:
    """`data` in a new private file beside `path` (a dotfile no reader lists), flushed to disk unless `sync`
    is False (fray.state.commit_batch syncs many at once); its name."""
    folder, name = os.path.split(path)
    # pid + random: the heartbeat thread, the main thread and a workload's
    # threads may all be writing in this folder at once.
    tmp = os.path.join(folder, f".{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
    except BaseException:
        discard(tmp)
        raise
    return tmp


def discard(tmp: str) -> None:
    """Remove a temp file that will not be renamed into place (gone already is fine)."""
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_text(path: str | os.PathLike[str], text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def dumps(document: object) -> str:
    """Strict, indented JSON text ending in a newline; ValueError on NaN/Infinity, TypeError on non-JSON values."""
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike[str], document: object) -> None:
    # Serialise before touching the disk: a document that cannot be written
    # must not cost the previous good file.
    write_bytes(path, dumps(document).encode("utf-8"))


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def read_json(path: str | os.PathLike[str], max_bytes: int = 8 * 1024 * 1024) -> object:
    """The JSON document at `path`.

    Raises FileNotFoundError when there is none, ValueError when it is larger
    than `max_bytes`, not UTF-8, or not strict JSON. Reads either layout: the plain file, else
    its newest complete version.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        # The write-once layout: its newest version that parses (an older one while the newest is mid-write).
        document = versions.read_newest(path, lambda _file, data: _loads(path, data, max_bytes))
        if document is None:
            raise
        return document
    return _loads(path, data, max_bytes)


def _loads(path: str | os.PathLike[str], data: bytes, max_bytes: int) -> object:
    if len(data) > max_bytes:
        raise ValueError(f"{os.fspath(path)} is larger than {max_bytes} bytes")
    return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
