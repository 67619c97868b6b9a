"""Small modal screens: confirm a destructive action, ban a node, the help page."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{ width: 76; max-width: 100%; height: auto; max-height: 100%; border: thick $primary;
    background: $surface; padding: 0 1; }}
{name} .title {{ text-style: bold; margin-bottom: 1; }}
{name} .error {{ color: $error; text-style: bold; }}
{name} Horizontal {{ height: auto; align-horizontal: right; margin-top: 1; }}
{name} Button {{ margin-left: 1; min-width: 12; }}
{name} Input {{ margin-bottom: 0; }}
"""


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; `y` confirms, `n` or Esc cancels."""

    DEFAULT_CSS = DIALOG_CSS.format(name="ConfirmScreen")
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, classes="title", id="question")
            with Horizontal():
                yield Button(f"{self.yes} (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class BanScreen(ModalScreen["tuple[str, str, str] | None"]):
    """Node, TTL and reason of a ban; returns them, or None when cancelled."""

    DEFAULT_CSS = DIALOG_CSS.format(name="BanScreen")
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, node: str = "", ttl: str = "1d", reason: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.node, self.ttl, self.reason = node, ttl, reason

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, classes="title")
            yield Label("Node")
            yield Input(self.node, placeholder="gpu-node-7", id="node")
            yield Label("For how long (like 6h, 3d, or never)")
            yield Input(self.ttl, placeholder="1d", id="ttl")
            yield Label("Reason")
            yield Input(self.reason, placeholder="ECC errors", id="reason")
            yield Static("", classes="error", id="error")
            with Horizontal():
                yield Button("Ban", variant="error", id="ban")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#node" if not self.node else "#ttl", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_input_submitted(self, _: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ban":
            self._submit()
        else:
            self.dismiss(None)

    def _submit(self) -> None:
        from fray.errors import FrayError
        from fray.ops import nodes

        node = self.query_one("#node", Input).value.strip()
        ttl = self.query_one("#ttl", Input).value.strip()
        try:
            nodes.node_name(node)
            nodes.parse_ttl(ttl)
        except FrayError as exc:
            self.query_one("#error", Static).update(str(exc))
            return
        self.dismiss((node, ttl, self.query_one("#reason", Input).value))


HELP = """\
[b]Everywhere[/b]
  q  quit            ?  this help        R  refresh now       /  search or filter
  Esc  back          1  runs             2  queue             3  nodes

[b]Runs (dashboard)[/b]
  j/k ↓/↑  move      g/G  top/bottom     Ctrl+u/Ctrl+d  page up/down
  Enter  details     t  logs             n  new run           o/O  sort by / reverse
  r  restart (start an ended run)        s  stop              p  pause/unpause
  b  blacklist the run's node            Esc  clear the filter
  c  curves (a sweep's row: its runs overlaid, m: next metric)

[b]Run details[/b]
  r/s/p  as above    t  logs             b  blacklist node    e  edit config
  m  next metric of the curves
  Backspace/Esc  back

[b]Logs[/b]
  space  follow on/off                   o/e  stdout/stderr   [ ]  previous/next attempt
  /  search          n/N  next/previous match                 g/G  top/bottom

[b]Nodes[/b]
  b  ban a node      u  unban the selected node

Stop, restart, pause, start and ban ask first: y confirms, n or Esc cancels.
Changes are written as `fray control` writes them; the daemon acts on them.
Over several clusters (--remote a,b, remotes = [...]): Enter, t, r, s, p and b on
a run of another cluster act there, as `fray ... --remote HOST` would.
"""


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = DIALOG_CSS.format(name="HelpScreen") + "HelpScreen > Vertical { width: 84; }"
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("fray dashboard: keys", classes="title")
            with VerticalScroll():
                yield Static(HELP, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
