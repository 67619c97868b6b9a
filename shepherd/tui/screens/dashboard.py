"""The dashboard: every run with its status, counts per status, the daemon's health, recent actions.

The table is `RunTable` (virtual, updated in place); `/` opens a filter that
narrows it as you type (every word must appear in the run's id, name, status,
node, mode, backend or reason); Enter keeps the filter, Esc clears it.
"""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Input

from shepherd.tui.data import Snapshot
from shepherd.tui.screens.base import FrayScreen, RunActions
from shepherd.tui.widgets.run_table import RunTable
from shepherd.tui.widgets.status_bar import DaemonBanner, EventsPane, StatusBar, counts_text


class DashboardScreen(RunActions, FrayScreen):
    BINDINGS = [
        Binding("enter", "details", "Details", show=False),
        Binding("r", "restart", "Restart"),
        Binding("s", "stop", "Stop"),
        Binding("p", "pause", "Pause"),
        Binding("t", "logs", "Logs"),
        Binding("b", "blacklist", "Ban node"),
        Binding("n", "new_run", "New run"),
        Binding("slash", "search", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    DEFAULT_CSS = """
    DashboardScreen #filter { display: none; height: 3; }
    DashboardScreen #filter.-open { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._snapshot: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield StatusBar("reading runs…", id="status")
        yield DaemonBanner(id="banner")
        yield Input(placeholder="filter: words that must all appear (Enter keeps it, Esc clears)", id="filter")
        yield RunTable(id="runs")
        yield EventsPane(id="events")
        yield Footer()

    def on_resize(self, event: Any) -> None:
        """Recent actions get 7 lines on a tall terminal, 4 on 24 rows, none below that."""
        height = event.size.height
        pane = self.query_one("#events", EventsPane)
        pane.display = height >= 20
        pane.styles.height = 7 if height >= 32 else 4

    def on_mount(self) -> None:
        self.table.palette = self.fray.palette.status
        self.query_one("#runs").focus()
        if self.fray.snapshot is not None:
            self.on_snapshot(self.fray.snapshot, first=True)

    @property
    def table(self) -> RunTable:
        return self.query_one("#runs", RunTable)

    def current_row(self) -> dict[str, Any] | None:
        return self.table.selected

    # -- refresh ------------------------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot, first: bool = False) -> None:
        first = first or self._snapshot is None
        self._snapshot = snapshot
        table = self.table
        if first:
            table.apply(snapshot.rows, set(snapshot.rows), set(table.rows) - set(snapshot.rows))
        else:
            table.apply(snapshot.rows, snapshot.changed, snapshot.removed)
        self._header()
        now = time.time()
        self.query_one("#events", EventsPane).show(snapshot.events, now, self.fray.palette)

    def _header(self) -> None:
        snapshot = self._snapshot
        if snapshot is None:
            return
        shown = len(self.table.order) if self.table.filter_text else None
        text = counts_text(snapshot.counts, snapshot.daemon, self.fray.palette, shown)
        if self.table.filter_text:
            text.append(f"  ·  filter: {self.table.filter_text}", style="bold")
        self.query_one("#status", StatusBar).show(text)
        self.query_one("#banner", DaemonBanner).show(snapshot.counts, snapshot.daemon)

    # -- keys ---------------------------------------------------------------------------

    def on_run_table_selected(self, event: RunTable.Selected) -> None:
        from shepherd.tui.screens.detail import DetailScreen

        self.app.push_screen(DetailScreen(event.run_id))

    def action_search(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-open")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.table.set_filter(event.value)
            self._header()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                event.input.remove_class("-open")
            self.table.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.value or box.has_class("-open"):
            box.value = ""
            box.remove_class("-open")
            self.table.set_filter("")
            self.table.focus()
            self._header()
        else:
            self.app.action_back()  # type: ignore[attr-defined]

    def action_new_run(self) -> None:
        from shepherd.tui.screens.new_run import NewRunScreen

        def submitted(run_id: str | None) -> None:
            if run_id:
                self.table.cursor_id = run_id  # the cursor lands on it once the refresh brings it

        self.app.push_screen(NewRunScreen(), submitted)
