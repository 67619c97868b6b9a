"""A Slurm request that no node of any partition it may use can ever meet: refused at submit (pure).

    problems(spec, nodes, asked) -> list[str]   each: what it asks, what the nodes have, how to fix it

The nodes are the cluster's as one `sinfo` lists them (`SlurmNodes`: placement
workers, one per node and partition, with their totals), so what is busy now
is not judged here: such a run waits in Slurm's queue and says why. What is
judged is what no wait can change: more CPUs, memory or GPUs (of a type whose
memory is within --min-vram/--max-vram) on one node than any node of the
allowed partitions has, fewer such nodes than --replicas, constraints no node
meets. The allowed partitions are the ones the run names (--partitions, an
`#SBATCH --partition`), else with GPUs every partition (fray chooses among
them), else Slurm's default. A resource the `#SBATCH` lines set themselves is
sbatch's to judge (`sbatch --test-only`, fray.backends.offers), not this
module's: fray does not send its own then.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from fray.core import values
from fray.core.model import RunSpec
from fray.core.placement.attributes import Resources, Worker
from fray.core.placement.feasible import why_never
from fray.core.placement.posting import WorkerIndex
from fray.core.placement.runs import parse_all

# The #SBATCH options that set each resource (then fray sends none of its own for it).
_SETS_CPUS = frozenset({"cpus-per-task", "cpus-per-gpu"})
_SETS_MEMORY = frozenset({"mem", "mem-per-cpu", "mem-per-gpu"})
_SETS_GPUS = frozenset({"gres", "gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket", "tres-per-node"})


class SlurmNodes(NamedTuple):
    """What the Slurm cluster has, from one sinfo."""

    workers: tuple[Worker, ...]  # one per node and partition (fray.backends.slurm.node_workers)
    defaults: tuple[str, ...]  # the default partition(s)
    vram_gb: dict[str, float]  # GPU type -> its memory, where the model is known
    gpus: dict[str, dict[str | None, int]]  # node -> GPU type -> how many
    time_limits: dict[str, float | None] = {}  # partition -> its MaxTime in seconds (None: none)


def problems(spec: RunSpec, nodes: SlurmNodes, named: Sequence[str], sbatch_sets: frozenset[str],
             time_sec: float | None = None) -> list[str]:
    """Why no node the run may use could ever take it; [] when some could (or nothing can be judged).
    `named`: the partitions its `#SBATCH` lines name; `sbatch_sets`: the options they set; `time_sec`: its
    `#SBATCH --time`, which a partition's MaxTime must allow (else Slurm keeps it pending for ever)."""
    allowed = tuple(dict.fromkeys([*spec.partitions, *named]))
    if allowed:
        pool = [w for w in nodes.workers if w.attributes.get("partition") in allowed]
        where = f"partition{'s' if len(allowed) > 1 else ''} {', '.join(allowed)}"
    elif spec.gpus:
        pool, where = list(nodes.workers), "any partition"
    else:
        pool = [w for w in nodes.workers if w.attributes.get("partition") in nodes.defaults] or list(nodes.workers)
        where = f"partition {', '.join(nodes.defaults)} (Slurm's default)" if nodes.defaults else "any partition"
    if not pool:
        return []  # partitions sinfo does not list: fray.core.submit_checks says so
    found = _time_problems(time_sec, {str(w.attributes.get("partition")) for w in pool}, nodes.time_limits)
    hosts = _by_host(pool)
    if not sbatch_sets & _SETS_CPUS:
        found += _over("CPUs", spec.cpus, {h: w.free.cpus for h, w in hosts.items()}, where, "--cpus")
    if spec.mem_mb and not sbatch_sets & _SETS_MEMORY:
        found += _over("MB of memory", spec.mem_mb, {h: w.free.mem_mb or 0 for h, w in hosts.items()
                                                     if w.free.mem_mb is not None}, where, "--mem")
    if spec.gpus and not sbatch_sets & _SETS_GPUS:
        found += _gpu_problems(spec, nodes, hosts, where)
    if found:
        return found
    per_task = Resources(spec.cpus if not sbatch_sets & _SETS_CPUS else 1,
                         spec.mem_mb if not sbatch_sets & _SETS_MEMORY else None,
                         spec.gpus if not sbatch_sets & _SETS_GPUS else 0)
    why = why_never(WorkerIndex(pool), parse_all(spec.constraints), tuple(spec.tolerations), per_task, spec.replicas)
    return [f"no Slurm node of {where} can ever take it: {why}; change what it asks (`fray nodes` lists what "
            "each node has)"] if why else []


