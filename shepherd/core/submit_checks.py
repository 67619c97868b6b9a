"""Everything about a submission that can be known before it is made, judged in one place (pure).

    problems(spec, name, offer, asked) -> list[str]   each: what is wrong, then how to fix it
    backend_problems(spec, offer, asked)              the part that can change after submit

`fray submit`, the dashboard, sweeps, `fray.submit`/`fray.map` and the cluster
API refuse a run with any problem before writing anything (fray.backends.offers
gathers the `Offer` and raises); the daemon asks again before each submission,
for what can change between submit and start (a partition removed since).

What a backend can never offer is a problem (on Slurm: more than any node of
the partitions it may use has, fray.core.never_fit); what it cannot offer
*now* (busy CPUs, a drained partition) is not: the run waits, and says why. An `Offer`
field left None was not known (sinfo failed, say), so nothing is judged on it:
the backend itself is then the judge, as it was before this check.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from typing import TYPE_CHECKING

from fray.core import values
from fray.core.model import RunSpec
from fray.core.capacity import Capacity, run_request

if TYPE_CHECKING:  # placement is loaded only to judge a Slurm run: a local submit need not import it
    from fray.core.never_fit import SlurmNodes

# A Google Cloud zone: region and letter, like us-west4-a or europe-west4-b.
_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
# Partitions that exist but take no jobs, now or (inact) until an admin acts; sinfo's AVAIL column.
_CLOSED = ("inact",)


class PartitionOffer(NamedTuple):
    """One Slurm partition as one sinfo showed it: its state, and the GPUs its largest nodes have."""

    name: str
    available: str  # up, down, drain, inact
    gpus: dict[str | None, int]  # GPU type (None: untyped GRES) -> the most of it on one node


class Offer(NamedTuple):
    """What the run's backend can ever offer; None: not known, not judged."""

    capacity: Capacity | None = None  # local: this machine's CPUs, memory, GPUs
    missing_interpreter: str | None = None  # local: the script's #! interpreter, when this machine has none such
    partitions: tuple[PartitionOffer, ...] | None = None  # slurm: from one sinfo
    slurm_nodes: SlurmNodes | None = None  # slurm: its nodes, from the same sinfo


class Asked(NamedTuple):
    """What a Slurm run asks on its `#SBATCH` lines, read by the Slurm backend's own parser."""

    partitions: tuple[str, ...] = ()
    gpu_types: tuple[str, ...] = ()
    options: frozenset[str] = frozenset()  # every option they set, by its long name
    time_sec: float | None = None  # their --time, in seconds


def problems(spec: RunSpec, name: str, offer: Offer, asked: Asked = Asked()) -> list[str]:
    """Every reason this run can never be submitted as it stands, each with its fix; empty: it may go."""
    return _name_problems(name) + _idle_problems(spec) + backend_problems(spec, offer, asked)


def _idle_problems(spec: RunSpec) -> list[str]:
    """The wrapper samples the workload's CPU every heartbeat: an idle timeout needs two samples to be judged."""
    idle, beat = spec.idle_timeout_sec, spec.heartbeat_interval_sec
    if idle and idle < 2 * beat:
        return [f"--idle-timeout {values.format_duration(idle)} is shorter than two heartbeats "
                f"(--heartbeat-interval {values.format_duration(beat)}), the least the hang watch can judge "
                f"idleness over: give --idle-timeout {values.format_duration(2 * beat)} or more, or 0 to turn it off"]
    return []


def backend_problems(spec: RunSpec, offer: Offer, asked: Asked = Asked()) -> list[str]:
    """What the backend can never offer this run (the daemon asks again before each submission)."""
    found: list[str] = []
    if spec.backend == "local":
        if offer.capacity is not None:
            found += _local_problems(spec, offer.capacity)
        if offer.missing_interpreter:
            found.append(f"the script's first line asks for {offer.missing_interpreter}, which this machine does "
                         f"not have: fix the #! line (e.g. #!/usr/bin/env python3)")
    elif spec.backend == "slurm":
        found += _slurm_problems(spec, offer.partitions, asked)
        if not found and offer.slurm_nodes is not None:
            from fray.core import never_fit

            found += never_fit.problems(spec, offer.slurm_nodes, asked.partitions, asked.options, asked.time_sec)
    elif spec.backend == "tpu":
        found += _tpu_problems(spec)
    return found


