"""Benchmark: actor round trips and lookups (targets: sync calls >= 5x Ray's; lookup at 10,000 endpoints <= 10 ms).

Measures, on this machine and in this run:
- sync calls/s: one caller, one actor in another process, `pool.call().ping()` in a loop;
- pipelined calls/s: `pool.call_async()` many, then their results;
- broadcast to 8 actors (8 server processes): median wall time of `pool.broadcast().ping()`;
- lookup with 10,000 endpoint files: 1,000 names of 10 actors, a fresh resolver per lookup (cold);
  and 10,000 actors under one name (first lookup, then later ones that reuse what was read);
beside Ray's actor calls measured the same way when Ray is installed (`pip install ray`);
- 1 MB round trips/s: `ping(payload)` of 1 MB of bytes, which the actor returns (1 MB each way), fray and
  Ray (when installed) in turn for ROUNDS rounds, each the same number of calls (target: fray >= 2x Ray).

    python tests/bench/bench_actors.py [--calls 5000] [--only all|mb] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fray import ClusterResolver, LocalCluster  # noqa: E402
from fray.state import endpoints  # noqa: E402

SERVER = """
import sys, threading
from fray import ActorServer, LocalCluster
class Ping:
    def ping(self, ctx, x=None):
        return x
cluster = LocalCluster(namespace="bench", home=sys.argv[1])
server = ActorServer(cluster)
server.register("ping" + sys.argv[2], Ping())
server.serve_background()
print("ready", flush=True)
sys.stdin.read()
server.shutdown(grace=0)
"""


def start_servers(home: Path, names: list[str]) -> list[subprocess.Popen[str]]:
    procs = []
    for suffix in names:
        proc = subprocess.Popen([sys.executable, "-c", SERVER, str(home), suffix], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        procs.append(proc)
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return procs


def rate(label: str, calls: int, seconds: float) -> float:
    per_sec = calls / seconds
    print(f"  {label:<44} {per_sec:>10,.0f} calls/s  ({seconds / calls * 1e6:6.1f} us per call)")
    return per_sec


def bench_fray(home: Path, calls: int) -> dict[str, float]:
    cluster = LocalCluster(namespace="bench", home=home)
    procs = start_servers(home, [""] + [f"-{i}" for i in range(8)])
    try:
        pool = ClusterResolver(cluster).lookup("ping")
        pool.wait_for_size(1, timeout=10)
        for _ in range(200):
            pool.call().ping()
        start = time.perf_counter()
        for _ in range(calls):
            pool.call().ping()
        sync = rate("fray sync call", calls, time.perf_counter() - start)
        start = time.perf_counter()
        futures = [pool.call_async().ping() for _ in range(calls * 4)]
        for future in futures:
            future.result()
        pipelined = rate("fray pipelined calls", calls * 4, time.perf_counter() - start)
        for i in range(8):
            ClusterResolver(cluster).lookup(f"ping-{i}").wait_for_size(1, timeout=10)
        group = _one_name_of_eight(cluster)  # one name, eight actors: a broadcast reaches all of them
        samples = []
        for _ in range(300):
            start = time.perf_counter()
            for future in group.broadcast().ping():
                future.result()
            samples.append(time.perf_counter() - start)
        broadcast_ms = statistics.median(samples) * 1000
        print(f"  {'fray broadcast to 8 actors (median)':<44} {broadcast_ms:>10.3f} ms")
        return {"sync": sync, "pipelined": pipelined, "broadcast_ms": broadcast_ms}
    finally:
        for proc in procs:
            proc.communicate("", timeout=10)


def _one_name_of_eight(cluster: LocalCluster):
    """Copy the endpoints of ping-0..7 under one name, so one pool broadcasts to all eight."""
    folder = cluster.home.actor_dir("bench", "ping8")
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(8):
        for record in endpoints.Directory(cluster.home).lookup("bench", f"ping-{i}"):
            endpoints.write(cluster.home, endpoints.Endpoint(**{**record.to_dict(), "name": "ping8"}))
    # the servers know their actors as ping-i: address them by id, which the endpoint carries
    pool = ClusterResolver(cluster).lookup("ping8")
    pool.wait_for_size(8, timeout=10)
    return pool


def bench_lookup(tmp: Path) -> dict[str, float]:
    home_root = tmp / "lookup"
    cluster = LocalCluster(namespace="many", home=home_root)
    now = time.time()

    def fill(name: str, count: int) -> None:
        for i in range(count):
            endpoints.write(cluster.home, endpoints.Endpoint(
                actor_id=f"{i:016x}", name=name, namespace="many", host="127.0.0.1", port=1000 + i % 60000,
                pid=1, node="bench", run_id=None, attempt=None, registered_at=now + i, metadata={}))

    for n in range(1000):
        fill(f"name-{n}", 10)
    samples = []
    for n in range(0, 1000, 10):
        start = time.perf_counter()
        found = ClusterResolver(cluster).lookup(f"name-{n}").size
        samples.append(time.perf_counter() - start)
        assert found == 10
    spread = statistics.median(samples) * 1000
    print(f"  {'lookup, 10,000 endpoints over 1,000 names':<44} {spread:>10.3f} ms  (cold resolver; target <= 10 ms: "
          f"{'met' if spread <= 10 else 'MISSED'})")
    fill("crowd", 10_000)
    resolver = ClusterResolver(cluster)
    start = time.perf_counter()
    assert len(resolver.resolve("crowd")) == 10_000
    first = (time.perf_counter() - start) * 1000
    warm = []
    for _ in range(20):
        start = time.perf_counter()
        resolver.resolve("crowd")
        warm.append(time.perf_counter() - start)
    warm_ms = statistics.median(warm) * 1000
    print(f"  {'lookup, 10,000 endpoints under one name':<44} {warm_ms:>10.3f} ms  (after the first, "
          f"{first:.0f} ms, read them all; target <= 10 ms: {'met' if warm_ms <= 10 else 'MISSED'})")
    return {"lookup_spread_ms": spread, "lookup_crowd_ms": warm_ms, "lookup_crowd_first_ms": first}


def bench_ray(calls: int) -> dict[str, float] | None:
    try:
        import ray
    except ImportError:
        print("  Ray is not installed here (pip install ray), so there is nothing to compare with")
        return None
    ray.init(num_cpus=9, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        @ray.remote
        class Ping:
            def ping(self, x=None):
                return x

        actor = Ping.remote()
        ray.get(actor.ping.remote())
        for _ in range(200):
            ray.get(actor.ping.remote())
        n = max(500, calls // 2)
        start = time.perf_counter()
        for _ in range(n):
            ray.get(actor.ping.remote())
        sync = rate("ray sync call", n, time.perf_counter() - start)
        start = time.perf_counter()
        ray.get([actor.ping.remote() for _ in range(n * 2)])
        pipelined = rate("ray pipelined calls", n * 2, time.perf_counter() - start)
        actors = [Ping.remote() for _ in range(8)]
        ray.get([a.ping.remote() for a in actors])
        samples = []
        for _ in range(300):
            start = time.perf_counter()
            ray.get([a.ping.remote() for a in actors])
            samples.append(time.perf_counter() - start)
        broadcast_ms = statistics.median(samples) * 1000
        print(f"  {'ray broadcast to 8 actors (median)':<44} {broadcast_ms:>10.3f} ms  (ray {ray.__version__})")
        return {"sync": sync, "pipelined": pipelined, "broadcast_ms": broadcast_ms}
    finally:
        ray.shutdown()


MB = 1 << 20
MB_CALLS = 50  # a round: 50 calls of each


def bench_megabyte(home: Path, rounds: int) -> None:
    """1 MB each way per call, fray's actor and Ray's in turn (a shared machine drifts): the median of each."""
    payload = os.urandom(MB)
    procs = start_servers(home, [""])
    ray_actor = _ray_actor(num_cpus=1)
    try:
        pool = ClusterResolver(LocalCluster(namespace="bench", home=home)).lookup("ping")
        pool.wait_for_size(1, timeout=10)
        calls: dict[str, Callable[[], object]] = {"fray": lambda: pool.call().ping(payload)}
        if ray_actor is not None:
            import ray

            calls["ray"] = lambda: ray.get(ray_actor.ping.remote(payload))
        for call in calls.values():
            for _ in range(10):
                assert len(call()) == MB  # type: ignore[arg-type]
        rates: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                start = time.perf_counter()
                for _ in range(MB_CALLS):
                    call()
                rates[name].append(MB_CALLS / (time.perf_counter() - start))
    finally:
        for proc in procs:
            proc.communicate("", timeout=10)
        if ray_actor is not None:
            import ray

            ray.shutdown()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, value in medians.items():
        runs = ", ".join(f"{r:.0f}" for r in rates[name])
        print(f"  {name + ' 1 MB round trip (1 MB each way)':<44} {value:>10,.0f} calls/s  (rounds: {runs})")
    if "ray" in medians:
        ratio = medians["fray"] / medians["ray"]
        print(f"  1 MB round trips: fray is {ratio:.2f}x Ray  [target >= 2x: {'met' if ratio >= 2 else 'MISSED'}]")
    else:
        print("  Ray is not installed here (pip install ray), so there is nothing to compare with")


def _ray_actor(num_cpus: int) -> Any:
    try:
        import ray
    except ImportError:
        return None
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)

    @ray.remote
    class Ping:
        def ping(self, x=None):
            return x

    actor = Ping.remote()
    ray.get(actor.ping.remote())
    return actor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--only", choices=("all", "mb"), default="all")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"actor benchmarks ({sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    if args.only == "mb":
        with tempfile.TemporaryDirectory() as tmp:
            bench_megabyte(Path(tmp) / "home", args.rounds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        fray = bench_fray(Path(tmp) / "home", args.calls)
        bench_lookup(Path(tmp))
        bench_megabyte(Path(tmp) / "home-mb", args.rounds)
    ray = bench_ray(args.calls)
    if ray:
        ratio = fray["sync"] / ray["sync"]
        print(f"  sync calls: fray is {ratio:.1f}x Ray  [target >= 5x: {'met' if ratio >= 5 else 'MISSED'}]")
        print(f"  pipelined:  fray is {fray['pipelined'] / ray['pipelined']:.1f}x Ray; "
              f"broadcast: {ray['broadcast_ms'] / fray['broadcast_ms']:.1f}x faster")


if __name__ == "__main__":
    main()
