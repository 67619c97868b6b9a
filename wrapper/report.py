"""What a workload tells fray from inside a job, and hears from it: progress, its result,
where to checkpoint, runtime commands.

    from fray import report

    if report.resuming() and report.latest_checkpoint():
        state = load(report.latest_checkpoint())
    report.progress(step=100, loss=0.31, samples_per_sec=812.0)
    with report.checkpoint(f"step-{step}", step=step) as folder:   # staged, promoted whole while current
        save(state, folder)
    for command in report.commands():      # tune, pause, resume, terminate (fray.wrapper.commands)
        if command.type == "tune":
            optimizer.lr = command.payload.get("learning_rate", optimizer.lr)
        command.ack(applied=True)
    report.final(accuracy=0.93)

The files land in the attempt folder ($FRAY_ATTEMPT_DIR): progress.json
(schemas/progress.json), history.jsonl (every step and checkpoint, thinned:
fray.wrapper.history) and result.json, which the wrapper copies into
final.json when the workload exits 0; command receipts land next to the
commands ($FRAY_COMMANDS_DIR). `progress()` returns in microseconds: a thread
of this process writes what it was told at most every half second and at
exit (fray.wrapper.progress_buffer). Each write is fenced (fray.wrapper.fence.guard):
once this attempt is superseded, it writes nothing and raises `Superseded`. Outside a fray job every call is a no-op
returning None (commands() yields nothing), so the same script runs
standalone. SIGUSR1 means "checkpoint now" (fray sends it before a planned
stop). Shell workloads use the command line twin:

    python -m fray.wrapper.report progress --step 10 --loss 0.3
    python -m fray.wrapper.report final --json '{"acc": 0.9}'
    python -m fray.wrapper.report commands          # unacknowledged commands, one JSON line each
    python -m fray.wrapper.report ack ID --json '{"applied": true}'
"""

from __future__ import annotations

import json
import math
import operator
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence, SupportsFloat, SupportsIndex

from . import commands as _commands, contract, history, progress_buffer, records
from .checkpoints import Superseded, checkpoint, latest_checkpoint
from .commands import Command

__all__ = ["Command", "Superseded", "ack", "attempt_dir", "checkpoint", "checkpoint_dir", "commands",
           "commands_dir", "final", "flush", "latest_checkpoint", "progress", "resuming"]

_lock = threading.Lock()  # progress_in() reads, checks, then writes: one thread at a time
_seen_commands: set[str] = set()  # each command is yielded once per process


def attempt_dir() -> Path | None:
    """This attempt's folder, or None outside a fray job."""
    value = os.environ.get(contract.ENV_ATTEMPT_DIR)
    return Path(value) if value else None


def checkpoint_dir() -> Path | None:
    """The run's checkpoint folder, kept across attempts, or None when the run has none.

    Writing into it directly is the old contract: a superseded attempt that
    still runs could write there beside the new one. `checkpoint(name)` stages
    and promotes instead (fray.wrapper.checkpoints).
    """
    value = os.environ.get(contract.ENV_CHECKPOINT_DIR)
    return Path(value) if value else None


def commands_dir() -> Path | None:
    """The run's runtime commands folder, or None outside a fray job."""
    value = os.environ.get(contract.ENV_COMMANDS_DIR)
    return Path(value) if value else None


def commands() -> Iterator[Command]:
    """The runtime commands not yet acknowledged, oldest first, each once per process.

    Yielding a command stamps its delivery; call `command.ack(**result)` once
    it is acted on. One not acknowledged is yielded again to the next process
    that asks (the next attempt, after a crash). Cheap enough to call every step.
    """
    folder = commands_dir()
    if folder is None:
        return
    for command in _commands.pending(str(folder)):
        if command.id in _seen_commands:
            continue
        _seen_commands.add(command.id)
        try:
            command.mark_delivered()
        except OSError as exc:
            print(f"fray report: delivery of {command.id} not recorded: {exc}", file=sys.stderr)
        yield command


def ack(command_id: str, **result: Any) -> bool | None:
    """Acknowledge the command `command_id` (for when only its id is at hand); None outside a fray job."""
    folder = commands_dir()
    if folder is None:
        return None
    for command in _commands.pending(str(folder)):
        if command.id == command_id:
            return command.ack(**result)
    raise ValueError(f"no unacknowledged command {command_id!r} in {folder}")


def resuming() -> bool:
    """True in a restarted attempt (attempt > 1): load the latest checkpoint before training."""
    return os.environ.get(contract.ENV_RESUME) == "1"


