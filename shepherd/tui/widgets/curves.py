"""The run screen's curves: the chosen metric by step and by wall time, attempts in colours, restarts and
checkpoints marked (data and drawing: fray.ops.curves).

Drawn with textual-plotext, a Textual widget around plotext. Chosen over
textual-plot because the terminal plot (`fray plot`) is plotext too: one
drawing function (fray.ops.curves.draw) serves both, so the dashboard, the
browser (`fray web` serves this same app) and the terminal show the same
picture; textual-plot would have needed a second drawing of every mark.
It is imported when a run screen first shows curves, never by `fray list`.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from fray.ops import curves


class CurvesPanel(Vertical):
    """A heading (metric, what is marked, how to change it) over two plots: by step, by wall time."""

    DEFAULT_CSS = """
    CurvesPanel { height: auto; }
    CurvesPanel Horizontal { height: 18; }
    CurvesPanel PlotextPlot { width: 1fr; height: 18; }
    """

    def compose(self) -> ComposeResult:
        from textual_plotext import PlotextPlot

        yield Static("", id="curves-head")
        with Horizontal(id="curves-plots"):
            yield PlotextPlot(id="by-step")
            yield PlotextPlot(id="by-time")

    def show(self, view: dict[str, Any]) -> None:
        from textual_plotext import PlotextPlot

        head = Text(f"Curves: {view['metric'] or 'none'}", style="bold")
        if len(view["metrics"]) > 1:
            head.append(f"  (m: next metric of {', '.join(view['metrics'])})", style="dim")
        head.append(f"\n{curves.summary(view)}")
        self.query_one("#curves-head", Static).update(head)
        plots = self.query_one("#curves-plots", Horizontal)
        plots.display = bool(view["attempts"])
        for axis, plot in zip(curves.AXES, (self.query_one("#by-step", PlotextPlot), self.query_one("#by-time", PlotextPlot))):
            plot.plt.clear_data()
            plot.plt.clear_figure()
            curves.draw(plot.plt, view, axis)
            plot.refresh()
