"""A log viewer: a virtual list of lines with follow mode, search highlighting and a position readout.

Lines are kept as plain text (the workload's own escape sequences are shown
as text, never interpreted) and rendered only when on screen, so a long log
scrolls as fast as a short one. In follow mode new lines keep the view at the
bottom; scrolling up leaves follow mode, as in `less +F`.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from fray.tui.widgets.virtual import set_virtual_size

MAX_LINES = 100_000  # older lines are dropped past this many
CONTROL = {i: "?" for i in range(32) if i != 9}


class LogView(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("j,down", "scroll_lines(1)", "Down", show=False),
        Binding("k,up", "scroll_lines(-1)", "Up", show=False),
        Binding("g,home", "top", "Top", show=False),
        Binding("G,end", "bottom", "Bottom", show=False),
        Binding("ctrl+d,pagedown", "page(1)", "Page down", show=False),
        Binding("ctrl+u,pageup", "page(-1)", "Page up", show=False),
        Binding("left,h", "pan(-8)", "Left", show=False),
        Binding("right,l", "pan(8)", "Right", show=False),
    ]
    DEFAULT_CSS = "LogView { height: 1fr; scrollbar-size-vertical: 1; scrollbar-size-horizontal: 1; }"

    class Moved(Message):
        """The view scrolled, or lines came: the readout and follow state need a repaint."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[str] = []
        self.follow = True
        self.search = ""
        self.matches: list[int] = []
        self.match_index = -1
        self.match_style = Style(reverse=True)
        self.current_style = Style(bold=True, reverse=True)
        self._longest = 0

    # -- content ----------------------------------------------------------------------

    def set_lines(self, lines: list[str]) -> None:
        self.lines = [self._clean(line) for line in lines[-MAX_LINES:]]
        self._longest = max((len(line) for line in self.lines), default=0)
        self._find()
        self._resize()
        self.refresh()
        self._to_end_if_following()

    def append(self, lines: list[str]) -> None:
        if not lines:
            return
        clean = [self._clean(line) for line in lines]
        start = len(self.lines)
        self.lines.extend(clean)
        self._longest = max(self._longest, max(len(line) for line in clean))
        dropped = len(self.lines) - MAX_LINES
        if dropped > 0:
            del self.lines[:dropped]
            self._find()
            self.refresh()
        elif self.search:
            needle = self.search.lower()
            self.matches.extend(i for i in range(start, len(self.lines)) if needle in self.lines[i].lower())
        self._resize()
        self.refresh()
        self._to_end_if_following()

    def _to_end_if_following(self) -> None:
        """Follow mode keeps the last line in view: scroll once the new size is laid out."""
        def to_end() -> None:
            if self.follow:
                self.scroll_end(animate=False, immediate=True)
            self.post_message(self.Moved())

        self.call_after_refresh(to_end)

    @staticmethod
    def _clean(line: str) -> str:
        return line.expandtabs(4).translate(CONTROL)

    def _resize(self) -> None:
        set_virtual_size(self, Size(self._longest, len(self.lines)))

    # -- search -----------------------------------------------------------------------

    def set_search(self, text: str) -> int:
        """Highlight `text` (case-insensitive) and go to its last occurrence; returns how many lines have it."""
        self.search = text
        self._find()
        if self.matches:
            self.match_index = len(self.matches) - 1
            self._show_match()
        self.refresh()
        self.post_message(self.Moved())
        return len(self.matches)

    def _find(self) -> None:
        if not self.search:
            self.matches, self.match_index = [], -1
            return
        needle = self.search.lower()
        self.matches = [i for i, line in enumerate(self.lines) if needle in line.lower()]
        self.match_index = min(self.match_index, len(self.matches) - 1)

    def next_match(self, step: int) -> None:
        if not self.matches:
            return
        self.match_index = (self.match_index + step) % len(self.matches)
        self._show_match()
        self.refresh()

    def _show_match(self) -> None:
        self.follow = False
        line = self.matches[self.match_index]
        self.scroll_to(y=max(0, line - self.size.height // 2), animate=False, immediate=True)
        self.post_message(self.Moved())

    # -- moving -----------------------------------------------------------------------

    def set_follow(self, on: bool) -> None:
        self.follow = on
        self._to_end_if_following()

    def action_scroll_lines(self, count: int) -> None:
        self.follow = False if count < 0 else self.follow
        self.scroll_to(y=self.scroll_offset.y + count, animate=False, immediate=True)
        self.post_message(self.Moved())

    def action_page(self, direction: int) -> None:
        self.action_scroll_lines(direction * max(1, self.size.height - 1))

    def action_pan(self, columns: int) -> None:
        self.scroll_to(x=max(0, self.scroll_offset.x + columns), animate=False, immediate=True)

    def action_top(self) -> None:
        self.follow = False
        self.scroll_home(animate=False, immediate=True)
        self.post_message(self.Moved())

    def action_bottom(self) -> None:
        self.scroll_end(animate=False, immediate=True)
        self.post_message(self.Moved())

    def on_mouse_scroll_up(self, _: events.MouseScrollUp) -> None:
        self.follow = False
        self.post_message(self.Moved())

    def on_resize(self, _: events.Resize) -> None:
        self._resize()
        self._to_end_if_following()

    def position(self) -> tuple[int, int, int]:
        """(lines above the view, lines below it, total)."""
        top = int(self.scroll_offset.y)
        height = max(1, self.size.height)
        total = len(self.lines)
        return top, max(0, total - top - height), total

    # -- rendering --------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        x, top = int(self.scroll_offset.x), int(self.scroll_offset.y)
        index = top + y
        base = self._base_style()
        if index >= len(self.lines):
            return Strip.blank(width, base)
        line = self.lines[index][x:x + width]
        segments: list[Segment] = []
        if self.search and index in self._match_set():
            current = self.matches[self.match_index] == index if self.match_index >= 0 else False
            style = base + (self.current_style if current else self.match_style)
            needle, lowered, position = self.search.lower(), line.lower(), 0
            while True:
                found = lowered.find(needle, position)
                if found < 0:
                    break
                segments.append(Segment(line[position:found], base))
                segments.append(Segment(line[found:found + len(needle)], style))
                position = found + len(needle)
            segments.append(Segment(line[position:], base))
        else:
            segments.append(Segment(line, base))
        used = min(len(line), width)
        if used < width:
            segments.append(Segment(" " * (width - used), base))
        return Strip(segments, width).crop(0, width)

    def _base_style(self) -> Style:
        key = (self.has_focus, self.app.theme)
        if getattr(self, "_base_for", None) != key:
            self._base_for, self._base = key, self.rich_style
        return self._base

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base_for = None

    def _match_set(self) -> set[int]:
        cached = getattr(self, "_match_cache", None)
        if cached is None or cached[0] is not self.matches or cached[1] != len(self.matches):
            cached = (self.matches, len(self.matches), set(self.matches))
            self._match_cache = cached
        return cached[2]
