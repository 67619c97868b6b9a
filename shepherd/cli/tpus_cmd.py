"""`fray tpus`: the TPU accelerator types and zones configured, with hosts and chips per slice (fray.ops.tpus)."""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.ops import tpus

COLUMNS = (render.Column("ACCELERATOR TYPE"), render.Column("CHIPS", ">"), render.Column("HOSTS", ">"),
           render.Column("CHIPS PER HOST", ">"))


@click.command("tpus")
@output.json_option("Print JSON (schemas/cli-tpus.json).")
@click.pass_context
def tpus_cmd(ctx: click.Context, as_json: bool) -> None:
    """The TPU accelerator types and zones in config.json's tpu section, with hosts and chips per slice."""
    output.emit(tpus.tpus_view(home_of(ctx)), as_json, render_tpus)


def render_tpus(data: dict[str, Any]) -> list[str]:
    rows = [[t["accelerator_type"], str(t["chips"]), str(t["hosts"]), str(t["chips_per_host"])]
            if t["problem"] is None else [t["accelerator_type"], "-", "-", t["problem"]]
            for t in data["accelerator_types"]]
    lines = render.table(COLUMNS, rows, render.terminal_width()) if rows else [
        "no accelerator types configured (config.json: tpu.accelerator_types)"]
    zones = ", ".join(data["zones"]) or "none configured (config.json: tpu.zones)"
    return lines + ["", f"Zones, in the order tried: {zones}"]
