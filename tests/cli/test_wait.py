"""Waiting commands say what they wait for: `fray wait`, `fray submit --wait / --follow`, a sweep's --wait.

Real daemon, real wrappers, `fray` run as a user runs it. Each change of status goes to
stderr with its reason; stdout holds only the end; the exit code is fray.core.waiting's.
"""

from __future__ import annotations

import json
from pathlib import Path

from fray.core import waiting
from fray.state import runs, store
from fray.state.layout import Home
from tests.conftest import run_fray, schema_validate

FAILS = "#!/bin/bash\n#FRAY --max-retries 1 --backoff-base 1s --heartbeat-interval 0.5\necho out; exit 1\n"
# Point 2 of `--sweep x=1,2,3` fails; the others succeed.
SWEEP = ("#!/usr/bin/env python3\n#FRAY --max-retries 0 --heartbeat-interval 0.5\nimport sys\n"
         "from fray import report\n"
         "x = sys.argv[sys.argv.index('--x') + 1]\nif x == '2':\n    sys.exit(1)\nreport.final(x=x)\n")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_pure_rules_of_news_and_exit_codes() -> None:
    row = {"run_id": "r", "name": "n", "status": "healthy_running", "reason": "heartbeat 3s old", "attempt": 1,
           "phase": "running"}
    assert waiting.news_key(row) == waiting.news_key({**row, "reason": "heartbeat 9s old"})  # no news
    waiting_row = {**row, "status": "pending", "reason": "can never start here: it asks for 3 CPUs"}
    assert waiting.news_line(waiting_row, False) == "pending: can never start here: it asks for 3 CPUs"
    assert waiting.exit_code([waiting_row, row]) == waiting.EXIT_NEVER_STARTS
    done = {**row, "status": "completed_success", "phase": "ended", "reason": "attempt 1 succeeded"}
    failed = {**row, "status": "failed_config", "phase": "ended", "reason": "sbatch refused it"}
    assert waiting.exit_code([done, row]) is None
    assert waiting.exit_code([done, done]) == 0 and waiting.exit_code([done, failed]) == 1
    assert waiting.count_line([done, failed, row]) == "2/3 ended: 1 ✓ completed_success, 1 ⊘ failed_config"


def test_submit_wait_tells_each_change_on_stderr_and_ends_with_the_status(home: Home, tmp_path: Path) -> None:
    proc = run_fray("submit", str(write(tmp_path, "fails.sh", FAILS)), "--wait", timeout=90)
    assert proc.returncode == 1, proc.stderr
    told = proc.stderr.splitlines()
    # The first look tells what the run is then: pending, or (the daemon reacts within milliseconds and the
    # script fails at once) its first attempt ended already.
    assert told[0].startswith(("pending: ", "restarting: attempt 1 ended: workload_failure (exit 1")), told
    assert any(line.startswith("restarting: attempt 1 ended: workload_failure (exit 1") for line in told), told
    assert told[-1].startswith("failed: 2 workload failures, more than --max-retries 1")
    assert "ended: ✗ failed" in proc.stdout and "restarting" not in proc.stdout


def test_submit_follow_streams_output_and_tells_changes_apart(home: Home, tmp_path: Path) -> None:
    proc = run_fray("submit", str(write(tmp_path, "fails.sh", FAILS)), "--follow", timeout=90)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.count("out\n") == 2  # both attempts' output
    assert any(line.startswith("restarting: attempt 1 ended") for line in proc.stderr.splitlines())
    assert proc.stderr.splitlines()[-1].startswith("failed: ")


def test_wait_gives_up_with_exit_3_on_a_run_that_can_never_start(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0}}))
    # Written past the submit check, as a run submitted before this machine lost its GPU would be.
    run_id = runs.create_run(home, runs.SubmitOptions(script=write(tmp_path, "g.sh", "#!/bin/bash\necho\n"),
                                                      overrides={"gpus": 1})).run_id
    proc = run_fray("wait", run_id, timeout=60)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "pending: can never start here: it asks for 1 GPUs (this machine offers 0)" in proc.stderr
    assert "gave up: a run can never start where it is" in proc.stdout
    proc = run_fray("wait", run_id, "--json", timeout=60)
    document = json.loads(proc.stdout)
    schema_validate("cli-wait", document)
    assert document["exit_code"] == 3 and document["runs"][0]["status"] == "pending"
    run_fray("control", "stop", run_id)


def test_a_sweep_waits_for_every_point_counts_them_and_names_the_one_that_failed(home: Home,
                                                                                 tmp_path: Path) -> None:
    script = write(tmp_path, "sweep.py", SWEEP)
    proc = run_fray("submit", str(script), "--sweep", "x=1,2,3", "--wait", timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "3/3 ended: 2 ✓ completed_success, 1 ✗ failed" in proc.stderr
    assert "submitted sweep" in proc.stderr
    failed = [line for line in proc.stdout.splitlines() if line.startswith("did not succeed: ")]
    assert len(failed) == 1
    group = json.loads(run_fray("list", "--json").stdout)["runs"][0]["group"]  # the folded sweep's row
    proc = run_fray("wait", "--group", group, "--json", timeout=60)
    document = json.loads(proc.stdout)
    schema_validate("cli-wait", document)
    assert proc.returncode == 1 and document["exit_code"] == 1
    assert sorted(r["status"] for r in document["runs"]) == ["completed_success", "completed_success", "failed"]
    assert failed[0].removeprefix("did not succeed: ") == next(r["run_id"] for r in document["runs"]
                                                               if r["status"] == "failed")


def test_a_wait_for_one_run_hears_of_its_end_at_once_not_on_its_timer(home: Home, tmp_path: Path, daemon) -> None:
    """A waiter looks at the run's meta.json between two reads of its row: with a 60 s timer, only the
    daemon's replacing that file can end the wait before the test gives up."""
    import threading

    from fray.ops.wait import Watch

    meta = runs.create_run(home, runs.SubmitOptions(script=write(tmp_path, "quick.sh", "#!/bin/bash\necho hi\n"),
                                                    overrides={}))
    told: list[str] = []
    codes: list[int] = []
    waiter = threading.Thread(target=lambda: codes.append(Watch(home, [meta.run_id], told.append).run(poll=60)))
    waiter.start()
    waiter.join(30)
    assert codes == [0], told
    assert told[-1].startswith("completed_success"), told
