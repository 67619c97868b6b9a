"""Benchmark: submitting a 1,000-point sweep to the real Slurm test cluster, fray against submitit's map_array.

Prints, measured in the same run on the same machine and cluster, each side
timed `--repeats` times in turn:
  - fray: from starting `fray submit SCRIPT --sweep i=0..999 --max-parallel 4`
    (a daemon already serving FRAY_HOME) until the daemon has recorded every
    point's attempt as submitted to Slurm (the sweep's launch record names its
    job array, one task per point), and how many `sbatch` calls that took;
    and, as its own line, until the daemon has also written every point's run
    folder (which it does after submitting: fray.daemon.sweeps);
  - submitit: `AutoExecutor(...).map_array(fn, range(1000))` with
    slurm_array_parallelism=4, wall time and `sbatch` calls.
Target: one sbatch call, and no slower than submitit.

Every job is submitted held (`#SBATCH --hold`) and cancelled after each
measurement, so the cluster never runs 2,000 jobs. `sbatch` calls are counted
by a shim first on the PATH of both (it logs, then runs the real sbatch).
submitit is a benchmark-only dependency: install it in the venv that runs this
(`pip install submitit`), never in the project's test dependencies.

    bash tests/slurm/cluster.sh start
    python tests/bench/bench_sweep.py [--points 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fray.state.layout import Home  # noqa: E402
from tests.slurm.fixture import start_cluster  # noqa: E402

FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.0, "command_timeout_sec": 120, "sinfo_ttl_sec": 5}
POINT = "#!/bin/bash\n#FRAY --backend slurm\n#SBATCH --hold\necho \"$FRAY_SWEEP_PARAMS\"\n"


def shim(folder: Path, log: Path) -> dict[str, str]:
    """An environment whose `sbatch` logs each call to `log` and runs the real one."""
    real = shutil.which("sbatch")
    assert real, "sbatch is not on PATH: start the test cluster (bash tests/slurm/cluster.sh start)"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sbatch").write_text(f'#!/bin/bash\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    (folder / "sbatch").chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def cancel_all(env: dict[str, str]) -> None:
    subprocess.run(["scancel", f"--user={os.environ.get('USER') or 'root'}"], env=env, check=False)


def fray_once(points: int, tmp: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """(seconds until the daemon recorded every point's first attempt as submitted to Slurm, seconds until
    every point's run folder was written too, its attempt in meta.json)."""
    home = Home(tmp / "fray")
    home.root.mkdir(parents=True)
    home.config.write_text(json.dumps({"slurm": FAST}))
    env = {**env, "FRAY_HOME": str(home.root)}
    script = tmp / "point.sh"
    script.write_text(POINT)
    fray = [sys.executable, "-m", "fray.cli.main"]
    subprocess.run([*fray, "daemon", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        start = time.perf_counter()
        done = subprocess.run([*fray, "submit", str(script), "--sweep", f"i=0..{points - 1}", "--max-parallel", "4",
                               "--json"], env=env, check=True, capture_output=True, text=True)
        sweep = json.loads(done.stdout)
        launch, last = home.group(sweep["group"]).launch, home.run(sweep["runs"][-1]["run_id"]).meta
        # Submitted: the sweep's launch record names its job array (every point is one task of it); the
        # record goes once the runs are written, and the runs name the array too.
        submitted = wait(start, lambda: recorded(launch) or last.exists())
        # Written: the daemon writes the points' run folders after that, in index order: the last one is last.
        written = wait(start, lambda: last.exists() and json.loads(last.read_text())["attempts"][0].get("backend_ref"))
        return submitted, written
    finally:
        subprocess.run([*fray, "daemon", "stop"], env=env, check=False, stdout=subprocess.DEVNULL)
        cancel_all(env)


def recorded(launch: Path) -> bool:
    try:
        return bool(json.loads(launch.read_bytes())["array_job_id"])
    except (FileNotFoundError, ValueError):  # not yet, or being replaced
        return False


def wait(start: float, done: Callable[[], Any]) -> float:
    """Seconds from `start` until `done()` is true (polled every 10 ms)."""
    while not done():
        if time.perf_counter() - start > 600:
            raise TimeoutError("the sweep was not submitted within 10 minutes")
        time.sleep(0.01)
    return time.perf_counter() - start


def submitit_once(points: int, tmp: Path, env: dict[str, str]) -> float:
    import submitit

    saved = dict(os.environ)
    os.environ.update(env)  # submitit runs sbatch from this process's PATH
    try:
        executor = submitit.AutoExecutor(folder=str(tmp / "submitit" / "%j"), cluster="slurm")
        executor.update_parameters(slurm_partition="cpu", timeout_min=5, slurm_array_parallelism=4,
                                   slurm_additional_parameters={"hold": True})
        start = time.perf_counter()
        jobs = executor.map_array(abs, range(points))
        elapsed = time.perf_counter() - start
        assert len(jobs) == points
        return elapsed
    finally:
        os.environ.clear()
        os.environ.update(saved)
        cancel_all(env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        import submitit  # noqa: F401
    except ImportError:
        sys.exit("this benchmark compares with submitit: pip install submitit (in this venv only)")
    cluster = start_cluster()
    os.environ.update(cluster.env)
    samples: dict[str, list[float]] = {"fray": [], "submitit": [], "written": []}
    sbatch_calls: dict[str, list[int]] = {"fray": [], "submitit": []}
    for _ in range(args.repeats):
        for label in ("fray", "submitit"):  # in turn: both see the same machine and cluster
            with tempfile.TemporaryDirectory() as folder:
                tmp = Path(folder)
                log = tmp / "sbatch.log"
                env = shim(tmp / "bin", log)
                if label == "fray":
                    seconds, written = fray_once(args.points, tmp, env, log)
                    samples["written"].append(written)
                else:
                    seconds = submitit_once(args.points, tmp, env)
                samples[label].append(seconds)
                sbatch_calls[label].append(calls(log))
    print(f"submitting a {args.points}-point sweep to the Slurm test cluster, {args.repeats} runs each "
          f"(load average {os.getloadavg()[0]:.2f}):")
    for label, seconds in samples.items():
        what = {"fray": "fray", "submitit": "submitit", "written": "fray, its runs written"}[label]
        calls_text = f"  sbatch calls {sorted(set(sbatch_calls[label]))}" if label in sbatch_calls else ""
        print(f"  {what:<22} median {statistics.median(seconds):6.2f} s  (min {min(seconds):.2f} / max "
              f"{max(seconds):.2f}){calls_text}")
    ratio = statistics.median(samples["fray"]) / statistics.median(samples["submitit"])
    one = set(sbatch_calls["fray"]) == {1}
    verdict = "met" if one and ratio <= 1.0 else "MISSED"
    print(f"  fray / submitit: {ratio:.2f}x  [target: one sbatch call and <= 1.00x: {verdict}]")


if __name__ == "__main__":
    main()
