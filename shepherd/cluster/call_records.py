"""How a launched callable ended, written in the job: its value or exception pickled, then its record.

The record (schemas/call-result.json: returned or raised, the type, the message,
the traceback text) is written after the pickle, so a reader that sees it finds
the value; both are job-side writes, refused once the attempt is superseded
(fray.wrapper.fence). A run's call writes attempts/<n>/call-result.json|pkl
(fray.cluster.entry); a chunk's call i writes calls/<i>.json|pkl (fray.cluster.chunks).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from fray.wrapper import face as wrapper


def write_raised(exc: BaseException, record: Path, value_file: Path) -> int:
    """Record the exception a call raised (its pickle, then the record with its traceback text); the exit code, 1."""
    text = traceback_text(exc)
    sys.stderr.write(text)
    _record(record, value_file, "raised", exc, str(exc), text, pickled=_pickle(value_file, exc) is None)
    return 1


def write_returned(value: object, record: Path, value_file: Path) -> int:
    """Record a call's return value (pickle, then record); the exit code: 0, or 1 when it cannot be pickled."""
    why = _pickle(value_file, value)
    if why is not None:
        text = f"the job's return value could not be pickled: {why}\n"
        sys.stderr.write(text)
        _record(record, value_file, "raised", value, f"the return value could not be pickled: {why}", text,
                pickled=False)
        return 1
    _record(record, value_file, "returned", value, "", None, pickled=True)
    return 0


def traceback_text(exc: BaseException) -> str:
    """The traceback from the caller's code down: the frames of fray.cluster (the entry point, Call.__call__,
    a chunk's loop) say nothing."""
    ours = os.path.dirname(os.path.abspath(__file__))
    tb = exc.__traceback__
    while (tb is not None and tb.tb_next is not None
           and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == ours):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _pickle(path: Path, value: object) -> str | None:
    """Pickle the return value or exception to `path`; why it could not be (None: it was)."""
    from fray.cluster import payloads

    wrapper.guard_write()  # a job-side write: a superseded attempt writes nothing (Superseded)
    try:
        payloads.dump(path, value)
    except Exception as exc:  # cloudpickle raises whatever the value's reducers raise
        return f"{type(value).__name__}: {exc!r}"
    return None


def _record(path: Path, value_file: Path, outcome: str, subject: object, message: str, text: str | None, *,
            pickled: bool) -> None:
    from fray.state import store

    kind = type(subject)
    wrapper.guard_write()
    store.write_json(path, {
        "outcome": outcome, "type": f"{kind.__module__}.{kind.__qualname__}", "message": message,
        "traceback": text, "value_file": value_file.name if pickled else None,
        "finished_at": time.time()}, "call-result")
