"""A run of another cluster: its screen and its logs, as its own cluster tells them.

`RemoteDetailScreen` is the run screen (fray.tui.screens.detail) fed by `fray
status RUN` on the run's host (fray.ops.remote_runs, in a worker thread, so the
dashboard never waits on SSH), read again each time the hosts are asked while
the run is live. Its curves are not drawn here (the history stays on the
host): the panel says how to plot them. `RemoteLogsScreen` shows the tail of
the latest attempt's stdout or stderr there (`o`/`e`, `R` reads again). r, s,
p and b act on that host (fray.tui.screens.screen).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from fray.errors import FrayError
from fray.ops import remote_runs
from fray.ops.live import Snapshot
from fray.tui.screens.screen import FrayScreen
from fray.tui.screens.detail import DetailScreen
from fray.tui.widgets.curves import CurvesPanel


class RemoteDetailScreen(DetailScreen):
    def __init__(self, cluster: str, run_id: str) -> None:
        super().__init__(run_id)
        self.cluster = cluster
        self._reading = False

    def focus_runs(self) -> set[str] | None:
        return set()  # nothing of this machine

    def current_row(self) -> dict[str, Any] | None:
        return {**self.data["run"], "cluster": self.cluster} if self.data else None

    def on_snapshot(self, snapshot: Snapshot) -> None:
        """This machine's runs: not this one."""

    def on_remote(self, remote: remote_runs.RemoteRuns) -> None:
        if self.data is None or self.data["run"].get("phase") != "ended":
            self.reload()

    def reload(self) -> None:
        if self._reading:
            return
        self._reading = True
        if self.data is None:
            self.query_one("#title", Static).update(Text(f"{self.run_id} on {self.cluster}: asking…", style="dim"))
        self.run_worker(self._read, thread=True, group="remote-status", exit_on_error=False)

    def _read(self) -> None:
        try:
            data, error = remote_runs.status(self.cluster, self.run_id), None
        except FrayError as exc:
            data, error = None, str(exc)
        self.app.call_from_thread(self._took, data, error)

    def _took(self, data: dict[str, Any] | None, error: str | None) -> None:
        self._reading = False
        if data is None:
            self.query_one("#facts", Static).update(Text(f"cannot read run {self.run_id}: {error}", style="bold red"))
            return
        data.setdefault("script_text", f"# the frozen script is on {self.cluster}, in {data['dir']}\n")
        self.data = data
        self._show()
        self._show_curves()

    def _facts(self, data: dict[str, Any], now: float) -> Any:
        table = super()._facts(data, now)
        table.add_row("cluster", f"{self.cluster} (the run dir is on that host)")
        return table

    def _show_curves(self) -> None:
        note = (f"the progress history is on {self.cluster}: `fray plot {self.run_id} --remote {self.cluster}` "
                "draws it")
        self.curves = {"metric": None, "metrics": [], "attempts": [], "restarts": [], "checkpoints": [],
                       "not_finite": [], "skipped": 0, "note": note}
        self.query_one("#curves", CurvesPanel).show(self.curves)


class RemoteLogsScreen(FrayScreen):
    BINDINGS = [
        Binding("o", "stream(False)", "stdout"),
        Binding("e", "stream(True)", "stderr"),
        Binding("R", "reload", "Read again"),
        Binding("backspace,escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    RemoteLogsScreen #where { height: auto; padding: 0 1; background: $panel; }
    RemoteLogsScreen VerticalScroll { height: 1fr; padding: 0 1; }
    """

    def __init__(self, cluster: str, run_id: str) -> None:
        super().__init__()
        self.cluster = cluster
        self.run_id = run_id
        self.stderr = False

    def compose(self) -> ComposeResult:
        yield Static(f"{self.run_id} on {self.cluster}: asking…", id="where")
        with VerticalScroll(id="body"):
            yield Static("", id="lines")
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()

    def action_stream(self, stderr: bool) -> None:
        self.stderr = stderr
        self.action_reload()

    def action_reload(self) -> None:
        self.run_worker(self._read, thread=True, group="remote-logs", exclusive=True, exit_on_error=False)

    def _read(self) -> None:
        try:
            data, error = remote_runs.logs(self.cluster, self.run_id, self.stderr), None
        except FrayError as exc:
            data, error = None, str(exc)
        self.app.call_from_thread(self._took, data, error)

    def _took(self, data: dict[str, Any] | None, error: str | None) -> None:
        stream = "stderr" if self.stderr else "stdout"
        if data is None:
            self.query_one("#where", Static).update(Text(f"{self.run_id} on {self.cluster}: {error}", style="bold red"))
            return
        shown = len(data["lines"])
        attempt = f"attempt {data['attempt']}" if data["attempt"] else "no attempt yet"
        self.query_one("#where", Static).update(Text(
            f"{self.run_id} on {self.cluster}, {attempt}, {stream}: the last {shown} lines "
            f"(up to {remote_runs.LOG_LINES}; o/e stdout/stderr, R reads again)", style="bold"))
        self.query_one("#lines", Static).update(Text("\n".join(data["lines"])))
        body = self.query_one("#body", VerticalScroll)
        body.call_after_refresh(body.scroll_end, animate=False)

    def action_back(self) -> None:
        self.app.action_back()  # type: ignore[attr-defined]
