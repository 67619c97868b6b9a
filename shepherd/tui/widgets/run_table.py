"""The runs table: a virtual, line-rendered view of thousands of rows that updates in place.

Only the lines on screen are rendered, so 10,000 runs cost what 40 do. A
refresh hands in the rows that changed (`apply`); the table re-sorts and
re-filters its index (a list of run ids), keeps the cursor on the same run, and
repaints only the lines whose content changed, so nothing flickers. Which
columns fit and how cells read is columns.py; `/` types a filter into the
table itself (see `on_key`).
"""

from __future__ import annotations

from typing import Any, Callable

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from fray.tui.widgets.columns import CLUSTER, COLUMNS, GAP, SORTS, Column, Row, cells_of, fit, layout, sort_key
from fray.tui.widgets.virtual import set_virtual_size


class RunTable(ScrollView, can_focus=True):
    """Every run, one per line, sorted and filtered, with a cursor that follows its run."""

    BINDINGS = [
        Binding("j,down", "cursor_down", "Down", show=False),
        Binding("k,up", "cursor_up", "Up", show=False),
        Binding("g,home", "top", "Top", show=False),
        Binding("G,end", "bottom", "Bottom", show=False),
        Binding("ctrl+d,pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+u,pageup", "page_up", "Page up", show=False),
        Binding("enter", "select", "Details"),
        Binding("o", "cycle_sort", "Sort", show=False),
        Binding("O", "reverse_sort", "Reverse", show=False),
    ]
    DEFAULT_CSS = """
    RunTable { height: 1fr; overflow-x: hidden; scrollbar-size-vertical: 1; }
    RunTable > .run-table--header { text-style: bold; }
    RunTable > .run-table--cursor { background: $primary 40%; }
    RunTable:focus > .run-table--cursor { background: $primary 70%; }
    """
    COMPONENT_CLASSES = {"run-table--header", "run-table--cursor"}

    class Highlighted(Message):
        def __init__(self, run_id: str | None) -> None:
            super().__init__()
            self.run_id = run_id

    class Selected(Message):
        def __init__(self, run_id: str) -> None:
            super().__init__()
            self.run_id = run_id

    class FilterChanged(Message):
        """The filter text changed, or typing it began (`typing`) or ended."""

        def __init__(self, text: str, typing: bool) -> None:
            super().__init__()
            self.text = text
            self.typing = typing

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: dict[str, Row] = {}
        self.order: list[str] = []  # the run ids shown, in order
        self._index: dict[str, int] = {}
        self._cells: dict[str, dict[str, str]] = {}  # formatted when first drawn
        self._haystack: dict[str, str] = {}
        self._keys: dict[str, Any] = {}  # run id -> sort key under the current sort
        self._matched: set[str] = set()  # the run ids that pass the current filter
        self._sorted: list[str] | None = None  # every run id in the current sort order
        self._words: list[str] = []
        self._filter_memo: dict[tuple[str, ...], set[str]] = {}  # recent filters' matches, while no row changes
        self._key_of = sort_key("created")
        self.cursor = 0
        self.cursor_id: str | None = None
        self.sort_by = "created"
        self.sort_reverse = True  # newest first, as `fray list`
        self.filter_text = ""
        self.typing_filter = False  # `/` was pressed: printable keys edit the filter until Enter or Esc
        # Called at once (same frame as the table's repaint) when the filter changes; else a FilterChanged message.
        self.filter_listener: Callable[[str, bool], None] | None = None
        self._name_width = 12
        self._node_width = 8
        self.columns = COLUMNS  # with CLUSTER first when the dashboard spans clusters (show_clusters)
        self._layout: list[tuple[Column, int]] = []
        self._layout_for: tuple[int, int, int] = (-1, -1, -1)
        self.palette: dict[str, str] = {}
        self._style_cache: dict[Any, tuple[Style, Style, Style]] = {}
        self._parsed: dict[str, Style] = {}

    # -- data -------------------------------------------------------------------------

    def apply(self, rows: dict[str, Row], changed: set[str], removed: set[str]) -> None:
        """Take a refresh: update the changed rows in place and repaint only what moved or changed.

        The order (filter + sort) is rebuilt only when rows came or went, or a changed row's
        sort key or filter match changed; cells are formatted when drawn, so a refresh that
        touches 1,000 rows costs dictionary updates, not formatting.
        """
        resort = bool(removed)
        refilter = False
        if changed or removed:
            self._filter_memo.clear()  # rows changed: what a filter matched may have too
        for run_id in removed:
            self.rows.pop(run_id, None)
            self._cells.pop(run_id, None)
            self._haystack.pop(run_id, None)
            self._keys.pop(run_id, None)
            self._matched.discard(run_id)
        key = self._key_of
        words = self._words
        for run_id in changed:
            row = rows.get(run_id)
            if row is None:
                continue
            self.rows[run_id] = row
            self._cells.pop(run_id, None)
            self._haystack.pop(run_id, None)
            new_key = key(row)
            if self._keys.get(run_id) != new_key:
                self._keys[run_id] = new_key
                resort = True
            if words:
                match = self._matches(run_id, words)
                if match != (run_id in self._matched):
                    (self._matched.add if match else self._matched.discard)(run_id)
                    refilter = True
            if len(row["name"]) > self._name_width and row.get("phase") is not None:  # unreadable: the id
                self._name_width = len(row["name"])
            if len(row.get("node") or "") > self._node_width:
                self._node_width = len(row["node"])
        if resort:
            self._sorted = None
        if resort or refilter:
            self._rebuild()
            self.refresh()
            return
        top = int(self.scroll_offset.y)
        for position in range(top, min(len(self.order), top + max(0, self.size.height - 1))):
            if self.order[position] in changed:
                self.refresh_line(position + 1)

    def set_filter(self, text: str) -> None:
        """Narrow the rows to those with every word of `text`; typing more searches only what matched."""
        self.filter_text = text
        words = text.lower().split()
        if words != self._words:
            old = self._words
            narrower = bool(old) and len(words) >= len(old) and all(o in w for o, w in zip(old, words))
            remembered = self._filter_memo.get(tuple(words))
            if remembered is not None:  # erasing back to a filter typed a moment ago
                matched = remembered
            else:
                hays = self._haystacks()
                pool = {run_id: hays[run_id] for run_id in self._matched} if narrower else hays
                for word in words:
                    pool = {run_id: hay for run_id, hay in pool.items() if word in hay}
                matched = set(pool) if words else set()
                if words:
                    if len(self._filter_memo) >= 32:
                        self._filter_memo.clear()
                    self._filter_memo[tuple(words)] = matched
            self._words, self._matched = words, matched
        self._rebuild()
        self.refresh()

    def sort(self, by: str, reverse: bool | None = None) -> None:
        if by not in SORTS:
            raise ValueError(f"cannot sort by {by!r}; one of {', '.join(SORTS)}")
        if reverse is None:
            reverse = not self.sort_reverse if by == self.sort_by else by in ("created", "uptime", "heartbeat", "step")
        self.sort_by, self.sort_reverse = by, reverse
        self._key_of = sort_key(by)
        self._keys = {run_id: self._key_of(row) for run_id, row in self.rows.items()}
        self._sorted = None
        self._rebuild()
        self.refresh()

    def show_clusters(self) -> None:
        """A CLUSTER column first: the rows come from several clusters."""
        self.columns = (CLUSTER, *COLUMNS)
        self._layout_for = (-1, -1, -1)
        self.refresh()

    def _hay(self, run_id: str) -> str:
        """The lower-cased text a filter searches: id, name, status, node, mode, where, reason, cluster."""
        hay = self._haystack.get(run_id)
        if hay is None:
            row = self.rows[run_id]
            hay = " ".join(str(v) for v in (run_id, row.get("cluster") or "", row["name"], row["status"], row.get("node"), row.get("mode"),
                                            row.get("where") or row.get("backend"), row.get("reason"),
                                            "paused" if row.get("paused") else "")).lower()
            self._haystack[run_id] = hay
        return hay

    def _haystacks(self) -> dict[str, str]:
        """Every row's filter text (built once, then only for rows that changed)."""
        if len(self._haystack) != len(self.rows):
            for run_id in self.rows:
                if run_id not in self._haystack:
                    self._hay(run_id)
        return self._haystack

    def _matches(self, run_id: str, words: list[str]) -> bool:
        hay = self._hay(run_id)
        return all(word in hay for word in words)

    def _rebuild(self) -> None:
        """The order shown: every row sorted (kept until a sort key changes), then filtered."""
        if self._sorted is None:
            self._sorted = sorted(self.rows, key=self._keys.__getitem__, reverse=self.sort_reverse)
        if self._words:
            matched = self._matched
            ids = [run_id for run_id in self._sorted if run_id in matched]
        else:
            ids = self._sorted
        self.order = ids
        self._index = {run_id: i for i, run_id in enumerate(ids)}
        set_virtual_size(self, Size(self.size.width, len(ids) + 1))
        if self.cursor_id in self._index:
            self.cursor = self._index[self.cursor_id]
        else:
            self.cursor = max(0, min(self.cursor, len(ids) - 1))
            self._set_cursor_id()

    def _cells_of(self, run_id: str) -> dict[str, str]:
        cells = self._cells.get(run_id)
        if cells is None:
            cells = self._cells[run_id] = cells_of(self.rows[run_id])
        return cells

    def _set_cursor_id(self) -> None:
        new = self.order[self.cursor] if self.order else None
        if new != self.cursor_id:
            self.cursor_id = new
            self.post_message(self.Highlighted(new))

    @property
    def selected(self) -> Row | None:
        return self.rows.get(self.cursor_id) if self.cursor_id else None

    def visible_ids(self) -> set[str]:
        """The runs on screen now."""
        top = int(self.scroll_offset.y)
        return set(self.order[top:top + max(1, self.size.height - 1)])

    def visible_lines(self) -> list[str]:
        """The text of the header and the rows on screen (what a person reads; tests use it)."""
        height = max(1, self.size.height)
        return [self._plain_line(y) for y in range(height)]

    # -- moving -----------------------------------------------------------------------

    def move_to(self, position: int) -> None:
        if not self.order:
            return
        old = self.cursor
        self.cursor = max(0, min(position, len(self.order) - 1))
        self._set_cursor_id()
        self.refresh_line(old + 1)
        self.refresh_line(self.cursor + 1)
        self._scroll_to_cursor()

    def move_to_run(self, run_id: str) -> bool:
        if run_id not in self._index:
            return False
        self.move_to(self._index[run_id])
        return True

    def _scroll_to_cursor(self) -> None:
        page = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + page:
            self.scroll_to(y=self.cursor - page + 1, animate=False)

    def action_cursor_down(self) -> None:
        self.move_to(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self.move_to(self.cursor - 1)

    def action_top(self) -> None:
        self.move_to(0)

    def action_bottom(self) -> None:
        self.move_to(len(self.order) - 1)

    def action_page_down(self) -> None:
        self.move_to(self.cursor + max(1, self.size.height - 2))

    def action_page_up(self) -> None:
        self.move_to(self.cursor - max(1, self.size.height - 2))

    def action_select(self) -> None:
        if self.cursor_id:
            self.post_message(self.Selected(self.cursor_id))

    def action_cycle_sort(self) -> None:
        self.sort(SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)])

    def action_reverse_sort(self) -> None:
        self.sort(self.sort_by, not self.sort_reverse)

    def start_filter(self) -> None:
        """`/`: keys now edit the filter (it narrows as you type); Enter keeps it, Esc clears it."""
        self.typing_filter = True
        self._filter_changed(self.filter_text, True)

    def on_key(self, event: events.Key) -> None:
        """While typing a filter, keys are text: handled here, before any binding sees them.

        No Input widget: editing a line of text in place repaints the table, while an
        Input would lay the whole screen out again on every keystroke.
        """
        if not self.typing_filter:
            return
        event.stop()
        event.prevent_default()
        text = self.filter_text
        if event.key == "enter":
            self.typing_filter = False
        elif event.key == "escape":
            self.typing_filter, text = False, ""
        elif event.key in ("backspace", "ctrl+h"):
            text = text[:-1]
        elif event.key == "ctrl+u":
            text = ""
        elif event.is_printable and event.character:
            text += event.character
        else:
            return
        if text != self.filter_text:
            self.set_filter(text)
        self._filter_changed(text, self.typing_filter)

    def _filter_changed(self, text: str, typing: bool) -> None:
        if self.filter_listener is not None:
            self.filter_listener(text, typing)
        else:
            self.post_message(self.FilterChanged(text, typing))

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            x = 0
            for column, width in self._columns():
                if x <= event.x < x + width + GAP:
                    key = {"icon": "status", "reason": "status"}.get(column.key, column.key)
                    self.sort(key)
                    return
                x += width + GAP
            return
        position = int(self.scroll_offset.y) + event.y - 1
        if 0 <= position < len(self.order):
            self.move_to(position)
            if event.chain >= 2:
                self.action_select()

    def on_resize(self, _: events.Resize) -> None:
        set_virtual_size(self, Size(self.size.width, len(self.order) + 1))
        self._scroll_to_cursor()

    # -- rendering --------------------------------------------------------------------

    def _columns(self) -> list[tuple[Column, int]]:
        width = self.scrollable_content_region.width
        if self._layout_for != (width, self._name_width, self._node_width):
            self._layout = layout(self.columns, max(20, width), self._name_width, self._node_width)
            self._layout_for = (width, self._name_width, self._node_width)
        return self._layout

    def _header_text(self, column: Column) -> str:
        if column.key == self.sort_by:
            return column.title + ("▼" if self.sort_reverse else "▲")
        return column.title

    def _plain_line(self, y: int) -> str:
        columns = self._columns()
        if y == 0:
            return (" " * GAP).join(fit(self._header_text(c), w, c.align) for c, w in columns).rstrip()
        position = int(self.scroll_offset.y) + y - 1
        if position >= len(self.order):
            return ""
        cells = self._cells_of(self.order[position])
        return (" " * GAP).join(fit(cells[c.key], w, c.align) for c, w in columns).rstrip()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_cache.clear()

    def _styles(self) -> tuple[Style, Style, Style]:
        """(base, header, cursor) styles, computed once per theme and focus state, not per line."""
        key = (self.has_focus, self.app.theme)
        styles = self._style_cache.get(key)
        if styles is None:
            base = self.rich_style
            styles = (base, base + self.get_component_rich_style("run-table--header"),
                      base + self.get_component_rich_style("run-table--cursor"))
            self._style_cache[key] = styles
        return styles

    def _status_style(self, status: str) -> Style:
        style = self._parsed.get(status)
        if style is None:
            style = self._parsed[status] = Style.parse(self.palette.get(status, "")) if self.palette else Style()
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        columns = self._columns()
        base, header, cursor = self._styles()
        if y == 0:
            text = (" " * GAP).join(fit(self._header_text(c), w, c.align) for c, w in columns)
            return Strip([Segment(fit(text, width, "<"), header)], width)
        position = int(self.scroll_offset.y) + y - 1
        if position >= len(self.order):
            return Strip.blank(width, base)
        run_id = self.order[position]
        cells = self._cells_of(run_id)
        line_style = cursor if position == self.cursor else base
        coloured = line_style + self._status_style(self.rows[run_id]["status"])
        segments: list[Segment] = []
        used = 0
        gap = Segment(" " * GAP, line_style)
        for index, (column, w) in enumerate(columns):
            if index:
                segments.append(gap)
                used += GAP
            style = coloured if column.key in ("icon", "status") else line_style
            segments.append(Segment(fit(cells[column.key], w, column.align), style))
            used += w
        if used < width:
            segments.append(Segment(" " * (width - used), line_style))
        return Strip(segments, width).crop(0, width)