def _name_problems(name: str) -> list[str]:
    try:
        values.parse_name(name)
    except ValueError as exc:
        return [f"run name {name!r}: {exc}; give another with --name NAME"]
    return []


def _local_problems(spec: RunSpec, capacity: Capacity) -> list[str]:
    need = run_request(spec.cpus, spec.mem_mb, spec.gpus, spec.replicas)
    tasks = f" ({spec.replicas} replicas)" if spec.replicas > 1 else ""
    found = []
    if need.cpus > capacity.cpus:
        found.append(f"it asks for {need.cpus} CPUs{tasks} and this machine has {capacity.cpus}: "
                     f"lower --cpus/--replicas, or use --backend slurm")
    if capacity.mem_mb is not None and need.mem_mb and need.mem_mb > capacity.mem_mb:
        found.append(f"it asks for {need.mem_mb} MB of memory{tasks} and this machine has {capacity.mem_mb} MB: "
                     f"lower --mem, or use --backend slurm")
    if need.gpus > capacity.gpus:
        found.append(f"it asks for {need.gpus} GPUs{tasks} and this machine has {capacity.gpus}: "
                     f"lower --gpus, or use --backend slurm")
    return found


def _slurm_problems(spec: RunSpec, partitions: tuple[PartitionOffer, ...] | None, asked: Asked) -> list[str]:
    if partitions is None:
        return []
    by_name = {p.name: p for p in partitions}
    known = ", ".join(sorted(by_name)) or "none"
    found = []
    for wanted in dict.fromkeys([*spec.partitions, *asked.partitions]):
        partition = by_name.get(wanted)
        if partition is None:
            found.append(f"Slurm has no partition {wanted!r} (it has: {known}); name one of those "
                         f"(`fray partitions` lists them with their GPUs)")
        elif partition.available in _CLOSED:
            found.append(f"Slurm partition {wanted!r} is {partition.available}: it takes no jobs; name another "
                         f"(`fray partitions`)")
    offered = {t for p in partitions for t in p.gpus if t}
    for gpu_type in dict.fromkeys(asked.gpu_types):
        if gpu_type not in offered:
            have = ", ".join(sorted(offered)) or "no typed GPUs"
            found.append(f"no Slurm node has GPUs of type {gpu_type!r} (the cluster has: {have}); "
                         f"fix the #SBATCH --gres line")
    return found


def _tpu_problems(spec: RunSpec) -> list[str]:
    # Types and zones are judged by their form and the generation table, not by asking the cloud:
    # a gcloud call per submit would cost seconds, and the create names the same mistakes anyway.
    found = []
    if not spec.tpu:
        found.append("--backend tpu needs the accelerator type: add --tpu TYPE, like --tpu v5litepod-16 (`fray tpus`)")
    else:
        from fray.core.tpu_topology import shape  # the generation table: only a TPU submit needs it

        try:
            shape(spec.tpu)
        except ValueError as exc:
            found.append(f"--tpu {spec.tpu}: {exc}")
    if not spec.zones:
        found.append("--backend tpu needs a zone: add --zone Z, like --zone us-west4-a (several: Z1,Z2, tried in order)")
    for zone in spec.zones:
        if not _ZONE.match(zone):
            found.append(f"--zone {zone}: not a Google Cloud zone (region and letter, like us-west4-a)")
    if spec.tpu and not spec.runtime_version:
        found.append(f"--backend tpu needs --runtime-version V (no default is known for {spec.tpu})")
    return found


def interpreter_of(script: bytes) -> str | None:
    """The program a script's `#!` line runs: `/bin/bash`, or NAME of `#!/usr/bin/env [-S] NAME`; None without one."""
    first = script.split(b"\n", 1)[0].decode("utf-8", "replace")
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words:
        return None
    if words[0].endswith("/env"):
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return rest[0] if rest else None
    return words[0]
