"""Waiting for runs to end, saying what they do meanwhile, and keeping a daemon alive while someone waits.

`fray wait`, `fray submit --wait` and `--follow` wait through a `Watch`: it
reads each run's row as `fray list` shows it and hands over what is new
(fray.core.waiting decides what is news and how the wait ends). `fray logs
-f` (fray.ops.logs.Follower) keeps the daemon alive through the same
DaemonKeeper: a person watching a run must not watch it stall because the
daemon stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from fray.core import waiting
from fray.core.model import Phase
from fray.daemon import lease
from fray.errors import CorruptFileError
from fray.state import store
from fray.state.layout import Home
from fray.state.row_cache import stat_key

POLL_SEC = 0.2
DAEMON_CHECK_SEC = 5.0
# Waiting for a few runs, their meta.json files are looked at this often between two reads of their rows: the
# daemon replaces a run's meta.json whenever it records a change, so an end is told at once, not up to POLL_SEC
# later (`fray submit --wait` of a short script); waiting for more, the rows are read every POLL_SEC only.
QUICK_SEC = 0.01
QUICK_RUNS = 16
# Once nothing was told for QUIET_AFTER_SEC (a run that trains for hours), the wait reads the rows every
# QUIET_POLL_SEC and looks at meta.json every QUIET_QUICK_SEC: an end is told 0.1 s late at most, and the
# wait costs 0.2% of a core instead of 2.7% (the 10 ms looks alone), which a job on the same node would feel
# (tests/bench/bench_nanogpt.py); each change brings the quick pace back.
QUIET_AFTER_SEC = 2.0
QUIET_POLL_SEC = 1.0
QUIET_QUICK_SEC = 0.1


class DaemonKeeper:
    """Restarts the daemon if it stops while someone waits on a run (any fray command may)."""

    def __init__(self, home: Home, every: float = DAEMON_CHECK_SEC) -> None:
        self.home = home
        self.every = every
        self._next = time.monotonic() + every

    def tick(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every
        health, _ = lease.current_health(self.home)
        if health.state == "stopped":
            lease.ensure_running(self.home)


class Watch:
    """The rows of the runs waited on, and what is new in them at each `step`.

    `on_news(line)` gets `pending: <reason>`-style lines (fray.core.waiting);
    with several runs, `on_count(line)` gets `3/10 ended: ...` whenever one more
    has ended. A run whose folder the daemon has not written yet (a new sweep's
    point) waits as pending.
    """

    def __init__(self, home: Home, run_ids: Sequence[str], on_news: Callable[[str], None],
                 on_count: Callable[[str], None] | None = None, names: dict[str, str] | None = None) -> None:
        self.home = home
        self.run_ids = list(dict.fromkeys(run_ids))
        self.on_news = on_news
        self.on_count = on_count
        self.names = names or {}
        self.rows: dict[str, dict[str, Any]] = {}
        self._told: dict[str, tuple[Any, ...]] = {}
        self.since: dict[str, float] = {}  # run id -> when what was last told of it began (its row last changed)
        self.started = time.time()
        self.last_count = ""  # the count line last told
        self._ended = -1
        self.keeper = DaemonKeeper(home)

    def step(self) -> int | None:
        """Read every run not yet ended, tell what is new; the wait's exit code once it is decided."""
        from fray.ops import views  # the row read model; only a waiting command needs it

        now = time.time()
        for run_id in self.run_ids:
            if run_id in self.rows and waiting.has_ended(self.rows[run_id]):
                continue
            if self.home.run(run_id).meta.exists():
                row = views.run_row(self.home, run_id, now)
            else:
                row = {"run_id": run_id, "name": self.names.get(run_id, run_id), "status": "pending",
                       "phase": Phase.QUEUED.value, "attempt": None, "reason": "waiting for the daemon to write it"}
            self.rows[run_id] = row
            key = waiting.news_key(row)
            if self._told.get(run_id) != key:
                self._told[run_id] = key
                self.since[run_id] = now
                self.on_news(waiting.news_line(row, len(self.run_ids) > 1))
        ended = sum(1 for row in self.rows.values() if waiting.has_ended(row))
        if self.on_count is not None and len(self.run_ids) > 1 and ended != self._ended:
            self._ended = ended
            self.last_count = waiting.count_line(self.rows.values())
            self.on_count(self.last_count)
        return waiting.exit_code(self.rows.values())

    def live(self, now: float | None = None) -> str:
        """The line a terminal shows meanwhile (fray.core.waiting.live_line)."""
        return waiting.live_line(self.rows.values(), self.since, time.time() if now is None else now, self.started)

    def run(self, poll: float = POLL_SEC, on_tick: Callable[[], None] | None = None) -> int:
        """Step until the wait is decided; the daemon is kept alive meanwhile. `on_tick` is called after each
        step that did not decide it (a terminal's live line is redrawn there)."""
        while True:
            code = self.step()
            if code is not None:
                return code
            if on_tick is not None:
                on_tick()
            self.keeper.tick()
            if time.time() - max(self.since.values(), default=self.started) > QUIET_AFTER_SEC:
                self._pause(max(poll, QUIET_POLL_SEC), QUIET_QUICK_SEC)
            else:
                self._pause(poll, QUICK_SEC)

    def _pause(self, poll: float, quick: float) -> None:
        """Sleep `poll` seconds, or less: until a waited run's meta.json is replaced (looked at every `quick`
        seconds, for QUICK_RUNS runs at most)."""
        going = [run_id for run_id in self.run_ids
                 if not (run_id in self.rows and waiting.has_ended(self.rows[run_id]))]
        if len(going) > QUICK_RUNS:
            time.sleep(poll)
            return
        files = [self.home.meta_file(run_id) for run_id in going]
        before = [stat_key(path) for path in files]
        deadline = time.monotonic() + poll
        while time.monotonic() < deadline:
            time.sleep(quick)
            if [stat_key(path) for path in files] != before:
                return


def ended_record(home: Home, run_id: str, patience: float = 2.0) -> dict[str, Any] | None:
    """ended.json, which the daemon writes just after it marks the run ended in meta.json."""
    deadline = time.monotonic() + patience
    while True:
        try:
            record = store.read_json(home.run(run_id).ended, "ended")
        except CorruptFileError:
            return None
        if record is not None or time.monotonic() >= deadline:
            return record
        time.sleep(QUICK_SEC)  # it comes a moment after meta.json: `submit --wait` of a short script waits on it


def group_members(home: Home, group: str) -> tuple[str, dict[str, str]]:
    """A group's id and its runs (run id -> name), a new sweep's points included (`fray wait --group`)."""
    from fray.ops import views

    data = views.list_view(home, group=group, fold=False)
    return data["group"], {row["run_id"]: row["name"] for row in data["runs"]}


def wait_view(watch: Watch, code: int) -> dict[str, Any]:
    """How a wait ended (schemas/cli-wait.json): its exit code, the count, each run's last row."""
    rows = [watch.rows[run_id] for run_id in watch.run_ids]
    return {"exit_code": code, "summary": waiting.count_line(rows),
            "runs": [{"run_id": row["run_id"], "name": row["name"], "status": row["status"],
                      "reason": row["reason"], "attempt": row.get("attempt"), "ended": waiting.has_ended(row)}
                     for row in rows]}
