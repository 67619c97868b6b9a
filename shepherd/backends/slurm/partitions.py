"""Slurm partitions and their GPUs: GRES strings, GPU memory, and which partitions fit a run.

    parse_gres("gpu:a100:4(S:0-1),gpu:v100:2")   -> (Gpu("a100", 4), Gpu("v100", 2))
    vram_gb("nvidia_a100-sxm4-80gb")            -> 80.0
    parse_sinfo(text) -> list[NodeRow]; summarize(rows) -> list[Partition]
    choose(partitions, Need(...)) -> Candidates: the partitions to try, best first

A GPU run on a cluster of several GPU partitions needs an order to try them
in: those whose nodes have enough GPUs of a type whose memory lies within
[--min-vram, --max-vram], smallest memory first (`--prefer min`, which leaves
the big GPUs to the runs that need them) or largest first (`--prefer max`).
`--partitions a,b` names the order outright. Pure: text in, records out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from fray.core.model import RunSpec
from fray.core.partition_policy import Candidates

# GPU memory in GB, by model. Checked in this order, first match wins, so a more
# specific name (v100s, h100 nvl, gh200) comes before the name it contains.
# A memory size in the type's own name (a100-80gb, a100_80g) beats the table.
_VRAM_GB: tuple[tuple[str, float], ...] = (
    ("gb200", 186), ("gh200", 96), ("b200", 180), ("b100", 180), ("h200", 141), ("h100[-_ ]?nvl", 94),
    ("h100", 80), ("h800", 80), ("a800", 80), ("a100", 40),
    ("rtx[-_ ]?6000[-_ ]?ada", 48), ("6000[-_ ]?ada", 48), ("l40s", 48), ("l40", 48), ("l4", 24),
    ("(?:rtx[-_ ]?)?a6000", 48), ("(?:rtx[-_ ]?)?a5000", 24), ("(?:rtx[-_ ]?)?a4000", 16),
    ("a40", 48), ("a30", 24), ("a16", 16), ("a10g?", 24), ("a2", 16),
    ("v100s", 32), ("v100", 16), ("p100", 16), ("p40", 24), ("p4", 8), ("t4", 16), ("k80", 12),
    ("(?:quadro[-_ ]?)?rtx[-_ ]?8000", 48), ("(?:quadro[-_ ]?)?rtx[-_ ]?6000", 24), ("titan[-_ ]?rtx", 24),
    ("(?:rtx[-_ ]?)?4090", 24), ("(?:rtx[-_ ]?)?3090", 24), ("(?:rtx[-_ ]?)?2080[-_ ]?ti", 11),
    ("mi300x", 192), ("mi300a", 128), ("mi250x?", 128), ("mi210", 64), ("mi100", 32),
)
_MODELS = tuple((re.compile(rf"(?<![a-z0-9]){pattern}(?![0-9])"), gb) for pattern, gb in _VRAM_GB)
_SIZE_TOKEN = re.compile(r"(?<![a-z0-9])([0-9]{1,3})g(?:b)?(?![a-z0-9])")
_GRES_COMMA = re.compile(r",(?![^(]*\))")
_GRES_ITEM = re.compile(r"^(?P<name>[^:()]+)(?::(?P<type>[^:()]+))?(?::(?P<count>[0-9]+))?(?:\((?P<extra>[^)]*)\))?$")


@dataclass(frozen=True)
class Gpu:
    """GPUs of one type on a node (type None: the GRES names no type)."""

    type: str | None
    count: int


@dataclass(frozen=True)
class NodeRow:
    """One line of `sinfo --Node`: a node as seen from one of its partitions."""

    node: str
    partition: str
    default: bool
    available: str  # the partition's: up, down, drain, inact
    state: str  # the node's, e.g. idle, mixed, down*, drained
    cpus: int
    mem_mb: int | None
    gpus: tuple[Gpu, ...]
    features: tuple[str, ...] = ()  # the node's available features (`%f`), e.g. ("ib", "nvme")
    time_limit_sec: float | None = None  # the partition's MaxTime (`%l`); None: infinite or not listed


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    available: str
    nodes: tuple[str, ...]
    states: dict[str, int]  # node state -> how many nodes
    node_gpus: tuple[tuple[Gpu, ...], ...]  # the GPUs of each node, in the order of `nodes`

    @property
    def gpus(self) -> dict[str | None, int]:
        """GPU type -> the most of it on one node."""
        most: dict[str | None, int] = {}
        for gpus in self.node_gpus:
            for gpu in gpus:
                most[gpu.type] = max(most.get(gpu.type, 0), gpu.count)
        return most

    def nodes_with(self, gpu_type: str | None, count: int) -> int:
        """How many nodes have at least `count` GPUs of `gpu_type`."""
        return sum(1 for gpus in self.node_gpus if any(g.type == gpu_type and g.count >= count for g in gpus))

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "default": self.default, "available": self.available, "nodes": list(self.nodes),
            "states": dict(sorted(self.states.items())),
            "gpus": [{"type": t, "per_node": n, "nodes": self.nodes_with(t, 1), "vram_gb": vram_gb(t) if t else None}
                     for t, n in sorted(self.gpus.items(), key=lambda item: item[0] or "")],
        }


@dataclass(frozen=True)
class Need:
    """What a run asks of a partition (from its spec)."""

    gpus: int = 0
    min_vram_gb: float | None = None
    max_vram_gb: float | None = None
    prefer: str = "min"  # "min" | "max": which end of the memory range to try first
    named: tuple[str, ...] = ()  # --partitions a,b: exactly these, in this order


def need_of(spec: RunSpec) -> Need:
    """What a run's spec asks of a partition."""
    return Need(gpus=spec.gpus, min_vram_gb=spec.min_vram_gb, max_vram_gb=spec.max_vram_gb, prefer=spec.prefer,
                named=tuple(spec.partitions))


