"""The Slurm partitions, their nodes and GPUs, and the order a run would try them in.

Partitions are the scheduler's facts, not fray state: they are read where
`sinfo` does, through the Slurm backend (fray.backends.slurm.sinfo) and the
same parsers and GPU memory table its partition choice uses.
"""

from __future__ import annotations

import time
from typing import Any

from fray.backends import external
from fray.backends.slurm import partitions, sinfo
from fray.core import directives
from fray.errors import BackendError, StateError


def need_of(gpus: str | None, min_vram: str | None, max_vram: str | None, prefer: str | None,
            named: str | None) -> partitions.Need | None:
    """The run these values describe, read as the `#FRAY` directives of the same names; None when none is given."""
    raw = {"--gpus": gpus, "--min-vram": min_vram, "--max-vram": max_vram, "--prefer": prefer, "--partitions": named}
    values = dict(directives.parse_flag_value(flag, text) for flag, text in raw.items() if text is not None)
    if not values:
        return None
    return partitions.Need(gpus=values.get("gpus", 0), min_vram_gb=values.get("min_vram_gb"),
                           max_vram_gb=values.get("max_vram_gb"), prefer=values.get("prefer", "min"),
                           named=tuple(values.get("partitions", ())))


def partitions_view(need: partitions.Need | None,
                    run_command: external.Runner = external.run) -> dict[str, Any]:
    """Every partition (schemas/cli-partitions.json), and with `need` the order such a run tries them in."""
    try:
        found = sinfo.read_partitions(run_command)
    except BackendError as exc:
        raise StateError(f"cannot list the Slurm partitions: {exc}. "
                         "Run this where `sinfo` works (a login node, with SLURM_CONF if the cluster needs it).") from None
    data: dict[str, Any] = {"generated_at": time.time(), "partitions": [p.to_dict() for p in found], "order": None}
    if need is not None:
        chosen = partitions.choose(found, need)
        data["order"] = {
            "gpus": need.gpus, "min_vram_gb": need.min_vram_gb, "max_vram_gb": need.max_vram_gb,
            "prefer": need.prefer, "partitions": list(need.named),
            "chain": list(chosen.chain) if chosen else [],
            "reason": (chosen.reason or None) if chosen else "no GPUs and no --partitions: Slurm's default partition",
        }
    return data
