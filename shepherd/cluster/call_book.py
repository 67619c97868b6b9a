"""The calls of a chunk run (fray.map), recorded in batches: written by the job, read by the calls' futures.

A call's result was four files of its own (value, record, stdout, stderr), each created and fsync'd: on a
small VM's disk a file's creation costs about 0.8 ms and an fsync 3 ms, fifty times a trivial call. So the job
records its calls in batches, committed together (fray.state.commit_batch: one barrier before the renames,
one after), each batch two files in the run's folder named by its first call and the attempt, beside the
attempt's output files:

    calls/<first>.<attempt>.json   the batch's records (schemas/call-batch.json): per call its index, how it
                                   ended (returned or raised, the type, the message, the traceback text), when it
                                   started and finished, and where its value and output lie
    calls/<first>.<attempt>.pkl    the calls' values (or exceptions), cloudpickled one after another
    calls/<attempt>.out            what the attempt's calls printed to stdout, one after another (.err: stderr)
    calls/<index>.cancel           call `index` is not to be made (its future's `cancel`, fray.submit): an empty
                                   file, looked for before the call begins; the call is recorded as raising
                                   CancelledError instead, and its run does not fail for it

A batch is committed COMMIT_SEC after its first call returned (by a thread of the writer, whatever the next
call is doing), once it holds COMMIT_BYTES of values, and when the run's calls are
done: a call's future resolves once its batch is committed, so its result is on disk before anyone sees it,
and a retry (or an attempt after the daemon restarted) makes only the calls no batch records as returned.
An attempt's batches cover its calls in order, without overlapping: the batch holding call i, if any, is the one
with the greatest first call <= i. The .json is renamed into place after the .pkl, so a reader that finds a
record finds its value.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from fray.state.layout import RunPaths

CALLS_DIR = "calls"
COMMIT_SEC = 0.2  # a batch of short calls is committed this often: what a crash can cost to redo, at most
COMMIT_BYTES = 64 << 20  # or once its values are this big (they are held in memory until then)
CACHED_BYTES = 8 << 20  # a reader keeps a batch's values this big or smaller in memory, read once for all its calls
SCHEMA = "call-batch"


def calls_dir(run: RunPaths) -> Path:
    return run.dir / CALLS_DIR


def batch_file(run: RunPaths, first: int, attempt: int, suffix: str) -> Path:
    return calls_dir(run) / f"{first}.{attempt}.{suffix}"


def cancel_file(run: RunPaths, index: int) -> Path:
    return calls_dir(run) / f"{index}.cancel"


def output_file(run: RunPaths, attempt: int, stderr: bool = False) -> Path:
    return calls_dir(run) / f"{attempt}.{'err' if stderr else 'out'}"


class BatchWriter:
    """The job's side: calls captured and staged one by one, committed a batch at a time, by `commit` or by its
    own thread once the oldest staged call has waited COMMIT_SEC (a short call followed by a long one is not
    held back by it). Use it as a context manager: the thread ends, and what is staged is committed, on exit."""

    def __init__(self, run: RunPaths, attempt: int, root: Path) -> None:
        from fray.state import store

        self.run = run
        self.attempt = attempt
        self.root = root  # FRAY_HOME: its file system is the one the barrier flushes
        store.make_dirs(calls_dir(run))
        self._records: list[dict[str, Any]] = []
        self._values: list[bytes] = []
        self._size = 0
        self._since = 0.0  # when the oldest staged call was staged (monotonic)
        self._staging = threading.Condition()  # guards the staged calls; wakes the committer
        self._committing = threading.Lock()  # one commit at a time, in order
        self._failed: BaseException | None = None  # what the committer's last commit raised (Superseded)
        self._closing = False
        self._streams = {fd: os.open(output_file(run, attempt, stderr=fd == 2), os.O_RDWR | os.O_CREAT | os.O_APPEND,
                                     0o600) for fd in (1, 2)}  # read back: `_copy_out`
        self._committer = threading.Thread(target=self._commit_when_due, name="fray-call-batches", daemon=True)

    def __enter__(self) -> "BatchWriter":
        self._committer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._staging:
            self._closing = True
            self._staging.notify()
        self._committer.join()
        for target in self._streams.values():
            os.close(target)
        if exc[0] is None:
            self.commit()

    @contextlib.contextmanager
    def captured(self, index: int) -> Iterator[dict[str, Any]]:
        """Descriptors 1 and 2 go to the attempt's call output files while call `index` runs (its subprocesses'
        too); what it wrote is copied to the attempt's streams after, so they still hold every call in order.
        Yields the call's record-to-be, its start and output places filled in."""
        sys.stdout.flush()
        sys.stderr.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        starts = {fd: os.fstat(target).st_size for fd, target in self._streams.items()}
        for fd, target in self._streams.items():
            os.dup2(target, fd)
        entry: dict[str, Any] = {"index": index, "started_at": time.time()}
        try:
            yield entry
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
                end = os.fstat(self._streams[fd]).st_size
                entry["stdout_at" if fd == 1 else "stderr_at"] = [starts[fd], end]
                if end > starts[fd]:
                    _copy_out(self._streams[fd], starts[fd], end, fd)

    def add(self, entry: dict[str, Any], value: bytes | None) -> None:
        """Stage a call's record (`entry`, from `captured`, with how it ended) and its pickled value; commit now
        when the staged values are COMMIT_BYTES or more."""
        self._raise_failed()
        with self._staging:
            if not self._records:
                self._since = time.monotonic()
                self._staging.notify()
            entry["value_at"] = None if value is None else [self._size, self._size + len(value)]
            if value is not None:
                self._values.append(value)
                self._size += len(value)
            self._records.append(entry)
            full = self._size >= COMMIT_BYTES
        if full:
            self.commit()

    def commit(self) -> int:
        """Make the staged calls durable and visible together; how many. Raises Superseded (nothing written)
        once this attempt is no longer the run's current one."""
        self._raise_failed()
        return self._commit()

    def _commit(self) -> int:
        from fray.state.commit_batch import CommitBatch
        from fray.wrapper import face as wrapper

        with self._committing:
            with self._staging:
                records, values = self._records, self._values
                self._records, self._values, self._size = [], [], 0
            if not records:
                return 0
            first = records[0]["index"]
            batch = CommitBatch(self.root, fence=wrapper.guard_write)
            try:
                batch.write_bytes(batch_file(self.run, first, self.attempt, "pkl"), b"".join(values))
                batch.write_json(batch_file(self.run, first, self.attempt, "json"),
                                 {"attempt": self.attempt, "calls": records}, SCHEMA)
                batch.commit()  # the .pkl renamed before the .json, both after the data is on disk
            except BaseException:
                batch.discard()
                raise
            return len(records)

    def _commit_when_due(self) -> None:
        """The committer: each batch committed COMMIT_SEC after its first call was staged."""
        while True:
            with self._staging:
                while not self._closing and (not self._records or time.monotonic() < self._since + COMMIT_SEC):
                    self._staging.wait(None if not self._records else self._since + COMMIT_SEC - time.monotonic())
                if self._closing:
                    return
            try:
                self._commit()
            except BaseException as exc:  # Superseded, or the disk refused: the job's thread raises it
                self._failed = exc
                return

    def _raise_failed(self) -> None:
        if self._failed is not None:
            raise self._failed


