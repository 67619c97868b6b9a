"""The cluster API examples run as a new user runs them: in-process (LocalCluster) and with `fray submit`."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading

import pytest

from conftest import REPO, run_fray, wait_until
from fray.state import store

pytestmark = pytest.mark.slow

# example -> lines its driver must print, whichever cluster runs it
EXPECTED = {
    "cluster_train.py": ["trained 20 steps, loss", "driver: training finished at step 20"],  # the job's, then the driver's
    "inference_actors.py": ["client: 3 servers answered 6 prompts ([2, 2, 2])"],
    "shards_workerpool.py": ["counted 12000 words in 12 shards"],
    "actors_rl.py": ["coordinator: 4 rounds, 24 episodes by 3 workers"],
    "elastic_barrier.py": ["slice 0: barrier sizes per step [3, 3]", "slice 1: barrier sizes per step [3, 3, 2, 2]",
                           "coordinator: all slices finished"],
}


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_example_runs_in_process_on_a_local_cluster(example, tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "examples" / example)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in EXPECTED[example]:
        assert line in proc.stdout, proc.stdout


def test_examples_run_with_fray_submit_on_the_local_backend(home):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2}}))  # every example fits a 2-core machine
    ids = {}
    for example in EXPECTED:
        out = run_fray("submit", str(REPO / "examples" / example), "--json", home=home.root, check=True)
        ids[example] = json.loads(out.stdout)["run_id"]
    for example, run_id in ids.items():
        meta = wait_until(lambda: (m := json.loads(home.run(run_id).meta.read_text()))["phase"] == "ended" and m,
                          timeout=60, what=f"{example} to end within a minute")
        stdout = home.run(run_id).attempt(1).stdout.read_text()
        assert meta["end"]["status"] == "completed_success", stdout + home.run(run_id).attempt(1).stderr.read_text()
        for line in EXPECTED[example]:
            assert line in stdout, stdout
    listing = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
    assert {r["status"] for r in listing["runs"]} == {"completed_success"}  # children too: none left behind
    run_fray("daemon", "stop", home=home.root)


def test_the_elastic_barrier_reports_the_size_it_released_with_even_if_a_member_leaves_before_waiters_wake():
    spec = importlib.util.spec_from_file_location("elastic_barrier", REPO / "examples" / "elastic_barrier.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    barrier = example.ElasticBarrier()
    barrier.members = {0, 1, 2}
    sizes: dict[int, int] = {}
    waiters = [threading.Thread(target=lambda m=m: sizes.__setitem__(m, barrier.wait(None, 1, m))) for m in (1, 2)]
    for waiter in waiters:
        waiter.start()
    wait_until(lambda: barrier.arrived.get(1) == {1, 2}, timeout=10, what="members 1 and 2 to wait at step 1")
    with barrier.changed:  # the waiters cannot wake before member 0 has arrived and left again
        sizes[0] = barrier.wait(None, 1, 0)
        barrier.leave(None, 0)
    for waiter in waiters:
        waiter.join(timeout=10)
    assert sizes == {0: 3, 1: 3, 2: 3}
