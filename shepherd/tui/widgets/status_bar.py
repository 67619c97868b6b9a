"""The dashboard's header: runs per status, the daemon's health, and a banner when the daemon is down
or a backend's tool fails every call (fray.backends.cli_health)."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.widgets import Static

from fray.core.status import ICONS, Status
from fray.ops import human

ENDED = frozenset({Status.COMPLETED_SUCCESS.value, Status.ENDED_EXPIRED.value, Status.STOPPED_MANUAL.value,
                   Status.FAILED.value, Status.FAILED_CONFIG.value, Status.FAILED_DEPENDENCY.value,
                   Status.ERROR_UNKNOWN.value})


def counts_text(counts: dict[str, int], daemon: dict[str, Any], palette: Any, shown: int | None = None) -> Text:
    """`1,204 runs: 3 ● healthy_running, 1 ✗ failed · daemon running (pid 7 on login1, last cycle 0.4s ago)`."""
    total = sum(counts.values())
    text = Text()
    text.append(f"{total:,} run{'s' if total != 1 else ''}", style="bold")
    if shown is not None and shown != total:
        text.append(f" ({shown:,} shown)")
    parts = [(status, count) for status, count in counts.items() if count]
    if parts:
        text.append(": ")
    for index, (status, count) in enumerate(parts):
        if index:
            text.append("  ")
        text.append(f"{count} {ICONS[Status(status)]} {status}", style=palette.status.get(status, ""))
    text.append("  ·  daemon ")
    text.append(daemon["state"], style=palette.daemon.get(daemon["state"], "") if daemon["state"] == "running" else
                palette.status.get("failed", "bold"))
    text.append(f" ({daemon['detail']})", style="dim")
    return text


def banner_text(counts: dict[str, int], daemon: dict[str, Any]) -> str | None:
    """The warning shown across the top when runs are not being watched; None when all is well."""
    state = daemon["state"]
    waiting = sum(count for status, count in counts.items() if status not in ENDED)
    if state == "stale":
        return (f"⚠ DAEMON STALE: {daemon['detail']}. Runs are not being watched. See daemon.log in FRAY_HOME, "
                "or restart it: fray daemon stop; fray daemon start")
    if state == "stopped":
        runs = f"{human.plural(waiting, 'active run')} {'is' if waiting == 1 else 'are'} not making progress" \
            if waiting else "nothing watches new runs"
        return f"⚠ DAEMON STOPPED: {runs}. Start it: fray daemon start (any fray submit/control also starts it)"
    failing = human.failing_commands(daemon.get("lease"), time.time())
    if failing:
        return "⚠ " + "; ".join(failing)
    return None


class StatusBar(Static):
    """Counts per status and the daemon's health: one line, two on a narrow terminal."""

    DEFAULT_CSS = "StatusBar { height: 1; padding: 0 1; background: $panel; }"
    _lines = 1

    def show(self, text: Text) -> None:
        """Repaint in place; lay the screen out again only when the number of lines changes."""
        width = max(1, self.size.width - 2) if self.size.width else 80
        lines = min(3, max(1, -(-text.cell_len // width)))
        if lines != self._lines:
            self._lines = lines
            self.styles.height = lines
        self.update(text, layout=False)


class DaemonBanner(Static):
    """A red (stopped) or yellow (stale) banner; hidden while the daemon runs."""

    DEFAULT_CSS = """
    DaemonBanner { height: auto; padding: 0 1; display: none; text-style: bold; }
    DaemonBanner.-stopped { display: block; background: $error; color: $text; }
    DaemonBanner.-stale { display: block; background: $warning; color: $text; }
    """
    _shown: str | None = None

    def show(self, counts: dict[str, int], daemon: dict[str, Any]) -> None:
        text = banner_text(counts, daemon)
        self.set_class(text is not None and daemon["state"] == "stopped", "-stopped")
        self.set_class(text is not None and daemon["state"] != "stopped", "-stale")
        if text is not None and text != self._shown:
            self._shown = text
            self.update(text)


def event_line(event: dict[str, Any], now: float, palette: Any) -> Text:
    """`14:03:27  train-gpt  #2 submitted  attempt 2 submitted to local`."""
    kind = event.get("kind", "?")
    style = {"error": palette.bad, "ended": "bold", "attempt_ended": palette.status.get("restarting", ""),
             "submitted": palette.status.get("pending", ""), "started": palette.good}.get(kind, "")
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(human.timestamp(event.get("at"), now), style="dim")
    text.append("  ")
    text.append(str(event.get("name", event.get("run_id", "?")))[:32], style="bold")
    attempt = event.get("attempt")
    text.append(f"  #{attempt}" if attempt else "")
    text.append(f"  {kind}", style=style)
    text.append(f"  {str(event.get('reason', '')).replace(chr(10), ' ')}")
    return text


class EventsPane(Static):
    """Recent actions: the daemon's events across runs, newest first."""

    DEFAULT_CSS = """
    EventsPane { height: 7; border-top: solid $panel; padding: 0 1; }
    """

    def show(self, events: list[dict[str, Any]], now: float, palette: Any) -> None:
        lines = max(1, self.size.height - 1) if self.size.height else 6
        text = Text("Recent actions (newest first)\n", style="bold")
        if not events:
            text.append("no events yet: the daemon records what it decides here", style="dim")
        for index, event in enumerate(events[:lines]):
            if index:
                text.append("\n")
            text.append_text(event_line(event, now, palette))
        self.update(text, layout=False)  # a fixed height: repaint, no layout
