"""What wakes the daemon's loop besides its timer: the file watcher (changes under runs/, a new sweep in groups/),
knowing the watch is on, and the doorbell a command on this host rings (fray.state.doorbell).

Both are optimisations over the poll timer, never a dependency: if the
watcher dies or never reports, the loop falls back to full scans on the timer.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fray.state import doorbell, layout
from fray.state.layout import Home
from fray.wrapper import contract

log = logging.getLogger("fray.daemon")

# Files whose change should wake the daemon at once. meta.json is not among
# them: the daemon writes it itself.
WAKE_NAMES = frozenset({layout.CONTROL, contract.STARTED, contract.EXIT})
WATCH_READY_TIMEOUT_SEC = 10.0
# watchfiles hands over a batch of changes once none came for a step (ms). Each step briefly takes the GIL: with
# 2 ms steps (500 wakes a second) the watcher alone cost an idle daemon 1.2% of a core at 1,000 runs, and 2.2% of
# a core beside a training job that kept both cores of a 2-core node busy (tests/bench/bench_nanogpt.py). A command
# on this host rings the doorbell instead, which wakes the loop at once, so the watcher only carries what the
# bell does not (other hosts' commands, a wrapper's files), 50 ms late at most: watchfiles' own default step.
WATCH_STEP_MS = 50
DEBOUNCE_MS = 100


def await_watch(probe: Path, watching: threading.Event, watcher: threading.Thread,
                wake: threading.Event | None = None) -> None:
    """Return once the watcher reports a file touched in runs/ (or gave up), then set `wake`.

    Setting up the watches takes a moment (one per folder), and a run submitted
    in that moment raises no event: the daemon's cycles are full scans until one
    began after the watch was on, and `wake` starts that one at once. Touching a
    probe file until the watcher reports it makes "the watch is on" an observed
    fact, not a hope.
    """
    deadline = time.monotonic() + WATCH_READY_TIMEOUT_SEC
    try:
        while not watching.is_set() and watcher.is_alive() and time.monotonic() < deadline:
            probe.write_bytes(b"")
            watching.wait(0.05)
    except OSError as exc:
        log.warning("could not probe the file watcher (%s); the timer and full scans cover for it", exc)
    finally:
        probe.unlink(missing_ok=True)
    if not watching.is_set():
        log.warning("the file watcher did not report in %.0f s; full scans until it does", WATCH_READY_TIMEOUT_SEC)
    if wake is not None:
        wake.set()


def watch_runs(home: Home, wake: threading.Event, stop: threading.Event,
               on_change: Callable[[set[str]], None], watching: threading.Event) -> None:
    """Watch FRAY_HOME: changed runs go to `on_change`; they and an edited config.json wake the loop."""
    import watchfiles

    runs_dir, groups_dir, config = home.runs_dir, home.groups_dir, str(home.config)

    def relevant(change: Any, path: str) -> bool:
        p = Path(path)
        return p.name in WAKE_NAMES or p.parent in (runs_dir, groups_dir) or path == config

    root = str(runs_dir) + os.sep
    try:
        for changes in watchfiles.watch(home.root, watch_filter=relevant, stop_event=stop, debounce=DEBOUNCE_MS,
                                        step=WATCH_STEP_MS, recursive=True, raise_interrupt=False,
                                        ignore_permission_denied=True):
            watching.set()  # any event at all: the watches were all set up before the first one
            run_ids = {path[len(root):].split(os.sep, 1)[0] for _, path in changes if path.startswith(root)}
            # A dot: never a run (a run still being built, whose rename into place is the event that counts;
            # the probe): a cycle for it only takes a CPU from the `fray submit` building it.
            run_ids = {run_id for run_id in run_ids if not run_id.startswith(".")}
            if run_ids:
                on_change(run_ids)
            if run_ids or any(path == config or Path(path).parent == groups_dir for _, path in changes):
                wake.set()
    except Exception:  # the timer still drives the loop without file events
        log.exception("file watcher stopped; falling back to the poll timer")


def hear_doorbell(bell: doorbell.Bell, wake: threading.Event, stop: threading.Event,
                  on_change: Callable[[set[str]], None]) -> None:
    """Each ring's runs go to `on_change` and wake the loop, until `stop`; the bell is closed on the way out."""
    def rung(run_ids: set[str]) -> None:
        if run_ids:
            on_change(run_ids)
        wake.set()

    try:
        bell.listen(rung, stop.is_set)
    except Exception:  # the watcher and the timer still drive the loop
        log.exception("doorbell stopped; the file watcher covers for it")
    finally:
        bell.close()
