"""Reading and writing state files: atomic, validated, private, and corruption-proof.

Rules (from the design): every write is temp-file + fsync + os.replace in the
same folder, UTF-8, newline-terminated; folders are 0700 and files 0600; every
read validates against its schema, and a file that fails is moved aside as
`<name>.corrupt-<timestamp>` and reported as `CorruptFileError`, never crashed
on and never silently overwritten. Shared files are written under a lock that holds across the hosts sharing
FRAY_HOME, flock or not (fray.state.shared_lock).
"""

from __future__ import annotations

import math
import os
import stat
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import orjson

from fray.core import validation
from fray.wrapper import face as wrapper
from fray.errors import CorruptFileError, StateError
from fray.state import layout
from fray.state.layout import Home

DIR_MODE = 0o700  # fray.wrapper.records' modes; that module (the writer, with shutil and tempfile) is loaded
FILE_MODE = wrapper.FILE_MODE  # by the first write, so `fray list` and `fray status`, which only read, never load it


def ensure_home(home: Home) -> None:
    """Create FRAY_HOME and its fixed folders (0700), or explain why it cannot be used."""
    try:
        for folder in (home.root, home.runs_dir, home.locks_dir):
            folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(
            f"cannot create the state directory {home.root}: {exc.strerror or exc}. "
            "Choose a writable place with --home DIR or FRAY_HOME=DIR."
        ) from None
    if not os.access(home.root, os.W_OK | os.X_OK) or not os.access(home.runs_dir, os.W_OK | os.X_OK):
        raise StateError(
            f"the state directory {home.root} is not writable by you. "
            "Fix its permissions or choose another with --home DIR or FRAY_HOME=DIR."
        )


def make_dirs(path: Path) -> None:
    """Create `path` and each missing parent 0700 (Path.mkdir(parents=True) gives parents the umask's mode)."""

    wrapper.make_private_dir(path)


def dumps(document: Any) -> bytes:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def write_bytes_atomic(path: Path, data: bytes, sync: bool = True) -> None:
    """Temp file, fsync, os.replace: the wrapper's writer, so both sides write files one way.
    `sync=False`: the caller makes many files durable at once (`sync_all`) before anyone sees them."""

    wrapper.write_bytes(path, data, sync)


def sync_all() -> None:
    """Flush every file written with sync=False to disk: one call instead of one fsync per file
    (a 1,000-point sweep writes thousands; each fsync costs about a millisecond, the one sync about as much)."""
    os.sync()


def write_json(path: Path, document: Any, schema: str, sync: bool = True) -> None:
    """Validate `document` against `schema`, then replace `path` with it atomically.

    A writer never writes what its own readers would reject: an invalid document
    is a bug, raised as ValueError before anything touches the disk.
    """
    problems = validation.errors(schema, document)
    if problems:
        raise ValueError(f"refusing to write {path} that violates schema {schema!r}: {'; '.join(problems)}")
    write_bytes_atomic(path, dumps(document), sync)


def create_json(path: Path, document: Any, schema: str) -> bool:
    """Write `path` only if it does not exist yet (write-once files). True if written."""
    problems = validation.errors(schema, document)
    if problems:
        raise ValueError(f"refusing to write {path} that violates schema {schema!r}: {'; '.join(problems)}")

    return wrapper.create_bytes(path, dumps(document))


