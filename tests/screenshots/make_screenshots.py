"""Make the README's screenshots of the dashboard: runs, run detail and logs, as SVG.

A demo FRAY_HOME is filled with runs in every state (tests/tui_support.make_runs plus
a few more), the app is driven headless with Textual's pilot, and each screen is
saved with App.save_screenshot. Run it again after changing how a screen looks:

    python tests/screenshots/make_screenshots.py [--out tests/screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fray.core.model import Attempt, Counters, Meta  # noqa: E402
from fray.state import runs, store  # noqa: E402
from fray.state.layout import Home  # noqa: E402
from tests.tui_support import dashboard, go_to, make_runs, screen_text, until  # noqa: E402

SIZE = (130, 36)


def more_runs(home: Home, scripts: Path, now: float) -> None:
    """Busy runs beside make_runs' five: healthy ones with progress, a degraded one, a crash loop."""
    script = scripts / "train.py"
    shapes = [("llama-ft-lr3e-4", "gpu-node-12", 5400, 48200, 0.812, 0.0),
              ("llama-ft-lr1e-4", "gpu-node-13", 5300, 47650, 0.846, 0.0),
              ("vit-pretrain", "gpu-node-2", 86000, 310400, 2.113, 0.0),
              ("rl-ppo-seed3", "gpu-node-5", 1900, 9800, 0.037, 45.0)]
    for index, (name, node, up, step, loss, beat_age) in enumerate(shapes):
        meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=name),
                               now=now - up - 300 - index)
        paths = home.run(meta.run_id)
        attempt = Attempt(number=1, state="running", backend="local", submitted_at=now - up - 60,
                          started_at=now - up, node=node, backend_ref={"pid": 1})
        meta = Meta.from_dict({**meta.to_dict(), "phase": "active", "attempts": [attempt.to_dict()]})
        store.write_json(paths.meta, meta.to_dict(), "meta")
        files = paths.attempt(1)
        store.make_dirs(files.dir)
        files.heartbeat.write_text(f"{now - beat_age}\n")
        store.write_json(files.progress, {"updated_at": now, "step": step, "loss": loss}, "progress")
        store.append_jsonl(paths.events, {"at": now - up, "run_id": meta.run_id, "kind": "started", "attempt": 1,
                                          "reason": f"attempt 1 started on {node}"}, "event")
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name="data-prep-shard7"),
                           now=now - 2000)
    paths = home.run(meta.run_id)
    attempts = [Attempt(number=n, state="ended", backend="local", submitted_at=now - 1500 + 60 * n,
                        started_at=now - 1490 + 60 * n, ended_at=now - 1480 + 60 * n, exit_code=50,
                        cause="workload_failure", node="gpu-node-9", detail="exit 50").to_dict() for n in (1, 2, 3)]
    meta = Meta.from_dict({**meta.to_dict(), "phase": "queued", "attempts": attempts,
                           "counters": vars(Counters(workload_failures=3, consecutive_fast_failures=3)),
                           "next_attempt_at": now + 40, "wait_reason": "backing off 40s before attempt 4"})
    store.write_json(paths.meta, meta.to_dict(), "meta")
    store.append_jsonl(paths.events, {"at": now - 1300, "run_id": meta.run_id, "kind": "backoff", "attempt": 3,
                                      "reason": "3 fast failures in a row: next attempt in 40s"}, "event")


def pretend_daemon(home: Home, now: float) -> int:
    """A daemon's lease and lock, so the header shows a healthy daemon (returns the held lock's fd)."""
    import fcntl
    import os

    store.make_dirs(home.locks_dir)
    fd = os.open(home.lock_file("daemon"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    store.write_json(home.daemon_lease, {"pid": os.getpid(), "host": "login1", "version": "0.1.0",
                                         "started_at": now - 90000, "last_cycle_at": now, "poll_interval_sec": 2.0,
                                         "cycles": 41230, "last_cycle_ms": 3.1, "active_runs": 6, "stopping": False,
                                         "last_error": None}, "daemon")
    return fd


async def shoot(home: Home, ids: dict[str, str], out: Path) -> None:
    async with dashboard(home, size=SIZE) as (app, pilot):
        await go_to(app, pilot, "train-gpt")
        app.save_screenshot(str(out / "dashboard.svg"))
        await pilot.press("enter")
        await until(pilot, lambda: "Attempts" in screen_text(app), what="the detail screen")
        body = app.screen.query_one("#body")
        body.scroll_to(y=body.max_scroll_y, animate=False)  # down to the script, #SBATCH and #FRAY lines
        await pilot.pause()
        app.save_screenshot(str(out / "detail.svg"))
        await pilot.press("t")
        await pilot.pause(0.5)
        await pilot.press("slash", *"loss 1.72", "enter")
        await pilot.pause()
        app.save_screenshot(str(out / "logs.svg"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "fray")
        now = time.time()
        ids = make_runs(home, Path(tmp) / "scripts", now=now)
        more_runs(home, Path(tmp) / "scripts", now)
        pretend_daemon(home, now)
        asyncio.run(shoot(home, ids, args.out))
    for name in ("dashboard", "detail", "logs"):
        print(args.out / f"{name}.svg")


if __name__ == "__main__":
    main()
