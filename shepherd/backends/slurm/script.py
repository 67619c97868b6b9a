"""The batch script and `sbatch` options for one attempt. Pure: a `BatchJob` in, text out.

The user's `#SBATCH` lines go into the script verbatim; what fray must control
goes on the sbatch command line, which Slurm lets win over the script:
job name and comment (run id and attempt), output into the attempt folder,
`--no-requeue` (the shepherd owns restarts), `--signal=B:USR1@<sec>` (the
wrapper, which is the batch shell, forwards it so the workload checkpoints
before a time limit), the partition, the excluded nodes. CPUs, memory and
GPUs from `#FRAY` become `-c/--mem/--gres` only where the user's `#SBATCH`
lines do not say.

The user's script is never pasted into the batch script: the wrapper runs the
frozen copy, which the batch script names by its (quoted) path only, so
heredocs, quotes, `$` and backslashes in it survive byte for byte.

Placement constraints (`#FRAY --constraint`) become `--constraint`,
`--partition`, `--nodelist`, `--exclude` and the GPU type in `--gres`
(`fray.core.placement.slurm`); `--replicas N` asks for N nodes, one task each,
in one allocation, unless the user's `#SBATCH` lines name the node count.

On several nodes (`#SBATCH -N 2`, or `--replicas 2`), `srun` starts one wrapper per node; task 0
reports in the attempt folder, task i in `tasks/<i>` under it. Each sees
FRAY_TASK_INDEX, FRAY_NUM_TASKS and FRAY_COORDINATOR_ADDRESS (the first
node, a port derived from the job id).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from fray.backends import wrapper_command
from fray.backends.protocol import SubmitRequest
from fray.backends.slurm.parse import job_name
from fray.core.placement.runs import parse_all
from fray.core.placement.slurm import SlurmPlacement, to_slurm
from fray.state import layout

ENV_TASK_INDEX = "FRAY_TASK_INDEX"
ENV_NUM_TASKS = "FRAY_NUM_TASKS"
ENV_COORDINATOR = "FRAY_COORDINATOR_ADDRESS"
COORDINATOR_PORT_BASE = 20000

# Short sbatch options that take a value, by their long names.
_SHORT = {"-c": "cpus-per-task", "-p": "partition", "-x": "exclude", "-N": "nodes", "-G": "gpus", "-J": "job-name",
          "-o": "output", "-e": "error", "-t": "time", "-n": "ntasks", "-w": "nodelist", "-C": "constraint",
          "-A": "account", "-q": "qos", "-D": "chdir", "-a": "array", "-d": "dependency", "-i": "input",
          "-L": "licenses", "-M": "clusters", "-m": "distribution", "-F": "nodefile", "-b": "begin"}
_MEMORY = ("mem", "mem-per-cpu", "mem-per-gpu")
_GPUS = ("gres", "gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket", "tres-per-node")
_CPUS = ("cpus-per-task", "cpus-per-gpu")


@dataclass(frozen=True)
class BatchJob:
    request: SubmitRequest
    python: str  # the compute side's Python, with the wrapper importable
    signal_before_limit_sec: int  # USR1 this long before the time limit
    gpu_type: str | None = None  # name it in --gres (chosen for the partition's memory)
    known_nodes: frozenset[str] | None = None  # exclude only these (sbatch rejects unknown names)

    @property
    def placement(self) -> SlurmPlacement:
        """The spec's constraints as sbatch options (checked at submit, so they translate)."""
        return to_slurm(parse_all(self.request.spec.constraints))

    @property
    def nodes(self) -> int:
        """Nodes in the allocation: the user's #SBATCH count if given, else one per replica."""
        user = sbatch_options(self.request.spec.sbatch)
        return node_count(user) if "nodes" in user else self.request.spec.replicas

    @property
    def exclude(self) -> tuple[str, ...]:
        """The user's --exclude, the hostname!= constraints, plus the blacklisted nodes Slurm knows:
        sbatch rejects a job that names an unknown node, and the blacklist is shared with other
        backends' nodes."""
        names = [n for n in sbatch_options(self.request.spec.sbatch).get("exclude", "").split(",") if n]
        names += [n for n in self.placement.exclude if n not in names]
        known = self.known_nodes or frozenset()
        names += [n for n in self.request.exclude_nodes if n in known and n not in names]
        return tuple(names)


def sbatch_options(lines: list[str]) -> dict[str, str]:
    """The options set by `#SBATCH` lines, by long name (the last one wins, as in sbatch)."""
    found: dict[str, str] = {}
    for line in lines:
        found.update((long_name(option), value) for option, value in line_options(line).items())
    return found


def line_options(line: str) -> dict[str, str]:
    """The options of one `#SBATCH` line as written (`--time`, `-p`) with their values; {} when it does not split."""
    try:
        tokens = shlex.split(line.removeprefix("#SBATCH"), comments=True)
    except ValueError:
        return {}  # sbatch will say what is wrong with it
    found: dict[str, str] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token.startswith("--"):
            name, has_value, value = token.partition("=")
            if not has_value and index < len(tokens) and not tokens[index].startswith("-"):
                value, index = tokens[index], index + 1
            found[name] = value
        elif token.startswith("-") and token[:2] in _SHORT:
            value = token[2:].lstrip("=")
            if not value and index < len(tokens):
                value, index = tokens[index], index + 1
            found[token[:2]] = value
    return found


