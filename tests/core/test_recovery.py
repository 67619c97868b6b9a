"""'My run failed: what now': one pure function says what to type, `fray status` shows it under the run,
and the docs' "When a run fails" page (docs/failures.md) names the same commands."""

from __future__ import annotations

import json
from pathlib import Path

from fray.core.recovery import next_steps
from tests.conftest import REPO, run_fray, schema_validate

SPEC = {"backend": "slurm"}


def test_each_final_status_and_reason_gets_its_commands() -> None:
    spent = next_steps("failed", "3 workload failures, more than --max-retries 2 within --retry-window 1d; last: exit 1",
                       "r1", SPEC, "running", end={"budget": "workload", "budget_limit": 2})
    assert spent[1].startswith("fray control config-set r1 max-retries=4 ")
    assert spent[2].startswith("fray control start r1 ")
    nodes = next_steps("failed", "101 node-side failures, more than --max-retries-preemption 100; last: x", "r1",
                       SPEC, "running", end={"budget": "node", "budget_limit": 100})
    # A run ended before the budget was recorded (an older home) reads, and gets the general steps.
    assert next_steps("failed", "3 workload failures, more than --max-retries 2; last: x", "r1", SPEC, "running",
                      end={"status": "failed", "reason": "...", "at": 1.0})[0].startswith("fray status r1 ")
    assert any(step.startswith("fray nodes unban NODE") for step in nodes)
    assert "max-retries-preemption=200" in nodes[2]
    config = next_steps("failed_config", "the slurm backend refused the submission: ...", "r1", SPEC, "running")
    assert "fix what the slurm backend refused" in config[0]
    assert next_steps("stopped_manual", "stopped on request", "r1", SPEC, "running")[0].startswith(
        "fray control start r1")
    assert next_steps("pending", "waiting for the daemon", "r1", SPEC, "stopped")[0].startswith("fray daemon start")
    assert next_steps("healthy_running", "attempt 1 running", "r1", SPEC, "running") == []
    assert next_steps("completed_success", "attempt 1 succeeded", "r1", SPEC, "running") == []


def test_the_docs_failures_page_names_every_command_the_function_gives() -> None:
    page = (REPO / "docs" / "failures.md").read_text()
    section = page[page.index("## What to type"):]
    section = section[:section.index("\n## ", 1)]
    for command in ("fray control config-set RUN max-retries=", "fray control start RUN", "fray daemon start",
                    "fray nodes unban NODE", "max-retries-preemption=", "failed_config", "fray logs RUN --stderr"):
        assert command in section, command


def test_status_of_a_failed_run_prints_what_to_type_under_it(home, tmp_path: Path) -> None:
    script = tmp_path / "fails.sh"
    script.write_text("#!/bin/bash\n#FRAY --max-retries 0 --heartbeat-interval 0.5\nexit 1\n")
    proc = run_fray("submit", str(script), "--wait", "--json", timeout=90)
    assert proc.returncode == 1, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    shown = run_fray("status", run_id, env={"NO_COLOR": "1"})
    lines = shown.stdout.splitlines()
    at = lines.index("What now")
    assert lines[at + 2].strip().startswith(f"fray control config-set {run_id} max-retries=1 ")
    document = json.loads(run_fray("status", run_id, "--json").stdout)
    schema_validate("cli-status", document)
    assert document["next_steps"][2].startswith(f"fray control start {run_id}")
