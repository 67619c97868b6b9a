"""The screens' footer: Textual's Footer, rebuilt only when the keys it shows change.

Textual's Footer rebuilds itself (a widget per key, each styled anew) whenever
its screen signals that bindings changed, which it does on every screen switch
and every focus change, even when the keys shown stay the same. Reopening the
run screen (fray.tui.app keeps one) was mostly that rebuild; this footer keeps
its keys while they would come out the same.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


def shown_keys(screen: Screen) -> tuple[Any, ...]:
    """What the footer's keys are made of: each active binding it shows, whether enabled, and its tooltip."""
    return tuple((key, binding.key, binding.key_display, binding.description, binding.action, binding.group,
                  enabled, tooltip)
                 for key, (_, binding, enabled, tooltip) in screen.active_bindings.items() if binding.show)


class KeyFooter(Footer):
    _composed: tuple[Any, ...] | None = None  # shown_keys when the keys were last built

    def compose(self):  # type: ignore[no-untyped-def]
        if self._bindings_ready:
            self._composed = shown_keys(self.screen)
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if self._composed is not None and screen is self.screen and shown_keys(screen) == self._composed:
            return  # the same keys: nothing to rebuild
        super().bindings_changed(screen)
