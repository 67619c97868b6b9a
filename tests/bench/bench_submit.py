"""Benchmark: `fray submit examples/hello.py` to the attempt's first heartbeat, daemon running.

Target: median <= 300 ms. Measured from the moment `fray submit` is started until
attempts/1/heartbeat exists; printed beside `python -c pass` and the bare
`fray submit` command time (which includes making sure a daemon serves).

    python tests/bench/bench_submit.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FRAY, REPO, env_for, report, time_command, warm_up  # noqa: E402

from fray.state.layout import Home  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "fray")
        env = env_for(home.root)
        warm_up([FRAY, "--help"], env)
        subprocess.run([FRAY, "daemon", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            report("baseline: python -c pass", time_command([sys.executable, "-c", "pass"], env, args.repeats))
            to_heartbeat, to_return = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                out = subprocess.run([FRAY, "submit", "--json", str(REPO / "examples" / "hello.py")], env=env,
                                     check=True, capture_output=True, text=True).stdout
                to_return.append(time.perf_counter() - start)
                beat = home.run(json.loads(out)["run_id"]).attempt(1).heartbeat
                while not beat.exists():
                    if time.perf_counter() - start > 30:
                        raise TimeoutError(f"no heartbeat at {beat}")
                    time.sleep(0.001)
                to_heartbeat.append(time.perf_counter() - start)
                time.sleep(0.3)  # let the run finish so runs do not queue behind each other
            report("fray submit (command returns)", to_return)
            report("fray submit -> first heartbeat", to_heartbeat, target_ms=300)
        finally:
            subprocess.run([FRAY, "daemon", "stop"], env=env, stdout=subprocess.DEVNULL)
            lease = json.loads(home.daemon_lease.read_text()) if home.daemon_lease.exists() else None
            if lease:
                try:
                    import os

                    os.kill(lease["pid"], signal.SIGKILL)
                except OSError:
                    pass


if __name__ == "__main__":
    main()