def read_json(path: Path | str, schema: str) -> Any | None:
    """The validated document at `path`, or None when there is no such file.

    Where there is no file but write-once versions of it (FRAY_RECORDS=write-once,
    fray.wrapper.versions), the newest complete one is read instead.

    Raises CorruptFileError (after moving the file aside) when it is empty, not
    JSON, or violates the schema. `path` may be a plain string: the daemon reads
    tens of thousands of files in its first cycle and builds no Path for them.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO in a file's place must not hang the reader
    except FileNotFoundError:
        return read_newest_version(path, schema)
    except PermissionError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror}. Check its permissions.") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise CorruptFileError(Path(path), f"{what} where a file belongs", quarantine(Path(path), info.st_ino))
    try:
        data = os.read(fd, info.st_size + 1)  # one read, no file object: the daemon reads thousands
        if len(data) > info.st_size:  # it grew after the fstat: read the rest
            chunks = [data]
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return _parse(path, data, schema, info.st_ino)


def read_newest_version(path: Path | str, schema: str) -> Any | None:
    """The newest complete version of `path` in the write-once layout, validated; None when there is none.

    A version that is not whole JSON yet is skipped (it may be mid-upload); one
    that is whole but violates the schema is corrupt, moved aside like a file.
    """
    def parse(version: str, data: bytes) -> Any:
        document = orjson.loads(data)  # orjson.JSONDecodeError is a ValueError: skipped, an older one is read
        violations = validation.errors(schema, document)
        if violations:
            raise CorruptFileError(Path(version), "; ".join(violations[:5]), quarantine(Path(version)))
        return document

    return wrapper.read_newest(path, parse)


def _parse(path: Path | str, data: bytes, schema: str, identity: int) -> Any:
    if not data.strip():
        problem = "the file is empty"
    else:
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            problem = f"not valid JSON ({exc})"
        else:
            violations = validation.errors(schema, document)
            if not violations:
                return document
            problem = "; ".join(violations[:5])
    raise CorruptFileError(Path(path), problem, quarantine(Path(path), identity, data))


def quarantine(path: Path, identity: int | None = None, read: bytes | None = None) -> Path | None:
    """Move a corrupt file aside as `<name>.corrupt-<timestamp>`; None if it changed meanwhile.

    `identity` is the inode that was read and `read` the bytes: a writer may have
    replaced the file since (the daemon renews its lease many times a second), and
    its new file is left alone. Checking before the move is not enough: the writer
    can rename in between, and a filesystem that reuses the freed inode number at
    once gives the good file the corrupt one's identity. So the file is moved
    first and compared after: one that is not what was read goes back, unless
    its writer has already put a newer one in its place.
    """
    try:
        if identity is not None and os.stat(path).st_ino != identity:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        target = layout.corrupt_name(path, f"{stamp}-{os.urandom(2).hex()}")
        os.replace(path, target)
    except FileNotFoundError:
        return None
    if read is None or _holds(target, identity, read):
        return target
    _put_back(target, path)
    return None


def _holds(path: Path, identity: int | None, read: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return (identity is None or os.fstat(handle.fileno()).st_ino == identity) and handle.read() == read
    except OSError:
        return False


def _put_back(moved: Path, path: Path) -> None:
    """Return a file taken by mistake to `path`, unless its writer has replaced it already (the newer wins)."""
    try:
        os.link(moved, path)  # never over a newer file, as a rename would be
    except FileExistsError:
        pass
    except OSError:  # no hard links here (some network and FUSE filesystems)
        if not os.path.exists(path):
            os.replace(moved, path)
            return
    os.unlink(moved)


def append_jsonl(path: Path, record: dict[str, Any], schema: str) -> None:
    """Append one validated line. A single O_APPEND write, so lines never interleave.

    A last line left without its newline (a crash mid-write, a corrupt file) stays
    a line of its own: the new record starts on the next line, readable.
    """
    append_jsonl_lines(path, [record], schema)


def append_jsonl_lines(path: Path, records: list[dict[str, Any]], schema: str) -> None:
    """Append validated lines in one O_APPEND write (none if any is invalid), as `append_jsonl` does one."""
    for record in records:
        problems = validation.errors(schema, record)
        if problems:
            raise ValueError(f"refusing to append to {path} a line that violates {schema!r}: {'; '.join(problems)}")
    line = b"".join(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE) for record in records)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, FILE_MODE)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # after a cut-off last line, start a new one rather than be glued to it
        os.write(fd, line)
    finally:
        os.close(fd)


class JsonLine(NamedTuple):
    """One line of a JSON-lines file: its record, or the problem that made it unreadable."""

    line_no: int
    record: dict[str, Any] | None  # None when the line is corrupt
    problem: str = ""


def read_jsonl(path: Path, schema: str) -> Iterator[JsonLine]:
    """Every line of a JSON-lines file; corrupt lines (e.g. cut by a crash) are reported, not raised."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    check = validation.validator(schema)
    for line_no, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            yield JsonLine(line_no, None, f"not valid JSON ({exc})")
            continue
        problems = check(record, "$")
        yield JsonLine(line_no, None if problems else record, "; ".join(problems))


def lock(home: Home, name: str, timeout: float = 10.0) -> Any:
    """A lock for a shared file that holds across processes and the hosts sharing FRAY_HOME, whatever the file
    system's flock does (fray.state.shared_lock: a lock file created exclusively)."""
    from fray.state.shared_lock import SharedLock

    return SharedLock(home.lock_file(name), timeout=timeout)


def held(home: Home, name: str) -> bool:
    """Whether some process holds lock `name` right now, by a bare flock probe: this host's own locks only
    (the host guard's, off Linux: fray.daemon.host_guard)."""
    import fcntl

    try:
        fd = os.open(home.lock_file(name), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return False


def heartbeat_reading(path: Path | str) -> tuple[float | None, bool]:
    """(epoch, damaged): the heartbeat's epoch, or None with damaged=True when a file is there but unreadable."""
    beat = read_heartbeat(path)
    if beat is not None:
        return beat, False
    return None, os.path.exists(path)


def read_heartbeat(path: Path | str) -> float | None:
    """The epoch in a heartbeat file (or its newest whole version), or None when absent or unreadable.

    A bad one is simply old. `path` may be a string: the dashboard reads thousands each tick, `fray list` one
    per run still going (hence a plain descriptor, no file object: a third cheaper).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO in its place must not hang the reader
        try:
            return _beat(os.read(fd, 64))
        finally:
            os.close(fd)
    except FileNotFoundError:
        return wrapper.read_newest(path, lambda _version, data: _beat(data))
    except (OSError, ValueError):
        return None


def _beat(data: bytes) -> float:
    beat = float(data.split(b"\n", 1)[0])
    if not math.isfinite(beat) or beat <= 0:  # "nan" never equals itself: it would read as a beat at every look
        raise ValueError(f"not a time: {beat}")
    return beat


class CachedReader:
    """Reads validated JSON files, re-parsing only those whose stat changed.

    The daemon reads every active run's files each cycle; most have not changed.
    """

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[int, int, int], Any]] = {}

    def read(self, path: Path, schema: str) -> Any | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._cache.pop(path, None)
            return read_newest_version(path, schema)  # a new name per version: nothing to cache by stat
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        hit = self._cache.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        document = read_json(path, schema)
        self._cache[path] = (key, document)
        return document

    def forget(self, prefix: Path) -> None:
        for path in [p for p in self._cache if prefix in p.parents]:
            del self._cache[path]
