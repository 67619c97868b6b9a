"""Benchmark: the TPU backend with 200 slices in the gcloud simulator while 50 are preempted at once.

Prints, measured in the same run on the same machine, against the simulator
(tests/fakes/gcloud: every call is a real process, as gcloud is, and waits
`--latency` seconds as a cloud round trip does):
  - the cycle: one backend snapshot (one `tpu-vm list` per zone) that finds the 50
    preempted slices, plus the 50 resubmissions a daemon cycle then makes: the time
    the daemon's cycle is held;
  - recovery: from that cycle's start until all 50 replacement slices are listed
    (deletes and creates run in the backend's call pool, `--workers` at once);
  - the baseline: a serial loop that deletes and recreates 50 preempted slices one
    call after another.
The backend is driven directly, not through the daemon process; launches are
marked done so no wrappers start (this measures the cloud handling).

    python tests/bench/bench_tpu.py [--slices 200] [--preempt 50] [--workers 16]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from fray.backends import external  # noqa: E402
from fray.backends.protocol import AttemptKey, SubmitRequest, Tracked  # noqa: E402
from fray.backends.tpu import command_lines  # noqa: E402
from fray.backends.tpu.backend import LAUNCHED, TpuBackend  # noqa: E402
from fray.core.model import RunSpec  # noqa: E402
from fray.state.layout import Home  # noqa: E402

ZONE = "us-west4-a"


def request(root: Path, run: str, attempt: int) -> SubmitRequest:
    attempt_dir = root / "home" / "runs" / run / "attempts" / str(attempt)
    attempt_dir.mkdir(parents=True, exist_ok=True)
    (attempt_dir / LAUNCHED).write_text("bench\n")
    spec = RunSpec(backend="tpu", tpu="v4-8", zones=[ZONE], runtime_version="v", spot=True, args=["x"])
    return SubmitRequest(key=AttemptKey(run, attempt), name=run, spec=spec, home=root / "home",
                         script=root / "s.sh", attempt_dir=attempt_dir, checkpoint_dir=root / "ckpt")


def preempt(state: Path, names: list[str]) -> None:
    """Injected by editing the simulator's records (the cloud's doing, not a timed call)."""
    for name in names:
        path = state / "nodes" / ZONE / f"{name}.json"
        node = json.loads(path.read_text())
        node["state"] = "PREEMPTED"
        path.write_text(json.dumps(node))


def wait(predicate, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("benchmark: timed out")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=200)
    parser.add_argument("--preempt", type=int, default=50)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.5,
                        help="seconds the simulator waits per call, as a cloud round trip (default 0.5)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fray-bench-tpu-"))
    state = root / "gcloud"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"ready_after_sec": 0, "latency_sec": args.latency}))
    os.environ["FRAY_GCLOUD_SIM"] = str(state)
    os.environ["PATH"] = f"{REPO / 'tests' / 'fakes' / 'gcloud'}{os.pathsep}{os.environ['PATH']}"
    (root / "home").mkdir()
    backend = TpuBackend(Home(root / "home"), {"workers": args.workers, "create_rate": 1000,
                                               "poll_interval_sec": 1})
    refs = {f"r{i}": backend.submit(request(root, f"r{i}", 1)) for i in range(args.slices)}
    wait(lambda: all(f.done() for f in backend._creates.values()))
    tracked = [Tracked(AttemptKey(run, 1), ref) for run, ref in refs.items()]
    victims = [f"r{i}" for i in range(args.preempt)]
    preempt(state, [command_lines.slice_name(run, 1) for run in victims])

    started = time.perf_counter()
    views = backend.snapshot(tracked)
    gone = [key for key, view in views.items() if view.state == "gone"]
    for key in gone:
        backend.submit(request(root, key.run_id, key.attempt + 1))
    cycle = time.perf_counter() - started
    replacements = {command_lines.slice_name(key.run_id, 2) for key in gone}
    wait(lambda: all(f.done() for f in backend._creates.values()) and backend.calls.pool._work_queue.empty())
    listed = lambda: {p.stem for p in (state / "nodes" / ZONE).glob("*.json")}  # noqa: E731
    wait(lambda: replacements <= listed() and not any(command_lines.slice_name(r, 1) in listed() for r in victims))
    recovery = time.perf_counter() - started
    assert len(gone) == args.preempt, f"{len(gone)} seen gone, {args.preempt} preempted"

    # Baseline: the same work, one blocking call after another.
    preempt(state, sorted(replacements))
    started = time.perf_counter()
    for name in sorted(replacements):
        run = name[len("fray-"):].rsplit("-a", 1)[0]
        external.run(command_lines.delete(name, ZONE), timeout=60)
        external.run(command_lines.create(command_lines.SliceRequest(run, 3, ZONE, "v4-8", "v", backend.home_id, "spot")), timeout=60)
    serial = time.perf_counter() - started
    backend.calls.close()

    print(f"{args.slices} slices, {args.preempt} preempted at once, {args.workers} gcloud calls at once "
          f"(simulator, {args.latency:g} s per call)")
    print(f"  daemon cycle held (snapshot + {len(gone)} resubmissions): {cycle:8.2f} s")
    print(f"  until all {len(gone)} replacements exist (parallel):      {recovery:8.2f} s")
    print(f"  serial delete-and-recreate loop, same work:         {serial:8.2f} s")
    print(f"  serial / parallel recovery: {serial / recovery:.1f}x; serial / cycle: {serial / cycle:.1f}x")


if __name__ == "__main__":
    main()
