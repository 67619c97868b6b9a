"""A run's frozen script, numbered, with `#SBATCH` lines green and `#FRAY` lines purple."""

from __future__ import annotations

from typing import Any

from rich.text import Text

MAX_LINES = 2000


def script_text(text: str | None, palette: Any) -> Text:
    if text is None:
        return Text("the frozen script cannot be read", style="dim")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    width = len(str(min(len(lines), MAX_LINES)))
    out = Text(no_wrap=True, overflow="ellipsis")
    for number, line in enumerate(lines[:MAX_LINES], start=1):
        if number > 1:
            out.append("\n")
        out.append(f"{number:>{width}} ", style="dim")
        stripped = line.lstrip()
        if stripped.startswith("#SBATCH"):
            style = palette.sbatch
        elif stripped.startswith("#FRAY"):
            style = palette.fray
        elif stripped.startswith("#"):
            style = palette.comment
        else:
            style = ""
        out.append(line.expandtabs(4), style=style)
    if len(lines) > MAX_LINES:
        out.append(f"\n… {len(lines) - MAX_LINES} more lines", style="dim")
    return out
