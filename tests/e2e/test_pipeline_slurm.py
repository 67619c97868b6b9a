"""The docs' "Pipelines" walkthrough (docs/pipelines.md), run as written on the real Slurm test cluster, with a node failure in train.

train is resubmitted after its node goes down; eval (`#FRAY --after train`) starts once, when train has
succeeded, on the checkpoint that train's second attempt promoted; report (`#FRAY --after eval:any`) after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal

import pytest

from conftest import REPO, run_fray, wait_until
from docs_pages import block_under
from fray.state.layout import Home
from tests.backends.slurm.test_slurm_backend import slurm_home  # noqa: F401  (autouse: the fast test cluster's config)

pytestmark = pytest.mark.slow

FAILURE_LINE = "# train's node fails"


def walkthrough() -> tuple[list[str], list[str]]:
    """The docs block's commands: those before the node failure, and those after."""
    lines = block_under("pipelines.md", "On Slurm, through a node failure").text.splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith(FAILURE_LINE))
    return ([line for line in lines[:cut] if line.startswith("fray ")],
            [line for line in lines[cut:] if line.startswith("fray ")])


def fray(home: Home, line: str) -> str:
    proc = run_fray(*shlex.split(line, comments=True)[1:], home=home.root, check=True, env={"COLUMNS": "200"})
    return proc.stdout


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def run_named(home: Home, name: str) -> str:
    return next(i for i in home.run_ids() if meta_of(home, i)["name"] == name)


def test_the_pipelines_walkthrough_on_slurm_with_a_node_failure(home, daemon, slurm_cluster, monkeypatch):
    monkeypatch.chdir(REPO)  # the walkthrough's paths are the repository's
    before, after = walkthrough()
    outputs = {line: fray(home, line) for line in before}
    assert "waiting for train (" in outputs[next(line for line in before if line.startswith("fray status eval"))]
    tree = outputs[next(line for line in before if line.startswith("fray list --tree"))]
    assert "└ eval ⇠ train" in tree and "└ report ⇠ eval:any" in tree
    train, evaluation = run_named(home, "train"), run_named(home, "eval")

    first = wait_until(lambda: (a := meta_of(home, train)["attempts"]) and a[0]["state"] == "running"
                       and a[0]["node"] and a[0], timeout=60, what="train's attempt 1 to run")
    wait_until(lambda: list(home.run(train).checkpoints_dir.glob("step-*")), timeout=60, what="a checkpoint")
    assert not meta_of(home, evaluation)["attempts"]
    node = first["node"]
    # The node dies: its slurmd, and with it everything running there (the wrapper and train).
    started = json.loads((home.run(train).attempt(1).dir / "started.json").read_text())
    slurm_cluster.kill_slurmd(node)
    try:
        for pid in (started["pid"], started["workload_pid"]):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        done = wait_until(lambda: meta_of(home, evaluation)["phase"] == "ended" and meta_of(home, evaluation),
                          timeout=180, what="eval to end")
    finally:
        slurm_cluster.restart_slurmd(node)
    trained = meta_of(home, train)
    assert trained["end"]["status"] == "completed_success"
    assert len(trained["attempts"]) >= 2 and trained["attempts"][0]["cause"] in ("node_fault", "lost", "heartbeat_stall")
    assert trained["attempts"][1]["node"] != node
    assert done["end"]["status"] == "completed_success" and len(done["attempts"]) == 1  # eval started once
    reported = wait_until(lambda: meta_of(home, run_named(home, "report"))["phase"] == "ended"
                          and meta_of(home, run_named(home, "report")), timeout=120, what="report to end")
    assert reported["end"]["status"] == "completed_success" and len(reported["attempts"]) == 1

    outputs = {line: fray(home, line) for line in after}
    assert "completed_success" in outputs["fray status train            # completed_success, 2 attempts"]
    logs = outputs[next(line for line in after if line.startswith("fray logs eval"))]
    assert f"evaluated step-000060 of {home.run(train).dir}: score 0.1" in logs
    assert "'step': 60, 'score': 0.1" in outputs[next(line for line in after if line.startswith("fray logs report"))]
    slurm_cluster.wait_node(lambda s: s.usable, node, timeout=30)
