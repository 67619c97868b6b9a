"""What every screen shares: taking a refresh, the actions on a run (r, s, p, t, b, e),
and the `/` filter box of the list screens.

The run actions write intent through fray.tui.actions (fray.ops, as the CLI
does), ask first when they are destructive, then have the app make sure a
daemon serves FRAY_HOME and refresh at once, so the change shows without waiting.
On a run of another cluster (its row's `cluster`) they run on that cluster's
host instead (fray.ops.remote_runs, in a worker thread), as `fray control OP
RUN --remote HOST` would.

Screens never import the app (fray.tui.app imports them): what they use of it
is the `Dashboard` protocol, and they open the run and logs screens through it
(`open_details`, `open_logs`), so the import graph has no cycle.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, cast

from textual.screen import Screen
from textual.widgets import Input

from fray.errors import FrayError
from fray.ops import remote_runs
from fray.ops.live import Snapshot
from fray.state.layout import Home
from fray.tui import actions
from fray.tui.theme import Palette


class Dashboard(Protocol):
    """What screens use of the app (fray.tui.app.FrayApp)."""

    home: Home
    palette: Palette
    snapshot: Snapshot | None

    def intent_written(self, daemon: bool = True) -> None: ...

    def open_details(self, run_id: str, cluster: str | None = None) -> None: ...

    def open_logs(self, run_id: str, cluster: str | None = None) -> None: ...

    def request_remotes(self) -> None: ...

    def run_worker(self, work: Any, **options: Any) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def notify(self, message: str, *, severity: str = "information", timeout: float | None = None) -> None: ...

    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...

    def action_back(self) -> None: ...


class FrayScreen(Screen):
    """A full screen of the dashboard app."""

    @property
    def fray(self) -> Dashboard:
        return cast(Dashboard, self.app)

    def on_snapshot(self, snapshot: Snapshot) -> None:
        """A refresh arrived (the app calls this on every screen in the stack)."""

    def focus_runs(self) -> set[str] | None:
        """The runs this screen shows, whose time-dependent columns each tick must bring up to date
        (None: every run)."""
        return None

    def action_search(self) -> None:
        self.notify("search works on the runs, queue, nodes and logs screens", severity="warning")


class FilterBox:
    """A list screen's `/` filter: the Input #filter over the table #TABLE_ID; `refilter` redraws it."""

    TABLE_ID: str
    filter_text: str

    def refilter(self) -> None:
        raise NotImplementedError

    def action_search(self) -> None:
        box = self.query_one("#filter", Input)  # type: ignore[attr-defined]
        box.add_class("-open")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.refilter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.remove_class("-open")
        self.query_one(f"#{self.TABLE_ID}").focus()  # type: ignore[attr-defined]

    def action_escape(self) -> None:
        """Esc clears and closes an open filter first; only then goes back."""
        box = self.query_one("#filter", Input)  # type: ignore[attr-defined]
        if box.value or box.has_class("-open"):
            box.value = ""
            box.remove_class("-open")
            self.query_one(f"#{self.TABLE_ID}").focus()  # type: ignore[attr-defined]
        else:
            self.action_back()

    def action_back(self) -> None:
        self.app.action_back()  # type: ignore[attr-defined]


def elsewhere(row: dict[str, Any]) -> str | None:
    """The cluster that holds the row's run, when it is not this machine."""
    cluster = row.get("cluster")
    return cluster if cluster not in (None, remote_runs.LOCAL) else None


