"""`fray usage`: wall time, CPU-, GPU- and TPU chip-hours, useful time, time lost by cause and goodput, by run,
group, partition or node (fray.ops.usage)."""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.core.usage import GROUPINGS
from fray.ops import human, usage

HOURS = (("cpu_hours", "CPU-H"), ("gpu_hours", "GPU-H"), ("tpu_chip_hours", "TPU CHIP-H"))


@click.command("usage")
@click.option("--since", "since", default=usage.DEFAULT_SINCE, show_default=True, metavar="DURATION",
              help="How far back: 12h, 7d, 30d, or all. Attempts are cut at this moment.")
@click.option("--by", "by", default="run", show_default=True, metavar="|".join(GROUPINGS),
              help="One row per run, group (job group or family), partition or node.")
@output.json_option("Print JSON (schemas/cli-usage.json).")
@click.pass_context
def usage_cmd(ctx: click.Context, since: str, by: str, as_json: bool) -> None:
    """What runs used, counted from their attempts' start and end: wall time, CPU-hours,
    GPU-hours, TPU chip-hours; and goodput, useful time over the time accounted. For runs
    that report steps (report.progress) the useful time is the time that made steps never
    done again, and the lost time is split by cause: steps redone after a restart, the
    detection delay (the fault to the attempt's end), backoff, queue, start and idle. For
    runs without steps it is the time of attempts that ended well (marked *). A running
    attempt counts up to now.
    """
    output.emit(usage.usage_view(home_of(ctx), since, by.strip().lower()), as_json, render_usage)


def render_usage(data: dict[str, Any]) -> list[str]:
    window = "all time" if data["since"] is None else f"since {human.timestamp(data['since'], data['generated_at'])} " \
                                                        f"({data['since_text']})"
    lines = [render.heading(f"Usage by {data['by']}, {window}")]
    if not data["rows"]:
        lines.append(f"no attempts ran in this window ({data['home']})")
    else:
        shown = [c for c in HOURS if data["total"][c[0]] > 0] or [HOURS[0]]  # hide columns nothing used
        columns = [render.Column(data["by"].upper()), *([render.Column("NAME", shrinkable=True)]
                                                        if data["by"] == "run" else []),
                   render.Column("RUNS", ">"), render.Column("ATTEMPTS", ">"), render.Column("WALL", ">"),
                   render.Column("USEFUL", ">"), render.Column("LOST", ">"),
                   render.Column("LOST BY CAUSE", shrinkable=True), render.Column("GOODPUT", ">"),
                   *[render.Column(title, ">") for _, title in shown]]
        rows = [_row(row, data["by"], shown) for row in data["rows"]]
        rows.append(_row({**data["total"], "key": "total", "label": ""}, data["by"], shown))
        lines += render.table(columns, rows, render.terminal_width())
    if any(row["basis"] in ("attempts", "mixed") for row in data["rows"]):
        lines.append("* goodput from the attempts' ends: these runs reported no steps")
    if data["unreadable"]:
        lines.append(f"not counted, meta.json unreadable: {', '.join(data['unreadable'])}")
    return lines


def _row(row: dict[str, Any], by: str, shown: list[tuple[str, str]]) -> list[str]:
    running = f" ({row['running']} running)" if row["running"] else ""
    goodput = human.MISSING if row["goodput"] is None else f"{row['goodput']:.0%}"
    if row["basis"] in ("attempts", "mixed"):
        goodput += "*"
    return [row["key"], *([row["label"]] if by == "run" else []), str(row["runs"]), f"{row['attempts']}{running}",
            human.duration(row["wall_sec"]), human.duration(row["useful_sec"]), human.duration(row["lost_sec"]),
            lost_by_cause(row["lost_by_cause"]), goodput,
            *[f"{row[key]:.2f}" for key, _ in shown]]


def lost_by_cause(lost: dict[str, float]) -> str:
    """`redone 14s, detection 20s`, biggest first; `-` when nothing was lost."""
    shown = sorted(((seconds, cause) for cause, seconds in lost.items() if seconds >= 0.05), reverse=True)
    return ", ".join(f"{cause.replace('_', ' ')} {human.duration(seconds)}" for seconds, cause in shown) or human.MISSING
