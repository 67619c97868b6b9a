"""fray end to end on the cluster in a box, with today's code: a run submitted on one login host runs in a
node host and both login hosts follow it through their own clients of the shared folder.

The scenario is `run_across_hosts`; what spans hosts (the daemon's lease, clocks, fencing, late files) is
tests/box/test_many_hosts.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from tests.box.box import Box
from tests.box.fray_on_box import FrayHome
from tests.box.host import Host
from tests.conftest import wait_until

pytestmark = pytest.mark.slow

STEPS = 10
TRAIN = f"""#FRAY --backend slurm --heartbeat-interval 0.5 --backoff-base 0
import socket
import time

from fray import report

for step in range(1, {STEPS + 1}):
    report.progress(step=step)
    print(f"step {{step}} on {{socket.gethostname()}}", flush=True)
    time.sleep(0.3)
"""


@dataclass
class Crossing:
    """What one run across hosts showed: where it ran, and what each login host said about it."""

    run_id: str
    submitted: dict[str, Any]  # `fray submit --json` on the submitting host
    ran_on: dict[str, list[int]]  # host -> pids of the run's workload, seen while it ran
    ended: dict[str, dict[str, Any]]  # login host -> its `fray status --json` once ended
    logs: dict[str, str]  # login host -> its `fray logs`


def run_across_hosts(box: Box, home: FrayHome, submit_on: Host, watchers: list[Host], script: str = TRAIN,
                     timeout: float = 60) -> Crossing:
    """Submit `script` on `submit_on`; watch where its workload runs; wait until every watcher's `fray status`
    shows it ended; read its logs from each watcher."""
    path = home.project("project", {"train.py": script}) / "train.py"
    submitted = home.submit(submit_on, path)
    run_id = submitted["run_id"]
    ran_on = wait_until(lambda: home.where(run_id), timeout=timeout, what=f"run {run_id}'s workload to start")
    ended = {host.name: home.wait_ended(host, run_id, timeout=timeout) for host in [submit_on, *watchers]}
    logs = {host.name: home.fray(host, "logs", run_id, check=True).stdout for host in [submit_on, *watchers]}
    return Crossing(run_id, submitted, ran_on, ended, logs)


@pytest.fixture
def fray_home(box: Box, request: pytest.FixtureRequest) -> Iterator[FrayHome]:
    home = FrayHome.create(box, request.node.name)
    yield home
    home.clean()


def test_a_run_submitted_on_login_a_runs_on_a_node_and_both_login_hosts_follow_it(box: Box,
                                                                                   fray_home: FrayHome) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    seen = run_across_hosts(box, fray_home, submit_on=a, watchers=[b])
    assert "login-a" in seen.submitted["daemon"]["detail"]  # `fray submit` started the daemon where it ran
    (node,) = seen.ran_on  # one host ran the workload: a node, never a login host
    assert node in {n.name for n in box.nodes}, seen.ran_on
    for shown in seen.ended.values():
        assert shown["run"]["status"] == "completed_success"
        assert [(t["number"], t["node"], t["cause"]) for t in shown["attempts"]] == [(1, node, "success")]
    assert seen.ended["login-a"]["attempts"] == seen.ended["login-b"]["attempts"]
    expected = "".join(f"step {i} on {node}\n" for i in range(1, STEPS + 1))  # socket.gethostname() on the node
    assert seen.logs == {"login-a": expected, "login-b": expected}
    attempt = fray_home.server / "runs" / seen.run_id / "attempts" / "1"
    assert (attempt / "exit.json").exists() and (attempt / "final.json").exists()  # through the node's client