def _copy_out(source: int, start: int, end: int, fd: int) -> None:
    data = os.pread(source, end - start, start)
    while data:
        data = data[os.write(fd, data):]


class CallBook:
    """The reader's side: what the committed batches of one run say of its calls. Committed batch files never
    change, so each is read once (a map's futures share one book per run), and the folder is listed again
    only for a call no batch read so far holds."""

    def __init__(self, run: RunPaths, root: Path) -> None:
        self.run = run
        self.root = root
        self._batches: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}  # (first, attempt) -> calls by index
        self._values: dict[tuple[int, int], bytes] = {}  # a batch's .pkl, read once (checked), when small

    def record(self, index: int) -> dict[str, Any] | None:
        """Call `index`'s record: the one saying it returned, else the latest attempt's (it raised); None
        while no committed batch holds it."""
        found = self._best(index, self._batches)
        if found is None or found["outcome"] != "returned":
            self._read_new()
            found = self._best(index, self._batches)
        return found

    def returned(self, index: int) -> bool:
        record = self.record(index)
        return record is not None and record["outcome"] == "returned"

    def returned_among(self, indexes: range) -> set[int]:
        """Those of `indexes` whose calls returned, the folder read once."""
        self._read_new()
        return {index for index in indexes if (found := self._best(index, self._batches)) is not None
                and found["outcome"] == "returned"}

    def value(self, record: dict[str, Any]) -> Any:
        """The value (or exception) a record's call left; payloads.load's checks first (once per batch file)."""
        import pickle

        from fray.cluster import payloads

        key, (start, end) = (record["first"], record["attempt"]), record["value_at"]
        if key in self._values:
            return pickle.loads(self._values[key][start:end])
        path = batch_file(self.run, key[0], key[1], "pkl")
        if os.path.getsize(path) <= CACHED_BYTES:
            self._values[key] = payloads.load(path, self.root, raw=True)
            return pickle.loads(self._values[key][start:end])
        return payloads.load(path, self.root, (start, end))

    def output(self, index: int, stderr: bool = False) -> str:
        """What call `index` printed (stderr=True: to stderr) in every committed try, in order."""
        self._read_new()
        texts = []
        for (_, attempt), calls in sorted(self._batches.items(), key=lambda item: item[0][1]):
            entry = calls.get(str(index))
            if entry is None:
                continue
            start, end = entry["stderr_at" if stderr else "stdout_at"]
            try:
                with open(output_file(self.run, attempt, stderr), "rb") as handle:
                    handle.seek(start)
                    texts.append(handle.read(end - start).decode(errors="replace"))
            except FileNotFoundError:
                continue
        return "".join(texts)

    @staticmethod
    def _best(index: int, batches: dict[tuple[int, int], dict[str, dict[str, Any]]]) -> dict[str, Any] | None:
        found = None
        for (first, attempt), calls in batches.items():
            entry = calls.get(str(index))
            if entry is None:
                continue
            entry = {**entry, "attempt": attempt, "first": first}
            if entry["outcome"] == "returned":
                return entry
            if found is None or attempt > found["attempt"]:
                found = entry
        return found

    def _read_new(self) -> None:
        """Read the batches committed since the last look."""
        from fray.errors import CorruptFileError
        from fray.state import store

        try:
            names = os.listdir(calls_dir(self.run))
        except FileNotFoundError:
            return
        for name in names:
            first, _, rest = name.partition(".")
            attempt, _, suffix = rest.partition(".")
            if suffix != "json" or not first.isdigit() or not attempt.isdigit():
                continue
            key = (int(first), int(attempt))
            if key in self._batches:
                continue
            try:
                document = store.read_json(batch_file(self.run, key[0], key[1], "json"), SCHEMA)
            except CorruptFileError:
                continue  # moved aside (and so no longer listed): its calls are made again
            if document is not None:
                self._batches[key] = {str(entry["index"]): entry for entry in document["calls"]}