def _time_problems(time_sec: float | None, partitions: set[str], limits: dict[str, float | None]) -> list[str]:
    """A time limit over every allowed partition's MaxTime: Slurm accepts such a job and never starts it."""
    if time_sec is None or not partitions:
        return []
    allowing = [p for p in partitions if limits.get(p) is None or limits[p] >= time_sec]  # type: ignore[operator]
    if allowing:
        return []
    most = max(limits[p] or 0.0 for p in partitions)
    which = ", ".join(f"{p} allows {values.format_duration(limits[p] or 0.0)}" for p in sorted(partitions))
    return [f"its #SBATCH --time asks for {values.format_duration(time_sec)}, more than any partition it may use "
            f"allows ({which}): Slurm would keep it pending for ever; ask for {values.format_duration(most)} or less, "
            "or name a partition that allows more"]


def _by_host(pool: Sequence[Worker]) -> dict[str, Worker]:
    """One worker per machine (Slurm lists a node once per partition it is in)."""
    hosts: dict[str, Worker] = {}
    for worker in pool:
        hosts.setdefault(str(worker.attributes.get("hostname", worker.worker_id)), worker)
    return hosts


def _over(what: str, asked: int, have: dict[str, int], where: str, flag: str) -> list[str]:
    if not have or asked <= max(have.values()):
        return []
    most = max(have.values())
    biggest = ", ".join(sorted(h for h, v in have.items() if v == most))
    return [f"it asks for {asked} {what} on one node, and the most any node of {where} has is {most} ({biggest}): "
            f"lower {flag}, or name a partition with bigger nodes (`fray nodes`)"]


def _gpu_problems(spec: RunSpec, nodes: SlurmNodes, hosts: dict[str, Worker], where: str) -> list[str]:
    """More GPUs of a fitting type on one node than any node has; fewer such nodes than replicas."""
    bounded = spec.min_vram_gb is not None or spec.max_vram_gb is not None

    def fits(gpu_type: str | None) -> bool:
        if not bounded:
            return True
        vram = nodes.vram_gb.get(gpu_type or "")
        return vram is not None and (spec.min_vram_gb is None or vram >= spec.min_vram_gb) \
            and (spec.max_vram_gb is None or vram <= spec.max_vram_gb)

    have = {host: max((n for t, n in nodes.gpus.get(host, {}).items() if fits(t)), default=0) for host in hosts}
    memory = _memory_words(spec)
    kind = f"GPUs{memory}"
    most = max(have.values(), default=0)
    if spec.gpus > most:
        if most == 0:
            types = sorted({t or "untyped" for h in hosts for t in nodes.gpus.get(h, {})})
            listed = f" (its GPUs: {', '.join(f'{t} {nodes.vram_gb[t]:g} GB' if t in nodes.vram_gb else t for t in types)})" \
                if types else ""
            return [f"it asks for {spec.gpus} {kind} on one node, and no node of {where} has such GPUs{listed}: "
                    f"change --gpus{', --min-vram/--max-vram' if memory else ''} or the partition (`fray partitions`)"]
        biggest = ", ".join(sorted(h for h, v in have.items() if v == most))
        return [f"it asks for {spec.gpus} {kind} on one node, and the most any node of {where} has is {most} "
                f"({biggest}): lower --gpus (several nodes: --replicas N, each with --gpus)"]
    enough = sum(1 for count in have.values() if count >= spec.gpus)
    if enough < spec.replicas:
        return [f"it asks for {spec.replicas} nodes with {spec.gpus} {kind} each, and {where} has {enough}: "
                f"lower --replicas or --gpus"]
    return []


def _memory_words(spec: RunSpec) -> str:
    bounds = []
    if spec.min_vram_gb is not None:
        bounds.append(f"at least {spec.min_vram_gb:g} GB")
    if spec.max_vram_gb is not None:
        bounds.append(f"at most {spec.max_vram_gb:g} GB")
    return f" with {' and '.join(bounds)} each" if bounds else ""
