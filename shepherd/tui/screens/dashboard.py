"""The dashboard: every run with its status, counts per status, the daemon's health, recent actions.

The table is `RunTable` (virtual, updated in place); `c` on a sweep's row
overlays the curves of its runs (fray.tui.screens.sweep); `/` starts a filter that
narrows it as you type (every word must appear in the run's id, name, status,
node, mode, backend or reason); Enter keeps the filter, Esc clears it. The
filter is typed into the table itself and echoed on a one-line prompt, so a
keystroke repaints the table without laying the screen out again.

Spanning clusters (the app's `clusters`), the table has a CLUSTER column and
holds, beside this machine's rows, each host's (`on_remote`, keyed
`@HOST/RUN_ID`); a host that did not answer is one row saying why. Enter, t, r,
s, p and b on a host's run act on that host (fray.tui.screens.screen).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from rich.text import Text
from textual.widgets import Static

from fray.core.sweeps import folding
from fray.ops import human, remote_runs
from fray.ops.live import Snapshot
from fray.tui.screens.screen import FrayScreen, RunActions, elsewhere
from fray.tui.widgets.run_table import RunTable
from fray.tui.widgets.status_bar import DaemonBanner, EventsPane, StatusBar, counts_text
from fray.tui.widgets.key_footer import KeyFooter


class DashboardScreen(RunActions, FrayScreen):
    BINDINGS = [
        Binding("enter", "details", "Details", show=False),
        Binding("r", "restart", "Restart"),
        Binding("s", "stop", "Stop"),
        Binding("p", "pause", "Pause"),
        Binding("t", "logs", "Logs"),
        Binding("b", "blacklist", "Ban node"),
        Binding("n", "new_run", "New run"),
        Binding("c", "curves", "Curves"),
        Binding("slash", "search", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    DEFAULT_CSS = """
    DashboardScreen #filter { display: none; height: 1; padding: 0 1; background: $boost; }
    DashboardScreen #filter.-open { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._snapshot: Snapshot | None = None
        self._folder = folding.Folder()
        self._remote: remote_runs.RemoteRuns | None = None

    def compose(self) -> ComposeResult:
        yield StatusBar("reading runs…", id="status")
        yield DaemonBanner(id="banner")
        yield Static("", id="filter")
        yield RunTable(id="runs")
        yield EventsPane(id="events")
        yield KeyFooter()

    def on_resize(self, event: Any) -> None:
        """Recent actions get 7 lines on a tall terminal, 4 on 24 rows, none below that."""
        height = event.size.height
        pane = self.query_one("#events", EventsPane)
        pane.display = height >= 20
        pane.styles.height = 7 if height >= 32 else 4

    def on_mount(self) -> None:
        self.table.palette = self.fray.palette.status
        self.table.filter_listener = self._show_filter  # same frame as the table: no second repaint
        self.query_one("#runs").focus()
        if getattr(self.app, "clusters", None):
            self.table.show_clusters()
        if self.fray.snapshot is not None:
            self.on_snapshot(self.fray.snapshot, first=True)
        remote = getattr(self.app, "remote", None)
        if remote is not None:
            self.on_remote(remote)

    @property
    def table(self) -> RunTable:
        return self.query_one("#runs", RunTable)

    def current_row(self) -> dict[str, Any] | None:
        return self.table.selected

    def focus_runs(self) -> set[str] | None:
        return self.table.visible_ids()

    # -- refresh ------------------------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot, first: bool = False) -> None:
        first = first or self._snapshot is None
        self._snapshot = snapshot
        table = self.table
        # Each sweep shows as one row counting its runs per status (Enter unfolds it), as in `fray list`.
        if first:
            rows, changed, _ = self._folder.apply(snapshot.rows, set(snapshot.rows), set())
            theirs = set(self._remote.rows) if self._remote else set()
            table.apply(rows, changed, set(table.rows) - set(rows) - theirs)
        else:
            table.apply(*self._folder.apply(snapshot.rows, snapshot.changed, snapshot.removed))
        self._header()
        now = time.time()
        self.query_one("#events", EventsPane).show(snapshot.events, now, self.fray.palette)

    def on_remote(self, remote: remote_runs.RemoteRuns) -> None:
        """The hosts answered: their rows replace their last ones; a host that did not is one row."""
        gone = set(self._remote.rows) - set(remote.rows) if self._remote else set()
        self._remote = remote
        self.table.apply(remote.rows, set(remote.rows), gone)
        self._header()

    def _header(self) -> None:
        snapshot = self._snapshot
        if snapshot is None:
            return
        shown = len(self.table.order) if self.table.filter_text else None
        text = counts_text(snapshot.counts, snapshot.daemon, self.fray.palette, shown)
        if self._remote is not None:
            text.append("  ·  on local; ", style="dim")
            held = Counter(row["cluster"] for row in self._remote.rows.values() if row.get("kind") != "cluster")
            for index, state in enumerate(self._remote.clusters):
                ok = state["state"] == "ok"
                text.append(", " if index else "")
                text.append(f"{state['cluster']} ", style="bold")
                text.append(human.plural(held[state["cluster"]], "run") if ok else "unavailable",
                            style="" if ok else self.fray.palette.bad)
        if self.table.filter_text:
            text.append(f"  ·  filter: {self.table.filter_text}", style="bold")
        self.query_one("#status", StatusBar).show(text)
        self.query_one("#banner", DaemonBanner).show(snapshot.counts, snapshot.daemon)

    # -- keys ---------------------------------------------------------------------------

    def on_run_table_selected(self, event: RunTable.Selected) -> None:
        row = self.table.rows.get(event.run_id) or {}
        if row.get("kind") == "cluster" or elsewhere(row):
            self._there(row)
            return
        if event.run_id.startswith(folding.KEY_PREFIX):  # a sweep: show or fold its runs
            self._folder.toggle(event.run_id)
            if self._snapshot is not None:
                self.table.apply(*self._folder.apply(self._snapshot.rows, set(), set()))
            return
        self.fray.open_details(event.run_id)

    def _there(self, row: dict[str, Any]) -> None:
        """Enter on a host's row: its run's screen as the host tells it (a sweep there: how to see it)."""
        if row.get("kind") == "cluster":
            self.notify(row["reason"], severity="warning")
        elif row.get("kind") == "group":
            self.notify(f"{row['name']} is a sweep on {row['cluster']}: `fray list --group {row['group']} --remote "
                        f"{row['cluster']}` lists its runs", severity="warning")
        else:
            self.fray.open_details(row["run_id"], row["cluster"])

    def action_curves(self) -> None:
        """A sweep's row: its runs' curves overlaid; a run's: its own screen, whose curves show each attempt."""
        row = self.current_row()
        if row is None:
            self.notify("no run selected", severity="warning")
        elif row.get("kind") == "cluster" or elsewhere(row):
            self._there(row)
        elif row.get("kind") == "group":
            from fray.tui.screens.sweep import SweepScreen

            self.app.push_screen(SweepScreen(row["group"], row["name"]))
        else:
            self.fray.open_details(row["run_id"])

    def action_search(self) -> None:
        self.table.focus()
        self.table.start_filter()

    def _show_filter(self, text: str, typing: bool) -> None:
        prompt = self.query_one("#filter", Static)
        prompt.set_class(typing or bool(text), "-open")
        line = Text()
        line.append("/", style="bold")
        line.append(text)
        if typing:
            line.append("▏", style="blink")
            line.append("  words that must all appear; Enter keeps the filter, Esc clears it", style="dim")
        else:
            line.append("  (/ edits it, Esc clears it)", style="dim")
        prompt.update(line, layout=False)
        self._header()

    def action_clear_filter(self) -> None:
        if self.table.filter_text or self.query_one("#filter").has_class("-open"):
            self.table.set_filter("")
            self.table.typing_filter = False
            self._show_filter("", False)
            self.table.focus()
        else:
            self.app.action_back()  # type: ignore[attr-defined]

    def action_new_run(self) -> None:
        from fray.tui.screens.new_run import NewRunScreen

        def submitted(run_id: str | None) -> None:
            if run_id:
                self.table.cursor_id = run_id  # the cursor lands on it once the refresh brings it

        self.app.push_screen(NewRunScreen(), submitted)
