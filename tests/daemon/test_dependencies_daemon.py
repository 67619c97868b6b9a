"""`--after` end to end: the real CLI and daemon, local wrappers, real files; and a daemon killed as the upstream ends."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray.state.layout import Home

pytestmark = pytest.mark.slow

# Trains until told to finish (a file appears), checkpoints, then succeeds: the test decides when it ends.
TRAIN = """\
#!/usr/bin/env python3
#FRAY --heartbeat-interval 1
import os, sys, time
from pathlib import Path
from fray import report
gate = Path(sys.argv[1])
while not gate.exists():
    time.sleep(0.05)
with report.checkpoint("step-7") as folder:
    (folder / "weights").write_text("7")
if gate.read_text().strip() == "fail":
    sys.exit(3)
report.final(step=7)
"""

# Records every start, and what it was told about its upstream.
EVAL = """\
#!/usr/bin/env python3
#FRAY --after train
import json, os, sys
from pathlib import Path
from fray import report
seen = {k: v for k, v in os.environ.items() if k.startswith("FRAY_AFTER_")}
with open(sys.argv[1], "a") as out:
    out.write(json.dumps(seen) + "\\n")
report.final(ok=True)
"""


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def status_json(home: Home, ref: str) -> dict:
    proc = run_fray("status", ref, "--json", home=home.root, check=True)
    data = json.loads(proc.stdout)
    schema_validate("cli-status", data)
    return data["run"]


def submit(home: Home, *args: str) -> str:
    proc = run_fray("submit", "--json", *args, home=home.root, check=True)
    return json.loads(proc.stdout)["run_id"]


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    (folder / "eval.py").write_text(EVAL)
    (folder / "report.py").write_text(EVAL.replace("#FRAY --after train\n", ""))  # upstreams from the flags only
    return folder


def test_eval_waits_for_train_then_starts_once_and_sees_its_folder_and_checkpoint(home, daemon, scripts, tmp_path):
    gate, seen = tmp_path / "gate", tmp_path / "seen.jsonl"
    train = submit(home, str(scripts / "train.py"), "--", str(gate))
    wait_until(lambda: meta_of(home, train)["attempts"] and status_json(home, train)["status"] == "healthy_running",
               timeout=60, what="train to run")
    evaluation = submit(home, str(scripts / "eval.py"), "--", str(seen))
    waiting = wait_until(lambda: (s := status_json(home, evaluation))["reason"].startswith("waiting for train") and s,
                         timeout=30, what="eval to wait")
    assert waiting["status"] == "pending"
    assert waiting["reason"] == "waiting for train (healthy_running, attempt 1)"
    assert not meta_of(home, evaluation)["attempts"]
    gate.write_text("ok")
    done = wait_until(lambda: meta_of(home, evaluation)["phase"] == "ended" and meta_of(home, evaluation),
                      timeout=60, what="eval to end")
    assert done["end"]["status"] == "completed_success"
    assert len(done["attempts"]) == 1
    lines = seen.read_text().splitlines()
    assert len(lines) == 1
    told = json.loads(lines[0])
    assert told["FRAY_AFTER_TRAIN"] == str(home.run(train).dir)
    assert told["FRAY_AFTER_TRAIN_CHECKPOINT"] == str(home.run(train).checkpoints_dir / "step-7")
    assert (Path(told["FRAY_AFTER_TRAIN_CHECKPOINT"]) / "weights").read_text() == "7"
    schema_validate("meta", done)


def test_a_failed_upstream_ends_the_dependent_failed_dependency_and_fail_dependents_start(home, daemon, scripts,
                                                                                             tmp_path):
    gate = tmp_path / "gate"
    train = submit(home, str(scripts / "train.py"), "--max-retries", "0", "--", str(gate))
    on_ok = submit(home, str(scripts / "eval.py"), "--name", "eval-ok", "--", str(tmp_path / "ok.jsonl"))
    on_fail = submit(home, str(scripts / "report.py"), "--name", "eval-fail", "--after", f"{train}:fail",
                     "--", str(tmp_path / "fail.jsonl"))
    gate.write_text("fail")
    ended = wait_until(lambda: meta_of(home, on_ok)["phase"] == "ended" and status_json(home, on_ok), timeout=60,
                       what="eval-ok to end")
    assert ended["status"] == "failed_dependency"
    assert ended["reason"].startswith("upstream train ended failed")
    assert meta_of(home, train)["end"]["status"] == "failed"
    assert not meta_of(home, on_ok)["attempts"]
    fail_side = wait_until(lambda: meta_of(home, on_fail)["phase"] == "ended" and meta_of(home, on_fail), timeout=60,
                           what="eval-fail to end")
    assert fail_side["end"]["status"] == "completed_success"
    listed = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", listed)
    assert listed["counts"]["failed_dependency"] == 1


def test_bad_after_is_refused_at_submit_and_writes_nothing(home, scripts):
    for args, words in [
        (["--after", "nosuch"], "no run matches 'nosuch'"),
        (["--name", "loop", "--after", "loop"], "cannot wait for itself"),
        (["--after", "gpu-login/train"], "another cluster"),
        (["--after", "train:soon"], "RUN[:ok|:fail|:any]"),
    ]:
        proc = run_fray("submit", str(scripts / "train.py"), *args, "--json", home=home.root)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout or proc.stderr)
        schema_validate("cli-error", error)
        assert words in json.dumps(error), (args, error)
        assert home.run_ids() == []
    # A sweep naming itself: a cycle through its own group.
    proc = run_fray("submit", str(scripts / "train.py"), "--name", "sw", "--sweep", "x=1,2", "--after", "sw",
                    home=home.root)
    assert proc.returncode == 2 and "cannot wait for itself" in proc.stderr
    assert home.run_ids() == [] and home.group_ids() == []


def test_a_daemon_killed_as_the_upstream_ends_starts_the_dependent_exactly_once(home, scripts, tmp_path):
    gate, seen = tmp_path / "gate", tmp_path / "seen.jsonl"
    first = start_daemon(home)
    train = submit(home, str(scripts / "train.py"), "--", str(gate))
    evaluation = submit(home, str(scripts / "eval.py"), "--", str(seen))
    wait_until(lambda: meta_of(home, train)["attempts"] and meta_of(home, evaluation)["wait_reason"], timeout=60,
               what="train to start and eval to wait")
    gate.write_text("ok")
    # Killed the moment train's wrapper has written its exit record: before or while the daemon acts on it.
    wait_until(lambda: home.run(train).attempt(1).exit.exists(), timeout=60, interval=0.005, what="train's exit")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    second = start_daemon(home)
    try:
        done = wait_until(lambda: meta_of(home, evaluation)["phase"] == "ended" and meta_of(home, evaluation),
                          timeout=60, what="eval to end")
        # And a third daemon, after it ended, changes nothing.
        os.kill(second.pid, signal.SIGKILL)
        second.wait(timeout=10)
        second = start_daemon(home)
        assert meta_of(home, evaluation)["end"]["status"] == "completed_success"
    finally:
        stop_daemon(second)
    assert done["end"]["status"] == "completed_success"
    assert len(done["attempts"]) == 1
    assert len(seen.read_text().splitlines()) == 1
    assert meta_of(home, train)["end"]["status"] == "completed_success"


def test_the_tree_shows_the_chain_and_stop_with_dependents_stops_all_of_it(home, daemon, scripts, tmp_path):
    train = submit(home, str(scripts / "train.py"), "--", str(tmp_path / "never"))
    evaluation = submit(home, str(scripts / "eval.py"), "--", str(tmp_path / "seen.jsonl"))
    report = submit(home, str(scripts / "report.py"), "--name", "report", "--after", "eval:any",
                    "--", str(tmp_path / "report.jsonl"))
    listed = json.loads(run_fray("list", "--tree", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", listed)
    rows = {row["run_id"]: row for row in listed["runs"]}
    assert [row["run_id"] for row in listed["runs"]] == [train, evaluation, report]
    assert [rows[i]["depth"] for i in (train, evaluation, report)] == [0, 1, 2]
    assert rows[report]["after"] == [{"run_id": evaluation, "name": "eval", "on": "any"}]
    assert "after" not in rows[train]
    text = run_fray("list", "--tree", home=home.root, check=True, env={"COLUMNS": "200"}).stdout
    assert "└ eval ⇠ train" in text and "└ report ⇠ eval:any" in text
    status = run_fray("status", report, home=home.root, check=True, env={"COLUMNS": "200"}).stdout
    assert f"eval ({evaluation}) to end" in status

    proc = run_fray("control", "stop", "train", "--with-dependents", "--json", home=home.root, check=True)
    stopped = json.loads(proc.stdout)
    schema_validate("cli-control", stopped)
    assert [d["run_id"] for d in stopped["dependents"]] == [evaluation, report]
    for run_id in (train, evaluation, report):
        done = wait_until(lambda: meta_of(home, run_id)["phase"] == "ended" and meta_of(home, run_id), timeout=60,
                          what=f"{run_id} to end")
        assert done["end"]["status"] == "stopped_manual", done["end"]
    assert not meta_of(home, report)["attempts"] and not meta_of(home, evaluation)["attempts"]


def test_a_run_waits_for_a_whole_sweep_and_a_sweep_waits_for_a_run(home, daemon, scripts, tmp_path):
    gate = tmp_path / "gate"
    (scripts / "point.py").write_text("#!/usr/bin/env python3\nfrom fray import report\nreport.final()\n")
    train = submit(home, str(scripts / "train.py"), "--", str(gate))
    # A sweep whose points wait for train; then a report that waits for all of the sweep's points.
    swept = json.loads(run_fray("submit", "--json", str(scripts / "point.py"), "--name", "sw", "--sweep", "x=1,2",
                                "--after", train, home=home.root, check=True).stdout)
    schema_validate("cli-sweep", swept)
    after_all = submit(home, str(scripts / "report.py"), "--name", "summary", "--after", "sw",
                       "--", str(tmp_path / "summary.jsonl"))
    spec = meta_of(home, after_all)["spec"]["after"]
    assert spec == [{"ref": "sw", "on": "ok", "name": "sw", "group": swept["group"], "size": 2}]
    points = [run["run_id"] for run in swept["runs"]]
    # Each starts out "waiting for the daemon": polled until the daemon has judged every one of them.
    wait_until(lambda: all(home.run(p).meta.exists()
                           and (meta_of(home, p)["wait_reason"] or "").startswith("waiting for train") for p in points),
               timeout=60, what="the points to wait for train")
    wait_until(lambda: meta_of(home, after_all)["wait_reason"] == "waiting for sweep sw (0 of 2 points ended)",
               timeout=60, what="the summary to wait for the sweep")
    gate.write_text("ok")
    done = wait_until(lambda: meta_of(home, after_all)["phase"] == "ended" and meta_of(home, after_all), timeout=90,
                      what="the summary to end")
    assert done["end"]["status"] == "completed_success"
    assert all(meta_of(home, p)["end"]["status"] == "completed_success" for p in points)
    told = json.loads((tmp_path / "summary.jsonl").read_text().splitlines()[0])
    assert told["FRAY_AFTER_SW"] == ":".join(str(home.run(p).dir) for p in points)
    assert told["FRAY_AFTER_SW_CHECKPOINT"] == ":"  # neither point checkpointed
