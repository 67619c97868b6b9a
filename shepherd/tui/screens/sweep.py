"""A sweep's curves: the chosen metric of every run of a sweep overlaid, one colour per run, over a table
of its points (parameters, status, step, loss) in the same colours.

Opened with `c` on a sweep's row of the dashboard (Enter still unfolds the
row). The data is fray.ops.curves.sweep_view, the one `fray plot --group`
draws, so the terminal, the browser (`fray web`) and `fray plot` show the
same overlay; `m` picks the next metric reported by any of its runs. It is
read again whenever a refresh says one of the sweep's runs changed, or while
any of them is live (their progress is not seen by inotify over NFS).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from fray.core.sweeps import folding
from fray.errors import FrayError
from fray.ops import curves, human
from fray.ops.live import Snapshot
from fray.tui.screens.screen import FrayScreen
from fray.tui.widgets.curves import CurvesPanel


class SweepScreen(FrayScreen):
    BINDINGS = [
        Binding("m", "next_metric", "Metric"),
        Binding("backspace,escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    SweepScreen #title { height: auto; padding: 0 1; background: $panel; }
    SweepScreen VerticalScroll { height: 1fr; padding: 0 1; }
    """

    def __init__(self, group: str, name: str) -> None:
        super().__init__()
        self.group = group
        self.sweep_name = name
        self.metric: str | None = None  # None: loss
        self.view: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"sweep {self.sweep_name}  ({self.group})", style="bold"), id="title")
        with VerticalScroll(id="body"):
            yield CurvesPanel(id="curves")
            yield Static("", id="points")
        yield Footer()

    def on_mount(self) -> None:
        self.reload()

    def focus_runs(self) -> set[str] | None:
        return self._members(self.fray.snapshot) if self.fray.snapshot else None

    def _members(self, snapshot: Snapshot) -> set[str]:
        return {run_id for run_id, row in snapshot.rows.items()
                if (folding.sweep_of(row) or {}).get("id") == self.group}

    def on_snapshot(self, snapshot: Snapshot) -> None:
        members = self._members(snapshot)
        if snapshot.full or members & snapshot.changed or any(
                snapshot.rows[m].get("phase") not in ("ended", None) for m in members):
            self.reload()

    def reload(self) -> None:
        try:
            self.view = curves.sweep_view(self.fray.home, self.group, self.metric)
        except (FrayError, OSError) as exc:
            self.query_one("#title", Static).update(Text(f"sweep {self.sweep_name}: {exc}", style="bold red"))
            return
        self.query_one("#curves", CurvesPanel).show(self.view)
        self.query_one("#points", Static).update(self._points(self.view))

    def _points(self, view: dict[str, Any]) -> Table:
        """One line per run of the sweep, in index order, its name in its curve's colour."""
        table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
        for name, justify in (("RUN", "left"), ("POINT", "left"), ("STATUS", "left"), ("STEP", "right"),
                              (f"LAST {view['metric']}".upper(), "right")):
            table.add_column(name, justify=justify, no_wrap=True)
        for point in view["points"]:
            colour = curves.COLOURS[(point["curve"] - 1) % len(curves.COLOURS)]
            table.add_row(Text(point["name"], style=colour), " ".join(f"{k}={v}" for k, v in point["params"].items()),
                          Text(f"{point['icon']} {point['status']}",
                               style=self.fray.palette.status.get(point["status"], "")),
                          human.number(point["step"]), human.number(point["value"]))
        return table

    def action_next_metric(self) -> None:
        chosen = curves.next_metric(self.view)
        if chosen is None:
            self.notify("no metric reported yet")
            return
        self.metric = chosen
        self.reload()

    def action_back(self) -> None:
        self.app.action_back()  # type: ignore[attr-defined]
