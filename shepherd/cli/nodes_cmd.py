"""`fray nodes [list|ban|unban]`: the nodes the backends offer and the blacklist.

A bare `fray nodes` opens the dashboard's nodes screen when stdout is a
terminal, and prints `list` otherwise (a pipe, a script).

`list` is fray.ops.nodes.nodes_view: the daemon's inventory (nodes.json; the
CLI never asks a backend) merged with blacklist.json. `ban` and `unban` change
the blacklist through fray.ops.nodes, as the dashboard's nodes screen does.

The dashboard is not imported from here (front ends never import each other):
a bare `fray nodes` on a terminal invokes the top-level `tui` command, found by
name in fray.cli.main's table of commands, with `--screen nodes`.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.ops import human, nodes as node_table


@click.group("nodes", invoke_without_command=True)
@click.pass_context
def nodes(ctx: click.Context) -> None:
    """The nodes runs can use, and the blacklist of those they must not.

    Without a subcommand: the dashboard's nodes screen on a terminal, else `list`.
    """
    if ctx.invoked_subcommand is not None:
        return
    if render.terminal_width() is not None and sys.stdin.isatty():
        dashboard = ctx.find_root().command.get_command(ctx, "tui")  # type: ignore[attr-defined]
        ctx.invoke(dashboard, screen="nodes")
    else:
        ctx.invoke(list_nodes, as_json=False)


@nodes.command("list")
@output.json_option("Print JSON (schemas/cli-nodes.json).")
@click.pass_context
def list_nodes(ctx: click.Context, as_json: bool) -> None:
    """Every known node with its resources and blacklist state; the hosts of live TPU slices after them."""
    output.emit(node_table.nodes_view(home_of(ctx)), as_json, render_nodes)


@nodes.command("ban")
@click.argument("node")
@click.option("--ttl", default=node_table.DEFAULT_TTL, show_default=True, metavar="DURATION",
              help="How long the ban lasts (like 6h, 3d), or 'never' to keep it until unban.")
@click.option("--reason", default="banned by hand", show_default=True, help="Why, shown beside the node.")
@output.json_option("Print JSON (schemas/cli-nodes-change.json).")
@click.pass_context
def ban(ctx: click.Context, node: str, ttl: str, reason: str, as_json: bool) -> None:
    """Keep runs off NODE: resubmissions exclude it until the ban expires."""
    entry = node_table.ban(home_of(ctx), node, node_table.parse_ttl(ttl), reason)
    output.emit({"action": "ban", "node": node, "entry": vars(entry)}, as_json, render_change)


@nodes.command("unban")
@click.argument("node")
@output.json_option("Print JSON (schemas/cli-nodes-change.json).")
@click.pass_context
def unban(ctx: click.Context, node: str, as_json: bool) -> None:
    """Let runs use NODE again."""
    node_table.unban(home_of(ctx), node)
    output.emit({"action": "unban", "node": node, "entry": None}, as_json, render_change)


def render_nodes(data: dict[str, Any]) -> list[str]:
    warning = _stale_warning(data)
    if data.get("inventory_problem"):
        warning = [*warning, f"warning: {data['inventory_problem']}"]
    if not data["nodes"]:
        return [*warning, "no nodes known yet: the daemon lists them when it starts (`fray daemon start`)"]
    now = data["generated_at"]
    plain = [node for node in data["nodes"] if not node.get("tpu")]
    hosts = [node for node in data["nodes"] if node.get("tpu")]
    lines = _node_table(plain, now) if plain else []
    if hosts:
        lines += [""] if lines else []
        lines += _tpu_host_table(hosts)
    return [*lines, *warning]  # the tables first, for pipes


def _tpu_host_table(hosts: list[dict[str, Any]]) -> list[str]:
    """One line per host of a live TPU slice: where it is, how the slice is, whose run it serves."""
    columns = [render.Column("TPU HOST"), render.Column("SLICE"), render.Column("WORKER", align=">"),
               render.Column("IP"), render.Column("STATE"), render.Column("HEALTH"), render.Column("RUN", shrinkable=True)]
    cells = []
    for node in hosts:
        tpu = node["tpu"]
        run = f"{tpu['run_id']} #{tpu['attempt']}" if tpu["run_id"] else "-"
        state = node["state"] if node["state"] == "READY" else render.style(node["state"], fg="yellow")
        health = tpu["health"] or "-"
        if health not in ("-", "HEALTHY", "HEALTH_UNSPECIFIED"):
            health = render.style(health, fg="red")
        cells.append([node["name"], f"{tpu['slice']} ({tpu['accelerator_type']}, {tpu['zone']})", str(tpu["worker"]),
                      tpu["ip"], state, health, run])
    return render.table(columns, cells, width=render.terminal_width())


def _node_table(nodes: list[dict[str, Any]], now: float) -> list[str]:
    columns = [render.Column("NODE"), render.Column("BACKEND"), render.Column("STATE"),
               render.Column("CPUS", align=">"), render.Column("MEM", align=">"), render.Column("GPUS"),
               render.Column("CLOCK"), render.Column("BLACKLIST", shrinkable=True)]
    cells = []
    for node in nodes:
        ban_entry = node["blacklist"]
        if ban_entry:
            until = "until unbanned" if ban_entry["expires_at"] is None else f"for {human.duration(ban_entry['expires_at'] - now)}"
            # Struck by several runs: a lemon node; by one: maybe that run's fault (docs/keeping-alive.md).
            runs = len(ban_entry.get("runs") or [])
            by = f", {runs} runs" if runs > 1 else ""
            banned = render.style(f"banned {until} ({ban_entry['strikes']}x{by}): {ban_entry['reason']}", fg="red")
        else:
            banned = "-"
        gpus = human.gpus(node["gpus"], node.get("gpu_type"))
        offset = node.get("clock_offset_sec")
        clock = human.clock_offset(offset)
        if human.clock_off(offset):
            clock = render.style(clock, fg="yellow")
        cells.append([node["name"], node["backend"] or "-", node["state"], human.number(node["cpus"]),
                      human.size_mb(node["mem_mb"]) if node["mem_mb"] else human.MISSING, gpus, clock, banned])
    return render.table(columns, cells, width=render.terminal_width())


def _stale_warning(data: dict[str, Any]) -> list[str]:
    """The inventory is the daemon's: say when nobody is keeping it current, and how old it is."""
    daemon = data["daemon"]
    if daemon["state"] == "running":
        return []
    at = data["inventory_at"]
    listed = f"these nodes were listed {human.duration(data['generated_at'] - at)} ago" if at else "no node list yet"
    text = (f"warning: the daemon is {daemon['state']} ({daemon['detail']}): {listed}, states may have changed "
            "since; start it: fray daemon start")
    return [render.style(text, fg="yellow", bold=True)]


def render_change(data: dict[str, Any]) -> list[str]:
    if data["action"] == "unban":
        return [f"unbanned {data['node']}: runs may use it again"]
    entry = data["entry"]
    until = "until unbanned" if entry["expires_at"] is None else f"until {human.timestamp(entry['expires_at'])}"
    return [f"banned {data['node']} {until} ({entry['strikes']} strikes): {entry['reason']}",
            "  new submissions exclude it; `fray nodes unban` lifts the ban"]
