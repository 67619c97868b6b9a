"""What the job already emits, read as its progress: the readers an attempt starts beside its workload.

`--progress-pattern` reads its output (fray.wrapper.logscan), `--progress-tensorboard` its event
files (fray.wrapper.tensorboard). Each is a thread of the wrapper reading files the workload writes
anyway, so neither can slow it down nor block it; both report through the same fenced
`report.progress_in` as the workload's own `report.progress`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from .options import Options


class Reader(Protocol):
    def stop(self) -> None:
        """Stop reading, after a last look at what the workload wrote."""


def start(options: Options, cwd: str, stdout: str, stderr: str, log: Callable[[str], None]) -> list[Reader]:
    """Start the readers the run declares; a pattern that does not compile here is logged and skipped."""
    readers: list[Reader] = []
    if options.progress_patterns:
        from . import logscan

        try:
            readers.append(logscan.LogScan(options.progress_patterns, [stdout, stderr], options.attempt_dir, log).start())
        except Exception as exc:  # noqa: BLE001 - checked at submit; another Python may read it otherwise
            log(f"--progress-pattern cannot be used on this node: {exc}")
    if options.progress_tensorboard:
        from . import tensorboard

        root = os.path.join(cwd, os.path.expanduser(options.progress_tensorboard))
        readers.append(tensorboard.TensorBoardScan(root, options.attempt_dir, log).start())
    return readers
