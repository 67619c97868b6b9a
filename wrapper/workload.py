"""Launching the workload: its interpreter, its environment, its process.

The script is a frozen 0600 copy, so it is never executed directly: the
interpreter comes from its shebang line, else from its extension (`.py` runs
under this Python, anything else under bash). The workload gets its own
session and process group, so that the wrapper can signal and kill all of it,
and writes straight into stdout.log / stderr.log: nothing is buffered in the
wrapper, so nothing is lost if the wrapper dies.

Whatever kills the wrapper kills the workload too: the kernel sends it SIGKILL
when the wrapper dies (PR_SET_PDEATHSIG, fray.wrapper.procs). Its own
descendants carry the attempt's tag in their environment (FRAY_ATTEMPT_TAG),
by which the sweeper finds and kills them (fray.wrapper.tags).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Mapping, Sequence

from . import contract, procs, records, tags
from .options import Options

FIRST_LINE_MAX_BYTES = 1024


class LaunchError(Exception):
    """The workload could not be started; the message says why and what to check."""


def read_first_line(script: str | os.PathLike[str]) -> str:
    """The script's first line without its line ending ("" for an empty file); OSError if unreadable."""
    with open(script, "rb") as handle:
        head = handle.read(FIRST_LINE_MAX_BYTES)
    return head.split(b"\n", 1)[0].decode("utf-8", errors="replace").rstrip("\r")


def _env_command(text: str) -> list[str] | None:
    """The command that `/usr/bin/env <text>` would run, or None when env does more than find a program."""
    if text.startswith("--split-string="):
        text = "-S" + text[len("--split-string=") :]
    elif text.startswith("--split-string"):
        text = "-S" + text[len("--split-string") :]
    try:
        # -S asks env to split (and unquote) the rest; without it the kernel
        # hands env the whole rest as one word, which only works for one word,
        # so split anyway rather than fail on "#!/usr/bin/env python3 -u".
        words = shlex.split(text[2:]) if text.startswith("-S") else text.split()
    except ValueError:
        return None
    if not words or words[0].startswith("-") or "=" in words[0]:
        return None  # env options or VAR=value assignments: let env itself do them
    return words


def shebang_command(first_line: str) -> list[str] | None:
    """Interpreter and its arguments from a `#!` line, or None when the line is no shebang."""
    if not first_line.startswith("#!"):
        return None
    text = first_line[2:].strip()
    if not text:
        return None
    interpreter, *tail = text.split(None, 1)
    rest = tail[0] if tail else ""
    if os.path.basename(interpreter) == "env" and rest:
        # Run the program env would have looked up ourselves (Popen searches
        # the workload's PATH), so a missing interpreter is a launch failure
        # rather than env's exit 127 that looks like a failing workload.
        command = _env_command(rest)
        if command is not None:
            return command
    return [interpreter, *rest.split()]


def launch_argv(script_path: str, first_line: str | None, args: Sequence[str], python: str | None = None) -> list[str]:
    """The argv that runs `script_path` with `args`, without the script needing an executable bit."""
    command = shebang_command(first_line or "")
    if command is None:
        if script_path.lower().endswith(".py"):
            command = [python or sys.executable or "python3"]
        else:
            command = ["bash"]
    return [*command, script_path, *args]


def workload_env(base: Mapping[str, str], options: Options) -> dict[str, str]:
    """The workload's environment: `base` plus what tells it which run and attempt it is."""
    env = dict(base)
    env[contract.ENV_RUN_ID] = options.run_id
    env[contract.ENV_JOB_ID] = options.run_id
    env[contract.ENV_JOB_NAME] = options.job_name or options.run_id
    env[contract.ENV_ATTEMPT] = str(options.attempt)
    env[contract.ENV_ATTEMPT_DIR] = options.attempt_dir
    env[contract.ENV_RESUME] = "1" if options.attempt > 1 else "0"
    if options.home is not None:
        env[contract.ENV_HOME] = options.home
        env.setdefault(contract.ENV_CLUSTER_SPEC, contract.ENV_CLUSTER_SPEC_FRAY)
        env[contract.ENV_ATTEMPT_TAG] = tags.Tag(options.run_id, options.attempt, options.home).text()
    else:
        env.pop(contract.ENV_ATTEMPT_TAG, None)  # not the attempt of a job this one was started from
    if options.namespace is not None:
        env[contract.ENV_NAMESPACE] = options.namespace
    # A job launched from inside another fray job inherits that job's
    # environment; it must not write into its parent's checkpoints, nor
    # answer its parent's commands.
    for name, value in ((contract.ENV_CHECKPOINT_DIR, options.checkpoint_dir),
                        (contract.ENV_COMMANDS_DIR, options.commands_dir)):
        if value is not None:
            env[name] = value
        else:
            env.pop(name, None)
    # So a Python workload's prints reach stdout.log as they happen.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _open_log(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, records.FILE_MODE)


def start(argv: Sequence[str], env: Mapping[str, str], cwd: str, stdout_path: str, stderr_path: str) -> subprocess.Popen[bytes]:
    """Start the workload in a new session; LaunchError when it cannot be started."""
    if not os.path.isdir(cwd):
        raise LaunchError(f"the working directory {cwd} does not exist or is not a directory; check --workdir")
    try:
        out = _open_log(stdout_path)
        try:
            err = _open_log(stderr_path)
        except BaseException:
            os.close(out)
            raise
    except OSError as exc:
        raise LaunchError(f"cannot open the workload's logs in {os.path.dirname(stdout_path)}: {exc}") from None
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=procs.die_with_this_process(),
        )
    except FileNotFoundError as exc:
        missing = exc.filename or argv[0]
        if missing == cwd:
            raise LaunchError(f"cannot enter the working directory {cwd}: {exc.strerror}") from None
        raise LaunchError(
            f"the interpreter {argv[0]!r} was not found (PATH={env.get('PATH', '')}); "
            "fix the script's #! line or install it on this node"
        ) from None
    except PermissionError as exc:
        raise LaunchError(f"the interpreter {argv[0]!r} cannot be executed: {exc.strerror}") from None
    except OSError as exc:
        raise LaunchError(f"cannot start {argv[0]!r}: {exc}") from None
    finally:
        # The child has its own copies; ours must not outlive the launch.
        os.close(out)
        os.close(err)
