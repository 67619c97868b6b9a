"""Edit config (`e`): the settings a live run may change, validated before anything is written.

One field per safe #FRAY option (policy.SAFE_OVERRIDES: retries, keep-alive,
heartbeat and grace timeouts, backoff, progress stall), showing the value in
force. Values are read as the directives read them (`10m`, `3`, `true`); a bad
value is named under its field, and the whole spec is checked again as
`fray control config-set` checks it (fray.ops.settings) before control.json
is written.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from fray.errors import FrayError
from fray.ops import settings as live_settings
from fray.tui import actions


def _id(field: str) -> str:
    return f"field-{field}"


class ConfigScreen(ModalScreen[bool]):
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "save", "Save")]
    DEFAULT_CSS = """
    ConfigScreen { align: center middle; }
    ConfigScreen > Vertical { width: 100; max-width: 100%; height: 90%; border: thick $primary;
        background: $surface; padding: 0 1; }
    ConfigScreen .title { text-style: bold; }
    ConfigScreen VerticalScroll { height: 1fr; }
    ConfigScreen .help { color: $text-muted; }
    ConfigScreen .field-error { color: $error; text-style: bold; height: auto; }
    ConfigScreen #error { color: $error; text-style: bold; height: auto; }
    ConfigScreen Horizontal { height: auto; align-horizontal: right; }
    ConfigScreen Button { margin-left: 1; }
    """

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.fields: list[live_settings.Setting] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Edit the live settings of {self.run_id}", classes="title", id="title")
            with VerticalScroll(id="form"):
                pass
            yield Static("", id="error")
            with Horizontal():
                yield Button("Save (ctrl+s)", variant="primary", id="save")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        try:
            self.fields = live_settings.current(self.app.home, self.run_id)  # type: ignore[attr-defined]
        except FrayError as exc:
            self.query_one("#error", Static).update(str(exc))
            return
        form = self.query_one("#form", VerticalScroll)
        for setting in self.fields:
            name = setting.flag.lstrip("-")
            form.mount(Label(f"{name}  ", classes="name"))
            form.mount(Static(setting.help, classes="help"))
            form.mount(Input(setting.text, placeholder="true or false" if setting.is_flag else "unset",
                             id=_id(setting.field)))
            form.mount(Static("", classes="field-error", id=f"error-{setting.field}"))
        if self.fields:
            self.call_after_refresh(lambda: self.query_one(f"#{_id(self.fields[0].field)}", Input).focus())

    def texts(self) -> dict[str, str]:
        return {s.field: self.query_one(f"#{_id(s.field)}", Input).value for s in self.fields}

    def action_save(self) -> None:
        settings, errors = live_settings.parse_changes(self.fields, self.texts())
        for setting in self.fields:
            self.query_one(f"#error-{setting.field}", Static).update(errors.get(setting.field, ""))
        message = self.query_one("#error", Static)
        if errors:
            message.update(f"{len(errors)} value{'s' if len(errors) > 1 else ''} cannot be read; nothing was saved")
            return
        if not settings:
            self.app.notify("nothing changed")
            self.dismiss(False)
            return
        try:
            outcome = actions.set_config(self.app.home, self.run_id, settings)  # type: ignore[attr-defined]
        except FrayError as exc:
            message.update(str(exc))
            return
        self.app.notify(outcome.message, timeout=6)
        self.app.intent_written(True)  # type: ignore[attr-defined]
        self.dismiss(True)

    def on_input_submitted(self, _: Input.Submitted) -> None:
        self.action_save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        else:
            self.dismiss(False)

    def action_cancel(self) -> None:
        self.dismiss(False)
