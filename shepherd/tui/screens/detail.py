"""One run in full: what `fray status` shows, plus its curves, probes, pending runtime commands and the script.

Sections: the run's status and facts (mode, resources, heartbeat policy,
failures, progress, goodput, requests), the reported metric by step and by
wall time (fray.tui.widgets.curves; `m` picks the next metric), attempts with their causes, the failure records,
the preflight probe results, runtime commands not yet acknowledged, recent
events, and the frozen script (`#SBATCH` lines green, `#FRAY` purple). Data is
fray.ops.detail.detail_view, re-read whenever a refresh says this run changed.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from fray.ops import curves, detail, human
from fray.ops.live import Snapshot
from fray.tui.screens.screen import FrayScreen, RunActions
from fray.tui.widgets.curves import CurvesPanel
from fray.tui.widgets.script_view import script_text
from fray.tui.widgets.key_footer import KeyFooter


class DetailScreen(RunActions, FrayScreen):
    BINDINGS = [
        Binding("r", "restart", "Restart"),
        Binding("s", "stop", "Stop"),
        Binding("p", "pause", "Pause"),
        Binding("t", "logs", "Logs"),
        Binding("b", "blacklist", "Ban node"),
        Binding("e", "edit_config", "Edit config"),
        Binding("m", "next_metric", "Metric"),
        Binding("backspace", "back", "Back"),
        Binding("j,down", "scroll(1)", show=False),
        Binding("k,up", "scroll(-1)", show=False),
    ]
    DEFAULT_CSS = """
    DetailScreen #title { height: auto; padding: 0 1; background: $panel; }
    DetailScreen VerticalScroll { height: 1fr; padding: 0 1; }
    DetailScreen .section { margin-top: 1; height: auto; }
    """

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.data: dict[str, Any] | None = None
        self.metric: str | None = None  # the curves' metric; None: loss, else the first reported
        self.curves: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Static(self.run_id, id="title")
        with VerticalScroll(id="body"):
            yield Static("", id="facts", classes="section")
            yield CurvesPanel(id="curves", classes="section")
            yield Static("", id="attempts", classes="section")
            yield Static("", id="failures", classes="section")
            yield Static("", id="probes", classes="section")
            yield Static("", id="commands", classes="section")
            yield Static("", id="events", classes="section")
            yield Static("", id="script", classes="section")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.reload()
        self.query_one("#body").focus()

    def show_run(self, run_id: str) -> None:
        """Show `run_id` on this screen, built for another run (the app keeps one run screen: fray.tui.app)."""
        self.run_id, self.data, self.metric, self.curves = run_id, None, None, None
        if not self.is_mounted:
            return  # on_mount loads it
        self.query_one("#title", Static).update(run_id)
        for section in self.query(".section").results(Static):
            section.update("")  # nothing of the other run stays, even when this one cannot be read
        self.reload()
        body = self.query_one("#body", VerticalScroll)
        body.scroll_home(animate=False)
        body.focus()

    def current_row(self) -> dict[str, Any] | None:
        return self.data["run"] if self.data else None

    def focus_runs(self) -> set[str] | None:
        return {self.run_id}

    def action_back(self) -> None:
        self.app.action_back()  # type: ignore[attr-defined]

    def action_scroll(self, lines: int) -> None:
        body = self.query_one("#body", VerticalScroll)
        body.scroll_to(y=body.scroll_y + lines, animate=False)

    def action_next_metric(self) -> None:
        chosen = curves.next_metric(self.curves)
        if chosen is None:
            self.notify("no metric reported yet")
            return
        self.metric = chosen
        self._show_curves()

    def _show_curves(self) -> None:
        try:
            self.curves = curves.curves_view(self.fray.home, self.run_id, self.metric)
        except OSError as exc:
            self.query_one("#curves", CurvesPanel).display = False
            self.notify(f"cannot read the progress history: {exc}", severity="error")
            return
        panel = self.query_one("#curves", CurvesPanel)
        panel.display = True  # hidden after a failed read, on this run or the one shown before
        panel.show(self.curves)

    def on_snapshot(self, snapshot: Snapshot) -> None:
        row = snapshot.rows.get(self.run_id)
        if self.run_id in snapshot.changed or snapshot.full or (row and row.get("phase") not in ("ended", None)):
            self.reload()

    def reload(self) -> None:
        try:
            self.data = detail.detail_view(self.fray.home, self.run_id)
        except OSError as exc:
            self.query_one("#facts", Static).update(Text(f"cannot read run {self.run_id}: {exc}", style="bold red"))
            return
        self._show()
        self._show_curves()

    # -- rendering ----------------------------------------------------------------------

    def _show(self) -> None:
        data = self.data
        assert data is not None
        palette = self.fray.palette
        now = time.time()
        row = data["run"]
        title = Text()
        title.append(f"{row['icon']} {row['status']}", style=palette.status.get(row["status"], ""))
        title.append(f"  {row['name']}", style="bold")
        title.append(f"  ({row['run_id']})", style="dim")
        if row.get("paused") and row.get("phase") != "ended":
            title.append("  paused", style="bold")
        self.query_one("#title", Static).update(title)
        self.query_one("#facts", Static).update(self._facts(data, now))
        self.query_one("#attempts", Static).update(self._attempts(data, now))
        self.query_one("#failures", Static).update(self._failures(data))
        self.query_one("#probes", Static).update(self._probes(data))
        self.query_one("#commands", Static).update(self._commands(data, now))
        self.query_one("#events", Static).update(self._events(data, now))
        script = data["script"] or {}
        heading = Text(f"Script ({script.get('source', '?')}, frozen as {script.get('frozen', '?')})", style="bold")
        self.query_one("#script", Static).update(Group(heading, script_text(data.get("script_text"), palette)))

    def _facts(self, data: dict[str, Any], now: float) -> Any:
        row, spec = data["run"], data["spec"]
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row("reason", row["reason"])
        if spec is None:
            corrupt = ", ".join(data["corrupt_files"]) or "none"
            table.add_row("files moved aside", corrupt)
            table.add_row("run dir", data["dir"])
            return table
        counters = data["counters"]
        if data["wait_reason"] and row["phase"] != "ended":
            table.add_row("waiting", data["wait_reason"])
        if data["next_attempt_at"]:
            table.add_row("next attempt", human.timestamp(data["next_attempt_at"], now))
        if detail.after_summary(spec):
            table.add_row("after", detail.after_summary(spec))
        table.add_row("mode", detail.mode_summary(spec))
        table.add_row("resources", detail.resources_summary(spec))
        if spec.get("sbatch"):
            table.add_row("#SBATCH", " ".join(spec["sbatch"]))
        table.add_row("heartbeat", f"every {human.duration(spec['heartbeat_interval_sec'])}, restart after "
                                   f"{human.duration(spec['heartbeat_timeout_sec'])} without one")
        table.add_row("failures", detail.failures_summary(counters, data.get("budgets")))
        for key, value in detail.hang_summaries(data["attempts"]):
            table.add_row(key, value)
        if data["progress"]:
            table.add_row("progress", detail.progress_summary(data["progress"], now))
        if data.get("goodput") and data["goodput"]["goodput"] is not None:
            table.add_row("goodput", detail.goodput_summary(data["goodput"]))
        requested = detail.control_summary(data["control"])
        if requested:
            table.add_row("requested", requested)
        overrides = data["control"].get("overrides") or {}
        if overrides:
            table.add_row("changed", ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())))
        table.add_row("submitted", detail.submitted_summary(row["created_at"], data["submitted_by"], now))
        if data["end"]:
            table.add_row("ended", f"{human.timestamp(data['end']['at'], now)}: {data['end']['reason']}")
        table.add_row("run dir", data["dir"])
        if data["corrupt_files"]:
            table.add_row(Text("corrupt", style="bold red"), "\n".join(data["corrupt_files"]))
        return table

    def _attempts(self, data: dict[str, Any], now: float) -> Any:
        palette = self.fray.palette
        if not data["attempts"]:
            return Text("Attempts: none yet", style="bold")
        table = Table(title="Attempts", title_justify="left", title_style="bold", expand=True, box=None,
                      header_style="bold", pad_edge=False)
        for name, justify in (("#", "right"), ("STATE", "left"), ("NODE", "left"), ("WHERE", "left"),
                              ("STARTED", "left"), ("TOOK", "right"), ("EXIT", "right"), ("CAUSE", "left"),
                              ("DETAIL", "left")):
            table.add_column(name, justify=justify, overflow="fold" if name == "DETAIL" else "ellipsis",
                             no_wrap=name != "DETAIL", ratio=1 if name == "DETAIL" else None)
        for attempt in data["attempts"]:
            started = attempt["started_at"]
            took = detail.attempt_took(attempt, now)
            cause = attempt["cause"]
            style = {"neutral": "", "good": palette.good, "bad": palette.bad}[detail.cause_kind(cause)]
            table.add_row(str(attempt["number"]), attempt["state"], attempt["node"] or "-",
                          attempt.get("partition") or attempt["backend"],
                          human.timestamp(started or attempt["submitted_at"], now), human.duration(took),
                          human.number(attempt["exit_code"]), Text(cause or "-", style=style),
                          (attempt["detail"] or "").replace("\n", " "))
        return table

    def _failures(self, data: dict[str, Any]) -> Any:
        failed = [a for a in data["attempts"] if a.get("failure")]
        if not failed:
            return Text("Failure records: none", style="bold")
        parts: list[Any] = [Text(f"Failure records ({len(failed)})", style="bold")]
        for attempt in reversed(failed[-5:]):
            failure = attempt["failure"]
            text = Text()
            task = f", task {attempt['failed_task']}" if attempt.get("failed_task") is not None else ""
            text.append(f"attempt {attempt['number']}{task}: exit {failure['exit_code']} ({failure['cause']}) on "
                        f"{failure['host']}: ", style=self.fray.palette.bad)
            text.append(failure["message"])
            for line in (failure.get("stderr_tail") or [])[-8:]:
                text.append(f"\n    {line}", style="dim")
            parts.append(text)
        return Group(*parts)

    def _probes(self, data: dict[str, Any]) -> Any:
        probes = data.get("probes") or []
        if not probes:
            return Text("Probe results: none recorded", style="bold")
        palette = self.fray.palette
        parts: list[Any] = [Text("Probe results", style="bold")]
        for record in probes[-3:]:
            head = Text(f"attempt {record['attempt']} on {record['host']}: ")
            head.append("passed" if record["ok"] else "FAILED", style=palette.good if record["ok"] else palette.bad)
            parts.append(head)
            for probe in record["probes"]:
                status = probe["status"]
                style = palette.good if status == "passed" else "dim" if status == "skipped" else palette.bad
                line = Text("  ")
                line.append(f"{status:<8}", style=style)
                line.append(f" {probe['name']:<12} {probe['seconds']:.1f}s  {probe.get('detail', '')}")
                parts.append(line)
        return Group(*parts)

    def _commands(self, data: dict[str, Any], now: float) -> Any:
        commands = data.get("commands")
        if not commands:
            return Text("Runtime commands: none pending", style="bold")
        waiting = commands.get("unacknowledged") or []
        head = Text(f"Runtime commands: {len(waiting)} pending, {commands.get('acknowledged', 0)} acknowledged",
                    style="bold")
        parts: list[Any] = [head]
        for command in waiting:
            delivered = "delivered" if command.get("delivered_at") else "not delivered yet"
            payload = ", ".join(f"{k}={v}" for k, v in (command.get("payload") or {}).items())
            parts.append(Text(f"  {command['type']} {payload} ({command['id']}, {human.age(command['issued_at'], now)}, "
                              f"{delivered})"))
        return Group(*parts)

    def _events(self, data: dict[str, Any], now: float) -> Any:
        events = data["events"]
        if not events:
            return Text("Events: none yet", style="bold")
        parts: list[Any] = [Text(f"Events (newest first, {len(events)})", style="bold")]
        for event in reversed(events[-15:]):
            line = Text("  ")
            line.append(human.timestamp(event["at"], now), style="dim")
            attempt = event.get("attempt")
            line.append(f"  {event['kind']}" + (f" #{attempt}" if attempt else ""), style="bold")
            line.append(f"  {event['reason']}")
            parts.append(line)
        return Group(*parts)
