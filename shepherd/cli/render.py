"""The terminal's side of the CLI's output: colours, aligned tables, key/value blocks.

The words and numbers themselves (durations, times, sizes, icons) are
fray.ops.human, shared with the dashboard; this module only lays them out
and colours them for a terminal. Nothing here reads state. Colour goes through `style`, which
leaves text plain when NO_COLOR is set or stdout is not a terminal, so piped
output and logs never carry ANSI escapes. Widths are measured on the plain
text and colour is applied after padding, so columns stay aligned.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from fray.core.status import Status
from fray.ops import human

# Colour of each status: green is good, yellow needs a look, red is bad, dim is over.
STATUS_COLOURS: dict[str, dict[str, Any]] = {
    Status.HEALTHY_RUNNING.value: {"fg": "green"},
    Status.RUNNING_DEGRADED.value: {"fg": "yellow"},
    Status.UNRESPONSIVE.value: {"fg": "yellow", "bold": True},
    Status.PENDING.value: {"fg": "cyan"},
    Status.RESTARTING.value: {"fg": "yellow"},
    Status.CRASH_LOOP.value: {"fg": "red"},
    Status.COMPLETED_SUCCESS.value: {"fg": "green"},
    Status.ENDED_EXPIRED.value: {"dim": True},
    Status.STOPPED_MANUAL.value: {"dim": True},
    Status.FAILED.value: {"fg": "red", "bold": True},
    Status.FAILED_CONFIG.value: {"fg": "magenta", "bold": True},
    Status.FAILED_DEPENDENCY.value: {"fg": "red"},
    Status.ERROR_UNKNOWN.value: {"fg": "red", "bold": True},
}
DAEMON_COLOURS: dict[str, dict[str, Any]] = {"running": {"fg": "green"}, "stale": {"fg": "yellow", "bold": True},
                  "stopped": {"fg": "red", "bold": True}}


def colour_enabled(stream: Any = None) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream if stream is not None else sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def style(text: str, **styles: Any) -> str:
    if not (styles and colour_enabled()):
        return text
    import click  # only for a terminal: `fray list` into a pipe or file loads no click (fray.cli.entry)

    return click.style(text, **styles)


def status_style(status: str | None) -> dict[str, Any]:
    return STATUS_COLOURS.get(status or "", {})


def status_label(status: str | None) -> str:
    """`● healthy_running`, coloured by status."""
    return style(f"{human.icon(status)} {status}", **status_style(status))


def terminal_width() -> int | None:
    """The terminal's width when stdout is one; None when output goes to a pipe or file."""
    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    import shutil  # a terminal only: `fray list` into a pipe or file loads no shutil

    return shutil.get_terminal_size((100, 24)).columns


# ---------------------------------------------------------------- tables


@dataclass(frozen=True)
class Column:
    """A table column: its title, alignment, and whether it may be cut to fit."""

    title: str
    align: str = "<"  # "<" or ">"
    shrinkable: bool = False  # may be cut with … to fit the terminal
    min_width: int = 8


def table(columns: Sequence[Column], rows: Sequence[Sequence[Any]], width: int | None = None,
          gap: str = "  ") -> list[str]:
    """Aligned lines, header first. A cell is plain text or (text, click.style keywords).

    `width`: cut shrinkable columns (with …) so each line fits in it.
    """
    # Column by column, as far as possible in C (zip, map): `fray list` lays out 10,000 rows of 11 cells.
    cells = list(zip(*rows)) if rows else [()] * len(columns)
    plain = [column if set(map(type, column)) <= {str} else [c if isinstance(c, str) else c[0] for c in column]
             for column in cells]
    widths = [max(len(col.title), max(map(len, texts), default=0)) for col, texts in zip(columns, plain)]
    natural = list(widths)
    if width is not None:
        _fit(columns, widths, width, len(gap))
    header = gap.join(_pad(col.title, widths[i], col.align) for i, col in enumerate(columns)).rstrip()
    lines = [style(header, bold=True)]
    coloured, last, laid_out = colour_enabled(), len(columns) - 1, []
    if not coloured and widths == natural:  # nothing to cut or colour (output to a pipe): one %-format per line
        layout = gap.replace("%", "%%").join(f"%{'-' if col.align == '<' else ''}{w}s"
                                             for col, w in zip(columns, widths))
        lines.extend((layout % line).rstrip() for line in zip(*plain))
        return lines
    for i, col in enumerate(columns):
        w = widths[i]
        texts = [t if len(t) <= w else human.truncate(t, w) for t in plain[i]]
        texts = [t.rjust(w) for t in texts] if col.align == ">" else [t.ljust(w) for t in texts]
        if i == last:
            texts = [t.rstrip() for t in texts]
        if coloured:
            import click

            texts = [t if isinstance(c, str) or not c[1] else click.style(t, **c[1]) for t, c in zip(texts, cells[i])]
        laid_out.append(texts)
    lines.extend(gap.join(texts).rstrip() for texts in zip(*laid_out))
    return lines


def _fit(columns: Sequence[Column], widths: list[int], width: int, gap: int) -> None:
    excess = sum(widths) + gap * (len(widths) - 1) - width
    # Shrink the last shrinkable column first (the reason), then the ones before it.
    for i in reversed(range(len(columns))):
        if excess <= 0:
            return
        if columns[i].shrinkable:
            cut = min(excess, max(0, widths[i] - columns[i].min_width))
            widths[i] -= cut
            excess -= cut


def _pad(text: str, width: int, align: str) -> str:
    return text.rjust(width) if align == ">" else text.ljust(width)


def key_values(pairs: Sequence[tuple[str, str]], indent: str = "  ") -> list[str]:
    """`  key:   value` lines, keys aligned."""
    if not pairs:
        return []
    pad = max(len(k) for k, _ in pairs) + 1
    return [f"{indent}{(k + ':').ljust(pad)} {v}" for k, v in pairs]


def heading(text: str) -> str:
    return style(text, bold=True)


def indent_block(lines: Sequence[str], indent: str = "    ") -> list[str]:
    return [indent + line for line in lines]


def separator(attempt: int, node: str | None) -> str:
    """The line between two attempts' output: `── attempt 2 on gpu-7 ──`."""
    return style(human.separator(attempt, node), dim=True)

