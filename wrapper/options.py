"""The wrapper's command line: the contract the shepherd's backends submit against.

    python -m fray.wrapper run --run-id RUN_ID --attempt N --attempt-dir DIR --script PATH
        [--home FRAY_HOME] [--job-name NAME] [--workdir DIR] [--checkpoint-dir DIR]
        [--namespace NS] [--heartbeat-interval SEC] [--stop-grace SEC]
        [--commands-dir DIR]
        [--code TREE --code-dir DIR [--entry REL] [--code-cwd REL]] [--module NAME]
        [--python PATH] [--python-env DIR]
        [--gpus N] [--tpu-devices N] [--tpu-device-glob GLOB ...]
        [--probes LIST] [--skip-probes LIST] [--probe-timeout SEC] [--min-free-disk MB]
        [--health-cmd CMD] [--health-interval SEC] [--health-retries K]
        [--idle-timeout SEC] [--progress-timeout SEC]
        [--progress-pattern REGEX ...] [--progress-tensorboard DIR]
        [--retry-arg=ARG ...] [--retry-args-if-exists PATH]
        [-- SCRIPT_ARGS...]

Everything after the first `--` goes to the script untouched. Paths are made
absolute here, against the directory the wrapper was started in, because the
workload runs in --workdir and sees them through its environment.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable, Sequence

from . import contract

COMMAND = "run"


class Options:
    """One attempt's settings. A plain class, not a dataclass: importing
    dataclasses would cost the wrapper's startup more than the rest of it."""

    __slots__ = (
        "run_id", "attempt", "attempt_dir", "script", "script_args", "home", "job_name",
        "workdir", "checkpoint_dir", "namespace", "heartbeat_interval", "stop_grace", "fence_grace",
        "commands_dir", "gpus", "tpu_devices", "tpu_device_globs", "probes", "skip_probes",
        "probe_timeout", "min_free_disk_mb", "health_cmd", "health_interval", "health_retries",
        "code", "code_dir", "entry", "code_cwd", "module", "python", "python_env", "idle_timeout", "progress_timeout",
        "progress_patterns", "progress_tensorboard", "retry_args", "retry_args_if_exists",
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
        fence_grace: float = contract.DEFAULT_FENCE_GRACE_SEC,
        commands_dir: str | None = None,
        gpus: int = 0,
        tpu_devices: int = 0,
        tpu_device_globs: tuple[str, ...] = contract.TPU_DEVICE_GLOBS,
        probes: tuple[str, ...] | None = None,
        skip_probes: tuple[str, ...] = (),
        probe_timeout: float = contract.DEFAULT_PROBE_TIMEOUT_SEC,
        min_free_disk_mb: int = contract.DEFAULT_MIN_FREE_DISK_MB,
        health_cmd: str | None = None,
        health_interval: float = contract.DEFAULT_HEALTH_INTERVAL_SEC,
        health_retries: int = contract.DEFAULT_HEALTH_RETRIES,
        code: str | None = None,
        code_dir: str | None = None,
        entry: str | None = None,
        code_cwd: str | None = None,
        module: str | None = None,
        python: str | None = None,
        python_env: str | None = None,
        idle_timeout: float = contract.DEFAULT_IDLE_TIMEOUT_SEC,
        progress_timeout: float = 0.0,
        progress_patterns: tuple[str, ...] = (),
        progress_tensorboard: str | None = None,
        retry_args: tuple[str, ...] = (),
        retry_args_if_exists: str | None = None,
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
        self.fence_grace = fence_grace
        self.commands_dir = commands_dir
        self.gpus = gpus
        self.tpu_devices = tpu_devices
        self.tpu_device_globs = tpu_device_globs
        self.probes = probes  # None: chosen by what the run asked for
        self.skip_probes = skip_probes
        self.probe_timeout = probe_timeout
        self.min_free_disk_mb = min_free_disk_mb
        self.health_cmd = health_cmd
        self.health_interval = health_interval
        self.health_retries = health_retries
        self.code = code  # a snapshot's tree: laid out in code_dir, the script is entry inside it
        self.code_dir = code_dir
        self.entry = entry
        self.code_cwd = code_cwd  # the working directory inside code_dir; None: workdir
        self.module = module  # run `python -m module` instead of the script
        self.python = python  # the interpreter for Python work; None: the #! line, else this Python
        self.python_env = python_env  # a venv or conda prefix: its bin/ leads the workload's PATH
        self.idle_timeout = idle_timeout  # 0: no idle check (fray.wrapper.hangwatch)
        self.progress_timeout = progress_timeout  # the shepherd's; 0: no stacks taken ahead of a stall
        self.progress_patterns = progress_patterns  # the job's output, read as progress (fray.wrapper.logscan)
        self.progress_tensorboard = progress_tensorboard  # its event files' scalars (fray.wrapper.tensorboard)
        self.retry_args = retry_args  # added to script_args after attempt 1 (fray.wrapper.resume_args)
        self.retry_args_if_exists = retry_args_if_exists

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


def _count(minimum: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {value!r}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {number}")
        return number

    return parse


def _probe_names(value: str) -> tuple[str, ...]:
    """`gpu,cuda` -> ("gpu", "cuda"); `none` -> (); unknown names are refused with the valid ones."""
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if names == ("none",):
        return ()
    unknown = [n for n in names if n not in contract.PROBE_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown probe {', '.join(map(repr, unknown)) or repr(value)}; "
            f"give a comma-separated list of {', '.join(contract.PROBE_NAMES)}, or none"
        )
    return names


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


@functools.lru_cache(maxsize=1)  # built once per process: a warm worker builds it for every wrapper it forks
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
    run.add_argument(
        "--fence-grace",
        type=_seconds(minimum_exclusive=True),
        default=contract.DEFAULT_FENCE_GRACE_SEC,
        metavar="SEC",
        help="with --home: kill the workload and exit, writing nothing, once FRAY_HOME has been unreadable "
        "this long; a superseded attempt is killed at once (default: %(default)g)",
    )
    run.add_argument("--commands-dir", type=_nonempty, metavar="DIR",
                     help="the run's runtime commands, exported as FRAY_COMMANDS_DIR")
    _add_code(run)
    _add_probes(run)
    _add_watches(run)
    return parser


def _add_code(run: argparse.ArgumentParser) -> None:
    """Where the workload's code and interpreter come from."""
    code = run.add_argument_group("code and interpreter (fray.wrapper.code)")
    code.add_argument("--code", type=_nonempty, metavar="TREE",
                      help="the run's code snapshot in FRAY_HOME/snapshots, laid out in --code-dir by the first attempt")
    code.add_argument("--code-dir", type=_nonempty, metavar="DIR", help="where the snapshot is laid out")
    code.add_argument("--entry", type=_nonempty, metavar="REL", help="with --code: the script, inside the snapshot")
    code.add_argument("--code-cwd", type=_nonempty, metavar="REL",
                      help="with --code: the working directory inside the snapshot (default: --workdir)")
    code.add_argument("--module", type=_nonempty, metavar="NAME", help="run `PYTHON -m NAME` instead of the script")
    code.add_argument("--python", type=_nonempty, metavar="PATH",
                      help="the interpreter of a Python script or module (default: its #! line, else this Python)")
    code.add_argument("--python-env", type=_nonempty, metavar="DIR",
                      help="a virtual environment or conda env whose bin/ leads the workload's PATH")


def _add_probes(run: argparse.ArgumentParser) -> None:
    """The preflight probes, before the workload starts."""
    probes = run.add_argument_group("preflight probes (before the workload starts; a failure exits 42, 43 or 44)")
    probes.add_argument("--gpus", type=_count(0), default=0, metavar="N", help="GPUs the run asked for (default: 0)")
    probes.add_argument("--tpu-devices", type=_count(0), default=0, metavar="N",
                        help="TPU device files expected on this host (default: 0, no TPU probe)")
    probes.add_argument("--tpu-device-glob", action="append", type=_nonempty, metavar="GLOB",
                        help=f"where TPU devices appear; repeatable (default: {' '.join(contract.TPU_DEVICE_GLOBS)})")
    probes.add_argument("--probes", type=_probe_names, metavar="LIST",
                        help=f"run exactly these probes ({','.join(contract.PROBE_NAMES)}, or none) "
                        "instead of those the resources imply")
    probes.add_argument("--skip-probes", type=_probe_names, default=(), metavar="LIST", help="never run these probes")
    probes.add_argument("--probe-timeout", type=_seconds(minimum_exclusive=True),
                        default=contract.DEFAULT_PROBE_TIMEOUT_SEC, metavar="SEC",
                        help="each probe's deadline; a probe that misses it is a node fault (default: %(default)g)")
    probes.add_argument("--min-free-disk", type=_count(0), default=contract.DEFAULT_MIN_FREE_DISK_MB, metavar="MB",
                        help="free space FRAY_HOME and the temporary directory need (default: %(default)d)")


def _add_watches(run: argparse.ArgumentParser) -> None:
    """What is watched while the workload runs (its health command, hangs, what it emits), and how it resumes."""
    health = run.add_argument_group("health command (while the workload runs)")
    health.add_argument("--health-cmd", type=_nonempty, metavar="CMD",
                        help="a shell command that exits 0 while the workload is healthy")
    health.add_argument("--health-interval", type=_seconds(minimum_exclusive=True),
                        default=contract.DEFAULT_HEALTH_INTERVAL_SEC, metavar="SEC",
                        help="seconds between health checks, and each check's deadline (default: %(default)g)")
    health.add_argument("--health-retries", type=_count(1), default=contract.DEFAULT_HEALTH_RETRIES, metavar="K",
                        help="failed checks in a row that stop the heartbeat (default: %(default)d)")
    hangs = run.add_argument_group("hang watch (fray.wrapper.hangwatch)")
    hangs.add_argument("--idle-timeout", type=_seconds(minimum_exclusive=False),
                       default=contract.DEFAULT_IDLE_TIMEOUT_SEC, metavar="SEC",
                       help="end the workload as hung when its processes use no CPU and report no progress "
                       "this long; 0: never (default: %(default)g)")
    hangs.add_argument("--progress-timeout", type=_seconds(minimum_exclusive=False), default=0.0, metavar="SEC",
                       help="the shepherd's progress timeout: the stacks are taken just before it ends a stall; "
                       "0: not known (default)")
    emitted = run.add_argument_group("what the job emits, read as its progress; how it resumes")
    emitted.add_argument("--progress-pattern", action="append", type=_nonempty, metavar="REGEX",
                         help="a regular expression searched in each line of the workload's stdout and stderr; "
                         "its named groups (step, loss, ...) are reported as progress (repeatable)")
    emitted.add_argument("--progress-tensorboard", type=_nonempty, metavar="DIR",
                         help="read the scalars of the TensorBoard event files under DIR (relative to the "
                         "working directory) as progress")
    emitted.add_argument("--retry-arg", action="append", metavar="ARG",
                         help="an argument added to the script's after attempt 1 (repeatable; write --retry-arg=ARG)")
    emitted.add_argument("--retry-args-if-exists", type=_nonempty, metavar="PATH",
                         help="add the --retry-arg arguments only when this file exists (relative to the working "
                         "directory)")


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
    records_mode = os.environ.get(contract.ENV_RECORDS)
    if records_mode not in (None, "", *contract.RECORDS_MODES):
        # Records written in a layout the shepherd does not read would look like a lost attempt.
        parser.error(f"{contract.ENV_RECORDS}={records_mode!r} is not one of {', '.join(contract.RECORDS_MODES)} "
                     "(write-once: a FRAY_HOME without atomic rename, such as gcsfuse)")
    if ns.code is not None and ns.code_dir is None:
        parser.error("--code needs --code-dir, where the snapshot is laid out")
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
        fence_grace=ns.fence_grace,
        commands_dir=_absolute(ns.commands_dir),
        gpus=ns.gpus,
        tpu_devices=ns.tpu_devices,
        tpu_device_globs=tuple(ns.tpu_device_glob) if ns.tpu_device_glob else contract.TPU_DEVICE_GLOBS,
        probes=ns.probes,
        skip_probes=ns.skip_probes,
        probe_timeout=ns.probe_timeout,
        min_free_disk_mb=ns.min_free_disk,
        health_cmd=ns.health_cmd,
        health_interval=ns.health_interval,
        health_retries=ns.health_retries,
        code=ns.code,
        code_dir=_absolute(ns.code_dir),
        entry=ns.entry,
        code_cwd=ns.code_cwd,
        module=ns.module,
        python=ns.python,
        python_env=_absolute(ns.python_env),
        idle_timeout=ns.idle_timeout,
        progress_timeout=ns.progress_timeout,
        progress_patterns=tuple(ns.progress_pattern or ()),
        progress_tensorboard=ns.progress_tensorboard,
        retry_args=tuple(ns.retry_arg or ()),
        retry_args_if_exists=ns.retry_args_if_exists,
    )
