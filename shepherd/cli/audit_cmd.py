"""`fray audit verify|show`: check the hash chain of audit.jsonl, list recent actions."""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.ops import audit, human


@click.group("audit")
def audit_group() -> None:
    """The log of every control action: who, what, when, from which host."""


@audit_group.command("verify")
@output.json_option("Print JSON (schemas/cli-audit-verify.json).")
@click.pass_context
def verify(ctx: click.Context, as_json: bool) -> None:
    """Check that no line of audit.jsonl was edited, removed or inserted. Exits 1 if one was."""
    data = audit.verify_view(home_of(ctx))
    output.emit(data, as_json, render_verify)
    if not data["ok"]:
        raise click.exceptions.Exit(1)


@audit_group.command("show")
@click.option("-n", "--limit", default=20, show_default=True, help="How many of the latest actions.")
@output.json_option("Print JSON (schemas/cli-audit-show.json).")
@click.pass_context
def show(ctx: click.Context, limit: int, as_json: bool) -> None:
    """The latest control actions, newest last."""
    output.emit(audit.show_view(home_of(ctx), limit), as_json, render_show)


def render_verify(data: dict[str, Any]) -> list[str]:
    if data["ok"]:
        return [f"audit log intact: {human.plural(data['lines'], 'line')} in {data['path']}"]
    return [render.style(f"audit log broken at line {data['first_bad_line']} of {data['path']}:", fg="red", bold=True),
            *[f"  {problem}" for problem in data["problems"]]]


def render_show(data: dict[str, Any]) -> list[str]:
    unreadable = data.get("unreadable") or []
    damage = [render.style(f"{data['path']} is corrupt: {human.plural(len(unreadable), 'line')} cannot be read "
                           "(`fray audit verify` says where the chain breaks):", fg="red", bold=True),
              *[f"  {problem}" for problem in unreadable[:5]]] if unreadable else []
    if not data["entries"]:
        return damage or [f"no control actions recorded yet in {data['path']}"]
    columns = [render.Column("TIME"), render.Column("WHO"), render.Column("ACTION"), render.Column("RUN"),
               render.Column("DETAILS", shrinkable=True)]
    rows = [[human.timestamp(e["at"]), f"{e['user']}@{e['host']}", e["action"], e["run_id"] or human.MISSING,
             output.dumps(e["details"]) if e["details"] else ""] for e in data["entries"]]
    return [*render.table(columns, rows, width=render.terminal_width()), *damage]
