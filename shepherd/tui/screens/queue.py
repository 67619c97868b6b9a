"""The queue: runs waiting for an attempt to start, in the order they will be tried, and why each waits.

Data is fray.ops.queue.queue_view over the dashboard's rows: first the runs already
handed to a backend, then queued runs oldest first, those backing off when
their delay ends, paused ones last. Enter opens a run's details; r/s/p/t/b act
on it as on the dashboard.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Input, Static

from fray.ops import human, queue as run_queue
from fray.ops.live import Snapshot
from fray.tui.screens.screen import FilterBox, FrayScreen, RunActions
from fray.tui.widgets.key_table import KeyTable

COLUMNS = (("position", "#"), ("icon", ""), ("name", "NAME"), ("status", "STATUS"), ("priority", "BAND"),
           ("attempt", "ATT"), ("backend", "ON"), ("age", "WAITING"), ("reason", "WHY IT WAITS"))


class QueueScreen(FilterBox, RunActions, FrayScreen):
    TABLE_ID = "queue"
    BINDINGS = [
        Binding("enter", "details", "Details"),
        Binding("r", "restart", "Restart"),
        Binding("s", "stop", "Stop"),
        Binding("p", "pause", "Pause"),
        Binding("t", "logs", "Logs"),
        Binding("b", "blacklist", "Ban node", show=False),
        Binding("slash", "search", "Filter"),
        Binding("escape", "escape", "Back", show=False),
        Binding("backspace", "back", "Back", show=False),
    ]
    DEFAULT_CSS = """
    QueueScreen #summary { height: 1; padding: 0 1; background: $panel; }
    QueueScreen #filter { display: none; height: 3; }
    QueueScreen #filter.-open { display: block; }
    QueueScreen DataTable { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[dict[str, Any]] = []
        self.rows: dict[str, dict[str, Any]] = {}
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="summary")
        yield Input(placeholder="filter the queue", id="filter")
        table: DataTable[Any] = KeyTable(id="queue", cursor_type="row")
        for key, title in COLUMNS:
            table.add_column(title, key=key)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        if self.fray.snapshot is not None:
            self.on_snapshot(self.fray.snapshot)
        self.query_one("#queue").focus()

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self.rows = snapshot.rows
        self.queue = run_queue.queue_view(self.fray.home, snapshot.rows.values())["queue"]
        self._fill(snapshot.generated_at)

    def _fill(self, now: float) -> None:
        table = self.query_one("#queue", DataTable)
        palette = self.fray.palette
        words = self.filter_text.lower().split()
        shown = [item for item in self.queue
                 if all(w in f"{item['name']} {item['run_id']} {item['status']} {item['reason']}".lower() for w in words)]
        keep = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        order = [item["run_id"] for item in shown]
        present = [key.value for key in table.rows]
        if present != order:  # the order itself changed: rebuild (the queue is short)
            table.clear()
            for item in shown:
                table.add_row(*self._cells(item, now, palette).values(), key=item["run_id"])
            if keep in order:
                table.move_cursor(row=order.index(keep))
        else:
            for item in shown:
                for key, value in self._cells(item, now, palette).items():
                    if str(table.get_cell(item["run_id"], key)) != str(value):
                        table.update_cell(item["run_id"], key, value, update_width=True)
        waiting = len(self.queue)
        self.query_one("#summary", Static).update(
            f"{waiting} run{'s' if waiting != 1 else ''} waiting, in the order they will be tried"
            + (f" · filter: {self.filter_text}" if self.filter_text else ""))

    @staticmethod
    def _cells(item: dict[str, Any], now: float, palette: Any) -> dict[str, Any]:
        style = palette.status.get(item["status"], "")
        return {"position": str(item["position"]), "icon": Text(item["icon"], style=style), "name": item["name"],
                "status": Text(item["status"], style=style), "priority": item.get("priority") or "-",
                "attempt": human.number(item["attempt"]),
                "backend": item["backend"] or "-",
                "age": human.duration(now - item["created_at"]) if item["created_at"] else "-",
                "reason": item["reason"]}

    def current_row(self) -> dict[str, Any] | None:
        table = self.query_one("#queue", DataTable)
        if not table.row_count:
            return None
        run_id = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.rows.get(run_id)

    def on_data_table_row_selected(self, _: DataTable.RowSelected) -> None:
        self.action_details()

    def refilter(self) -> None:
        if self.fray.snapshot is not None:
            self._fill(self.fray.snapshot.generated_at)
