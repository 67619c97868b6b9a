"""Many hands on the controls at once: 8 processes x 500 control operations while the daemon runs.

control.json has one writer *role* (the CLI) but any number of CLI processes;
each request is a read-modify-write under the run's lock, then one audited line.
Nothing may be lost (every restart counted, every setting kept), no reader may
ever see half a file, and audit.jsonl must hold exactly one intact, chained line
per operation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, wait_until
from fray.state import audit, runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

WORKERS = 8
OPS = 500

# Each worker owns one safe setting, so the last value it wrote to a run is the one that
# must be there at the end; values stay valid together (check_spec) whatever the order.
SETTING = {0: ("max_retries", 1000, 1), 1: ("max_retries_preemption", 1000, 1), 2: ("startup_grace_sec", 300.0, 1.0),
           3: ("stop_grace_sec", 1.0, 0.001), 4: ("progress_timeout_sec", 1000.0, 1.0), 5: ("backoff_max_sec", 10.0, 1.0),
           6: ("heartbeat_timeout_sec", 300.0, 1.0), 7: ("backoff_base_sec", 0.1, 0.0001)}

WORKER = r"""
import json, random, sys, time
from pathlib import Path
from fray.state import runs
from fray.state.layout import Home

home, run_ids, index, ops, key, base, step, go = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6]), float(sys.argv[7]), Path(sys.argv[8])
home = Home(Path(home))
rng = random.Random(index)
restarts = {r: 0 for r in run_ids}
last = {}
counts = {"restart": 0, "config-set": 0, "unpause": 0}
while not go.exists():
    time.sleep(0.005)
for i in range(ops):
    run_id = rng.choice(run_ids)
    op = rng.choices(["restart", "config-set", "unpause"], [45, 45, 10])[0]
    if op == "config-set":
        value = base + i * step
        value = int(value) if key.startswith("max_retries") else value
        runs.set_overrides(home, run_id, {key: value})
        last[run_id] = value
    else:
        runs.request(home, run_id, op)
        restarts[run_id] += op == "restart"
    counts[op] += 1
print(json.dumps({"restarts": restarts, "last": last, "counts": counts}))
"""

READER = r"""
import json, sys
from pathlib import Path
from fray.state import store
from fray.errors import CorruptFileError
from fray.state.layout import Home

home, run_ids, stop = Home(Path(sys.argv[1])), json.loads(sys.argv[2]), Path(sys.argv[3])
reads, torn = 0, []
while not stop.exists():
    for run_id in run_ids:
        for path, schema in ((home.run(run_id).control, "control"), (home.run(run_id).meta, "meta")):
            try:
                store.read_json(path, schema)
            except CorruptFileError as exc:
                torn.append(str(exc))
            reads += 1
print(json.dumps({"reads": reads, "torn": torn}))
"""

SERVES = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --stop-grace 1 --backoff-base 0
trap '' USR1
trap 'exit 0' TERM
while true; do sleep 0.1; done
"""


def python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=str(REPO), start_new_session=True)


def test_8_processes_issuing_500_control_operations_each_lose_nothing_and_tear_nothing(home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 8, "gpus": 0}}))
    daemon = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        storm(home, tmp_path)
    finally:
        daemon.kill()
        daemon.wait()


def storm(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(SERVES)
    run_ids = [runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id
               for _ in range(3)]
    for run_id in run_ids:
        wait_until(lambda: home.run(run_id).attempt(1).started.exists(), what="the runs to be running")
    go, stop = tmp_path / "go", tmp_path / "stop"
    reader = python(READER, str(home.root), json.dumps(run_ids), str(stop))
    workers = [python(WORKER, str(home.root), json.dumps(run_ids), str(i), str(OPS), *map(str, SETTING[i]), str(go))
               for i in range(WORKERS)]
    began = time.monotonic()
    go.touch()
    results = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err
            results.append(json.loads(out))
    finally:
        for worker in workers:
            worker.kill()
        stop.touch()
        out, err = reader.communicate(timeout=30)
    took = time.monotonic() - began
    assert reader.returncode == 0, err
    seen = json.loads(out)
    total = sum(sum(r["counts"].values()) for r in results)
    print(f"\n{total} control operations by {WORKERS} processes in {took:.1f}s "
          f"({total / took:.0f}/s); {seen['reads']} reads alongside")

    assert total == WORKERS * OPS
    # No torn read: every read of control.json and meta.json, mid-write or not, was a whole file.
    assert seen["torn"] == [] and seen["reads"] > 1000
    # No lost update: every restart counted, every worker's last setting kept.
    for run_id in run_ids:
        control = json.loads(home.run(run_id).control.read_text())
        assert control["restart_nonce"] == sum(r["restarts"][run_id] for r in results)
        for index, result in enumerate(results):
            key = SETTING[index][0]
            if run_id in result["last"]:
                assert control["overrides"][key] == result["last"][run_id], (run_id, key)
    # One intact, chained audit line per operation.
    lines = home.audit.read_text().splitlines()
    assert len(lines) == total
    assert audit.verify(home) == []
    actions = [json.loads(line)["action"] for line in lines]
    for op in ("restart", "config-set", "unpause"):
        assert actions.count(f"control.{op}") == sum(r["counts"][op] for r in results)
    # The daemon saw it all too: it has applied the last restart and the last settings of each run.
    for run_id in run_ids:
        control = json.loads(home.run(run_id).control.read_text())

        def applied() -> bool:
            meta = json.loads(home.run(run_id).meta.read_text())
            return (meta["applied"]["restart_nonce"] == control["restart_nonce"]
                    and all(meta["spec"][k] == v for k, v in control["overrides"].items()))

        wait_until(applied, timeout=15, what=f"the daemon to apply every request to {run_id}")
    assert not [p for p in home.root.rglob("*.corrupt-*")], "a reader saw a corrupt file"
    for run_id in run_ids:
        runs.request(home, run_id, "stop")
    for run_id in run_ids:
        wait_until(lambda: json.loads(home.run(run_id).meta.read_text())["phase"] == "ended", what="the stops")
