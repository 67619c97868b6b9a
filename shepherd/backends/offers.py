"""What a run's backend can ever offer, read once, and the refusal of a run it never could (submit time).

    check(home, spec, name)   raise UsageError listing every problem (fray.core.submit_checks), writing nothing
    recheck(backend, spec)    the daemon's look before each submission, from the backend's own cached sinfo

The judging is pure (fray.core.submit_checks); this shell only looks: this
machine's CPUs, memory and GPUs for the local backend (as its scheduler counts
them) and whether it has the script's `#!` interpreter, one `sinfo` for Slurm, kept for a minute so that a
sweep of a thousand points costs one call while a long-lived caller (the dashboard, a notebook) still sees a
partition added later; nothing for TPU (its checks need no cloud call).
A look that fails leaves that part unjudged: the backend stays the judge.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from typing import TYPE_CHECKING, Any

from fray.core import submit_checks
from fray.core.model import RunSpec
from fray.errors import StateError, UsageError
from fray.state.layout import Home

if TYPE_CHECKING:  # the runner (subprocess) is loaded where sinfo is run: a local submit runs no command
    from fray.backends import external

SINFO_TIMEOUT_SEC = 15.0
SINFO_TTL_SEC = 60.0
# backend -> (when it was read, what it offered; None: the look failed, so the backend judges)
_sinfo_cache: dict[str, tuple[float, tuple[submit_checks.PartitionOffer, ...] | None]] = {}


def check(home: Home, spec: RunSpec, name: str, script: bytes | None = None,
          run_command: external.Runner | None = None) -> None:
    """Refuse (UsageError, exit 2) a run that can never be submitted as it stands; say every reason and fix."""
    offered = offer(home, spec.backend, run_command)
    if spec.backend == "local" and script is not None:
        missing = _missing(submit_checks.interpreter_of(script))
        offered = submit_checks.Offer(offered.capacity, missing, offered.partitions)
    found = submit_checks.problems(spec, name, offered, asked(spec))
    if found:
        lines = "\n".join(f"  - {problem}" for problem in found)
        raise UsageError(f"this run can never start on the {spec.backend} backend, so nothing was submitted:\n{lines}")


def check_prepared(home: Home, ready: Any) -> None:
    """`check` for a run read for submission (fray.state.runs.Prepared). Its #! line is looked at only when it
    chooses the interpreter: a Python script run by --python, --venv or --conda ignores it."""
    check(home, ready.spec, ready.name, None if ready.spec.python else ready.data)


def recheck(backend: object, spec: RunSpec) -> list[str]:
    """In the daemon, before each submission: what may have changed since submit (a partition removed or made
    inactive), judged from what the backend already knows (the Slurm backend's cached sinfo): no extra call."""
    lister = getattr(backend, "list_partitions", None)
    if spec.backend != "slurm" or lister is None:
        return []  # local: the scheduler says "can never start here"; tpu: nothing changes after submit
    found = lister()
    if found is None:
        return []
    if len(spec.partitions) > 1:
        # A chain falls back from a partition sbatch refuses to the next (fray.core.partition_policy).
        spec = dataclasses.replace(spec, partitions=[])
    partitions = tuple(submit_checks.PartitionOffer(p.name, p.available, p.gpus) for p in found)
    return submit_checks.backend_problems(spec, submit_checks.Offer(partitions=partitions), asked(spec))


def offer(home: Home, backend: str, run_command: external.Runner | None = None) -> submit_checks.Offer:
    if backend == "local":
        from fray.backends.local import machine

        try:
            return submit_checks.Offer(capacity=machine.capacity(machine.local_config(home)))
        except (OSError, StateError):  # an unusable FRAY_HOME or config.json: writing the run says so
            return submit_checks.Offer()
    if backend == "slurm":
        return submit_checks.Offer(partitions=_partitions(run_command))
    return submit_checks.Offer()


def asked(spec: RunSpec) -> submit_checks.Asked:
    """What the run's `#SBATCH` lines ask of Slurm: partitions and typed GRES (`gpu:a100:2`)."""
    if spec.backend != "slurm" or not spec.sbatch:
        return submit_checks.Asked()
    from fray.backends.slurm.script import sbatch_options

    options = sbatch_options(spec.sbatch)
    named = tuple(p for p in options.get("partition", "").split(",") if p)
    types = []
    for item in options.get("gres", "").split(","):
        parts = item.split(":")
        if len(parts) >= 3 and parts[0] == "gpu" or len(parts) == 2 and parts[0] == "gpu" and not parts[1].isdigit():
            types.append(parts[1])
    return submit_checks.Asked(partitions=named, gpu_types=tuple(types))


def _missing(program: str | None) -> str | None:
    """`program` when this machine cannot run it (not on PATH, or no such executable file)."""
    if program is None:
        return None
    found = shutil.which(program) if "/" not in program else (program if os.access(program, os.X_OK) else None)
    return None if found else program


def _partitions(run_command: external.Runner | None) -> tuple[submit_checks.PartitionOffer, ...] | None:
    """What Slurm offers (`run_command`: external.run when None), read at most once a minute."""
    cached = _sinfo_cache.get("slurm")
    if cached is None or time.monotonic() - cached[0] > SINFO_TTL_SEC:
        from fray.backends import external
        from fray.backends.slurm import sinfo
        from fray.errors import BackendError

        try:
            found = sinfo.read_partitions(run_command or external.run, SINFO_TIMEOUT_SEC)
        except BackendError:
            cached = (time.monotonic(), None)
        else:
            cached = (time.monotonic(), tuple(submit_checks.PartitionOffer(p.name, p.available, p.gpus) for p in found))
        _sinfo_cache["slurm"] = cached
    return cached[1]
