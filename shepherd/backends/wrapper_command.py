"""The wrapper's command line, built once for every backend (`python -m fray.wrapper run ...`).

Every backend starts the same wrapper with the same options: where the run
lives, which attempt this is, its code snapshot and interpreter (or the frozen
script), resources and preflight probes, the health command, the runtime
commands folder. Options left at the
wrapper's defaults are not spelled out, so a command line stays readable in `ps`.
A backend that runs it through a shell quotes it with `shell_command`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from fray.backends.protocol import SubmitRequest
from fray.core.tpu_topology import shape
from fray.core.model import RunSpec
from fray.state.layout import Home
from fray.wrapper import contract

# `python -m <this> run ...`: also how the local backend recognises its wrappers in /proc.
WRAPPER_MODULE = "fray.wrapper"


def wrapper_argv(python: str, request: SubmitRequest, attempt_dir: str | None = None) -> list[str]:
    """The wrapper's argv for one attempt; `attempt_dir` overrides the request's (a shell variable on Slurm)."""
    spec = request.spec
    return [
        python, "-m", WRAPPER_MODULE, "run",
        "--home", str(request.home),
        "--run-id", request.key.run_id,
        "--attempt", str(request.key.attempt),
        "--attempt-dir", attempt_dir if attempt_dir is not None else str(request.attempt_dir),
        "--script", str(request.script),
        # Values a person chose are joined to their option: `--job-name=--help` is a name, never an option.
        f"--job-name={request.name}",
        f"--namespace={request.namespace or request.key.run_id}",
        "--workdir", spec.workdir,
        "--checkpoint-dir", str(request.checkpoint_dir),
        "--heartbeat-interval", repr(spec.heartbeat_interval_sec),
        "--stop-grace", repr(spec.stop_grace_sec),
        # Gone before the daemon gives up on it and starts another attempt (fray.wrapper.fence).
        "--fence-grace", repr(spec.heartbeat_timeout_sec / 2),
        *_probe_and_health(spec, Home(request.home).run(request.key.run_id).commands_dir),
        *_code_and_python(spec, Home(request.home).run(request.key.run_id).code_dir),
        "--", *spec.args,
    ]


def shell_command(argv: Sequence[str], verbatim: str | None = None) -> str:
    """`argv` as one shell command line, every word quoted but `verbatim` (a shell expansion)."""
    return " ".join(word if word == verbatim else shlex.quote(word) for word in argv)


def _code_and_python(spec: RunSpec, code_dir: object) -> list[str]:
    """`--code TREE --code-dir DIR --entry REL ...`: the run's snapshot and where it starts in it, its interpreter."""
    args: list[str] = []
    code = spec.code
    if code is not None:
        args += ["--code", code["tree"], "--code-dir", str(code_dir)]
        if code.get("entry"):
            args += ["--entry", code["entry"]]
        if code.get("cwd"):
            args += ["--code-cwd", code["cwd"]]
    if spec.module is not None:
        args += ["--module", spec.module]
    if spec.python is not None:
        args += ["--python", spec.python]
    if spec.python_env is not None:
        args += ["--python-env", spec.python_env]
    return args


def _probe_and_health(spec: RunSpec, commands_dir: object) -> list[str]:
    """`--gpus N --probes ... --health-cmd ...` for this spec (each option followed by one value; a value a
    person wrote that may start with `-`, joined to its option), and what reads the job's progress."""
    args = ["--commands-dir", str(commands_dir), "--gpus", str(spec.gpus)]
    if spec.backend == "tpu" and spec.tpu:
        # Every host of a slice must see its share of the chips (the wrapper's tpu probe, exit 42 if not).
        args += ["--tpu-devices", str(shape(spec.tpu).chips_per_host)]
    if spec.probes is not None:
        args += ["--probes", ",".join(spec.probes) or "none"]
    if spec.skip_probes:
        args += ["--skip-probes", ",".join(spec.skip_probes)]
    if spec.probe_timeout_sec != contract.DEFAULT_PROBE_TIMEOUT_SEC:
        args += ["--probe-timeout", repr(spec.probe_timeout_sec)]
    if spec.min_free_disk_mb != contract.DEFAULT_MIN_FREE_DISK_MB:
        args += ["--min-free-disk", str(spec.min_free_disk_mb)]
    if spec.idle_timeout_sec != contract.DEFAULT_IDLE_TIMEOUT_SEC:
        args += ["--idle-timeout", repr(spec.idle_timeout_sec or 0.0)]
    if spec.progress_timeout_sec:  # the stacks of a stall are taken just before the daemon ends it
        args += ["--progress-timeout", repr(spec.progress_timeout_sec)]
    args += [f"--progress-pattern={pattern}" for pattern in spec.progress_patterns]
    if spec.progress_tensorboard is not None:
        args.append(f"--progress-tensorboard={spec.progress_tensorboard}")
    args += [f"--retry-arg={arg}" for arg in spec.retry_args]
    if spec.retry_args_if_exists is not None:
        args.append(f"--retry-args-if-exists={spec.retry_args_if_exists}")
    if spec.health_cmd is not None:
        args += ["--health-cmd", spec.health_cmd, "--health-interval", repr(spec.health_interval_sec),
                 "--health-retries", str(spec.health_retries)]
    return args
