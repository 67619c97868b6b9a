"""Progress from the TensorBoard event files the workload writes: `--progress-tensorboard DIR`.

A thread of the wrapper looks under DIR (relative to the workload's working directory) every POLL_SEC
for files whose name holds `tfevents`, reads what each has gained since the last look
(fray.wrapper.tfevents parses it), and reports the scalars as progress through
`fray.wrapper.report.progress_in`, fenced as the workload's own reports are: the event's step is
the step, the scalar named as in LOSS_TAGS the loss, and every scalar a metric under its tag. Each
step is a point of the history (thinned by fray.wrapper.history); progress.json is written once a
poll. Only what is written after the attempt started counts: event files of earlier attempts (the
folder is usually kept across them) are read from their end, so their steps do not come first.

Bounded: at most MAX_FILES event files are followed and MAX_READ_BYTES read from each a poll. Reading
never raises into the wrapper: what it cannot read it says once in wrapper.log.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import history, logscan, report, tfevents
from .fence import Superseded

POLL_SEC = 2.0
MAX_FILES = 64
MAX_DIRS = 2000
MAX_READ_BYTES = 8 * 1024 * 1024
EVENT_FILE_MARK = "tfevents"
# The scalar that is "the loss", in order of preference: PyTorch/Lightning's, HF Trainer's, Keras's.
LOSS_TAGS = ("loss", "train/loss", "train_loss", "loss/train", "training_loss", "epoch_loss")


def event_files(root: str) -> list[str]:
    """The event files under `root`, oldest first, at most MAX_FILES of them (MAX_DIRS folders looked in)."""
    found: list[tuple[float, str]] = []
    seen = 0
    for folder, dirnames, filenames in os.walk(root):
        seen += 1
        if seen > MAX_DIRS:
            dirnames[:] = []
            break
        for name in filenames:
            if EVENT_FILE_MARK in name:
                path = os.path.join(folder, name)
                try:
                    found.append((os.path.getmtime(path), path))
                except OSError:
                    continue
    return [path for _, path in sorted(found)[-MAX_FILES:]]


class _EventFile:
    def __init__(self, path: str, offset: int) -> None:
        self.path = path
        self.offset = offset
        self.records = tfevents.Records()

    def read(self) -> list[tfevents.Scalar]:
        try:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size <= self.offset:
                    return []
                handle.seek(self.offset)
                data = handle.read(min(size - self.offset, MAX_READ_BYTES))
        except OSError:
            return []
        self.offset += len(data)
        return self.records.feed(data)


class Steps:
    """Scalars gathered into steps (pure): the values at each step seen, and the latest of each tag."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.tags: dict[str, float] = {}
        self.points: list[dict[str, Any]] = []
        self.changed = False

    def add(self, scalars: list[tfevents.Scalar]) -> None:
        for scalar in scalars:
            step = self.values.get("step")
            if step is not None and scalar.step > step:
                self.points.append(dict(self.values))  # the step before is complete
            if step is None or scalar.step >= step:
                self.values["step"] = scalar.step
            elif scalar.step < step:
                continue  # an older step (another writer, a file written late): not progress
            self.tags[scalar.tag] = scalar.value
            self.values.update(_as_values(self.tags))
            self.changed = True


def _as_values(tags: dict[str, float]) -> dict[str, Any]:
    values: dict[str, Any] = {name: value for name, value in tags.items() if name not in logscan.COUNTERS}
    loss = next((tags[name] for name in LOSS_TAGS if name in tags), None)
    values.pop("loss", None)
    if loss is not None:
        values["loss"] = loss
    return values


class TensorBoardScan:
    """The thread that follows the event files under `root` and reports their scalars."""

    def __init__(self, root: str, attempt_dir: str, log: Callable[[str], None], poll: float = POLL_SEC) -> None:
        self.root = root
        self.folder = Path(attempt_dir)
        self.log = log
        self.poll = poll
        self.files: dict[str, _EventFile] = {}
        self.steps = Steps()
        self._known_at_start = {path: _size(path) for path in event_files(root)} if os.path.isdir(root) else {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fray-tensorboard", daemon=True)
        self._lock = threading.Lock()
        self._told: set[str] = set()
        self.superseded = False

    def start(self) -> "TensorBoardScan":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread, then read what the workload wrote last."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.scan()

    def _loop(self) -> None:
        while not self._stopping.wait(self.poll):
            self.scan()

    def scan(self) -> None:
        """One look: new files, new records, one report. Never raises."""
        with self._lock:
            if self.superseded:
                return
            try:
                self._read()
                self._report(time.time())
            except Superseded:
                self.superseded = True
            except Exception as exc:  # noqa: BLE001 - progress is advisory: the workload goes on
                self._tell("error", f"progress from TensorBoard: {type(exc).__name__}: {exc}")

    def _read(self) -> None:
        if not os.path.isdir(self.root):
            return
        for path in event_files(self.root):
            if path not in self.files:
                # A file there before the attempt started is read from where it was: its steps are another's.
                self.files[path] = _EventFile(path, self._known_at_start.get(path, 0))
        for event_file in sorted(self.files.values(), key=lambda f: f.path):
            self.steps.add(event_file.read())
            if event_file.records.broken:
                self._tell(event_file.path, f"progress from TensorBoard: {event_file.path} is not read further: "
                                            f"{event_file.records.broken}")

    def _report(self, now: float) -> None:
        steps = self.steps
        if not steps.changed:
            return
        steps.changed = False
        points, steps.points = steps.points, []
        for point in points:
            history.record_progress(self.folder, logscan.document(point, now))
        values = logscan.document(steps.values, now)
        try:
            report.progress_in(self.folder, values["step"], values["loss"], values["samples_per_sec"],
                               values["checkpoint_version"], values["extra"], now=now)
        except ValueError as exc:
            self._tell("refused", f"progress from TensorBoard not recorded: {exc}")

    def _tell(self, key: str, message: str) -> None:
        if key not in self._told:
            self._told.add(key)
            self.log(message)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
