"""Make the screenshots of the dashboard (README, docs/watching.md): runs, run detail, logs, a run's curves and a sweep's, as SVG.

A demo FRAY_HOME is filled with runs in every state (tests/tui_support.make_runs plus
a few more), the app is driven headless with Textual's pilot, and each screen is
saved with App.save_screenshot. Run it again after changing how a screen looks:

    python tests/screenshots/make_screenshots.py [--out tests/screenshots] [--only curves|sweep]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fray.core.model import Attempt, Counters, Meta  # noqa: E402
from fray.state import runs, store
from fray.state.sweeps import creating  # noqa: E402
from fray.state.layout import Home  # noqa: E402
from fray.wrapper import history  # noqa: E402
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


def curves_run(home: Home, scripts: Path, now: float) -> str:
    """A run of three attempts with their progress histories, written line by line as the wrapper writes them:
    a node fault at step 2,340 (checkpoint 2,000) and a hang at 4,410 (checkpoint 4,000), 1 step a second."""
    meta = runs.create_run(home, runs.SubmitOptions(script=scripts / "train.py", overrides={}, name="gpt-small"),
                           now=now - 7000)
    paths = home.run(meta.run_id)
    spans = [(1, 0, 2340, "node_fault", 60), (2, 2001, 4410, "progress_stall", 600), (3, 4001, 6000, None, 0)]
    attempts, clock = [], now - 6990
    for number, first, last, cause, detection in spans:
        started = clock + 20
        files = paths.attempt(number)
        store.make_dirs(files.dir)
        lines = [history.line(started + 10 + (step - first), step,
                              {"loss": 3.2 * math.exp(-step / 1800) + 0.9 + 0.04 * math.sin(step / 37),
                               "lr": 3e-4 * min(1.0, step / 500)})
                 for step in range(first, last + 1, 10)]
        lines += [history.line(started + 10 + (step - first), step, checkpoint=f"step-{step}")
                  for step in range(first - first % 1000 + 1000, last + 1, 1000)]
        lines.sort(key=lambda data: float(data.split(b'"t":')[1].split(b",")[0]))
        files.history.write_bytes(b"".join(lines))
        ended = None if cause is None else started + 10 + (last - first) + detection
        attempts.append(Attempt(number=number, state="ended" if cause else "running", backend="local",
                                submitted_at=clock, started_at=started, ended_at=ended, cause=cause,
                                node=f"gpu-node-{number + 3}", backend_ref={"pid": 1}).to_dict())
        clock = (ended or now) + 15
    meta = Meta.from_dict({**meta.to_dict(), "phase": "active", "attempts": attempts})
    store.write_json(paths.meta, meta.to_dict(), "meta")
    paths.attempt(3).heartbeat.write_text(f"{now}\n")
    return meta.run_id


def sweep_runs(home: Home, scripts: Path, now: float) -> str:
    """A sweep of four learning rates, each run's loss written as the wrapper writes it (1 step a second);
    returns the group id."""
    ready = runs.prepare(runs.SubmitOptions(script=scripts / "train.py", overrides={}, name="lr-sweep"), home)
    rates = (1e-3, 3e-4, 1e-4, 3e-5)
    members = [creating.PointRun(spec=ready.spec, params={"lr": lr}, files={ready.frozen: ready.data},
                               frozen=ready.frozen, source=ready.source) for lr in rates]
    metas = creating.create_group(home, "lr-sweep", members, now=now - 4000)
    for meta, lr in zip(metas, rates):
        paths = home.run(meta.run_id)
        files = paths.attempt(1)
        store.make_dirs(files.dir)
        started = now - 3900
        speed = 600 * (lr / 1e-4) ** 0.5  # a larger rate learns faster and settles higher
        floor = 0.8 + 2e2 * lr
        files.history.write_bytes(b"".join(
            history.line(started + step, step, {"loss": 3.0 * math.exp(-step / speed) + floor +
                                                0.03 * math.sin(step / 23 + lr * 1e4)})
            for step in range(0, 3800 if lr > 5e-5 else 3100, 20)))
        attempt = Attempt(number=1, state="running", backend="local", submitted_at=started - 10, started_at=started,
                          node="gpu-node-2", backend_ref={"pid": 1})
        store.write_json(paths.meta, Meta.from_dict({**meta.to_dict(), "phase": "active",
                                                     "attempts": [attempt.to_dict()]}).to_dict(), "meta")
        files.heartbeat.write_text(f"{now}\n")
    return metas[0].group["id"]  # type: ignore[index]


async def shoot_sweep(home: Home, out: Path) -> None:
    async with dashboard(home, size=(130, 36)) as (app, pilot):
        await go_to(app, pilot, "lr-sweep")
        await pilot.press("c")
        await until(pilot, lambda: "loss by step" in screen_text(app), what="the sweep's curves")
        await pilot.pause(0.3)
        app.save_screenshot(str(out / "sweep.svg"))


async def shoot_curves(home: Home, run_id: str, out: Path) -> None:
    async with dashboard(home, size=(130, 44), run_id=run_id) as (app, pilot):
        await until(pilot, lambda: "loss by step" in screen_text(app), what="the curves")
        body = app.screen.query_one("#body")
        body.scroll_to(y=app.screen.query_one("#curves").region.y - body.region.y - 2, animate=False)
        await pilot.pause(0.3)
        app.save_screenshot(str(out / "curves.svg"))


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
    parser.add_argument("--only", choices=("screens", "curves", "sweep"), help="make only these (default: all)")
    args = parser.parse_args()
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "fray")
        now = time.time()
        ids = make_runs(home, Path(tmp) / "scripts", now=now)
        more_runs(home, Path(tmp) / "scripts", now)
        curves_id = curves_run(home, Path(tmp) / "scripts", now)
        pretend_daemon(home, now)
        if args.only in (None, "screens"):
            asyncio.run(shoot(home, ids, args.out))
            made += ["dashboard", "detail", "logs"]
        if args.only in (None, "curves"):
            asyncio.run(shoot_curves(home, curves_id, args.out))
            made.append("curves")
        if args.only in (None, "sweep"):
            sweep_runs(home, Path(tmp) / "scripts", now)
            asyncio.run(shoot_sweep(home, args.out))
            made.append("sweep")
    for name in made:
        print(args.out / f"{name}.svg")


if __name__ == "__main__":
    main()
