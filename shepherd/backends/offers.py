"""What a run's backend can ever offer, read once, and the refusal of a run it never could (submit time).

    check(home, spec, name)   raise UsageError listing every problem (fray.core.submit_checks), writing nothing
    estimate(spec)            when and where Slurm expects the run to start (what `check` was told), or None
    recheck(backend, spec)    the daemon's look before each submission, from the backend's own cached sinfo

The judging is pure (fray.core.submit_checks); this shell only looks: this
machine's CPUs, memory and GPUs for the local backend (as its scheduler counts
them) and whether it has the script's `#!` interpreter, one `sinfo` for Slurm, kept for a minute so that a
sweep of a thousand points costs one call while a long-lived caller (the dashboard, a notebook) still sees a
partition added later; nothing for TPU (its checks need no cloud call). A Slurm run that passes those
checks is then shown to Slurm itself: `sbatch --test-only` (fray.backends.slurm.test_only) refuses what
its `#SBATCH` lines or the partition's limits make impossible, with its words and the line they point at.
A look that fails leaves that part unjudged: the backend stays the judge.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
import shutil
import time
from typing import TYPE_CHECKING, Any

from fray.backends.protocol import ListsPartitions
from fray.core import submit_checks
from fray.core.model import RunSpec
from fray.errors import StateError, SubmissionRefused
from fray.state.layout import Home

if TYPE_CHECKING:  # the runner (subprocess) is loaded where sinfo is run: a local submit runs no command
    from fray.backends import external
    from fray.backends.slurm.partitions import NodeRow

SINFO_TIMEOUT_SEC = 15.0
SINFO_TTL_SEC = 60.0
# backend -> (when it was read, its nodes as sinfo listed them; None: the look failed, so the backend judges)
_sinfo_cache: dict[str, tuple[float, list[NodeRow] | None]] = {}


def check(home: Home, spec: RunSpec, name: str, script: bytes | None = None,
          run_command: external.Runner | None = None, script_name: str = "the script",
          interpreter_matters: bool = True) -> None:
    """Refuse (UsageError, exit 2) a run that can never be submitted as it stands; say every reason and fix.
    `script`: its bytes, for its #! line (where `interpreter_matters`) and the line an sbatch refusal points at."""
    offered = offer(home, spec.backend, run_command)
    if spec.backend == "local" and script is not None and interpreter_matters:
        missing = _missing(submit_checks.interpreter_of(script))
        offered = submit_checks.Offer(offered.capacity, missing, offered.partitions, offered.slurm_nodes)
    found = submit_checks.problems(spec, name, offered, asked(spec))
    if not found and spec.backend == "slurm":
        from fray.backends.slurm import test_only

        text = script.decode("utf-8", "replace") if script is not None else "\n".join(spec.sbatch)
        rows = _slurm_rows(run_command)
        verdict = test_only.ask(spec, text, script_name, _summaries(rows), run_command or _runner())
        if verdict.refused:
            found.append(f"{verdict.refused}; fix it and submit again")
    if found:
        lines = "\n".join(f"  - {problem}" for problem in found)
        raise SubmissionRefused(f"this run can never start on the {spec.backend} backend, so nothing was "
                                f"submitted:\n{lines}")


def check_prepared(home: Home, ready: Any) -> None:
    """`check` for a run read for submission (fray.state.runs.Prepared). Its #! line is looked at only when it
    chooses the interpreter: a Python script run by --python, --venv or --conda ignores it."""
    check(home, ready.spec, ready.name, ready.data, script_name=Path(str(ready.source)).name,
          interpreter_matters=not ready.spec.python)


def estimate(spec: RunSpec, run_command: external.Runner | None = None) -> dict[str, Any] | None:
    """When and where `sbatch --test-only` expects the run to start (its answer to `check`, kept a minute):
    {start_at, nodes, partition, said}; None for another backend, or when Slurm gave no estimate."""
    if spec.backend != "slurm":
        return None
    from fray.backends.slurm import test_only

    verdict = test_only.ask(spec, "", "", _summaries(_slurm_rows(run_command)), run_command or _runner())
    found = verdict.estimate
    if found is None:
        return None
    return {"start_at": found.start_at, "nodes": found.nodes, "partition": found.partition or None,
            "said": found.text}


def recheck(backend: object, spec: RunSpec) -> list[str]:
    """In the daemon, before each submission: what may have changed since submit (a partition removed or made
    inactive), judged from what the backend already knows (the Slurm backend's cached sinfo): no extra call."""
    if spec.backend != "slurm" or not isinstance(backend, ListsPartitions):
        return []  # local: the scheduler says "can never start here"; tpu: nothing changes after submit
    found = backend.list_partitions()
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
        rows = _slurm_rows(run_command)
        if rows is None:
            return submit_checks.Offer()
        from fray.backends.slurm import node_workers, partitions
        from fray.core import never_fit

        found = partitions.summarize(rows)
        gpus: dict[str, dict[str | None, int]] = {}
        for row in rows:
            gpus.setdefault(row.node, {g.type: g.count for g in row.gpus})
        types = {g.type for row in rows for g in row.gpus if g.type}
        nodes = never_fit.SlurmNodes(tuple(node_workers.workers(rows)), tuple(p.name for p in found if p.default),
                                     {t: v for t in types if (v := partitions.vram_gb(t)) is not None}, gpus,
                                     {row.partition: row.time_limit_sec for row in rows})
        return submit_checks.Offer(partitions=tuple(submit_checks.PartitionOffer(p.name, p.available, p.gpus)
                                                    for p in found), slurm_nodes=nodes)
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
    from fray.backends.slurm.partitions import slurm_seconds

    time_sec = slurm_seconds(options["time"]) if options.get("time") else None
    return submit_checks.Asked(partitions=named, gpu_types=tuple(types), options=frozenset(options), time_sec=time_sec)


def _missing(program: str | None) -> str | None:
    """`program` when this machine cannot run it (not on PATH, or no such executable file)."""
    if program is None:
        return None
    found = shutil.which(program) if "/" not in program else (program if os.access(program, os.X_OK) else None)
    return None if found else program


def _runner() -> external.Runner:
    from fray.backends import external

    return external.run


def _summaries(rows: list[NodeRow] | None) -> list[Any] | None:
    if rows is None:
        return None
    from fray.backends.slurm import partitions

    return partitions.summarize(rows)


def _slurm_rows(run_command: external.Runner | None) -> list[NodeRow] | None:
    """The Slurm cluster's nodes, one sinfo row per node and partition (`run_command`: external.run when
    None), read at most once a minute; None when sinfo fails."""
    cached = _sinfo_cache.get("slurm")
    if cached is None or time.monotonic() - cached[0] > SINFO_TTL_SEC:
        from fray.backends.slurm import partitions

        result = (run_command or _runner())(["sinfo", "--noheader", "--Node", f"--format={partitions.SINFO_FORMAT}"],
                                            SINFO_TIMEOUT_SEC)
        cached = (time.monotonic(), partitions.parse_sinfo(result.stdout) if result.ok else None)
        _sinfo_cache["slurm"] = cached
    return cached[1]
