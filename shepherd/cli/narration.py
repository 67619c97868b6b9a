"""A wait's narration on stderr: each change once, as a line of its own, and on a terminal one live line below
them, rewritten in place (what it waits for, for how long, what comes next).

    narrator = Narrator.for_stderr()
    narrator.told("pending: waiting for train")     # a change: a line of its own, kept
    narrator.live("○ pending for 25s: ... · next: ...")  # rewritten in place; nothing when stderr is no terminal
    narrator.done()                                 # the live line cleared before the answer is printed

Piped or redirected, only the changes are written, one line each: a log of a
wait reads the same as its terminal's scrollback. The live line is cut to the
terminal's width, so it never wraps (a wrapped line cannot be rewritten).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

REDRAW_SEC = 1.0  # the live line's elapsed time moves by the second
_CLEAR = "\r\x1b[2K"


class Narrator:
    def __init__(self, stream: TextIO, terminal: bool) -> None:
        self.stream = stream
        self.terminal = terminal
        self._shown = ""  # the live line on screen now
        self._drawn_at = 0.0

    @classmethod
    def for_stderr(cls) -> "Narrator":
        try:
            terminal = sys.stderr.isatty()
        except (AttributeError, ValueError):
            terminal = False
        return cls(sys.stderr, terminal)

    def told(self, line: str) -> None:
        """A change: its own line, kept (the live line is drawn again below it)."""
        shown = self._shown
        self._write((_CLEAR if shown else "") + line + "\n")
        self._shown = ""
        if shown:
            self._draw(shown)

    def live(self, line: str) -> None:
        """The live line, rewritten when it says something new or a second has passed."""
        if not self.terminal:
            return
        now = time.monotonic()
        if line != self._shown or now - self._drawn_at >= REDRAW_SEC:
            self._draw(line)

    def done(self) -> None:
        """Clear the live line: what follows (the answer on stdout) starts on a clean line."""
        if self._shown:
            self._write(_CLEAR)
            self._shown = ""

    def _draw(self, line: str) -> None:
        import shutil

        width = shutil.get_terminal_size((100, 24)).columns
        fitted = line if len(line) < width else line[: max(1, width - 2)] + "…"
        self._write(_CLEAR + fitted)
        self._shown = line
        self._drawn_at = time.monotonic()

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal: the wait goes on, unseen