@dataclass(frozen=True)
class _Fit:
    partition: str
    vram: float | None
    gpu_type: str | None
    share: float  # of the partition's nodes, those that have such GPUs

    def order(self, prefer: str) -> tuple[float, float]:
        """Sort key: memory by preference (unknown last), then partitions made of such nodes first."""
        if self.vram is None:
            return (float("inf"), -self.share)
        return (-self.vram if prefer == "max" else self.vram, -self.share)


def parse_gres(text: str) -> tuple[Gpu, ...]:
    """The GPUs in a GRES string: `gpu:a100:4`, `gpu:a100:4(S:0-1)`, `gpu:2`, several comma-separated.

    Other GRES (mps, shard, nic) and `(null)` give nothing.
    """
    found: list[Gpu] = []
    for item in _split_gres(text.strip()):
        match = _GRES_ITEM.match(item.strip())
        if match is None or match["name"] != "gpu":
            continue
        gpu_type, count = match["type"], match["count"]
        if count is None and gpu_type is not None and gpu_type.isdigit():
            gpu_type, count = None, gpu_type  # gpu:2 — the number is the count, not a type
        found.append(Gpu(gpu_type, int(count) if count is not None else 1))
    return tuple(found)


def _split_gres(text: str) -> list[str]:
    """Split on the commas outside parentheses: `gpu:a:2(S:0,1),gpu:b:1` has two items."""
    return [item for item in _GRES_COMMA.split(text) if item and item != "(null)"]


def vram_gb(gpu_type: str) -> float | None:
    """GPU memory in GB for a GRES type name, or None when the model is not known."""
    name = gpu_type.lower().replace("nvidia", " ").replace("tesla", " ").replace("geforce", " ")
    for pattern, gb in _MODELS:
        if pattern.search(name):
            size = _SIZE_TOKEN.search(name)
            if size is not None and 4 <= int(size.group(1)) <= 400:
                return float(size.group(1))
            return float(gb)
    return None


def parse_sinfo(text: str) -> list[NodeRow]:
    """Rows of `sinfo --noheader --Node --format=%N|%P|%a|%T|%c|%m|%G|%f|%l` (see SINFO_FORMAT); rows
    without the features or the time limit column (older formats) read as featureless and unlimited."""
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) not in (7, 8, 9) or not parts[0]:
            continue
        node, partition, available, state, cpus, mem, gres = parts[:7]
        features = tuple(f for f in (parts[7] if len(parts) >= 8 else "").split(",") if f and f != "(null)")
        rows.append(NodeRow(
            node=node, partition=partition.rstrip("*"), default=partition.endswith("*"), available=available,
            state=state, cpus=_int(cpus) or 0, mem_mb=_int(mem), gpus=parse_gres(gres), features=features,
            time_limit_sec=slurm_seconds(parts[8]) if len(parts) == 9 else None,
        ))
    return rows


SINFO_FORMAT = "%N|%P|%a|%T|%c|%m|%G|%f|%l"
_TIME = re.compile(r"^(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})$")


