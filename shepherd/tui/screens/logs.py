"""Logs of a run: the tail of any attempt's stdout or stderr, follow mode, search, where you are.

Opens on the latest attempt's stdout, its last lines (the files are read with
fray.ops.logs, as `fray logs` reads them). `o`/`e` switch to stdout/stderr,
`[`/`]` to the previous/next attempt, space turns follow mode on and off: while
following, new lines are appended as they are written and a new attempt is
switched to when it starts (as `fray logs -f` does). `/` searches (n/N step
through the matches). The bar under the log says which file, how many lines
are above and below the view, and whether it follows.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Input, Static

from fray.errors import FrayError
from fray.ops import human, logs as runlogs, lookup
from fray.tui.screens.screen import FrayScreen
from fray.tui.widgets.log_view import LogView

TAIL_LINES = 5000
POLL_SEC = 0.25


class LogsScreen(FrayScreen):
    BINDINGS = [
        Binding("space", "toggle_follow", "Follow"),
        Binding("o", "stream('stdout')", "stdout"),
        Binding("e", "stream('stderr')", "stderr"),
        Binding("left_square_bracket", "attempt(-1)", "Prev attempt"),
        Binding("right_square_bracket", "attempt(1)", "Next attempt"),
        Binding("slash", "search", "Search"),
        Binding("n", "next_match(1)", "Next match"),
        Binding("N", "next_match(-1)", "Prev match", show=False),
        Binding("backspace", "back", "Back", show=False),
        Binding("escape", "escape", "Back", show=False),
    ]
    DEFAULT_CSS = """
    LogsScreen #where { height: 1; padding: 0 1; background: $panel; }
    LogsScreen #position { height: 1; padding: 0 1; background: $panel; }
    LogsScreen #search { display: none; height: 3; }
    LogsScreen #search.-open { display: block; }
    """

    def __init__(self, run_id: str, stream: str = "stdout", attempt: int | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.stream = stream
        self.attempt = attempt
        self.attempts = 0
        self.name_of_run = run_id
        self._follower: runlogs.Follower | None = None
        self._note = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="where")
        yield Input(placeholder="search (Enter: go to the last match; n/N: next/previous)", id="search")
        yield LogView(id="log")
        yield Static("", id="position")
        yield Footer()

    def on_mount(self) -> None:
        from rich.style import Style

        palette = self.fray.palette
        self.log_view.match_style = Style.parse(palette.match)
        self.log_view.current_style = Style.parse(palette.current_match)
        self.load()
        self.query_one("#log").focus()
        self.set_interval(POLL_SEC, self.poll, name="logs-follow")

    @property
    def log_view(self) -> LogView:
        return self.query_one("#log", LogView)

    # -- reading ------------------------------------------------------------------------

    def load(self) -> None:
        """(Re)open the chosen attempt and stream, from its last TAIL_LINES lines."""
        home = self.fray.home
        try:
            meta = lookup.read_meta(home, self.run_id)
        except FrayError as exc:
            self._follower = None
            self._note = str(exc)
            self.log_view.set_lines([])
            self._status()
            return
        self.name_of_run = meta.name
        self.attempts = len(meta.attempts)
        if self.attempt is None or self.attempt > self.attempts:
            self.attempt = self.attempts or None
        if self.attempt is None:
            self._follower = runlogs.Follower(home, self.run_id, (self.stream,))
            self._note = f"no attempt yet ({meta.wait_reason or meta.phase}); lines appear when it starts"
            self.log_view.set_lines([])
            self._status()
            return
        path = runlogs.log_path(home, self.run_id, self.attempt, self.stream)
        lines, tail = runlogs.tail_now(path, TAIL_LINES)
        self._follower = runlogs.Follower(home, self.run_id, (self.stream,), start_attempt=self.attempt,
                                          tails={self.stream: tail})
        self._note = "" if path.exists() else "(the file does not exist yet)"
        self.log_view.set_lines(lines)
        self._status()

    def poll(self) -> None:
        """Follow: new lines of the open file, and the next attempt once it starts (as `fray logs -f`)."""
        if not self.log_view.follow or self._follower is None:
            return
        new: list[str] = []

        def on_attempt(number: int, node: str | None) -> None:
            self.attempt = number
            new.append(human.separator(number, node))

        try:
            self._follower.step(on_attempt, lambda item: new.append(item.line))
        except FrayError:
            return
        if self._follower.meta is not None:
            self.attempts = len(self._follower.meta.attempts)
        if new:
            self.log_view.append(new)
        self._status()

    # -- keys ---------------------------------------------------------------------------

    def action_toggle_follow(self) -> None:
        self.log_view.set_follow(not self.log_view.follow)
        if self.log_view.follow:
            self.poll()
        self._status()

    def action_stream(self, stream: str) -> None:
        if stream != self.stream:
            self.stream = stream
            self.load()

    def action_attempt(self, step: int) -> None:
        if not self.attempts:
            return
        target = max(1, min(self.attempts, (self.attempt or self.attempts) + step))
        if target != self.attempt:
            self.attempt = target
            self.log_view.follow = target == self.attempts and self.log_view.follow
            self.load()

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("-open")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        count = self.log_view.set_search(event.value)
        event.input.remove_class("-open")  # the term stays in the readout below; n/N step through it
        if event.value and not count:
            self.notify(f"no line has {event.value!r}", severity="warning")
        self.log_view.focus()
        self._status()

    def action_next_match(self, step: int) -> None:
        self.log_view.next_match(step)
        self._status()

    def action_back(self) -> None:
        self.app.action_back()  # type: ignore[attr-defined]

    def action_escape(self) -> None:
        box = self.query_one("#search", Input)
        if box.has_class("-open") and box.has_focus:
            box.remove_class("-open")
            self.log_view.focus()
        else:
            self.action_back()

    def on_log_view_moved(self, _: LogView.Moved) -> None:
        self._status()

    def _status(self) -> None:
        view = self.log_view
        where = Text()
        where.append(f"{self.name_of_run}", style="bold")
        attempt = f"attempt {self.attempt} of {self.attempts}" if self.attempt else "no attempt yet"
        where.append(f"  {attempt}  ")
        where.append(self.stream, style="bold reverse" if self.stream == "stderr" else "bold")
        if self.attempt:
            where.append(f"  {runlogs.log_path(self.fray.home, self.run_id, self.attempt, self.stream)}", style="dim")
        self.query_one("#where", Static).update(where)
        above, below, total = view.position()
        position = Text()
        position.append("FOLLOWING" if view.follow else "paused (space follows)",
                        style="bold reverse" if view.follow else "bold")
        position.append(f"  {'↑ ' + format(above, ',') + ' above' if above else 'top'}")
        position.append(f"  {'↓ ' + format(below, ',') + ' below' if below else 'bottom'}")
        position.append(f"  {total:,} lines")
        if view.search:
            found = len(view.matches)
            current = view.match_index + 1 if view.matches else 0
            position.append(f"  search {view.search!r}: {current}/{found}")
        if self._note:
            position.append(f"  {self._note}", style="dim")
        self.query_one("#position", Static).update(position)
