"""`FrayApp`: the screens, the global keys, and keeping what is shown current.

Live data: a watchfiles thread (data.Watcher) reports which runs changed and
the app scans just those (data.RunsModel, in a worker thread so the screen
never waits on the disk); a one-second timer re-reads the live runs'
heartbeats and progress (written by compute nodes, unseen by inotify over
NFS), recomputes the time-dependent columns (uptime, heartbeat age, status
thresholds), and falls back to full scans (every 2 s without a watcher, every
30 s with one, and at most once per ten durations of the last full scan), so
a missed event costs seconds, not correctness. Each scan is handed to every screen in the stack
(`on_snapshot`); the dashboard updates the rows that changed, in place. A scan
that fails (a permission problem, a bug) is reported on screen and retried; it
never ends the app.

Other clusters (`clusters`: `fray tui --remote a,b`, `--remote all`, the user
config's `remotes`): every REMOTE_SCAN_SEC, and on R, the hosts are asked for
their runs (fray.ops.remote_runs, in a worker thread, in parallel, each within
the per-host timeout) and each screen gets them (`on_remote`); a host that is
down is one row saying so, and never holds up this machine's rows.

Writing intent: the screens call fray.tui.actions (fray.ops, as the CLI commands do)
and then `intent_written`, which makes sure a daemon serves FRAY_HOME
(fray.ops.daemon.ensure_running, in a thread: it may wait for the daemon's first cycle)
and refreshes at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from textual.app import App
from textual.binding import Binding
from textual.theme import Theme

from fray.errors import FrayError
from fray.ops import remote_runs
from fray.ops.daemon import ensure_running
from fray.ops.live import Hint, RunsModel, Snapshot, Watcher
from fray.state.layout import Home
from fray.tui import theme as themes

FULL_SCAN_WITH_WATCHER_SEC = 30.0
FULL_SCAN_WITHOUT_WATCHER_SEC = 2.0
FULL_SCAN_SHARE = 10  # a full scan runs at most every 10x its own duration
SCREENS = ("runs", "queue", "nodes")
FIRST_PAINT_ROWS = 200  # read before every other run: more than a terminal shows
REMOTE_SCAN_SEC = 5.0


class FrayApp(App):
    TITLE = "fray"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("R", "refresh", "Refresh", show=False),
        Binding("slash", "search", "Search", show=False),
        Binding("escape", "back", "Back", show=False),
        Binding("1", "show('runs')", "Runs", show=False),
        Binding("2", "show('queue')", "Queue", show=False),
        Binding("3", "show('nodes')", "Nodes", show=False),
    ]
    CSS = """
    Screen { background: $background; }
    Toast { max-width: 80; }
    """
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, home: Home, *, start: str = "runs", run_id: str | None = None, theme_name: str | None = None,
                 watch: bool = True, tick: float | None = 1.0,
                 ensure_daemon: Callable[[Home], Any] | None = ensure_running,
                 clusters: list[str] | None = None) -> None:
        super().__init__()
        self.home = home
        self.start = start
        self.start_run = run_id
        self.requested_theme = theme_name
        self.use_watcher = watch
        self.tick = tick
        self.ensure_daemon = ensure_daemon
        self.model = RunsModel(home)
        self.snapshot: Snapshot | None = None
        self.watcher: Watcher | None = None
        self.palette = themes.PALETTES["dark"]
        self.theme_choice = "dark"
        self.scan_error: str | None = None
        self._pending = Hint()
        self._pending_tick = False
        self._refreshing = False
        self._scan_lock = asyncio.Lock()
        self._last_full = 0.0
        self._full_scan_sec = 0.0
        self.scans_applied = 0
        self.clusters = clusters if clusters and len(clusters) > 1 else None  # `local` first
        self.remote: remote_runs.RemoteRuns | None = None
        self.asking = False  # the hosts are being asked now (request_remotes)
        self._run_screen: Any = None  # the run screen, kept once built (open_details)

    # -- start and stop -------------------------------------------------------------------

    def get_default_screen(self) -> Any:
        from fray.tui.screens.dashboard import DashboardScreen

        return DashboardScreen()

    def on_mount(self) -> None:
        for name, colours in themes.TEXTUAL_THEMES.items():
            self.register_theme(Theme(name=name, **colours))  # type: ignore[arg-type]
        self.theme_choice = themes.choose(self.requested_theme, self.console.color_system)
        self.palette = themes.PALETTES[self.theme_choice]
        self.theme = themes.TEXTUAL_NAMES[self.theme_choice]
        if self.start in ("queue", "nodes"):
            self.action_show(self.start)
        if self.start_run:
            self.open_details(self.start_run)
        if self.use_watcher:
            self._start_watcher()
        if self.tick:
            self.set_interval(self.tick, self._on_tick, name="fray-tick")
        self.request_refresh(None)
        if self.clusters:
            if self.tick:
                self.set_interval(REMOTE_SCAN_SEC, self.request_remotes, name="fray-remotes")
            self.request_remotes()

    def on_unmount(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()

    def _start_watcher(self) -> None:
        if self.watcher is None:
            self.watcher = Watcher(self.home, lambda hint: self.call_from_thread(self.request_refresh, hint))
        self.watcher.start()

    # -- refreshing -----------------------------------------------------------------------

    def _on_tick(self) -> None:
        now = time.monotonic()
        watching = self.watcher is not None and self.watcher.alive
        if self.use_watcher and not watching:
            self._start_watcher()  # FRAY_HOME may exist now
        every = FULL_SCAN_WITH_WATCHER_SEC if watching else FULL_SCAN_WITHOUT_WATCHER_SEC
        every = max(every, FULL_SCAN_SHARE * self._full_scan_sec)  # thousands of runs: at most 10% of a CPU
        focus = getattr(self.screen, "focus_runs", lambda: None)()
        self.request_refresh(None if now - self._last_full >= every else Hint(beats=True, focus=focus), tick=True)

    def request_refresh(self, hint: Hint | None, tick: bool = False) -> None:
        """Scan soon: `hint` None means everything; scans never overlap, requests in between merge."""
        if hint is None:
            self._pending.full = True
        else:
            self._pending.merge(hint)
        self._pending_tick = self._pending_tick or tick
        if not self._refreshing:
            self._refreshing = True
            self.run_worker(self._refresh_loop(), group="refresh", exit_on_error=False)

    async def _refresh_loop(self) -> None:
        try:
            while self._pending or self._pending_tick:
                hint, self._pending, self._pending_tick = self._pending, Hint(), False
                await self._scan(hint)
        finally:
            self._refreshing = False

    async def refresh_now(self, full: bool = True, runs: set[str] | None = None) -> Snapshot | None:
        """Scan and apply right away: everything (R), or what a timer tick reads plus `runs` (tests)."""
        focus = None if full else getattr(self.screen, "focus_runs", lambda: None)()
        return await self._scan(Hint(full=full, runs=set(runs or ()), beats=not full, focus=focus))

    async def _scan(self, hint: Hint) -> Snapshot | None:
        async with self._scan_lock:
            full = hint.full or self.snapshot is None
            try:
                if self.snapshot is None:  # first paint: the newest screenful now, every run a moment later
                    self._apply(await asyncio.to_thread(self.model.scan, time.time(), None, FIRST_PAINT_ROWS))
                snapshot = await asyncio.to_thread(self.model.scan, time.time(), None if full else hint)
            except Exception as exc:  # never let a bad file or a bug end the app: show it, retry next tick
                message = f"could not read {self.home.root}: {type(exc).__name__}: {exc}"
                if message != self.scan_error:
                    self.notify(message, severity="error", timeout=10)
                self.scan_error = message
                return None
            self.scan_error = None
            if full:
                self._last_full = time.monotonic()
                self._full_scan_sec = snapshot.scan_ms / 1000
            self._apply(snapshot)
            return snapshot

    def _apply(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        for screen in list(self.screen_stack):
            handler = getattr(screen, "on_snapshot", None)
            if handler is None:
                continue
            try:
                handler(snapshot)
            except Exception as exc:  # a screen that cannot show this state must not take the app down
                self.notify(f"{type(screen).__name__}: {type(exc).__name__}: {exc}", severity="error")
        self.scans_applied += 1

    def request_remotes(self) -> None:
        """Ask the other clusters for their runs soon (one asking at a time)."""
        if self.clusters and not self.asking:
            self.asking = True
            self.run_worker(self.refresh_remotes(), group="remotes", exit_on_error=False)

    async def refresh_remotes(self) -> remote_runs.RemoteRuns:
        """Ask the other clusters now and hand their rows to every screen (tests await this)."""
        hosts = [c for c in self.clusters or () if c != remote_runs.LOCAL]
        try:
            remote = await asyncio.to_thread(remote_runs.ask, hosts)
        except Exception as exc:  # a bug or a bad config must not end the app: every host is one row saying so
            remote = remote_runs.RemoteRuns({remote_runs.key_of(h, ""): remote_runs.down_row(h, str(exc))
                                             for h in hosts})
        finally:
            self.asking = False
        self.remote = remote
        for screen in list(self.screen_stack):
            handler = getattr(screen, "on_remote", None)
            if handler is not None:
                handler(remote)
        return remote

    def intent_written(self, daemon: bool = True) -> None:
        """After a screen wrote intent: make sure a daemon acts on it, and show the change now."""
        if daemon and self.ensure_daemon is not None:
            self.run_worker(self._ensure_daemon, thread=True, group="daemon", exit_on_error=False)
        self.request_refresh(None)

    def _ensure_daemon(self) -> None:
        try:
            self.ensure_daemon(self.home)  # type: ignore[misc]
        except FrayError as exc:
            self.call_from_thread(self.notify, f"the request is recorded, but {exc}", severity="error", timeout=10)

    # -- global keys ----------------------------------------------------------------------

    def action_help(self) -> None:
        from fray.tui.screens.dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_refresh(self) -> None:
        snapshot = await self.refresh_now(full=True)
        self.request_remotes()
        if snapshot is not None:
            self.notify(f"refreshed {len(snapshot.rows):,} runs in {snapshot.scan_ms:.0f} ms", timeout=2)

    def action_back(self) -> None:
        if len(self.screen_stack) > 1:
            self.pop_screen()

    def action_show(self, name: str) -> None:
        """Go to the runs, queue or nodes screen (from anywhere)."""
        from fray.tui.screens.nodes import NodesScreen
        from fray.tui.screens.queue import QueueScreen

        while len(self.screen_stack) > 1:
            self.pop_screen()
        if name == "queue":
            self.push_screen(QueueScreen())
        elif name == "nodes":
            self.push_screen(NodesScreen())

    def open_details(self, run_id: str, cluster: str | None = None) -> None:
        """The run's screen (screens open it through the app, which imports them: no cycle); a run of
        another cluster: its screen as that cluster tells it."""
        if cluster is not None and cluster != remote_runs.LOCAL:
            from fray.tui.screens.remote_run import RemoteDetailScreen

            self.push_screen(RemoteDetailScreen(cluster, run_id))
            return
        from fray.tui.screens.detail import DetailScreen

        # One run screen, built once and kept (installed) while closed: building and styling its widgets is
        # most of the time from Enter to the screen, so a second run's screen only shows that run's data.
        screen = self._run_screen
        if screen is None:
            screen = self._run_screen = DetailScreen(run_id)
            self.install_screen(screen, "run")
        elif screen in self.screen_stack:  # already open under this one (details, logs, then Enter again)
            screen = DetailScreen(run_id)
        else:
            screen.show_run(run_id)
        self.push_screen(screen)

    def open_logs(self, run_id: str, cluster: str | None = None) -> None:
        """The run's logs screen; a run of another cluster: the tail its cluster gives."""
        if cluster is not None and cluster != remote_runs.LOCAL:
            from fray.tui.screens.remote_run import RemoteLogsScreen

            self.push_screen(RemoteLogsScreen(cluster, run_id))
            return
        from fray.tui.screens.logs import LogsScreen

        self.push_screen(LogsScreen(run_id))

    def action_search(self) -> None:
        handler = getattr(self.screen, "action_search", None)
        if handler is not None:
            handler()
