"""Launching the workload: its code, its interpreter, its environment, its process.

The code is the run's snapshot, laid out by its first attempt (fray.wrapper.code)
and first on the job's PYTHONPATH, with the job-side helpers
(fray.wrapper.jobside) last, so `from fray import report` works in any Python.
A script is never executed directly (a frozen copy is 0600): a Python script
runs under --python when the run names one (its venv's, its conda env's, the
python3 it was submitted with), else under its shebang's interpreter, else, by
its extension, `.py` under this Python and anything else under bash. The
workload gets its own session and process group, so that the wrapper can
signal and kill all of it, and writes straight into stdout.log / stderr.log:
nothing is buffered in the wrapper, so nothing is lost if the wrapper dies.

Whatever kills the wrapper kills the workload too: the kernel sends it SIGKILL
when the wrapper dies (PR_SET_PDEATHSIG, fray.wrapper.procs). Its own
descendants carry the attempt's tag in their environment (FRAY_ATTEMPT_TAG),
by which the stray killer finds and kills them (fray.wrapper.tags).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Mapping, NamedTuple, Sequence

from . import code, contract, forked, jobside, procs, records, tags
from .options import Options

FIRST_LINE_MAX_BYTES = 1024


class LaunchError(Exception):
    """The workload could not be started; the message says why and what to check. `node_side`: this node
    lacks what the run needs (its interpreter, its working directory), which another node may have."""

    def __init__(self, message: str, node_side: bool = False) -> None:
        super().__init__(message)
        self.node_side = node_side


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


class Placement(NamedTuple):
    """Where the workload runs from: its script, its working directory, the folders its imports search first."""

    script: str
    cwd: str
    python_path: tuple[str, ...]


def place(options: Options) -> Placement:
    """The run's code laid out (its first attempt makes the copy) and where the workload starts in it;
    CodeError or OSError when the copy cannot be made."""
    if options.code is None or options.code_dir is None:
        return Placement(options.script, options.workdir or os.getcwd(), ())
    target, link = options.code_dir, True
    if records.write_once():  # no atomic rename nor hard link in FRAY_HOME: each host copies to its own disk
        target, link = code.node_local_dir(options.run_id), False
    folder = code.materialize(options.home or "", options.code, target, link)
    script = os.path.join(folder, options.entry) if options.entry else options.script
    cwd = os.path.join(folder, options.code_cwd) if options.code_cwd else (options.workdir or folder)
    return Placement(script, cwd, tuple(code.python_path(folder)))


def _is_python(script_path: str, command: list[str] | None) -> bool:
    if command is not None:
        return os.path.basename(command[0]).startswith("python")
    return script_path.lower().endswith(".py")


def launch_argv(script_path: str, first_line: str | None, args: Sequence[str], python: str | None = None) -> list[str]:
    """The argv that runs `script_path` with `args`, without the script needing an executable bit.
    `python`, the run's interpreter, runs a Python script whatever its #! line says."""
    command = shebang_command(first_line or "")
    if python is not None and _is_python(script_path, command):
        command = [python]
    elif command is None:
        command = [sys.executable or "python3"] if script_path.lower().endswith(".py") else ["bash"]
    return [*command, script_path, *args]


def workload_env(base: Mapping[str, str], options: Options, python_path: Sequence[str] = ()) -> dict[str, str]:
    """The workload's environment: `base` plus what tells it which run and attempt it is, its interpreter's
    environment, and its imports: the code's folders first, fray's job-side helpers last."""
    env = dict(base)
    if options.python_env is not None:
        env["PATH"] = os.pathsep.join([os.path.join(options.python_env, "bin"), *filter(None, [env.get("PATH")])])
        marker = "CONDA_PREFIX" if os.path.isdir(os.path.join(options.python_env, "conda-meta")) else "VIRTUAL_ENV"
        env[marker] = options.python_env
    try:
        helpers = [jobside.helpers_path()]
    except OSError:
        helpers = []  # the node's temporary folder is unusable: only a Python with fray imports it
    env["PYTHONPATH"] = os.pathsep.join([*python_path, *filter(None, [base.get("PYTHONPATH")]), *helpers])
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


def start(argv: Sequence[str], env: Mapping[str, str], cwd: str, stdout_path: str,
          stderr_path: str) -> subprocess.Popen[bytes] | forked.Forked:
    """Start the workload in a new session; LaunchError when it cannot be started."""
    if not os.path.isdir(cwd):
        raise LaunchError(f"the working directory {cwd} does not exist on this node or is not a directory; "
                          "check --workdir", node_side=True)
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
        if forked.applies(argv):  # in a warm worker: a fork of this interpreter runs the function
            return forked.start(argv, env, cwd, out, err)
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
            raise LaunchError(f"cannot enter the working directory {cwd}: {exc.strerror}", node_side=True) from None
        where = "does not exist on this node" if os.sep in argv[0] else f"is not on this node's PATH ({env.get('PATH', '')})"
        raise LaunchError(f"the interpreter {argv[0]!r} {where}; fix the script's #! line or --python, or "
                          "install it on this node", node_side=True) from None
    except PermissionError as exc:
        raise LaunchError(f"the interpreter {argv[0]!r} cannot be executed on this node: {exc.strerror}",
                          node_side=True) from None
    except OSError as exc:
        raise LaunchError(f"cannot start {argv[0]!r}: {exc}") from None
    finally:
        # The child has its own copies; ours must not outlive the launch.
        os.close(out)
        os.close(err)