def _counter(name: str, value: Any) -> int | None:
    if value is None or (type(value) is int and value >= 0):
        return value  # the common case first: this runs on every step
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"{name} must be a whole number, not {value!r}")
    try:
        number = operator.index(value)  # ints, numpy integers, integer tensors
    except TypeError:
        raise TypeError(f"{name} must be a whole number, not {value!r}") from None
    if number < 0:
        raise ValueError(f"{name} must not be negative, not {number}")
    return number


def _measure(name: str, value: Any, extra: dict[str, Any]) -> float | None:
    if value is None or (type(value) is float and math.isfinite(value)):
        return value
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"{name} must be a number, not {value!r}")
    try:
        number = float(value)  # floats, numpy scalars, 0-d tensors
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        # JSON has no NaN; a diverged loss is worth seeing, so say it aside.
        extra[f"{name}_not_finite"] = repr(number)
        return None
    return number


def _previous(path: Path) -> dict[str, Any]:
    try:
        document = records.read_json(path)
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: nothing to compare with
    return document if isinstance(document, dict) else {}


def _not_decreasing(name: str, new: int | None, old: Any, path: Path) -> int | None:
    if not isinstance(old, int) or isinstance(old, bool):
        return new
    if new is None:
        return old  # a counter left out keeps its last value
    if new < old:
        raise ValueError(
            f"{name} went back from {old} to {new} (in {path}); {name} must not decrease within an attempt. "
            "A restarted attempt has its own progress.json, so report the step you resumed from, not less."
        )
    return new


def progress(
    step: SupportsIndex | None = None,
    loss: SupportsFloat | None = None,
    samples_per_sec: SupportsFloat | None = None,
    checkpoint_version: SupportsIndex | None = None,
    **extra: Any,
) -> dict[str, Any] | None:
    """Report the newest values: progress.json says them within half a second; the document it will hold.

    `step` and `checkpoint_version` are counters: they must not decrease
    (ValueError, nothing kept), and one left out keeps its last value.
    `extra` holds anything else JSON can say (learning rate, tokens seen...)
    and is replaced on each call; a value JSON cannot say is a ValueError.
    The call costs microseconds: the file is written by a thread of this
    process at most every half second and at exit, a report that raises
    `checkpoint_version` before the call returns (fray.wrapper.progress_buffer);
    `flush()` writes at once. Returns None outside a fray job. A write that
    fails is warned about on stderr (progress is advisory, the training goes on).
    Raises `Superseded` once a write found this attempt no longer the run's
    current one (it wrote nothing): the wrapper is killing this workload.
    """
    folder = os.environ.get(contract.ENV_ATTEMPT_DIR)  # attempt_dir() without a Path: this runs every step
    if not folder:
        return None
    document = _document(step, loss, samples_per_sec, checkpoint_version, extra, None)
    _check_json(document["extra"])
    return progress_buffer.put(folder, document, _merged)


def flush() -> None:
    """Write what `progress()` holds now (it does within half a second, and at exit); raises `Superseded`."""
    progress_buffer.flush()


def _progress(step: Any, loss: Any, samples_per_sec: Any, checkpoint_version: Any, extra: dict[str, Any]) -> dict[str, Any] | None:
    folder = attempt_dir()
    if folder is None:
        return None
    return progress_in(folder, step, loss, samples_per_sec, checkpoint_version, extra)


def progress_in(folder: Path, step: Any, loss: Any, samples_per_sec: Any, checkpoint_version: Any,
                extra: dict[str, Any], now: float | None = None) -> dict[str, Any] | None:
    """`progress()` for the attempt folder `folder`, written before it returns and checked against progress.json
    as it is: the command line twin, and the wrapper's readers of the job's output and event files
    (fray.wrapper.logscan, fray.wrapper.tensorboard). Fenced and checked as `progress()` is; None when the file
    could not be written (warned on stderr)."""
    document = _document(step, loss, samples_per_sec, checkpoint_version, extra, now)
    path = folder / contract.PROGRESS
    with _lock:
        document = _merged(document, _previous(path), path)
        try:
            _write(path, document, "progress", durable=False)  # advisory: not worth an fsync
        except OSError as exc:
            # Progress is advisory: a full disk or a flaky mount must not end a long training run.
            print(f"fray report: progress not recorded: {exc}", file=sys.stderr)
            return None
        try:
            history.record_progress(folder, document)  # the curve (fray.wrapper.history)
        except OSError as exc:
            print(f"fray report: progress history not recorded: {exc}", file=sys.stderr)
    return document


