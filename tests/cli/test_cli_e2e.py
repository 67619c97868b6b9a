"""`fray` end to end, as a user: real scripts run by a real daemon and the local backend.

Every --json output seen here is validated against its schema with the
reference validator. Synchronization is by polling (`wait_until`), never sleeps.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_fray, schema_validate, wait_until



def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def fray_json(*args: str, schema: str, code: int = 0) -> dict:
    proc = run_fray(*args, "--json")
    assert proc.returncode == code, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    schema_validate(schema, document)
    return document


def status_of(run: str) -> dict:
    return fray_json("status", run, schema="cli-status")


def run_status(run: str) -> str:
    return status_of(run)["run"]["status"]


# ---------------------------------------------------------------- a run that succeeds


def test_submit_wait_then_list_status_logs(home, tmp_path):
    script = write(tmp_path, "hello.py", "import sys\nprint('hello from fray', sys.argv[1:])\n"
                                         "print('a warning', file=sys.stderr)\n")
    proc = run_fray("submit", str(script), "--name", "greet", "--wait", "--", "--lr", "3e-4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitted run" in proc.stdout and "completed_success" in proc.stdout
    run_id = proc.stdout.split("submitted run ", 1)[1].split()[0]
    assert f"status {run_id}" in proc.stdout and f"logs {run_id} -f" in proc.stdout  # next-step hints

    listed = fray_json("list", schema="cli-list")
    assert [(r["run_id"], r["status"], r["icon"]) for r in listed["runs"]] == [(run_id, "completed_success", "✓")]
    assert listed["counts"]["completed_success"] == 1 and listed["daemon"]["state"] == "running"
    human = run_fray("list").stdout
    assert "✓" in human and "greet" in human and "attempt 1 succeeded" in human

    by_name = status_of("greet")
    by_prefix = status_of(run_id[:20])
    assert by_name["run"]["run_id"] == by_prefix["run"]["run_id"] == run_id
    assert [a["cause"] for a in by_name["attempts"]] == ["success"]
    assert by_name["spec"]["args"] == ["--lr", "3e-4"]
    text = run_fray("status", "greet").stdout
    for part in ("✓ completed_success", "Attempts", "success", "Recent events", by_name["dir"]):
        assert part in text

    assert run_fray("logs", "greet").stdout == "hello from fray ['--lr', '3e-4']\n"
    assert run_fray("logs", "greet", "--stderr").stdout == "a warning\n"
    logs = fray_json("logs", run_id, "-n", "1", schema="cli-logs")
    assert logs["attempt"] == 1 and logs["lines"] == ["hello from fray ['--lr', '3e-4']"]
    lines = run_fray("logs", run_id, "-f", "--json").stdout.splitlines()  # ended: prints and returns
    for line in lines:
        schema_validate("cli-logs-line", json.loads(line))
    assert [json.loads(line)["line"] for line in lines] == ["hello from fray ['--lr', '3e-4']"]


def test_submit_json_with_wait_reports_the_end_and_result(home, tmp_path):
    script = write(tmp_path, "result.py",
                   "#FRAY --cpus 2\n#FRAY --max-retries 5\n"
                   "from fray import report\nreport.final(accuracy=0.9)\n")
    data = fray_json("submit", str(script), "--max-retries", "1", "--wait", schema="cli-submit")
    assert data["spec"]["cpus"] == 2 and data["spec"]["max_retries"] == 1  # flags override directives
    assert data["end"]["status"] == "completed_success" and data["end"]["attempts"] == 1
    assert data["end"]["result"] == {"accuracy": 0.9}


# ---------------------------------------------------------------- a run that fails


def test_failing_run_exits_1_and_status_shows_the_failure(home, tmp_path):
    script = write(tmp_path, "boom.py", "#FRAY --max-retries 5\nimport sys\nprint('about to fail')\n"
                                        "sys.exit('ValueError: the loss is nan')\n")
    proc = run_fray("submit", str(script), "--max-retries", "0", "--wait")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "✗ failed" in proc.stdout
    data = status_of("boom")
    assert data["run"]["status"] == "failed" and len(data["attempts"]) == 1
    failure = data["attempts"][0]["failure"]
    assert failure["stderr_tail"] == ["ValueError: the loss is nan"]
    assert data["budgets"] == {"window_sec": 86400.0, "workload": {"used": 1, "max": 0},
                               "node": {"used": 0, "max": 100},
                               "backoff": {"base_sec": 2.0, "max_sec": 300.0, "progress_after_sec": 60.0,
                                           "streak": 1}}
    text = run_fray("status", "boom").stdout
    assert "Last failure (attempt 1" in text and "ValueError: the loss is nan" in text
    assert "budget left: 0 of 0 workload, 100 of 100 node-side (last 1d)" in text
    assert run_fray("control", "stop", "boom").returncode == 2  # it has ended already


def test_follow_streams_every_attempt_with_separators(home, tmp_path):
    script = write(tmp_path, "flaky.py",
                   "import os, sys\nn = os.environ['FRAY_ATTEMPT']\nprint('out', n)\n"
                   "print('err', n, file=sys.stderr)\nsys.exit(1 if n == '1' else 0)\n")
    proc = run_fray("submit", str(script), "--backoff-base", "0", "--follow")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    first, second = out.index("── attempt 1 on "), out.index("── attempt 2 on ")
    assert first < out.index("out 1") < second < out.index("out 2")
    assert "stderr│ err 1" in out and "stderr│ err 2" in out
    assert out.rstrip().splitlines()[-1].startswith("run ") and "completed_success" in out

    data = fray_json("logs", "flaky", "--attempt", "1", schema="cli-logs")
    assert data["attempt"] == 1 and data["lines"] == ["out 1"]
    followed = run_fray("logs", "flaky", "-f", "--attempt", "1").stdout
    assert followed.index("attempt 1") < followed.index("out 1") < followed.index("attempt 2") < followed.index("out 2")


def test_logs_follow_prints_lines_as_they_come_and_stops_at_the_end(home, tmp_path):
    go = tmp_path / "go"
    script = write(tmp_path, "slow.py",
                   f"import os, time\nprint('first', flush=True)\n"
                   f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\nprint('second')\n")
    submitted = fray_json("submit", str(script), schema="cli-submit")
    sink = tmp_path / "followed.jsonl"
    with open(sink, "w") as handle:
        follower = subprocess.Popen([sys.executable, "-m", "fray.cli.main", "logs", submitted["run_id"], "-f",
                                     "--json"], stdout=handle, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: "first" in sink.read_text(), what="the first line, while the run goes on")
            assert "second" not in sink.read_text()
            go.write_text("")
            assert follower.wait(timeout=30) == 0
        finally:
            follower.kill()
    records = [json.loads(line) for line in sink.read_text().splitlines()]
    for record in records:
        schema_validate("cli-logs-line", record)
    assert [r["line"] for r in records] == ["first", "second"]


# ---------------------------------------------------------------- control


def test_control_stop_pause_unpause_restart_start(home, tmp_path, daemon):
    script = write(tmp_path, "forever.sh", "#!/bin/bash\n#FRAY --stop-grace 5\necho up $FRAY_ATTEMPT\nsleep 300\n")
    run_id = fray_json("submit", str(script), schema="cli-submit")["run_id"]

    def attempt_running(number: int) -> bool:
        data = status_of(run_id)
        return data["run"]["status"] == "healthy_running" and data["run"]["attempt"] == number

    wait_until(lambda: attempt_running(1), what="attempt 1 running")

    paused = fray_json("control", "pause", run_id, schema="cli-control")
    assert paused["op"] == "pause" and paused["control"]["paused"] is True
    wait_until(lambda: status_of(run_id)["attempts"][0]["cause"] == "paused", what="the pause")
    assert status_of(run_id)["run"]["phase"] == "queued"
    fray_json("control", "unpause", run_id, schema="cli-control")
    wait_until(lambda: attempt_running(2), what="attempt 2 after unpause")

    restarted = run_fray("control", "restart", "forever")
    assert restarted.returncode == 0 and "requested restart" in restarted.stdout
    wait_until(lambda: attempt_running(3), what="attempt 3 after restart")

    stopped = fray_json("control", "stop", run_id, schema="cli-control")
    assert stopped["control"]["stop_requested"] is True and "stopped_manual" in stopped["effect"]
    wait_until(lambda: run_status(run_id) == "stopped_manual", timeout=10, what="stopped_manual")
    assert status_of(run_id)["attempts"][-1]["cause"] == "stopped"

    started = fray_json("control", "start", run_id, schema="cli-control")
    assert "attempt 4" in started["effect"]
    wait_until(lambda: attempt_running(4), what="attempt 4 after start")
    assert run_fray("logs", run_id).stdout == "up 4\n"
    fray_json("control", "stop", run_id, schema="cli-control")
    wait_until(lambda: run_status(run_id) == "stopped_manual", timeout=10, what="stopped_manual again")


# ---------------------------------------------------------------- the daemon


def test_daemon_start_status_stop(home, tmp_path):
    started = fray_json("daemon", "start", schema="cli-daemon")
    assert started["changed"] is True and started["state"] == "running" and started["lease"]["pid"] > 0
    again = fray_json("daemon", "start", schema="cli-daemon")
    assert again["changed"] is False and again["lease"]["pid"] == started["lease"]["pid"]
    status = run_fray("daemon", "status")
    assert status.returncode == 0 and f"pid {started['lease']['pid']}" in status.stdout
    stopped = fray_json("daemon", "stop", schema="cli-daemon")
    assert stopped["changed"] is True and stopped["state"] == "stopped"
    assert fray_json("daemon", "status", schema="cli-daemon")["state"] == "stopped"

    script = write(tmp_path, "one.py", "print(1)\n")
    fray_json("submit", str(script), schema="cli-submit")  # submit starts a daemon again
    assert fray_json("daemon", "status", schema="cli-daemon")["state"] == "running"


def test_home_option_and_hints_that_name_it(tmp_path, home):
    other = tmp_path / "other home"
    script = write(tmp_path, "hi.py", "print('hi')\n")
    try:
        proc = run_fray("--home", str(other), "submit", str(script), "--wait")
        assert proc.returncode == 0, proc.stderr
        assert f"fray --home '{other}' status" in proc.stdout
        listed = fray_json("--home", str(other), "list", schema="cli-list")
        assert listed["runs"][0]["status"] == "completed_success"
        assert fray_json("list", schema="cli-list")["runs"] == []  # FRAY_HOME was not used
    finally:
        run_fray("--home", str(other), "daemon", "stop")


def test_daemon_run_serves_in_the_foreground_until_terminated(home, tmp_path):
    import signal

    foreground = subprocess.Popen([sys.executable, "-m", "fray.cli.main", "daemon", "run", "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: fray_json("daemon", "status", schema="cli-daemon")["state"] == "running",
                   what="the foreground daemon")
        assert fray_json("daemon", "status", schema="cli-daemon")["lease"]["pid"] == foreground.pid
        foreground.send_signal(signal.SIGTERM)
        out, _ = foreground.communicate(timeout=15)
    finally:
        foreground.kill()
    assert foreground.returncode == 0
    final = json.loads(out)
    schema_validate("cli-daemon", final)
    assert final["action"] == "run" and final["state"] == "stopped"


def test_a_top_level_run_has_a_namespace_its_own_run_id(home, tmp_path):
    script = write(tmp_path, "ns.py", "import os\nfrom fray import report\nprint('ns=' + os.environ['FRAY_NAMESPACE'])\n"
                                      "report.final()\n")
    proc = run_fray("submit", str(script), "--wait", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    assert f"ns={run_id}" in run_fray("logs", run_id, check=True).stdout
    assert status_of(run_id)["namespace"] == run_id


def test_logs_of_a_multi_node_attempt_show_every_task_marked_and_task_picks_one(home, tmp_path):
    """The layout a multi-node backend leaves (task i in attempts/<n>/tasks/<i>/), read by `fray logs`."""
    script = write(tmp_path, "two.py", "from fray import report\nprint('from task 0')\nreport.final()\n")
    run_id = json.loads(run_fray("submit", str(script), "--wait", "--json", check=True).stdout)["run_id"]
    task1 = home.run(run_id).attempt(1).task(1)
    task1.dir.mkdir(parents=True)
    task1.stdout.write_text("from task 1\nagain 1\n")
    assert run_fray("logs", run_id, check=True).stdout.splitlines() == [
        "[task 0] from task 0", "[task 1] from task 1", "[task 1] again 1"]
    assert run_fray("logs", run_id, "--task", "1", "-n", "1", check=True).stdout.splitlines() == ["again 1"]
    data = fray_json("logs", run_id, schema="cli-logs")
    assert data["tasks"] == [{"task": 0, "path": str(home.run(run_id).attempt(1).stdout)},
                             {"task": 1, "path": str(task1.stdout)}]
    missing = run_fray("logs", run_id, "--task", "3")
    assert missing.returncode == 2 and "has no task 3" in missing.stderr
    lines = [json.loads(line) for line in run_fray("logs", run_id, "-f", "--json", check=True).stdout.splitlines()]
    for line in lines:
        schema_validate("cli-logs-line", line)
    assert [(item["task"], item["line"]) for item in lines] == [(0, "from task 0"), (1, "from task 1"), (1, "again 1")]
