"""Colours of the dashboard: a 256-colour theme (dark or light) and an 8-colour fallback.

The 256-colour themes use only colours of the xterm 256-colour cube, so a
terminal without true colour shows exactly these. On a terminal that reports
8/16 colours (TERM=xterm, a bare SSH session), the app uses the terminal's own
ANSI palette instead (Textual's ansi themes), which is readable on a dark or a
light background because the terminal chose it. Status colours follow the CLI
(shepherd/cli/render.py): green is good, yellow needs a look, red is bad, dim is over.

Pure: no Textual import here, so the palette can be tested and reused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

THEMES = ("dark", "light", "ansi")

# Textual theme name for each of ours; the first two are registered by app.py from TEXTUAL_THEMES.
TEXTUAL_NAMES = {"dark": "fray-dark", "light": "fray-light", "ansi": "ansi-dark", "ansi-light": "ansi-light"}

# name -> keyword arguments of textual.theme.Theme (colours from the xterm 256-colour cube)
TEXTUAL_THEMES: dict[str, dict[str, object]] = {
    "fray-dark": dict(primary="#5f87d7", secondary="#5f5faf", accent="#d787ff", warning="#d7af00",
                      error="#d75f5f", success="#5faf5f", foreground="#d0d0d0", background="#121212",
                      surface="#1c1c1c", panel="#262626", dark=True),
    "fray-light": dict(primary="#005faf", secondary="#5f5f87", accent="#8700af", warning="#af8700",
                       error="#af0000", success="#008700", foreground="#1c1c1c", background="#eeeeee",
                       surface="#e4e4e4", panel="#d0d0d0", dark=False),
}


@dataclass(frozen=True)
class Palette:
    """Rich style strings for what the dashboard colours itself."""

    status: dict[str, str]
    daemon: dict[str, str]
    sbatch: str
    fray: str
    comment: str
    match: str
    current_match: str
    dim: str = "dim"
    good: str = "green"
    bad: str = "red"
    extra: dict[str, str] = field(default_factory=dict)


def _status(good: str, warn: str, bad: str, wait: str) -> dict[str, str]:
    return {
        "healthy_running": good, "running_degraded": warn, "unresponsive": f"bold {warn}", "pending": wait,
        "restarting": warn, "crash_loop": bad, "completed_success": good, "ended_expired": "dim",
        "stopped_manual": "dim", "failed": f"bold {bad}", "failed_config": f"bold {bad} reverse",
        "failed_dependency": bad, "error_unknown": f"bold {bad}",
    }


PALETTES: dict[str, Palette] = {
    "dark": Palette(
        status=_status("#5faf5f", "#d7af00", "#ff5f5f", "#5fafd7"),
        daemon={"running": "#5faf5f", "stale": "bold #1c1c1c on #d7af00", "stopped": "bold #ffffff on #af0000"},
        sbatch="#87d787", fray="#af87ff", comment="#808080", match="#000000 on #d7af00",
        current_match="bold #000000 on #ff8700", good="#5faf5f", bad="#ff5f5f",
    ),
    "light": Palette(
        status=_status("#008700", "#875f00", "#af0000", "#005f87"),
        daemon={"running": "#008700", "stale": "bold #000000 on #ffd75f", "stopped": "bold #ffffff on #af0000"},
        sbatch="#008700", fray="#8700af", comment="#6c6c6c", match="#000000 on #ffd75f",
        current_match="bold #ffffff on #d75f00", good="#008700", bad="#af0000",
    ),
    "ansi": Palette(
        status=_status("green", "yellow", "red", "cyan"),
        daemon={"running": "green", "stale": "bold black on yellow", "stopped": "bold white on red"},
        sbatch="green", fray="magenta", comment="dim", match="reverse", current_match="bold reverse yellow",
    ),
}


def choose(requested: str | None, color_system: str | None) -> str:
    """Our theme: what was asked (--theme, else $FRAY_TUI_THEME), else ansi on an 8/16-colour terminal, else dark."""
    wanted = (requested or os.environ.get("FRAY_TUI_THEME") or "").strip().lower()
    if wanted in THEMES:
        return wanted
    if color_system in (None, "standard", "windows"):
        return "ansi"
    return "dark"
