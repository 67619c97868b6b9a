"""`fray nodes [list|ban|unban]`: the nodes the backends offer and the blacklist.

A bare `fray nodes` opens the dashboard's nodes screen when stdout is a
terminal, and prints `list` otherwise (a pipe, a script).

`list` merges the daemon's inventory (nodes.json; the CLI never asks a backend)
with blacklist.json. `ban` and `unban` change the blacklist under its lock and
are audited; the daemon's next submission excludes what is banned.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from fray.state import blacklist, store
from fray.cli import output, render
from fray.cli.main import home_of
from fray.core.directives import parse_duration
from fray.errors import CorruptFileError, UsageError
from fray.state.layout import Home

DEFAULT_BAN = "1d"


@click.group("nodes", invoke_without_command=True)
@click.pass_context
def nodes(ctx: click.Context) -> None:
    """The nodes runs can use, and the blacklist of those they must not.

    Without a subcommand: the dashboard's nodes screen on a terminal, else `list`.
    """
    if ctx.invoked_subcommand is not None:
        return
    if render.terminal_width() is not None and sys.stdin.isatty():
        from fray import tui

        tui.run(home_of(ctx), start="nodes")
    else:
        ctx.invoke(list_nodes, as_json=False)


@nodes.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-nodes.json).")
@click.pass_context
def list_nodes(ctx: click.Context, as_json: bool) -> None:
    """Every known node with its resources and blacklist state."""
    output.emit(nodes_view(home_of(ctx)), as_json, render_nodes)


@nodes.command("ban")
@click.argument("node")
@click.option("--ttl", default=DEFAULT_BAN, show_default=True, metavar="DURATION",
              help="How long the ban lasts (like 6h, 3d), or 'never' to keep it until unban.")
@click.option("--reason", default="banned by hand", show_default=True, help="Why, shown beside the node.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-nodes-change.json).")
@click.pass_context
def ban(ctx: click.Context, node: str, ttl: str, reason: str, as_json: bool) -> None:
    """Keep runs off NODE: resubmissions exclude it until the ban expires."""
    home = home_of(ctx)
    store.ensure_home(home)
    entry = blacklist.ban(home, node, reason, parse_ttl(ttl))
    output.emit({"action": "ban", "node": node, "entry": vars(entry)}, as_json, render_change)


@nodes.command("unban")
@click.argument("node")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-nodes-change.json).")
@click.pass_context
def unban(ctx: click.Context, node: str, as_json: bool) -> None:
    """Let runs use NODE again."""
    blacklist.unban(home_of(ctx), node)
    output.emit({"action": "unban", "node": node, "entry": None}, as_json, render_change)


def parse_ttl(text: str) -> float | None:
    if text.strip().lower() in ("never", "none", "forever"):
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--ttl {text}: {exc}; or 'never'") from None


def nodes_view(home: Home) -> dict[str, Any]:
    now = time.time()
    try:
        inventory = store.read_json(home.nodes, "nodes") or {"generated_at": None, "backends": {}}
    except CorruptFileError:
        inventory = {"generated_at": None, "backends": {}}
    banned = blacklist.load(home)
    rows: list[dict[str, Any]] = []
    for backend, listed in sorted(inventory["backends"].items()):
        for node in listed:
            rows.append({**node, "backend": backend, "blacklist": _ban_of(banned, node["name"], now)})
    known = {row["name"] for row in rows}
    for name in sorted(set(banned.nodes) - known):
        rows.append({"name": name, "backend": None, "state": "unknown", "cpus": None, "mem_mb": None, "gpus": None,
                     "gpu_type": None, "partitions": [], "blacklist": _ban_of(banned, name, now)})
    return {"generated_at": now, "inventory_at": inventory["generated_at"], "nodes": rows}


def _ban_of(banned: blacklist.Blacklist, name: str, now: float) -> dict[str, Any] | None:
    entry = banned.nodes.get(name)
    return vars(entry) if entry is not None and entry.active(now) else None


def render_nodes(data: dict[str, Any]) -> list[str]:
    if not data["nodes"]:
        return ["no nodes known yet: the daemon lists them when it starts (`fray daemon start`)"]
    now = data["generated_at"]
    columns = [render.Column("NODE"), render.Column("BACKEND"), render.Column("STATE"),
               render.Column("CPUS", align=">"), render.Column("MEM", align=">"), render.Column("GPUS"),
               render.Column("BLACKLIST", shrinkable=True)]
    cells = []
    for node in data["nodes"]:
        ban_entry = node["blacklist"]
        if ban_entry:
            until = "until unbanned" if ban_entry["expires_at"] is None else f"for {render.duration(ban_entry['expires_at'] - now)}"
            banned = render.style(f"banned {until} ({ban_entry['strikes']}x): {ban_entry['reason']}", fg="red")
        else:
            banned = "-"
        gpus = f"{node['gpus']} x {node['gpu_type']}" if node.get("gpu_type") else render.number(node["gpus"])
        cells.append([node["name"], node["backend"] or "-", node["state"], render.number(node["cpus"]),
                      render.size_mb(node["mem_mb"]) if node["mem_mb"] else render.MISSING, gpus, banned])
    return render.table(columns, cells, width=render.terminal_width())


def render_change(data: dict[str, Any]) -> list[str]:
    if data["action"] == "unban":
        return [f"unbanned {data['node']}: runs may use it again"]
    entry = data["entry"]
    until = "until unbanned" if entry["expires_at"] is None else f"until {render.timestamp(entry['expires_at'])}"
    return [f"banned {data['node']} {until} ({entry['strikes']} strikes): {entry['reason']}",
            "  new submissions exclude it; `fray nodes unban` lifts the ban"]
