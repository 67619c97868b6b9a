"""Nodes and the blacklist: every known node with its GPUs, and ban / unban with a TTL and a reason.

The rows are `fray nodes list`'s (fray.ops.nodes.nodes_view: the daemon's inventory
nodes.json merged with blacklist.json), refreshed when either file changes.
`b` bans the selected node (or any node typed in), `u` unbans it; both ask
first and are written as `fray nodes ban|unban` writes them.
"""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Input, Static

from fray.ops import human, nodes as node_table
from fray.ops.live import Snapshot
from fray.tui import actions
from fray.tui.screens.screen import FilterBox, FrayScreen, RunActions
from fray.tui.widgets.key_table import KeyTable

COLUMNS = (("name", "NODE"), ("backend", "BACKEND"), ("state", "STATE"), ("cpus", "CPUS"), ("mem", "MEM"),
           ("gpus", "GPUS"), ("partitions", "PARTITIONS"), ("blacklist", "BLACKLIST"))


def node_cells(node: dict[str, Any], now: float, palette: Any) -> dict[str, Any]:
    ban = node.get("blacklist")
    if ban:
        until = "until unbanned" if ban["expires_at"] is None else f"{human.duration(ban['expires_at'] - now)} left"
        banned: Any = Text(f"banned {until}, {ban['strikes']}x: {ban['reason']}", style=palette.bad)
    else:
        banned = Text("-", style="dim")
    gpus = human.gpus(node.get("gpus"), node.get("gpu_type"))
    return {"name": node["name"], "backend": node.get("backend") or "-", "state": node.get("state") or "-",
            "cpus": human.number(node.get("cpus")),
            "mem": human.size_mb(node["mem_mb"]) if node.get("mem_mb") else "-", "gpus": gpus,
            "partitions": ",".join(node.get("partitions") or []) or "-", "blacklist": banned}


class NodesScreen(FilterBox, RunActions, FrayScreen):
    TABLE_ID = "nodes"
    BINDINGS = [
        Binding("b", "ban", "Ban"),
        Binding("u", "unban", "Unban"),
        Binding("slash", "search", "Filter"),
        Binding("escape", "escape", "Back", show=False),
        Binding("backspace", "back", "Back", show=False),
    ]
    DEFAULT_CSS = """
    NodesScreen #summary { height: 1; padding: 0 1; background: $panel; }
    NodesScreen #filter { display: none; height: 3; }
    NodesScreen #filter.-open { display: block; }
    NodesScreen DataTable { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.view: dict[str, Any] = {"nodes": [], "generated_at": time.time(), "inventory_at": None}
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="summary")
        yield Input(placeholder="filter nodes", id="filter")
        table: DataTable[Any] = KeyTable(id="nodes", cursor_type="row", zebra_stripes=True)
        for key, title in COLUMNS:
            table.add_column(title, key=key)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.reload()
        self.query_one("#nodes").focus()

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.full or snapshot.hint.blacklist or snapshot.hint.nodes:
            self.reload()

    def reload(self) -> None:
        self.view = node_table.nodes_view(self.fray.home)
        self._fill()

    def _fill(self) -> None:
        """Update rows in place: changed cells, new and vanished nodes; the cursor stays on its node."""
        table = self.query_one("#nodes", DataTable)
        now = self.view["generated_at"]
        words = self.filter_text.lower().split()
        wanted: dict[str, dict[str, Any]] = {}
        for node in self.view["nodes"]:
            cells = node_cells(node, now, self.fray.palette)
            hay = " ".join(str(v) for v in cells.values()).lower()
            if all(word in hay for word in words):
                wanted[node["name"]] = cells
        present = {key.value for key in table.rows}
        for name in present - set(wanted):
            table.remove_row(name)
        for name, cells in wanted.items():
            if name in present:
                for key, value in cells.items():
                    if str(table.get_cell(name, key)) != str(value):
                        table.update_cell(name, key, value, update_width=True)
            else:
                table.add_row(*(cells[key] for key, _ in COLUMNS), key=name)
        banned = sum(1 for node in self.view["nodes"] if node.get("blacklist"))
        inventory = (f"inventory from {human.timestamp(self.view['inventory_at'], now)}" if self.view["inventory_at"]
                     else "no inventory yet: the daemon lists nodes when it starts")
        summary = f"{len(self.view['nodes'])} nodes, {banned} blacklisted · {inventory}"
        if self.filter_text:
            summary += f" · filter: {self.filter_text}"
        self.query_one("#summary", Static).update(summary)

    def selected_node(self) -> str | None:
        table = self.query_one("#nodes", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return key.value

    def current_row(self) -> dict[str, Any] | None:
        return None

    def action_ban(self) -> None:
        from fray.tui.screens.dialogs import BanScreen

        home = self.fray.home

        def chosen(result: tuple[str, str, str] | None) -> None:
            if result:
                node, ttl, reason = result
                self._confirm(f"Ban {node} ({ttl or actions.DEFAULT_TTL})? New attempts will avoid it.", "Ban",
                              lambda: actions.ban(home, node, ttl, reason), daemon=False)

        self.app.push_screen(BanScreen("Ban a node: runs' new attempts avoid it until the ban expires.",
                                       self.selected_node() or "", actions.DEFAULT_TTL, "banned by hand"), chosen)

    def action_unban(self) -> None:
        node = self.selected_node()
        if node is None:
            self.notify("no node selected", severity="warning")
            return
        entry = next((n.get("blacklist") for n in self.view["nodes"] if n["name"] == node), None)
        if not entry:
            self.notify(f"{node} is not blacklisted", severity="warning")
            return
        home = self.fray.home
        self._confirm(f"Unban {node}? Runs may use it again.", "Unban", lambda: actions.unban(home, node), daemon=False)

    def refilter(self) -> None:
        self._fill()