def long_name(option: str) -> str:
    """`partition` for `-p` and for `--partition`."""
    return _SHORT[option] if option in _SHORT else option.removeprefix("--")


def node_count(options: dict[str, str]) -> int:
    """The most nodes the job may get (`-N 2`, `--nodes=2-4`); 1 when unset."""
    text = options.get("nodes", "1")
    counts = [int(part) for part in text.replace(":", "-").split("-") if part.strip().isdigit()]
    return max(counts, default=1)


def sbatch_argv(job: BatchJob, script_path: Path, log_path: Path) -> list[str]:
    """The whole sbatch command line for this attempt."""
    request = job.request
    log = slurm_filename(str(log_path))
    return [
        "sbatch", "--parsable", f"--job-name={job_name(request.key)}",
        f"--comment=fray:{request.key.run_id}:{request.key.attempt}",
        f"--output={log}", f"--error={log}", "--no-requeue", f"--chdir={request.attempt_dir}",
        f"--signal=B:USR1@{job.signal_before_limit_sec}", *resource_options(job), str(script_path),
    ]


def resource_options(job: BatchJob) -> list[str]:
    """Where and on what the job runs: partition, excluded nodes, constraints, nodes, CPUs, memory, GPUs.
    Attempts with the same options (and #SBATCH lines) can share one job array (fray.backends.slurm.arrays)."""
    spec = job.request.spec
    user = sbatch_options(spec.sbatch)
    argv: list[str] = []
    request = job.request
    placement = job.placement
    if request.partition:
        argv.append(f"--partition={request.partition}")
    elif placement.partitions and "partition" not in user:
        argv.append(f"--partition={','.join(placement.partitions)}")
    if job.exclude:
        argv.append(f"--exclude={','.join(job.exclude)}")
    if placement.constraint and "constraint" not in user:
        argv.append(f"--constraint={placement.constraint}")
    if placement.nodelist and "nodelist" not in user:
        argv.append(f"--nodelist={','.join(placement.nodelist)}")
    if "nodes" not in user and spec.replicas > 1:
        argv += [f"--nodes={spec.replicas}", "--ntasks-per-node=1"]
    if not any(name in user for name in _CPUS) and spec.cpus > 1:
        argv.append(f"--cpus-per-task={spec.cpus}")
    if not any(name in user for name in _MEMORY) and spec.mem_mb:
        argv.append(f"--mem={spec.mem_mb}M")
    gpu_type = placement.gpu_type or job.gpu_type
    if not any(name in user for name in _GPUS) and spec.gpus:
        argv.append(f"--gres=gpu:{gpu_type}:{spec.gpus}" if gpu_type else f"--gres=gpu:{spec.gpus}")
    return argv


def batch_script(job: BatchJob) -> str:
    """The script sbatch runs: the user's #SBATCH lines, then the wrapper around the frozen script."""
    request, spec = job.request, job.request.spec
    q = shlex.quote
    lines = ["#!/bin/bash", *spec.sbatch,
             f"# Generated by fray for run {request.key.run_id}, attempt {request.key.attempt}.",
             "# The user's script runs from its frozen copy (--script below), never pasted in here.",
             'if [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then',
             '    echo "fray: Slurm requeued this job; fray starts a new attempt itself, so this one ends here" >&2',
             "    exit 0",
             "fi"]
    lines += [f"export {key}={q(value)}" for key, value in sorted(spec.env.items())]
    if job.nodes <= 1:
        lines += [f"export {ENV_TASK_INDEX}=0 {ENV_NUM_TASKS}=1",
                  f"export {ENV_COORDINATOR}=\"$(hostname):$(({COORDINATOR_PORT_BASE} + SLURM_JOB_ID % 10000))\"",
                  "exec " + _wrapper_command(job)]
        return "\n".join(lines) + "\n"
    # One wrapper per node. srun's --kill-on-bad-exit ends every task when one
    # fails, and the job with them: the allocation is released as a whole.
    per_task = "\n".join([
        f"export {ENV_TASK_INDEX}=\"$SLURM_PROCID\" {ENV_NUM_TASKS}=\"$SLURM_NTASKS\"",
        f"task_dir={q(str(request.attempt_dir))}",
        f'[ "$SLURM_PROCID" = 0 ] || task_dir="$task_dir/{layout.TASKS_DIR}/$SLURM_PROCID"',
        "exec " + _wrapper_command(job, '"$task_dir"'),
    ])
    lines += [
        f"export {ENV_COORDINATOR}=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)"
        f":$(({COORDINATOR_PORT_BASE} + SLURM_JOB_ID % 10000))\"",
        'exec srun --kill-on-bad-exit=1 --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" '
        f"--ntasks-per-node=1 bash -c {q(per_task)}",
    ]
    return "\n".join(lines) + "\n"


def _wrapper_command(job: BatchJob, attempt_dir: str | None = None) -> str:
    """The wrapper's command line, quoted for bash; `attempt_dir` is a shell expansion left as it is."""
    return wrapper_command.shell_command(wrapper_command.wrapper_argv(job.python, job.request, attempt_dir), attempt_dir)


def slurm_filename(path: str) -> str:
    """sbatch expands %j, %x, ... in --output: a literal % must be doubled."""
    return path.replace("%", "%%")
