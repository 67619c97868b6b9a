"""A DataTable that also moves with the dashboard's keys (j/k, g/G, Ctrl+u/Ctrl+d), and whose
columns widen on screen as soon as an updated cell needs it."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.binding import Binding
from textual.widgets import DataTable


class KeyTable(DataTable[Any]):
    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
        Binding("ctrl+d", "page_down", "Page down", show=False),
        Binding("ctrl+u", "page_up", "Page up", show=False),
    ]

    async def _on_idle(self, event: events.Idle) -> None:
        """DataTable measures updated cells when idle, but keeps lines it drew before at the old
        widths (its line caches are keyed on its update count): drop them when a width changed."""
        before = [column.content_width for column in self.columns.values()]
        await super()._on_idle(event)
        if [column.content_width for column in self.columns.values()] != before:
            self._update_count += 1
            self.refresh()
