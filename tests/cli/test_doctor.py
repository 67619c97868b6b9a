"""`fray doctor` on this machine: the real CLI, a real probe job through a real daemon, its report checked
against its schema. What it finds across hosts (node-local flock, a node's clock off, late files) is tried
on the cluster in a box (tests/box/test_many_hosts.py)."""

from __future__ import annotations

import json

import pytest

from conftest import run_fray, schema_validate

pytestmark = pytest.mark.slow


def test_doctor_runs_a_probe_job_and_reports_each_check_with_its_measurement(home) -> None:
    proc = run_fray("doctor", "--json", "--timeout", "60", home=home.root, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    schema_validate("cli-doctor", report)
    checks = {f["check"]: f for f in report["findings"]}
    assert list(checks) == ["file system", "atomic operations", "locks", "daemon", "round trip", "nodes' python",
                            "clocks"]
    assert checks["atomic operations"]["status"] == "ok"
    assert checks["daemon"]["status"] == "ok"  # the probe job started one
    assert checks["nodes' python"]["status"] == "ok" and "`from fray import report` works" in checks["nodes' python"]["summary"]
    trips = report["measured"]["round_trips_sec"]
    assert len(trips) == 5 and all(0 <= t < 5 for t in trips)
    (node,) = report["measured"]["clock_offsets_sec"].values()
    assert abs(node) < 1.0  # this machine against itself
    assert "doctor: probe job: running on" in proc.stderr  # its steps, told as they happen
    status = json.loads(run_fray("status", report["run_id"], "--json", home=home.root, check=True).stdout)
    assert status["run"]["name"] == "fray-doctor"  # a real run, as any script: shown, and ended
    assert status["run"]["phase"] == "ended"


def test_doctor_without_a_job_checks_this_host_only_and_says_a_missing_daemon_is_a_warning(home) -> None:
    proc = run_fray("doctor", "--no-job", home=home.root, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # warnings are no failure
    assert "warn  daemon: stopped" in proc.stdout and "fix: fray daemon start" in proc.stdout
    assert "round trip" not in proc.stdout
    assert proc.stdout.rstrip().endswith("fray works here; see the warnings")


def test_doctor_refuses_a_backend_it_does_not_know_with_the_choices(home) -> None:
    proc = run_fray("doctor", "--backend", "pbs", "--json", home=home.root, timeout=60)
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert "pbs" in error["message"] and "slurm" in error["message"]
