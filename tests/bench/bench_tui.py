"""Benchmark: the dashboard with 10,000 runs, measured with Textual's pilot (headless).

Figures (median over repeats, with min/max):
- first full render: from creating the app to the first frame with every row in the table;
- refresh (target <= 100 ms of app work): a timer tick (time-dependent columns of the running
  runs recomputed), a watcher-driven refresh after 100 runs' heartbeats and progress changed,
  and a full rescan (the timer fallback); app work = reading what changed (in a worker thread)
  + updating the table in place + rendering the frame;
- key press to screen (target <= 50 ms): j, G/g (jump across 10,000 rows), Ctrl+d, a filter
  keystroke (re-filtering 10,000 rows), Enter (open a run's details);
each beside a baseline measured in the same run: a bare Textual app with a 40-row DataTable.

1,000 of the runs are running (heartbeat and progress on disk), 9,000 have ended, as
in bench_list.py.

    python tests/bench/bench_tui.py [--runs 10000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))
from _common import report  # noqa: E402
from bench_list import populate  # noqa: E402

from fray.state import store  # noqa: E402
from fray.state.layout import Home  # noqa: E402

SIZE = (160, 50)


class Frames:
    """When frames reach the terminal: wraps App._display and, since a headless app skips it, also does
    the work a real terminal's frame costs (turning the update into escape sequences)."""

    def __init__(self, app) -> None:
        self.times: list[float] = []
        original = app._display

        def display(screen, renderable) -> None:
            if renderable is not None:
                if hasattr(renderable, "render_segments"):
                    renderable.render_segments(app.console)
                self.times.append(time.perf_counter())
            original(screen, renderable)

        app._display = display

    def latency(self, since: float) -> float:
        """Seconds from `since` to the last frame drawn before the app went idle."""
        after = [t for t in self.times if t >= since]
        if not after:
            raise AssertionError("no frame was drawn")
        return after[-1] - since


async def key_latency(app, pilot, frames: Frames, key: str) -> float:
    """From the key event being sent to the frame that shows its effect (pilot.press waits for idle)."""
    start = time.perf_counter()
    await pilot.press(key)
    await pilot.pause()
    return frames.latency(start)


def refresh_heartbeats(home: Home, run_ids: list[str], step: int) -> None:
    """What 100 busy workloads do between two refreshes: a heartbeat and a progress report each."""
    now = time.time()
    for run_id in run_ids:
        files = home.run(run_id).attempt(1)
        files.heartbeat.write_text(f"{now}\n")
        store.write_json(files.progress, {"updated_at": now, "step": step, "loss": 0.5}, "progress")


async def baseline(repeats: int) -> dict[str, list[float]]:
    from textual.app import App
    from textual.widgets import DataTable, Input

    class Bare(App):
        def compose(self):
            yield DataTable()
            yield Input()

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            table.add_columns("NAME", "STATUS", "NODE")
            for i in range(40):
                table.add_row(f"job-{i}", "healthy_running", "node-1")
            table.focus()

    samples: dict[str, list[float]] = {"first": [], "key": [], "type": []}
    for _ in range(3):
        start = time.perf_counter()
        app = Bare()
        frames = Frames(app)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            samples["first"].append(frames.latency(start))
            for i in range(repeats):
                samples["key"].append(await key_latency(app, pilot, frames, "down" if i % 2 == 0 else "up"))
            app.query_one(Input).focus()
            await pilot.pause()
            for i in range(repeats):
                samples["type"].append(await key_latency(app, pilot, frames, "backspace" if i % 2 else "x"))
    return samples


