"""`fray partitions`: the Slurm partitions, their nodes and GPUs, as fray's partition choice sees them.

Partitions are the scheduler's facts, not fray state: fray.ops.partitions reads
them through the Slurm backend (one bounded `sinfo`), with the same parsers and
GPU memory table the backend's partition choice uses. With `--gpus N` (and
`--min-vram`, `--max-vram`, `--prefer`, `--partitions`) it also shows the order
a run with those directives would try them in.
"""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.ops import partitions as slurm_partitions

COLUMNS = (render.Column("PARTITION"), render.Column("AVAIL"), render.Column("NODES", ">"),
           render.Column("STATES", shrinkable=True), render.Column("GPUS PER NODE", shrinkable=True, min_width=12))


@click.command("partitions")
@click.option("--gpus", metavar="N", help="Show the order a run with N GPUs per node would try the partitions in.")
@click.option("--min-vram", metavar="GB", help="With --gpus: the least memory per GPU, like 40.")
@click.option("--max-vram", metavar="GB", help="With --gpus: the most memory per GPU, like 48.")
@click.option("--prefer", metavar="min|max", help="With --gpus: the least or the most GPU memory first (default min).")
@click.option("--partitions", "named", metavar="P1,P2", help="Only these partitions, in this order.")
@output.json_option("Print JSON (schemas/cli-partitions.json).")
def partitions_cmd(gpus: str | None, min_vram: str | None, max_vram: str | None, prefer: str | None,
                   named: str | None, as_json: bool) -> None:
    """The Slurm partitions with their nodes, states and GPUs (type, count, memory)."""
    need = slurm_partitions.need_of(gpus, min_vram, max_vram, prefer, named)
    output.emit(slurm_partitions.partitions_view(need), as_json, render_partitions)


def render_partitions(data: dict[str, Any]) -> list[str]:
    rows = []
    for p in data["partitions"]:
        name = p["name"] + ("*" if p["default"] else "")
        states = ", ".join(f"{count} {state}" for state, count in p["states"].items())
        rows.append([name, p["available"], str(len(p["nodes"])), states, _gpus(p["gpus"]) or "-"])
    if not rows:
        return ["no partitions (sinfo listed none)"]
    lines = render.table(COLUMNS, rows, render.terminal_width())
    order = data["order"]
    if order is not None:
        asked = f"{order['gpus']} GPUs per node" + "".join(
            f", {label} {order[key]:g} GB" for key, label in (("min_vram_gb", "at least"), ("max_vram_gb", "at most"))
            if order[key] is not None)
        tried = " -> ".join(order["chain"]) if order["chain"] else f"none: {order['reason']}"
        lines += ["", f"A run asking for {asked} (prefer {order['prefer']}) tries: {tried}"]
    return lines


def _gpus(gpus: list[dict[str, Any]]) -> str:
    parts = []
    for gpu in gpus:
        memory = f" {gpu['vram_gb']:g} GB" if gpu["vram_gb"] is not None else ""
        parts.append(f"{gpu['type'] or 'gpu'} x{gpu['per_node']}{memory} ({gpu['nodes']} nodes)")
    return "; ".join(parts)