def slurm_seconds(text: str) -> float | None:
    """Seconds in a Slurm time (`--time`, a partition's MaxTime), read as sbatch reads them: M, M:S, H:M:S,
    D-H, D-H:M, D-H:M:S (so `30` is 30 minutes); None for infinite, unlimited or unreadable."""
    match = _TIME.match(text.strip())
    if match is None:
        return None
    days = int(match["days"] or 0)
    numbers = [int(n) for n in match["rest"].split(":")]
    if match["days"] is not None:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = (numbers + [0, 0])[:3]
    elif len(numbers) == 1:  # M
        hours, minutes, seconds = 0, numbers[0], 0
    elif len(numbers) == 2:  # M:S
        hours, (minutes, seconds) = 0, numbers
    else:  # H:M:S
        hours, minutes, seconds = numbers
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def _int(text: str) -> int | None:
    digits = text.strip().rstrip("+")
    return int(digits) if digits.isdigit() else None


def summarize(rows: Iterable[NodeRow]) -> list[Partition]:
    """Partitions in the order sinfo lists them, each with its nodes' states and GPUs."""
    grouped: dict[str, list[NodeRow]] = {}
    for row in rows:
        grouped.setdefault(row.partition, []).append(row)
    partitions = []
    for name, members in grouped.items():
        states: dict[str, int] = {}
        for row in members:
            states[row.state] = states.get(row.state, 0) + 1
        partitions.append(Partition(name=name, default=members[0].default, available=members[0].available,
                                    nodes=tuple(r.node for r in members), states=states,
                                    node_gpus=tuple(r.gpus for r in members)))
    return partitions


def choose(partitions: Sequence[Partition], need: Need) -> Candidates | None:
    """The partitions to try, best first; None when there is nothing to choose (Slurm's default applies).

    An empty chain (with a reason) means no partition can run it.
    """
    if not need.gpus and not need.named:
        return None
    known = {p.name: p for p in partitions}
    if need.named:
        # The user's order stands; drop only what is known not to fit. A name
        # sinfo does not list is kept: sbatch says what is wrong with it.
        chain = tuple(n for n in need.named if n not in known or _fit(known[n], need) is not None)
        return Candidates(chain, "" if chain else f"none of --partitions {','.join(need.named)} {_wanted(need)}")
    fits = [f for f in (_fit(p, need) for p in partitions if p.available == "up") if f is not None]
    fits.sort(key=lambda f: f.order(need.prefer))
    chain = tuple(f.partition for f in fits)
    return Candidates(chain, "" if chain else f"no partition that is up {_wanted(need)}")


def gpu_type_for(partition: Partition | None, need: Need) -> str | None:
    """The GPU type to name in --gres on `partition`: only when memory bounds rule some out
    (None: any GPU of the partition will do, Slurm picks)."""
    if partition is None or not need.gpus or (need.min_vram_gb is None and need.max_vram_gb is None):
        return None
    fit = _fit(partition, need)
    return fit.gpu_type if fit is not None else None


def _fit(partition: Partition, need: Need) -> _Fit | None:
    """The best GPU type of `partition` for `need`, or None when none fits."""
    if not need.gpus:
        return _Fit(partition.name, None, None, 1.0)
    bounded = need.min_vram_gb is not None or need.max_vram_gb is not None
    options = []
    for gpu_type in partition.gpus:
        fitting = partition.nodes_with(gpu_type, need.gpus)
        vram = vram_gb(gpu_type) if gpu_type else None
        if not fitting or (bounded and (vram is None or not _within(vram, need))):
            continue  # too few per node, or memory out of bounds or unknown (cannot be shown to fit)
        options.append(_Fit(partition.name, vram, gpu_type, fitting / max(1, len(partition.nodes))))
    return min(options, key=lambda o: o.order(need.prefer)) if options else None


def _within(vram: float, need: Need) -> bool:
    return (need.min_vram_gb is None or vram >= need.min_vram_gb) and (need.max_vram_gb is None or vram <= need.max_vram_gb)


def _wanted(need: Need) -> str:
    memory = []
    if need.min_vram_gb is not None:
        memory.append(f"at least {need.min_vram_gb:g} GB")
    if need.max_vram_gb is not None:
        memory.append(f"at most {need.max_vram_gb:g} GB")
    of = f" with {' and '.join(memory)} each" if memory else ""
    return f"has nodes with {need.gpus} GPUs{of}"


@dataclass(frozen=True)
class NodeSummary:
    """A node across all its partitions (for Backend.nodes)."""

    name: str
    state: str
    cpus: int
    mem_mb: int | None
    gpus: tuple[Gpu, ...]
    partitions: tuple[str, ...]


def nodes(rows: Iterable[NodeRow]) -> list[NodeSummary]:
    by_name: dict[str, NodeSummary] = {}
    for row in rows:
        seen = by_name.get(row.node)
        partitions = (seen.partitions if seen else ()) + (row.partition,)
        by_name[row.node] = NodeSummary(row.node, row.state, row.cpus, row.mem_mb, row.gpus, partitions)
    return list(by_name.values())
