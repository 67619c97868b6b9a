"""The wrapper's command line: the contract the shepherd's backends submit against.

    python -m wrapper run --run-id RUN_ID --attempt N --attempt-dir DIR --script PATH
        [--home FRAY_HOME] [--job-name NAME] [--workdir DIR] [--checkpoint-dir DIR]
        [--namespace NS] [--heartbeat-interval SEC] [--stop-grace SEC]
        [-- SCRIPT_ARGS...]

Everything after the first `--` goes to the script untouched. Paths are made
absolute here, against the directory the wrapper was started in, because the
workload runs in --workdir and sees them through its environment.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

from wrapper import contract

COMMAND = "run"


class Options:
    """One attempt's settings. A plain class, not a dataclass: importing
    dataclasses would cost the wrapper's startup more than the rest of it."""

    __slots__ = (
        "run_id", "attempt", "attempt_dir", "script", "script_args", "home", "job_name",
        "workdir", "checkpoint_dir", "namespace", "heartbeat_interval", "stop_grace",
    )

    def __init__(
        self,
        run_id: str,
        attempt: int,
        attempt_dir: str,
        script: str,
        script_args: tuple[str, ...] = (),
        home: str | None = None,
        job_name: str | None = None,
        workdir: str | None = None,
        checkpoint_dir: str | None = None,
        namespace: str | None = None,
        heartbeat_interval: float = contract.DEFAULT_HEARTBEAT_INTERVAL_SEC,
        stop_grace: float = contract.DEFAULT_STOP_GRACE_SEC,
    ) -> None:
        self.run_id = run_id
        self.attempt = attempt
        self.attempt_dir = attempt_dir
        self.script = script
        self.script_args = script_args
        self.home = home
        self.job_name = job_name
        self.workdir = workdir
        self.checkpoint_dir = checkpoint_dir
        self.namespace = namespace
        self.heartbeat_interval = heartbeat_interval
        self.stop_grace = stop_grace

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Options({fields})"


def _nonempty(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def _attempt_number(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"attempts are numbered from 1, not {number}")
    return number


def _seconds(minimum_exclusive: bool) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            seconds = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of seconds, not {value!r}") from None
        if seconds != seconds or seconds in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number of seconds, not {value!r}")
        if seconds < 0 or (minimum_exclusive and seconds == 0):
            raise argparse.ArgumentTypeError(f"must be {'more than' if minimum_exclusive else 'at least'} 0, not {value}")
        return seconds

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m wrapper",
        description="Run one attempt of a fray run on this node: heartbeat, launch, watch, clean up, report.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = commands.add_parser(
        COMMAND,
        help="run one attempt of a script",
        description="Run one attempt of a script. Arguments after `--` are passed to the script.",
    )
    run.add_argument("--run-id", required=True, type=_nonempty, help="the run's id")
    run.add_argument("--attempt", required=True, type=_attempt_number, metavar="N", help="the attempt number, from 1")
    run.add_argument("--attempt-dir", required=True, type=_nonempty, metavar="DIR", help="this attempt's folder (created 0700)")
    run.add_argument("--script", required=True, type=_nonempty, metavar="PATH", help="the script to run (need not be executable)")
    run.add_argument("--home", type=_nonempty, metavar="FRAY_HOME", help="the state directory, exported as FRAY_HOME")
    run.add_argument("--job-name", type=_nonempty, metavar="NAME", help="exported as FRAY_JOB_NAME (default: the run id)")
    run.add_argument("--workdir", type=_nonempty, metavar="DIR", help="the workload's working directory (default: the current one)")
    run.add_argument("--checkpoint-dir", type=_nonempty, metavar="DIR", help="created 0700 and exported as FRAY_CHECKPOINT_DIR")
    run.add_argument("--namespace", type=_nonempty, metavar="NS", help="exported as FRAY_NAMESPACE")
    run.add_argument(
        "--heartbeat-interval",
        type=_seconds(minimum_exclusive=True),
        default=contract.DEFAULT_HEARTBEAT_INTERVAL_SEC,
        metavar="SEC",
        help="seconds between heartbeats (default: %(default)g)",
    )
    run.add_argument(
        "--stop-grace",
        type=_seconds(minimum_exclusive=False),
        default=contract.DEFAULT_STOP_GRACE_SEC,
        metavar="SEC",
        help="seconds a workload told to stop has before it is killed (default: %(default)g)",
    )
    return parser


def _absolute(path: str | None) -> str | None:
    return None if path is None else os.path.abspath(path)


def parse(argv: Sequence[str]) -> Options:
    """Options from the command line (without the program name); exits 2 with a message on bad arguments."""
    argv = list(argv)
    # Split at the first `--` ourselves: argparse's REMAINDER mishandles script
    # arguments that look like options.
    if "--" in argv:
        cut = argv.index("--")
        ours, script_args = argv[:cut], tuple(argv[cut + 1 :])
    else:
        ours, script_args = argv, ()
    parser = build_parser()
    ns = parser.parse_args(ours)
    return Options(
        run_id=ns.run_id,
        attempt=ns.attempt,
        attempt_dir=os.path.abspath(ns.attempt_dir),
        script=os.path.abspath(ns.script),
        script_args=script_args,
        home=_absolute(ns.home),
        job_name=ns.job_name,
        workdir=_absolute(ns.workdir),
        checkpoint_dir=_absolute(ns.checkpoint_dir),
        namespace=ns.namespace,
        heartbeat_interval=ns.heartbeat_interval,
        stop_grace=ns.stop_grace,
    )
