"""`sbatch --test-only` at submit: Slurm's own judgement of a run's `#SBATCH` lines and placement, before a run exists.

    ask(spec, script_text, script_name, found, run_command) -> Verdict

The job sbatch is asked about is the first attempt's: the run's `#SBATCH`
lines in a batch script of their own, and on the command line the resource
options fray adds (fray.backends.slurm.script.resource_options) with the
partition fray would choose (the first of the GPU partitions that fit, or
each of `--partitions a,b` in turn until one is accepted). sbatch parses and
places it without submitting it: a typo (`--tim=1:00:00`), an option it does
not take, a request no node can meet, a partition's or QOS's limits are
refused with its own words, which `refusals` points at the script's line;
an accepted one comes with the start Slurm expects (`Job 3 to start at ...
on nodes n3 in partition h100`), which `fray submit` shows.

An answer that is not about the job (the controller unreachable, sbatch
missing, a timeout) judges nothing: the daemon's first sbatch is the judge
then. Answers are kept for a minute by what was asked, so a sweep of a
thousand points costs one call.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from fray.backends import external
from fray.backends.protocol import AttemptKey, SubmitRequest
from fray.backends.slurm import partitions, refusals
from fray.backends.slurm.script import BatchJob, resource_options, sbatch_options
from fray.core.model import RunSpec

TIMEOUT_SEC = 15.0
TTL_SEC = 60.0
_NOWHERE = Path("/nonexistent")  # the attempt's folders: not part of what --test-only judges
# what was asked -> (when, its answer)
_cache: dict[tuple[str, ...], tuple[float, external.CommandResult]] = {}


class Verdict(NamedTuple):
    """Slurm's answer: `refused` ("" when it would take it), with the start it expects where it gave one."""

    refused: str = ""
    estimate: refusals.Estimate | None = None


def ask(spec: RunSpec, script_text: str, script_name: str, found: list[partitions.Partition] | None,
        run_command: external.Runner = external.run) -> Verdict:
    """What `sbatch --test-only` says of the run's first attempt; Verdict() when it could not say."""
    said: list[str] = []
    for partition in _partitions_to_try(spec, found):
        result = _test_only(spec, partition, found, run_command)
        if result.ok or refusals.judge(result) is not refusals.Answer.REFUSED:
            # "ok": sbatch --test-only says it on stderr, with exit 0
            return Verdict(estimate=refusals.estimate(result.stderr)) if result.ok else Verdict()
        words = refusals.words(result)
        said.append(f"{words} (on partition {partition})" if partition and len(spec.partitions) > 1 else words)
    if not said:
        return Verdict()
    text = "; ".join(said)
    pointers = refusals.pointed(text, script_text, spec.to_dict())
    return Verdict(refused=refusals.refusal(text, pointers, script_name).replace(
        "sbatch refused the job", "sbatch --test-only refused it", 1))


def _partitions_to_try(spec: RunSpec, found: list[partitions.Partition] | None) -> list[str | None]:
    """The partitions the daemon would submit to, in its order (None: Slurm's default or the #SBATCH line)."""
    if spec.partitions:
        return list(spec.partitions)
    if not spec.gpus or "partition" in sbatch_options(spec.sbatch) or found is None:
        return [None]
    chain = partitions.choose(found, partitions.need_of(spec))
    return [chain.chain[0]] if chain is not None and chain.chain else [None]


def _test_only(spec: RunSpec, partition: str | None, found: list[partitions.Partition] | None,
               run_command: external.Runner) -> external.CommandResult:
    chosen = next((p for p in found or [] if p.name == partition), None)
    request = SubmitRequest(key=AttemptKey("test-only", 1), name="test-only", spec=spec, home=_NOWHERE,
                            script=_NOWHERE, attempt_dir=_NOWHERE, checkpoint_dir=_NOWHERE, partition=partition)
    job = BatchJob(request, "python3", 0, gpu_type=partitions.gpu_type_for(chosen, partitions.need_of(spec)))
    options = ["--test-only", "--job-name=fray-test-only", *resource_options(job)]
    key = (*options, "\0", *spec.sbatch)
    cached = _cache.get(key)
    if cached is not None and time.monotonic() - cached[0] < TTL_SEC:
        return cached[1]
    folder = tempfile.mkdtemp(prefix="fray-test-only-")
    path = Path(folder) / "job.sh"
    try:
        path.write_text("\n".join(["#!/bin/bash", *spec.sbatch, "true", ""]))
        result = run_command(["sbatch", *options, str(path)], TIMEOUT_SEC)
    finally:
        try:
            os.unlink(path)
            os.rmdir(folder)
        except OSError:
            pass
    _cache[key] = (time.monotonic(), result)
    return result
