"""New run (`n`): choose a script, see what its directives ask for, confirm, submit.

The script is picked from a tree of the directory fray was started in, or typed
as a path. Choosing it shows what `fray submit` would do (name, mode, backend,
resources) or the directive error with its line, before anything is written.
Submit creates the run as `fray submit` does (runs.create_run) and makes sure
the daemon runs; the screen closes with the new run's id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DirectoryTree, Input, Label, Static

from fray.errors import FrayError
from fray.ops import submit as submitting
from fray.tui import actions

SCRIPT_SUFFIXES = frozenset({".py", ".sh", ".bash", ".zsh", ".jl", ".r", ".R", ""})


class ScriptTree(DirectoryTree):
    """Folders and files that look like scripts; hidden entries left out."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".") and (p.is_dir() or p.suffix in SCRIPT_SUFFIXES)]


class NewRunScreen(ModalScreen["str | None"]):
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Submit")]
    DEFAULT_CSS = """
    NewRunScreen { align: center middle; }
    NewRunScreen > Vertical { width: 100; max-width: 100%; height: 90%; border: thick $primary;
        background: $surface; padding: 0 1; }
    NewRunScreen .title { text-style: bold; }
    NewRunScreen ScriptTree { height: 1fr; min-height: 3; }
    NewRunScreen #preview { height: auto; max-height: 6; }
    NewRunScreen #preview.-error { color: $error; text-style: bold; }
    NewRunScreen Horizontal { height: auto; align-horizontal: right; }
    NewRunScreen Button { margin-left: 1; }
    """

    def __init__(self, start: Path | None = None) -> None:
        super().__init__()
        self.start = start or Path.cwd()
        self.ready = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("New run: choose a script (its #FRAY lines say how it runs)", classes="title")
            yield ScriptTree(str(self.start), id="tree")
            yield Label("Script")
            yield Input(placeholder="path/to/train.py (Enter checks it)", id="script")
            yield Label("Arguments for the script (optional)")
            yield Input(placeholder="--lr 3e-4", id="args")
            yield Static("", id="preview")
            with Horizontal():
                yield Button("Submit (ctrl+s)", variant="primary", id="submit", disabled=True)
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#script", Input).focus()

    def on_directory_tree_file_selected(self, event: DirectoryTree.FileSelected) -> None:
        self.query_one("#script", Input).value = str(event.path)
        self.check()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "script":
            self.check()
        elif event.input.id == "args" and self.ready:
            self.action_submit()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "script":
            self.ready = False
            self.query_one("#submit", Button).disabled = True

    def script_path(self) -> Path:
        text = self.query_one("#script", Input).value.strip()
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.start / path

    def check(self) -> bool:
        """Show what submitting would do; enable Submit when the script and its directives are good."""
        preview = self.query_one("#preview", Static)
        if not self.query_one("#script", Input).value.strip():
            preview.update("choose a script in the tree or type its path")
            preview.add_class("-error")
            return False
        summary, error = submitting.preview(self.script_path(), self.query_one("#args", Input).value)
        self.ready = error is None
        preview.set_class(not self.ready, "-error")
        preview.update(error or summary + "\nSubmit to create the run (ctrl+s).")
        self.query_one("#submit", Button).disabled = not self.ready
        return self.ready

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        if not self.ready and not self.check():
            return
        app = self.app
        try:
            outcome = actions.submit(app.home, self.script_path(), self.query_one("#args", Input).value)  # type: ignore[attr-defined]
        except FrayError as exc:
            preview = self.query_one("#preview", Static)
            preview.add_class("-error")
            preview.update(str(exc))
            return
        app.notify(outcome.message, timeout=6)
        app.intent_written(True)  # type: ignore[attr-defined]
        self.dismiss(outcome.run_id)
