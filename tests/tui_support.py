"""Helpers of the dashboard's tests: a FRAY_HOME with runs in every state, and driving the app headless.

`make_runs` writes state files as the daemon and the wrapper would (a healthy
run with logs and progress, a pending one, a failed one with failure records
and probes, a finished one, one whose meta.json is corrupt) and a node
inventory. `screen_text` is what a person would read on the screen now.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from fray.state import meta_file, runs, store
from fray.state.layout import Home
from fray.core.model import Attempt, Meta

SCRIPT = """#!/usr/bin/env python
#FRAY --mode indefinite
#FRAY --gpus 1
#FRAY --heartbeat-timeout 10m
#SBATCH --time=4:00:00
# Train a model; fray restarts it if it stops making progress.
import time
print("training")
"""


def make_runs(home: Home, scripts: Path, now: float | None = None) -> dict[str, str]:
    """Runs in every state; returns their ids by role (healthy, pending, failed, done, corrupt)."""
    now = time.time() if now is None else now
    store.ensure_home(home)
    scripts.mkdir(parents=True, exist_ok=True)
    script = scripts / "train.py"
    script.write_text(SCRIPT)
    ids: dict[str, str] = {}

    def new(name: str, at: float) -> Meta:
        return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=name), now=at)

    meta = new("train-gpt", now - 4000)
    paths = home.run(meta.run_id)
    attempt = Attempt(number=1, state="running", backend="local", submitted_at=now - 3700, started_at=now - 3600,
                      node="gpu-node-7", backend_ref={"pid": 1})
    meta = Meta.from_dict({**meta.to_dict(), "phase": "active", "attempts": [attempt.to_dict()]})
    meta_file.write(paths, meta.to_dict())  # with its last good copy, as the daemon writes it
    files = paths.attempt(1)
    store.make_dirs(files.dir)
    files.heartbeat.write_text(f"{now}\n")
    store.write_json(files.progress, {"updated_at": now, "step": 12000, "loss": 1.234}, "progress")
    files.stdout.write_text("".join(f"step {i} loss {2 - i / 1000:.3f}\n" for i in range(300)))
    files.stderr.write_text("warning: dataloader is slow\n")
    store.write_json(files.probe, {"host": "gpu-node-7", "started_at": now - 3605, "ended_at": now - 3601, "ok": True,
                                   "probes": [{"name": "node", "status": "passed", "seconds": 0.2, "detail": "disk ok"},
                                              {"name": "gpu", "status": "passed", "seconds": 1.5,
                                               "detail": "1 GPU, ECC clean"}]}, "probe")
    for at, kind, reason in ((now - 3700, "submitted", "attempt 1 submitted to local"),
                             (now - 3600, "started", "attempt 1 started on gpu-node-7")):
        store.append_jsonl(paths.events, {"at": at, "run_id": meta.run_id, "kind": kind, "attempt": 1,
                                          "reason": reason}, "event")
    ids["healthy"] = meta.run_id

    ids["pending"] = new("eval-sweep", now - 100).run_id

    meta = new("flaky-job", now - 9000)
    paths = home.run(meta.run_id)
    attempts = []
    for n in (1, 2):
        attempts.append(Attempt(number=n, state="ended", backend="local", submitted_at=now - 8000 + n,
                                started_at=now - 7990 + n, ended_at=now - 7000 + n, exit_code=50,
                                cause="workload_failure", node="gpu-node-3", detail="exit 50").to_dict())
        store.make_dirs(paths.attempt(n).dir)
        store.write_json(paths.attempt(n).failure, {
            "run_id": meta.run_id, "attempt": n, "exit_code": 50, "cause": "workload_failure",
            "message": "the workload exited with status 1", "workload_exit_code": 1,
            "stderr_tail": ["Traceback (most recent call last):", "ValueError: loss is nan"], "host": "gpu-node-3",
            "started_at": now - 7990, "ended_at": now - 7000}, "failure")
    meta = Meta.from_dict({**meta.to_dict(), "phase": "ended", "attempts": attempts,
                           "end": {"status": "failed", "reason": "2 workload failures (max_retries 1)", "at": now - 6999}})
    meta_file.write(paths, meta.to_dict())  # with its last good copy, as the daemon writes it
    ids["failed"] = meta.run_id

    meta = new("hello", now - 20000)
    paths = home.run(meta.run_id)
    attempt = Attempt(number=1, state="ended", backend="local", submitted_at=now - 19990, started_at=now - 19980,
                      ended_at=now - 19000, exit_code=0, cause="success", node="gpu-node-1")
    meta = Meta.from_dict({**meta.to_dict(), "phase": "ended", "attempts": [attempt.to_dict()],
                           "end": {"status": "completed_success", "reason": "attempt 1 succeeded", "at": now - 19000}})
    meta_file.write(paths, meta.to_dict())  # with its last good copy, as the daemon writes it
    ids["done"] = meta.run_id

    meta = new("broken", now - 50)
    home.run(meta.run_id).meta.write_text("{not json")
    ids["corrupt"] = meta.run_id

    store.write_json(home.nodes, {"generated_at": now, "backends": {"local": [
        {"name": "gpu-node-7", "state": "idle", "cpus": 64, "mem_mb": 524288, "gpus": 8, "gpu_type": "H100",
         "partitions": ["gpu"]},
        {"name": "gpu-node-3", "state": "mixed", "cpus": 64, "mem_mb": 524288, "gpus": 8, "gpu_type": "A100",
         "partitions": ["gpu"]}]}}, "nodes")
    return ids


def screen_text(app: Any) -> str:
    """The text on the screen right now, line by line (what a person reads)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


class Daemons:
    """Records the homes the app asked to have a daemon for (instead of starting one)."""

    def __init__(self) -> None:
        self.calls: list[Home] = []

    def __call__(self, home: Home) -> None:
        self.calls.append(home)


@contextlib.asynccontextmanager
async def dashboard(home: Home, size: tuple[int, int] = (140, 36), **options: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The app, headless, with its first scan applied; no watcher, no timer unless asked."""
    from fray.tui.app import FrayApp

    options.setdefault("watch", False)
    options.setdefault("tick", None)
    options.setdefault("ensure_daemon", Daemons())
    options.setdefault("theme_name", "dark")
    app = FrayApp(home, **options)
    async with app.run_test(size=size) as pilot:
        await app.refresh_now()
        await pilot.pause()
        yield app, pilot


async def until(pilot: Any, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Let the app run until `predicate()` is true."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; the screen:\n{screen_text(pilot.app)}")
        await pilot.pause(0.05)


async def go_to(app, pilot, name):
    """Move the cursor to the run called `name` with j/k, as a person would."""
    table = app.screen.query_one("#runs")
    target = next(i for i, run_id in enumerate(table.order) if table.rows[run_id]["name"] == name)
    key = "j" if target > table.cursor else "k"
    for _ in range(abs(target - table.cursor)):
        await pilot.press(key)
    assert table.selected["name"] == name
    return table.selected


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)
