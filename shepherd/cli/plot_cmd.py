"""`fray plot RUN`: a run's metric against step and against wall time in the terminal, attempts in colours,
restarts and checkpoints marked (fray.ops.curves), and as a PNG for a report (fray.ops.png_chart);
`fray plot --group SWEEP` overlays a sweep's runs.

plotext draws the terminal plot (it comes with textual-plotext, the dashboard's
plotting widget) and is imported only here, when a plot is asked for.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from fray.cli.main import home_of
from fray.errors import UsageError
from fray.ops import curves, lookup, png_chart


@click.command("plot")
@click.argument("run", required=False)
@click.option("--group", "group", default=None, metavar="GROUP",
              help="Overlay the runs of this group (a sweep), one colour each, instead of one run's attempts.")
@click.option("--metric", "metric", default=None, metavar="NAME",
              help="The reported metric to plot (default: loss, else the first one reported).")
@click.option("--png", "png", default=None, metavar="FILE", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the plot to FILE as a PNG image.")
@click.pass_context
def plot(ctx: click.Context, run: str | None, group: str | None, metric: str | None, png: Path | None) -> None:
    """A run's metric against step and against wall time, each attempt in its own colour;
    restarts are red lines, checkpoints `o`, NaN/inf `x`. RUN is a run id, a unique prefix
    of one, or a run name. `--group GROUP` overlays a sweep's runs instead.
    """
    home = home_of(ctx)
    if (run is None) == (group is None):
        raise UsageError("give a RUN or --group GROUP (a sweep), not both")
    if group is not None:
        view = curves.sweep_view(home, group, metric)
    else:
        view = curves.curves_view(home, lookup.resolve(home, run), metric)
    if metric is not None and metric not in view["metrics"]:
        known = ", ".join(view["metrics"]) or "none yet"
        raise UsageError(f"run {view['run_id']} has no metric {metric!r}; it reported: {known}")
    if view["attempts"]:
        click.echo(_terminal_plot(view))
    click.echo(curves.summary(view))
    if png is not None:
        if not view["attempts"]:
            raise UsageError(f"nothing to write to {png}: {curves.summary(view)}")
        try:
            png.write_bytes(png_chart.chart_png(view))
        except OSError as exc:
            raise UsageError(f"cannot write {png}: {exc.strerror}") from None
        click.echo(f"wrote {png}")


def _terminal_plot(view: dict) -> str:
    import plotext as plt

    plt.clear_figure()
    width, height = shutil.get_terminal_size((100, 40))
    plt.plotsize(min(width, 160), max(24, min(height - 4, 60)))
    if not sys.stdout.isatty():
        plt.clear_color()  # a pipe or a file gets plain text
    plt.subplots(2, 1)
    for row, axis in enumerate(curves.AXES, start=1):
        plt.subplot(row, 1)
        curves.draw(plt, view, axis)
    return plt.build()
