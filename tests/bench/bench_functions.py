"""Benchmark: trivial functions through `fray.map` on the local backend, beside a floor and other tools.

Prints, measured in the same run on the same machine, for each size (100 and
1,000 by default), the wall time from the call until every result is back:
  - floor: the same function in a `concurrent.futures.ProcessPoolExecutor` with
    one process per CPU (its start and shutdown included);
  - fray: `fray.map(fn, range(N), backend="local")` without `chunk=` then every
    `.result()`, in a fresh FRAY_HOME whose daemon is already running (a map of
    another function started it and was waited for): the calls packed into runs
    as for a function never measured (fray.core.batching), then the same map
    again, packed by the call time the first one measured; `chunk=1` (one run per
    call, as before packing) up to `--one-per-call-max` functions; `--chunks`
    sizes; and, up to `--cold-max` functions, cold (`"warm_functions": false`, a
    new Python for each run);
  - fray.submit in a loop: `[fray.submit(fn, i) for i in range(N)]` then every `.result()`, in
    such a home likewise (its calls packed as a map's, fray.cluster.submits), twice;
  - ray warm: one remote task per item and `ray.get`, timed after `ray.init(num_cpus=CPUs)`
    returned (its workers start meanwhile, as in a notebook whose Ray session is open);
    and ray with `ray.init` and `ray.shutdown()` included, when ray imports in `--other-python`;
  - submitit: `LocalExecutor.map_array` and every `.result()`, when submitit
    imports in `--other-python` (up to `--submitit-max` functions: it starts a
    new Python for each, as fray's cold start does).
Ray and submitit are benchmark-only, never fray's dependencies (`--other-python`: this
Python by default, or a venv of their own: `python -m venv /tmp/bench-venv &&
/tmp/bench-venv/bin/pip install ray submitit`); rows whose tool does not import say so.
Then the daemon's commit cost: meta.json documents (with their last good copy)
written one fsync'd file at a time, as before group commit, against the same
documents staged and committed as one batch (fray.state.commit_batch), in
writes per second. Targets (issue 39): 100 functions <= 0.5 s, 1,000 <= Ray warm in
the same run, both without `chunk=` and with the daemon running, through `fray.map` and a `fray.submit` loop.

    python tests/bench/bench_functions.py [--sizes 100,1000] [--other-python PYTHON]
        [--cold-max 100] [--one-per-call-max 100] [--submitit-max 100] [--chunks 25,100]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench._common import env_for, time_command  # noqa: E402

TARGETS_SEC = {100: 0.5}  # issue 39; 1,000 and any other size: Ray warm's time in the same run
CPUS = os.cpu_count() or 1

OTHER = r'''
import sys, time
tool, n, cpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def square(x):
    return x * x

start = time.perf_counter()
if tool in ("ray", "ray-warm"):
    import ray
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    if tool == "ray-warm":
        start = time.perf_counter()
    remote = ray.remote(square)
    results = ray.get([remote.remote(i) for i in range(n)])
    took = time.perf_counter() - start
    ray.shutdown()
    if tool == "ray":
        took = time.perf_counter() - start
else:
    import tempfile, submitit
    executor = submitit.LocalExecutor(folder=tempfile.mkdtemp(prefix="bench-submitit-"))
    executor.update_parameters(timeout_min=60)
    results = [job.result() for job in executor.map_array(square, range(n))]
    took = time.perf_counter() - start
assert results == [i * i for i in range(n)]
print(took)
'''


def square(x: int) -> int:
    return x * x


def cube(x: int) -> int:
    return x * x * x


def python_floor_ms(repeats: int = 7) -> float:
    """The median wall time of `python -c pass` here, now."""
    return statistics.median(time_command([sys.executable, "-c", "pass"], dict(os.environ), repeats)) * 1000


def floor(n: int) -> float:
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(max_workers=CPUS) as pool:
        results = list(pool.map(square, range(n)))
    assert results == [i * i for i in range(n)]
    return time.perf_counter() - start


def fray_map(n: int, warm: bool = True, chunk: int | None = None, again: bool = False, submit: bool = False
             ) -> tuple[float, dict[str, float]] | tuple[tuple[float, dict[str, float]], tuple[float, dict[str, float]]]:
    """In a child process of its own, as a user's script: a fresh FRAY_HOME whose daemon a map of another
    function started (and was waited for), then the map timed (`submit`: a loop of `fray.submit` instead).
    Its wall seconds, and the CPU seconds its processes used (`cpu_used`); with `again`, the same for a
    second map of the same function after it."""
    home = Path(tempfile.mkdtemp(prefix="bench-functions-"))
    (home / "config.json").write_text(json.dumps({"local": {"warm_functions": warm}}))
    script = (
        "import resource, sys, time\nsys.path.insert(0, sys.argv[2])\nimport fray\n"
        "from tests.bench.bench_functions import cube, square\n"
        "n, chunk, rounds, submit = int(sys.argv[1]), (int(sys.argv[3]) or None), int(sys.argv[4]), sys.argv[5]\n"
        "assert [f.result(timeout=600) for f in fray.map(cube, range(3), backend='local')] == [0, 1, 8]\n"
        "for _ in range(rounds):\n"
        "    used = resource.getrusage(resource.RUSAGE_SELF)\n    start = time.perf_counter()\n"
        "    futures = ([fray.submit(square, i, backend='local') for i in range(n)] if submit == 'submit'\n"
        "               else fray.map(square, range(n), backend='local', chunk=chunk))\n"
        "    results = [f.result(timeout=3600) for f in futures]\n"
        "    took = time.perf_counter() - start\n"
        "    assert results == [i * i for i in range(n)]\n"
        "    now = resource.getrusage(resource.RUSAGE_SELF)\n"
        "    print(took, now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime, flush=True)\n"
        "    input()\n")
    env = env_for(home)
    rounds = 2 if again else 1
    try:
        proc = subprocess.Popen([sys.executable, "-c", script, str(n), str(REPO), str(chunk or 0), str(rounds),
                                 "submit" if submit else "map"],
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert proc.stdin is not None and proc.stdout is not None
        found: list[tuple[float, dict[str, float]]] = []
        before = {"daemon": 0.0, "wrappers": 0.0}
        for _ in range(rounds):
            took, client = (float(word) for word in proc.stdout.readline().split())
            total = cpu_used(home)  # read before the next map is let go
            found.append((took, {"client": client, **{who: total[who] - before[who] for who in total}}))
            before = total
            proc.stdin.write("\n")
            proc.stdin.flush()
        if proc.wait(timeout=600) != 0:
            raise RuntimeError("the fray.map script failed")
        return (found[0], found[1]) if again else found[0]
    finally:
        subprocess.run([sys.executable, "-m", "fray.cli.main", "daemon", "stop", "--json"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_used(home: Path) -> dict[str, float]:
    """CPU seconds (user + system) so far of the daemon of `home`, and of its warm worker with what it forked:
    the function hosts, and the wrappers it reaped with their workloads ("wrappers"; the guardians are not
    counted)."""
    daemon = json.loads((home / "daemon.json").read_text())["pid"]
    used = {"daemon": _cpu_seconds(daemon, children=False), "wrappers": 0.0}
    for entry in os.scandir("/proc"):
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
            if b"fray.warm.worker" in argv and str(home).encode() in argv:
                used["wrappers"] += _cpu_seconds(int(entry.name), children=True)
        except OSError:
            continue
    return used


def _cpu_seconds(pid: int, children: bool) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(field) for field in fields[11:15 if children else 13]) / os.sysconf("SC_CLK_TCK")


def other(python: str, tool: str, n: int) -> float | str:
    """Seconds, or why the row has no figure."""
    probe = subprocess.run([python, "-c", f"import {tool.partition('-')[0]}"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"not importable in {python}"
    proc = subprocess.run([python, "-c", OTHER, tool, str(n), str(CPUS)], capture_output=True, text=True,
                          timeout=3600)
    if proc.returncode != 0:
        return "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:100]
    return float(proc.stdout.split()[-1])


def commit_rates(count: int, rounds: int = 3) -> tuple[float, float]:
    """meta.json + copy writes per second (medians of `rounds`, taken in turn): one fsync'd file at a time,
    and one batch for all of them."""
    from fray.core.model import RunSpec
    from fray.state import meta_file, runs
    from fray.state.commit_batch import CommitBatch
    from fray.state.layout import Home

    home = Home(Path(tempfile.mkdtemp(prefix="bench-commit-")))
    now = time.time()
    documents = []
    for index in range(count):
        meta = runs.new_meta(f"point-{index}", now, "/tmp", RunSpec(backend="local"), source="bench",
                             frozen="script.sh", script=b"#!/bin/bash\n")
        paths = home.run(meta.run_id)
        paths.dir.mkdir(parents=True)
        documents.append((paths, meta.to_dict()))
    alone, together = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        for paths, document in documents:
            meta_file.write(paths, document)
        alone.append(time.perf_counter() - start)
        batch = CommitBatch(home.root)
        start = time.perf_counter()
        for paths, document in documents:
            meta_file.stage(batch, paths, document)
        batch.commit()
        together.append(time.perf_counter() - start)
    return 2 * count / statistics.median(alone), 2 * count / statistics.median(together)


def row(label: str, seconds: float | str | tuple[float, dict[str, float]], floor_sec: float,
        target: float | None = None, n: int = 1) -> None:
    if isinstance(seconds, tuple):  # a fray row, with the CPU its processes used (a figure a busy machine keeps)
        row(label, seconds[0], floor_sec, target)
        per = {who: f"{used / n * 1000:.2f} ms" for who, used in seconds[1].items()}
        print(f"    CPU per function: daemon {per['daemon']}, warm worker, hosts and wrappers {per['wrappers']}, "
              f"the caller's process {per['client']}")
        return
    if isinstance(seconds, str):
        print(f"  {label:<38} {'-':>9}    ({seconds})")
        return
    verdict = "" if target is None else f"  target <= {target:.2f} s: {'PASS' if seconds <= target else 'MISS'}"
    print(f"  {label:<38} {seconds:8.2f} s  ({seconds / floor_sec:6.1f} x floor){verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="how many functions, comma-separated")
    parser.add_argument("--other-python", default=sys.executable,
                        help="a Python with ray and submitit installed (their rows are skipped where they do not import)")
    parser.add_argument("--cold-max", type=int, default=100, help="largest size also run with warm_functions off")
    parser.add_argument("--one-per-call-max", type=int, default=100, help="largest size also run with chunk=1")
    parser.add_argument("--submitit-max", type=int, default=100, help="largest size run through submitit")
    parser.add_argument("--chunks", default="", help="chunk sizes (calls per run) of more chunked rows")
    parser.add_argument("--commit-files", type=int, default=500, help="meta.json documents for the commit rows")
    args = parser.parse_args()
    print(f"{CPUS} CPUs; other tools from {args.other_python}"
          + ("" if os.path.exists(args.other_python) else " (missing: their rows are skipped)"))
    for n in [int(size) for size in args.sizes.split(",")]:
        print(f"{n} trivial functions (x -> x * x), wall time until every result is back "
              f"(`python -c pass` {python_floor_ms():.0f} ms):")
        floor_sec = floor(n)
        row("floor: ProcessPoolExecutor", floor_sec, floor_sec)
        ray_warm = other(args.other_python, "ray-warm", n) if os.path.exists(args.other_python) else "no --other-python"
        target = TARGETS_SEC.get(n, ray_warm if isinstance(ray_warm, float) else None)
        first, again = fray_map(n, again=True)
        row("fray.map, never measured", first, floor_sec, target, n)
        row("fray.map again, call time measured", again, floor_sec, target, n)
        first, again = fray_map(n, again=True, submit=True)
        row("fray.submit in a loop, never measured", first, floor_sec, target, n)
        row("fray.submit in a loop again, measured", again, floor_sec, target, n)
        row("ray warm (after ray.init)", ray_warm, floor_sec)
        if n <= args.one_per_call_max:
            row("fray.map, chunk=1 (a run per call)", fray_map(n, chunk=1), floor_sec, None, n)
        for chunk in [int(c) for c in args.chunks.split(",") if c]:
            row(f"fray.map, chunk={chunk}", fray_map(n, chunk=chunk), floor_sec, None, n)
        row("fray.map, cold starts", fray_map(n, warm=False)[0] if n <= args.cold_max
            else f"over --cold-max {args.cold_max}", floor_sec)
        for tool in ("ray", "submitit"):
            if not os.path.exists(args.other_python):
                result: float | str = "no --other-python"
            elif tool == "submitit" and n > args.submitit_max:
                result = f"over --submitit-max {args.submitit_max}"
            else:
                result = other(args.other_python, tool, n)
            row(tool + (" (init + tasks + shutdown)" if tool == "ray" else " LocalExecutor"), result, floor_sec)
    alone, together = commit_rates(args.commit_files)
    print(f"daemon commit, {args.commit_files} meta.json documents and their copies:")
    print(f"  {'one fsync per file (before)':<34} {alone:8.0f} writes/s")
    print(f"  {'group commit (one batch)':<34} {together:8.0f} writes/s  ({together / alone:.1f} x)")


if __name__ == "__main__":
    main()
