"""Accelerator type -> hosts and chips per slice (the documented TPU generations).

The number after the generation means TensorCores for v2, v3, v4 and v5p
(two per chip) and chips for v5e (`v5litepod`) and v6e. Multi-host slices put
four chips on each VM; the small v5e/v6e slices (1, 4, 8 chips) are one VM.
Source: cloud.google.com/tpu/docs/system-architecture-tpu-vm and the per-version
pages (v4, v5e, v5p, v6e): v4-32 is 16 chips on 4 VMs, v5litepod-16 is 16 chips on 4 VMs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Generation:
    prefix: str  # what the accelerator type starts with
    cores_per_chip: int  # 2: the number counts TensorCores; 1: it counts chips
    chips_per_host: int  # on a multi-host slice
    single_host_max_chips: int  # slices up to this many chips are one VM
    # The TPU VM software version a run gets without --runtime-version: the base image
    # Google's per-version pages name for the generation (docs/tpu.md).
    default_runtime: str


GENERATIONS: tuple[Generation, ...] = (
    Generation("v2", 2, 4, 4, "tpu-ubuntu2204-base"),
    Generation("v3", 2, 4, 4, "tpu-ubuntu2204-base"),
    Generation("v4", 2, 4, 4, "tpu-ubuntu2204-base"),
    Generation("v5p", 2, 4, 4, "v2-alpha-tpuv5"),
    Generation("v5litepod", 1, 4, 8, "v2-alpha-tpuv5-lite"),
    Generation("v6e", 1, 4, 8, "v2-alpha-tpuv6e"),
)

_TYPE = re.compile(r"^([a-z0-9]+?)-(\d+)$")


@dataclass(frozen=True)
class SliceShape:
    accelerator_type: str
    chips: int
    hosts: int

    @property
    def chips_per_host(self) -> int:
        return self.chips // self.hosts


def shape(accelerator_type: str) -> SliceShape:
    """Hosts and chips of one accelerator type; ValueError for an unknown or malformed one."""
    match = _TYPE.match(accelerator_type.strip().lower())
    generation = next((g for g in GENERATIONS if match and g.prefix == match.group(1)), None)
    if match is None or generation is None:
        known = ", ".join(g.prefix + "-N" for g in GENERATIONS)
        raise ValueError(f"unknown TPU accelerator type {accelerator_type!r} (known: {known})")
    count = int(match.group(2))
    if count <= 0 or count % generation.cores_per_chip:
        raise ValueError(f"{accelerator_type!r}: {count} is not a whole number of chips")
    chips = count // generation.cores_per_chip
    if chips <= generation.single_host_max_chips:
        return SliceShape(accelerator_type, chips, 1)
    if chips % generation.chips_per_host:
        raise ValueError(f"{accelerator_type!r}: {chips} chips do not fill whole hosts")
    return SliceShape(accelerator_type, chips, chips // generation.chips_per_host)


def default_runtime(accelerator_type: str) -> str | None:
    """The runtime version of `accelerator_type`'s generation (None for a type of no known generation)."""
    prefix = accelerator_type.strip().lower().rpartition("-")[0]
    return next((g.default_runtime for g in GENERATIONS if g.prefix == prefix), None)
