"""`fray actors list`: the actor endpoints jobs registered, by namespace and name.

Read-only: fray.ops.actors reads the endpoint files
(namespaces/<ns>/actors/<name>/<id>.json) with the status of the run that
serves each one. It imports no cloudpickle: listing is reading JSON.
"""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.ops import actors as actor_table, human

COLUMNS = (
    render.Column("NAME", shrinkable=True, min_width=8),
    render.Column("ACTOR ID"),
    render.Column("ADDRESS"),
    render.Column("RUN", shrinkable=True, min_width=10),
    render.Column("ATT", ">"),
    render.Column("RUN STATUS"),
    render.Column("AGE", ">"),
)


@click.group("actors")
def actors() -> None:
    """The actors that jobs registered (ActorServer.register)."""


@actors.command("list")
@click.option("--namespace", "-n", metavar="NS", help="Only this namespace.")
@output.json_option("Print JSON (schemas/cli-actors.json).")
@click.pass_context
def list_actors(ctx: click.Context, namespace: str | None, as_json: bool) -> None:
    """Every registered actor endpoint, by namespace and name, with its run's status."""
    data = actor_table.actors_view(home_of(ctx), namespace)
    output.emit(data, as_json, render_actors)


def render_actors(data: dict[str, Any]) -> list[str]:
    rows = data["endpoints"]
    if not rows:
        where = f" in namespace {data['namespace']}" if data["namespace"] else ""
        return [f"No actors registered{where} in {data['home']}. Jobs register them with ActorServer.register()."]
    lines: list[str] = []
    now = data["generated_at"]
    for namespace in sorted({r["namespace"] for r in rows}):
        mine = [r for r in rows if r["namespace"] == namespace]
        names = len({r["name"] for r in mine})
        lines.append(render.heading(f"{namespace}: {human.plural(names, 'name')}, {human.plural(len(mine), 'actor')}"))
        cells = [[r["name"], r["actor_id"], r["address"], r["run_id"] or human.MISSING, human.number(r["attempt"]),
                  (r["run_status"] or human.MISSING, render.status_style(r["run_status"]) if r["run_status"] else {}),
                  human.duration(now - r["registered_at"])] for r in mine]
        lines += render.indent_block(render.table(COLUMNS, cells, width=render.terminal_width()), "  ")
        lines.append("")
    return lines[:-1]