class RunActions:
    """r/s/p/t/b/e on the run a screen shows or has selected (`current_row`)."""

    def current_row(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def _row_or_warn(self) -> dict[str, Any] | None:
        row = self.current_row()
        if row is None:
            self.notify("no run selected", severity="warning")  # type: ignore[attr-defined]
        elif row.get("kind") == "cluster":
            self.notify(row["reason"], severity="warning")  # type: ignore[attr-defined]
            return None
        elif row.get("kind") == "group":
            self.notify(f"{row['name']} is a sweep of {row['size']} runs: Enter shows them; r, s and p act on "
                        f"all of them", severity="warning")  # type: ignore[attr-defined]
            return None
        return row

    def _do(self, work: Callable[[], actions.Outcome], daemon: bool = True) -> None:
        """Write the intent now; report the outcome; then (as the CLI) make sure a daemon serves it; refresh."""
        app: Dashboard = self.app  # type: ignore[attr-defined]
        try:
            outcome = work()
        except FrayError as exc:
            app.notify(str(exc), severity="error", timeout=8)
            return
        app.notify(outcome.message, timeout=6)
        app.intent_written(daemon)

    def _do_there(self, cluster: str, work: Callable[[], str]) -> None:
        """Run `work` (an action on `cluster`'s host) in a thread; report it; ask the clusters again."""
        app: Dashboard = self.app  # type: ignore[attr-defined]

        def there() -> None:
            try:
                message, severity = work(), "information"
            except FrayError as exc:
                message, severity = str(exc), "error"
            app.call_from_thread(app.notify, message, severity=severity, timeout=8)
            app.call_from_thread(app.request_remotes)

        app.notify(f"asking {cluster}…", timeout=3)
        app.run_worker(there, thread=True, group="remote-action", exit_on_error=False)

    def _control(self, key: str) -> None:
        selected = self.current_row()
        cluster = elsewhere(selected) if selected is not None and selected.get("kind") != "cluster" else None
        if selected is not None and cluster is not None:
            op = actions.op_for(key, selected)
            self._ask_then_do(op, selected, lambda: remote_runs.control(cluster, selected, op), cluster)
            return
        if selected is not None and selected.get("kind") == "group":
            self._control_group(key, selected)
            return
        row = self._row_or_warn()
        if row is None:
            return
        if row.get("phase") is None:
            self.notify(f"run {row['run_id']} cannot be changed: {row['reason']}", severity="error")  # type: ignore[attr-defined]
            return
        if key == "s" and row.get("phase") == "ended":
            self.notify(f"{row['name']} has already ended ({row['status']}); r starts it again",  # type: ignore[attr-defined]
                        severity="warning")
            return
        op = actions.op_for(key, row)
        home = self.app.home  # type: ignore[attr-defined]
        self._ask_then_do(op, row, lambda: actions.control(home, row["run_id"], op))

    def _control_group(self, key: str, row: dict[str, Any]) -> None:
        """r/s/p on a sweep's row: the same operation for every run of it, as `fray control OP --group`."""
        if key == "s" and row.get("phase") == "ended":
            self.notify(f"every run of {row['name']} has ended; r starts them again",  # type: ignore[attr-defined]
                        severity="warning")
            return
        op = actions.op_for(key, row)
        home = self.app.home  # type: ignore[attr-defined]
        self._ask_then_do(op, row, lambda: actions.control_group(home, row["group"], row["name"], op))

    def _ask_then_do(self, op: str, row: dict[str, Any], run: Callable[[], Any], cluster: str | None = None) -> None:
        """A destructive operation is confirmed first; the others are done at once (on `cluster`, if given)."""
        if op in actions.DESTRUCTIVE:
            question = actions.describe(op, row) + (f" (on {cluster})" if cluster else "")
            self._confirm(question, op.capitalize(), run, cluster=cluster)
        elif cluster:
            self._do_there(cluster, run)
        else:
            self._do(run)

    def _confirm(self, question: str, yes: str, run: Callable[[], Any], daemon: bool = True,
                 cluster: str | None = None) -> None:
        from fray.tui.screens.dialogs import ConfirmScreen

        def answered(ok: bool | None) -> None:
            if ok and cluster:
                self._do_there(cluster, run)
            elif ok:
                self._do(run, daemon)

        self.app.push_screen(ConfirmScreen(question, yes), answered)  # type: ignore[attr-defined]

    def action_restart(self) -> None:
        self._control("r")

    def action_stop(self) -> None:
        self._control("s")

    def action_pause(self) -> None:
        self._control("p")

    def action_logs(self) -> None:
        row = self._row_or_warn()
        if row is not None:
            self.app.open_logs(row["run_id"], elsewhere(row))  # type: ignore[attr-defined]

    def action_details(self) -> None:
        row = self._row_or_warn()
        if row is not None:
            self.app.open_details(row["run_id"], elsewhere(row))  # type: ignore[attr-defined]

    def action_blacklist(self) -> None:
        row = self._row_or_warn()
        if row is None:
            return
        from fray.tui.screens.dialogs import BanScreen

        home = self.app.home  # type: ignore[attr-defined]
        cluster = elsewhere(row)
        try:
            node = (row.get("node") if cluster else actions.node_of(home, row["run_id"])) or ""
        except FrayError:
            node = ""
        title = (f"Blacklist the node of {row['name']}" + (f" ({node})" if node else " (it has run on none yet)") +
                 ": new attempts avoid it; a run on it now restarts elsewhere.")

        def chosen(result: tuple[str, str, str] | None) -> None:
            if result and cluster:
                target, ttl, reason = result
                self._do_there(cluster, lambda: remote_runs.ban(cluster, row, target, ttl, reason))
            elif result:
                target, ttl, reason = result
                self._do(lambda: actions.ban_run_node(home, row["run_id"], target, ttl, reason))

        self.app.push_screen(BanScreen(title, node, actions.DEFAULT_TTL, f"bad for run {row['run_id']}"),  # type: ignore[attr-defined]
                             chosen)

    def action_edit_config(self) -> None:
        row = self._row_or_warn()
        if row is None:
            return
        cluster = elsewhere(row)
        if cluster:
            where = f"`fray control config-set {row['run_id']} KEY=VALUE --remote {cluster}`"
            self.notify(f"{row['name']} runs on {cluster}: change its settings there, with {where}",  # type: ignore[attr-defined]
                        severity="warning")
            return
        from fray.tui.screens.settings import ConfigScreen

        self.app.push_screen(ConfigScreen(row["run_id"]))  # type: ignore[attr-defined]