async def dashboard(home: Home, repeats: int) -> dict[str, list[float]]:
    from fray.tui.app import FrayApp
    from fray.ops.live import Hint

    samples: dict[str, list[float]] = {k: [] for k in (
        "first", "first_scan", "tick", "watch", "full", "j", "G", "g", "ctrl+d", "filter", "enter",
        "tick_cpu", "watch_cpu", "full_cpu", "first_cpu")}
    for round_ in range(2):
        start, cpu = time.perf_counter(), time.process_time()
        app = FrayApp(home, watch=False, tick=None, ensure_daemon=None, theme_name="dark")
        frames = Frames(app)
        async with app.run_test(size=SIZE) as pilot:
            snapshot = await app.refresh_now()
            await pilot.pause()
            table = app.screen.query_one("#runs")
            assert len(table.order) == len(snapshot.rows), "not every row is in the table"
            samples["first"].append(frames.latency(start))
            samples["first_cpu"].append(time.process_time() - cpu)
            samples["first_scan"].append(snapshot.scan_ms / 1000)
            if round_:
                break
            live = app.model.live_ids()
            for i in range(repeats):
                start, cpu = time.perf_counter(), time.process_time()
                await app.refresh_now(full=False)  # a timer tick
                await pilot.pause()
                samples["tick_cpu"].append(time.process_time() - cpu)  # scan thread + table update + frame
                samples["tick"].append(frames.latency(start))

                batch = live[(i * 100) % len(live):][:100]
                refresh_heartbeats(home, batch, step=i)
                start, cpu = time.perf_counter(), time.process_time()
                await app._scan(Hint(runs=set(batch)))  # what the watcher hands over
                await pilot.pause()
                samples["watch_cpu"].append(time.process_time() - cpu)
                samples["watch"].append(frames.latency(start))

                if i < max(3, repeats // 4):
                    start, cpu = time.perf_counter(), time.process_time()
                    await app.refresh_now(full=True)
                    await pilot.pause()
                    samples["full_cpu"].append(time.process_time() - cpu)
                    samples["full"].append(frames.latency(start))

            for key in ("j", "G", "g", "ctrl+d"):
                for _ in range(repeats):
                    samples[key].append(await key_latency(app, pilot, frames, key))
                    if key == "ctrl+d":
                        await pilot.press("g")
            await pilot.press("slash")
            await pilot.pause()
            typing = [*"job-12", *["backspace"] * 6]  # narrowing as you type, then widening again
            for i in range(max(repeats, len(typing))):
                samples["filter"].append(await key_latency(app, pilot, frames, typing[i % len(typing)]))
            await pilot.press("escape")
            for _ in range(min(repeats, 10)):
                samples["enter"].append(await key_latency(app, pilot, frames, "enter"))
                await pilot.press("escape")
                await pilot.pause()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "fray")
        started = time.perf_counter()
        populate(home, args.runs)
        print(f"populated {args.runs:,} runs in {time.perf_counter() - started:.1f}s; Python {sys.version.split()[0]}")
        base = asyncio.run(baseline(args.repeats))
        bench = asyncio.run(dashboard(home, args.repeats))
        print(f"\nfray tui with {args.runs:,} runs, pilot at {SIZE[0]}x{SIZE[1]} (headless)")
        report("baseline: bare Textual app, 40-row DataTable: first frame", base["first"])
        report("first full render (all rows in the table), wall", bench["first"])
        report("  CPU (startup, reading every run, first frame)", bench["first_cpu"])
        report("  of which the first scan (reading every run), wall", bench["first_scan"])
        print()
        report("refresh: timer tick (running runs recomputed), wall", bench["tick"], target_ms=100)
        report("  app work: CPU of scan + table update + frame", bench["tick_cpu"], target_ms=100)
        report("refresh: watcher, 100 runs' heartbeat+progress, wall", bench["watch"], target_ms=100)
        report("  app work: CPU of scan + table update + frame", bench["watch_cpu"], target_ms=100)
        report("refresh: full rescan (timer fallback), wall", bench["full"])
        report("  app work: CPU of scan + table update + frame", bench["full_cpu"])
        print()
        report("baseline: bare Textual app, key press to screen", base["key"])
        report("key to screen: j (next row)", bench["j"], target_ms=50)
        report("key to screen: G (last of all rows)", bench["G"], target_ms=50)
        report("key to screen: g (first row)", bench["g"], target_ms=50)
        report("key to screen: Ctrl+d (page down)", bench["ctrl+d"], target_ms=50)
        report("baseline: bare Textual app, typing into an Input", base["type"])
        report("key to screen: filter keystroke (typing 'job-12', erasing it)", bench["filter"], target_ms=50)
        report("key to screen: Enter (open a run's details)", bench["enter"])
        load = os.getloadavg()[0]
        print(f"\nwall: until the frame is drawn; CPU: process time of all threads (the scan runs in a worker"
              f" thread). Load average during the run: {load:.1f} on {os.cpu_count()} CPUs"
              f"{' (a busy machine: wall times include waiting for a CPU)' if load > (os.cpu_count() or 1) else ''}.")


if __name__ == "__main__":
    main()