def _document(step: Any, loss: Any, samples_per_sec: Any, checkpoint_version: Any, extra: dict[str, Any],
              now: float | None) -> dict[str, Any]:
    """The checked values as a progress document, before the counters are merged with the last one."""
    extra = dict(extra)
    speed = _measure("samples_per_sec", samples_per_sec, extra)
    if speed is not None and speed < 0:
        raise ValueError(f"samples_per_sec must not be negative, not {speed}")
    return {
        "updated_at": time.time() if now is None else now,
        "step": _counter("step", step),
        "loss": _measure("loss", loss, extra),
        "samples_per_sec": speed,
        "checkpoint_version": _counter("checkpoint_version", checkpoint_version),
        "extra": extra,
    }


def _merged(document: dict[str, Any], previous: dict[str, Any], path: Path) -> dict[str, Any]:
    """`document` after `previous` (the last report): counters checked and carried over, the stall clock kept (pure)."""
    document["step"] = _not_decreasing("step", document["step"], previous.get("step"), path)
    document["checkpoint_version"] = _not_decreasing(
        "checkpoint_version", document["checkpoint_version"], previous.get("checkpoint_version"), path
    )
    # When the step last moved: the shepherd's progress-stall check reads this,
    # so a workload that keeps reporting the same step still counts as stalled.
    advanced = document["step"] != previous.get("step") or "step_changed_at" not in previous
    document["step_changed_at"] = document["updated_at"] if advanced else previous["step_changed_at"]
    return document


_PLAIN = frozenset((str, int, bool, type(None)))  # what JSON says as it is: no need to try


def _check_json(extra: dict[str, Any]) -> None:
    """ValueError unless JSON can say `extra`: checked in the call, since the file is written later."""
    for value in extra.values():
        if type(value) in _PLAIN or (type(value) is float and math.isfinite(value)):
            continue
        try:
            json.dumps(extra, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(_not_json("progress", exc)) from None
        return


def final(**result: Any) -> dict[str, Any] | None:
    """Record the run's result (result.json, copied into final.json on exit 0); None outside a fray job."""
    folder = attempt_dir()
    if folder is None:
        return None
    _write(folder / contract.RESULT, result, "result")
    return result


def _write(path: Path, document: dict[str, Any], what: str, durable: bool = True) -> None:
    try:
        text = records.dumps(document)
    except (TypeError, ValueError) as exc:
        raise ValueError(_not_json(what, exc)) from None
    records.write_record(path, text.encode("utf-8"), durable=durable)


def _not_json(what: str, exc: Exception) -> str:
    return (f"cannot report this {what}: {exc}. Values must be JSON: strings, finite numbers, "
            "booleans, None, lists and dicts with string keys.")


# -- the command line twin ---------------------------------------------------


def _json_object(text: str) -> dict[str, Any]:
    import argparse

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object ({{...}}), not {type(value).__name__}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m fray.wrapper.report progress|final|commands|ack ...`: 0 on success (or outside a job), 1 when refused, 2 on bad arguments."""
    import argparse  # here, not at the top: workloads import this module for progress()

    parser = argparse.ArgumentParser(prog="python -m fray.wrapper.report", description="Report to fray from inside a job.")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = subcommands.add_parser("progress", help="replace progress.json", description="Replace progress.json.")
    p.add_argument("--step", type=int, help="a counter that must not decrease")
    p.add_argument("--loss", type=float)
    p.add_argument("--samples-per-sec", type=float)
    p.add_argument("--checkpoint-version", type=int, help="a counter that must not decrease")
    p.add_argument("--extra", type=_json_object, default={}, metavar="JSON", help="a JSON object of other values")
    f = subcommands.add_parser("final", help="record the result", description="Record the run's result (result.json).")
    f.add_argument("--json", type=_json_object, default={}, metavar="JSON", help="the result, a JSON object")
    subcommands.add_parser("commands", help="print unacknowledged runtime commands",
                           description="Print each unacknowledged runtime command as one JSON line, oldest first, "
                           "and stamp its delivery.")
    a = subcommands.add_parser("ack", help="acknowledge a runtime command", description="Acknowledge a runtime command.")
    a.add_argument("id", help="the command's id")
    a.add_argument("--json", type=_json_object, default={}, metavar="JSON", help="what was done, a JSON object")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "progress":
            _progress(args.step, args.loss, args.samples_per_sec, args.checkpoint_version, args.extra)
        elif args.command == "final":
            final(**args.json)
        elif args.command == "commands":
            for command in commands():
                print(json.dumps({"id": command.id, "type": command.type, "issued_at": command.issued_at,
                                  "actor": command.actor, "payload": command.payload}), flush=True)
        else:
            ack(args.id, **args.json)
    except (TypeError, ValueError, OSError) as exc:
        print(f"fray report: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
