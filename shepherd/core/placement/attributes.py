"""Workers as the scheduler sees them: typed attributes and free resources (pure).

A worker is a place a task can run: this machine for the local backend, a node
for Slurm, a host of a TPU slice. Its attributes are typed values (str, int,
float) that constraints compare against; a few names are shared by all
backends so one constraint means the same thing everywhere:

    hostname, cpu-count, memory-gb, gpu-count, gpu-type     every backend
    partition, feature:<name> (=1)                           Slurm (`sinfo`)
    tpu-name, tpu-worker-id, tpu-topology, tpu-vm-count      TPU hosts

Taints are attributes named `taint:<name>`: a job implicitly requires each
taint to be absent unless it tolerates it (`Request.tolerations`), so a node
marked `taint:maintenance` is left alone by everything but the jobs that say so.

The builders take what the backends measured (a `sinfo` row, a TPU host's
listing) as plain values; reading `/proc` or running `sinfo` is the backends'
job, not this module's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from fray.core.placement.constraints import Value

TAINT_PREFIX = "taint:"


@dataclass(frozen=True)
class Resources:
    """What one task asks for, or what a worker has free. mem_mb None: not accounted."""

    cpus: int = 1
    mem_mb: int | None = None
    gpus: int = 0


@dataclass(frozen=True)
class Worker:
    worker_id: str
    attributes: Mapping[str, Value] = field(default_factory=dict)
    free: Resources = Resources(cpus=0, mem_mb=None, gpus=0)


def taint(name: str) -> str:
    return TAINT_PREFIX + name


def is_taint(key: str) -> bool:
    return key.startswith(TAINT_PREFIX)


def local_attributes(hostname: str, cpu_count: int, mem_mb: int | None, gpu_count: int,
                     gpu_type: str | None) -> dict[str, Value]:
    """This machine's own attributes, from what the local backend measured."""
    attributes: dict[str, Value] = {"hostname": hostname, "cpu-count": cpu_count, "gpu-count": gpu_count}
    if mem_mb is not None:
        attributes["memory-gb"] = mem_mb // 1024
    if gpu_type:
        attributes["gpu-type"] = normalise_gpu_type(gpu_type)
    return attributes


def slurm_node_attributes(node: str, partition: str, cpus: int, mem_mb: int | None, gres: str,
                          features: Iterable[str]) -> dict[str, Value]:
    """One Slurm node from a `sinfo` row: GRES such as `gpu:a100:4(S:0-1)`, features `ib,nvme`."""
    attributes: dict[str, Value] = {"hostname": node, "partition": partition, "cpu-count": cpus, "gpu-count": 0}
    if mem_mb is not None:
        attributes["memory-gb"] = mem_mb // 1024
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count = parts[-1]
        if count.isdigit():
            attributes["gpu-count"] = int(attributes["gpu-count"]) + int(count)
        if len(parts) == 3:
            attributes["gpu-type"] = normalise_gpu_type(parts[1])
    for feature in features:
        feature = feature.strip()
        if feature and feature != "(null)":
            attributes[f"feature:{feature}"] = 1
    return attributes


def tpu_host_attributes(tpu_name: str, worker_id: int, topology: str, vm_count: int,
                        accelerator_type: str = "") -> dict[str, Value]:
    """One host of a TPU slice; tasks of a job grouped by `tpu-name` land on one slice."""
    attributes: dict[str, Value] = {"hostname": f"{tpu_name}-w{worker_id}", "tpu-name": tpu_name,
                                    "tpu-worker-id": worker_id, "tpu-vm-count": vm_count}
    if topology:  # e.g. 2x2x4; not known from the accelerator type alone
        attributes["tpu-topology"] = topology
    if accelerator_type:
        attributes["tpu-type"] = accelerator_type
    return attributes


def normalise_gpu_type(name: str) -> str:
    """`NVIDIA H100 80GB HBM3`, `Tesla V100-SXM2-16GB` and `h100` become `h100`, `v100`: the model,
    as a person writes it in a constraint (the first word with a digit that is not a memory size)."""
    words = re.split(r"[\s_-]+", name.lower())
    for word in words:
        if word not in ("nvidia", "tesla", "geforce") and any(ch.isdigit() for ch in word) \
                and not word.endswith(("gb", "g")):
            return word
    return name.strip().lower()
