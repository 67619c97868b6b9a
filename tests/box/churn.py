"""Runs that fail and are retried at once, each workload recording itself: what "one live attempt per run" is
checked by across takeovers (tests/box/test_many_hosts.py, tests/bench/bench_hosts.py).

Each workload writes `churn/<run id>/<attempt>-<host>-<pid>.json` beside the home, rewritten every 0.2 s with its
first and last sign of life; `overlaps` and `duplicates` read them back from the file server's side.
"""

from __future__ import annotations

import json
from typing import Any

from tests.box.fray_on_box import FrayHome

SCRIPT = """#FRAY --backend slurm --max-retries 1000 --backoff-base 0 --heartbeat-interval 0.5
import json, os, socket, sys, time

folder = os.path.join(os.path.dirname(os.environ["FRAY_HOME"]), "churn", os.environ["FRAY_RUN_ID"])
os.makedirs(folder, exist_ok=True)
me = os.path.join(folder, f"{os.environ['FRAY_ATTEMPT']}-{socket.gethostname()}-{os.getpid()}.json")
start = time.time()
for _ in range(8):  # alive for about 1.6 s, then a workload failure: retried at once, again and again
    with open(me + ".tmp", "w") as f:
        json.dump({"attempt": int(os.environ["FRAY_ATTEMPT"]), "start": start, "last": time.time()}, f)
    os.replace(me + ".tmp", me)
    time.sleep(0.2)
sys.exit(1)
"""


def workloads(home: FrayHome) -> dict[str, list[dict[str, Any]]]:
    """Run id -> every workload it ran, as each recorded itself: attempt number, first and last sign of life."""
    found: dict[str, list[dict[str, Any]]] = {}
    records = home.server.parent / "churn"
    for folder in records.iterdir() if records.is_dir() else ():  # none until a first workload started
        for record in folder.glob("*.json"):
            try:
                found.setdefault(folder.name, []).append(json.loads(record.read_text()))
            except ValueError:
                pass
    return found


def duplicates(ran: dict[str, list[dict[str, Any]]]) -> dict[str, list[int]]:
    """Run id -> the attempt numbers that more than one workload ran."""
    found = {}
    for run_id, workloads_of_run in ran.items():
        numbers = [w["attempt"] for w in workloads_of_run]
        twice = sorted({n for n in numbers if numbers.count(n) > 1})
        if twice:
            found[run_id] = twice
    return found


def overlaps(ran: dict[str, list[dict[str, Any]]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each pair of workloads of one run that lived at once."""
    found = []
    for run_id, workloads_of_run in ran.items():
        ordered = sorted(workloads_of_run, key=lambda w: w["start"])
        found += [(run_id, a, b) for a, b in zip(ordered, ordered[1:]) if a["last"] > b["start"]]
    return found
