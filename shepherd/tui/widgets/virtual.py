"""Setting a scroll view's virtual size without laying the whole screen out again."""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView


def set_virtual_size(widget: ScrollView, size: Size) -> None:
    """Set a scroll view's virtual size, laying the screen out again only when its scrollbars
    appear or go (otherwise a filter keystroke or a new log line would re-lay the whole screen)."""
    if size == widget.virtual_size:
        return
    width, height = widget.container_size
    old = widget.virtual_size
    same_bars = (size.height > height) == (old.height > height) and (size.width > width) == (old.width > width)
    if widget.is_mounted and height and same_bars:
        widget.set_reactive(ScrollView.virtual_size, size)
        widget._scroll_update(size)  # Textual's own no-layout path (Widget._size_updated)
        widget.refresh()
    else:
        widget.virtual_size = size
