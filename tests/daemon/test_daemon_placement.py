"""The daemon places waiting local runs with the scheduler: band first, constraints on the machine's attributes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fray, running, schema_validate, start_daemon, stop_daemon, wait_until
from fray.state import runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

SERVE = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --stop-grace 2
trap 'exit 0' TERM
while true; do sleep 0.1; done
"""


def submit(home: Home, script: Path, **overrides: object) -> str:
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides,
                                                    workdir=str(script.parent))).run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def test_production_starts_before_older_batch_and_an_unmet_constraint_says_why(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 1, "gpus": 0}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(SERVE)
    daemon = start_daemon(home, wait=False)
    started: list[str] = []
    try:
        blocker = submit(home, serve)
        started.append(blocker)
        wait_until(lambda: home.run(blocker).attempt(1).started.exists(), what="the first run to take the CPU")
        batch = submit(home, serve, priority="batch")
        prod = submit(home, serve, priority="production")
        h100 = submit(home, serve, constraints={"gpu-type=h100": "gpu-type=h100"})
        started += [batch, prod, h100]
        wait_until(lambda: meta_of(home, h100)["wait_reason"] == "no worker with gpu-type=h100",
                   what="the constrained run to say why it waits")

        listing = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
        bands = {row["run_id"]: row["priority"] for row in listing["runs"]}
        assert bands[prod] == "production" and bands[batch] == "batch" and bands[blocker] == "interactive"
        table = run_fray("list", home=home.root, check=True, env={"COLUMNS": "250"}).stdout
        assert "no worker with gpu-type=h100" in table and "pending · batch" in table

        runs.request(home, blocker, "stop")
        wait_until(lambda: home.run(prod).attempt(1).started.exists(), what="the production run to start first")
        assert not meta_of(home, batch)["attempts"]
        said = [json.loads(line)["reason"] for line in home.run(batch).events.read_text().splitlines()]
        assert any("runs of a higher priority band, or older ones, go first" in text for text in said), said
    finally:
        for run_id in started:
            if meta_of(home, run_id)["phase"] != "ended":
                runs.request(home, run_id, "stop")
        for run_id in started:
            wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", what="the stops")
        stop_daemon(daemon)


GROUP = """#!/bin/bash
#FRAY --replicas 3 --max-retries 1 --backoff-base 0 --heartbeat-interval 0.5 --stop-grace 2
echo "$FRAY_TASK_INDEX of $FRAY_NUM_TASKS at $FRAY_COORDINATOR_ADDRESS pid $$" > "task-$FRAY_TASK_INDEX-attempt-$FRAY_ATTEMPT"
if [ "$FRAY_TASK_INDEX" = 1 ]; then
  # fails once its siblings are up (each task starts when its own wrapper does, later under load)
  for _ in $(seq 100); do [ -e "task-0-attempt-$FRAY_ATTEMPT" ] && [ -e "task-2-attempt-$FRAY_ATTEMPT" ] && break; sleep 0.1; done
  echo "replica 1 lost its shard" >&2; exit 3
fi
exec sleep 300
"""


def test_one_replica_failing_kills_its_siblings_and_the_group_is_retried_under_max_retries(
        home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 3, "gpus": 0}}))
    job = tmp_path / "group.sh"
    job.write_text(GROUP)
    daemon = start_daemon(home, wait=False)
    run_id = ""
    try:
        run_id = submit(home, job)
        # Replica 1 fails in every attempt while 0 and 2 sleep: each time the sleepers are killed within
        # seconds, and attempt 2 starts all three again; then --max-retries 1 is spent and the run fails.
        wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", timeout=60, what="the run to end")
        meta = meta_of(home, run_id)
        assert [a["number"] for a in meta["attempts"]] == [1, 2]
        written = home.run(run_id).code_dir  # the working directory: the run's copy of its code
        for number in (1, 2):
            attempt = home.run(run_id).attempt(number)
            failed_at = json.loads((attempt.task(1).dir / "exit.json").read_text())["ended_at"]
            for i in (0, 2):  # the sleepers did not sleep on
                sleeper = int((written / f"task-{i}-attempt-{number}").read_text().split(" pid ")[1])
                wait_until(lambda: not running(sleeper), timeout=5, what=f"attempt {number}'s task {i} killed")
                # Its wrapper reports it killed, unless the attempt was closed first: then it is fenced and
                # writes nothing more (the last attempt's siblings may lose that race to the run's end).
                exit_record = attempt.task(i).dir / "exit.json"
                if exit_record.exists():
                    assert json.loads(exit_record.read_text())["ended_at"] - failed_at < 5
            assert meta["attempts"][number - 1]["counted_as"] == "workload"  # the group spends --max-retries
            assert meta["attempts"][number - 1]["detail"].startswith("task 1 of 3: exit 3: replica 1 lost its shard")
        assert (written / "task-2-attempt-2").read_text().startswith("2 of 3 at 127.0.0.1:")
        assert meta["end"]["status"] == "failed"
        reason = meta["end"]["reason"]
        assert "more than --max-retries 1" in reason and "task 1 of 3: exit 3: replica 1 lost its shard" in reason
        shown = run_fray("status", run_id, home=home.root, check=True, env={"COLUMNS": "200"}).stdout
        assert "3 tasks that live and die together: one failing stops the others" in shown
        # The failure shown is task 1's own (its stderr), not task 0's "killed by SIGKILL".
        assert "Last failure (attempt 2, task 1, exit 50)" in shown and "    replica 1 lost its shard" in shown
        data = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
        schema_validate("cli-status", data)
        assert [(a["failed_task"], a["failure"]["workload_exit_code"]) for a in data["attempts"]] == [(1, 3), (1, 3)]
    finally:
        if run_id and meta_of(home, run_id)["phase"] != "ended":
            runs.request(home, run_id, "stop")
            wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", what="the stop")
        stop_daemon(daemon)


FINISHING = """#!/bin/bash
#FRAY --replicas 3 --heartbeat-interval 0.5 --stop-grace {grace}
if [ "$FRAY_TASK_INDEX" = 0 ]; then echo "host 0 done"; exit 0; fi
sleep {sleep}
echo "host $FRAY_TASK_INDEX wrote its shard"
"""


def test_a_group_whose_task_0_succeeds_first_waits_for_the_others_to_finish_up_to_the_stop_grace(
        home: Home, tmp_path: Path) -> None:
    """Hosts of one program end a little apart: the last ones' output must not be cut off by task 0's success."""
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 3, "gpus": 0}}))
    late = tmp_path / "late.sh"
    late.write_text(FINISHING.format(grace=30, sleep=3))
    hung = tmp_path / "hung.sh"
    hung.write_text(FINISHING.format(grace=2, sleep=300))
    daemon = start_daemon(home, wait=False)
    try:
        run_id = submit(home, late)
        wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", timeout=60, what="the run to end")
        meta = meta_of(home, run_id)
        assert meta["end"]["status"] == "completed_success" and len(meta["attempts"]) == 1, meta
        attempt = home.run(run_id).attempt(1)
        for index in (1, 2):
            assert f"host {index} wrote its shard" in attempt.task(index).stdout.read_text()
            assert json.loads(attempt.task(index).exit.read_text())["exit_code"] == 0
        # A sibling that never ends holds the run for the stop grace only, then goes with the attempt.
        run_id = submit(home, hung)
        wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", timeout=60, what="the hung group to end")
        meta = meta_of(home, run_id)
        assert meta["end"]["status"] == "completed_success", meta
        task0 = json.loads(home.run(run_id).attempt(1).exit.read_text())
        # Task 0's end, on the daemon's clock (its node's less the offset measured: one machine here, so a poll's worth)
        assert abs(meta["attempts"][0]["ended_at"] - task0["ended_at"]) < 1.0
        assert 2 <= meta["end"]["at"] - task0["ended_at"] < 20, (meta["end"], task0)
        # Their wrappers find the attempt closed (fray.wrapper.fence) and kill their workloads.
        hung = home.run(run_id).attempt(1)
        pids = [json.loads(hung.task(i).started.read_text())["workload_pid"] for i in (1, 2)]
        wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids), timeout=30,
                   what="the siblings that never ended stopped with the attempt")
    finally:
        stop_daemon(daemon)


def test_a_user_whose_credits_are_spent_waits_as_batch_and_fray_list_says_so(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    # 0.0005 resource-hours: the running run (1 CPU) spends them in under two seconds.
    home.config.write_text(json.dumps({"local": {"cpus": 1, "gpus": 0}, "priority": {"credit_hours": 0.0005}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(SERVE)
    daemon = start_daemon(home, wait=False)
    started: list[str] = []
    try:
        blocker = submit(home, serve)
        started.append(blocker)
        wait_until(lambda: home.run(blocker).attempt(1).started.exists(), what="the first run to take the CPU")
        prod = submit(home, serve, priority="production")
        started.append(prod)
        wait_until(lambda: "credits are spent" in (meta_of(home, prod)["wait_reason"] or ""), timeout=30,
                   what="the production run to wait as batch")
        assert meta_of(home, prod)["wait_reason"].startswith("placed as batch (")
        table = run_fray("list", home=home.root, check=True, env={"COLUMNS": "250"}).stdout
        line = next(text for text in table.splitlines() if prod in text)
        assert "pending · production" in line and "placed as batch (" in line and "credits are spent" in line
    finally:
        for run_id in started:
            if meta_of(home, run_id)["phase"] != "ended":
                runs.request(home, run_id, "stop")
        for run_id in started:
            wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", what="the stops")
        stop_daemon(daemon)


def test_constraints_are_checked_against_the_machines_attributes(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0, "gpu_type": "NVIDIA H100 80GB HBM3"}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(SERVE)
    daemon = start_daemon(home, wait=False)
    started: list[str] = []
    try:
        h100 = submit(home, serve, constraints={"gpu-type=h100": "gpu-type=h100", "cpu-count>=2": "cpu-count>=2"})
        a100 = submit(home, serve, constraints={"gpu-type in (a100, l4)": "gpu-type in (a100, l4)"})
        started += [h100, a100]
        wait_until(lambda: home.run(h100).attempt(1).started.exists(), what="the run this machine satisfies")
        wait_until(lambda: meta_of(home, a100)["wait_reason"] == "no worker with gpu-type in (a100, l4)",
                   what="the run it does not")
    finally:
        for run_id in started:
            if meta_of(home, run_id)["phase"] != "ended":
                runs.request(home, run_id, "stop")
        for run_id in started:
            wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", what="the stops")
        stop_daemon(daemon)


def test_a_run_no_worker_can_take_ends_unschedulable_after_its_scheduling_timeout(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    script = tmp_path / "h100.sh"
    script.write_text("#!/bin/bash\n#FRAY --constraint gpu-type=h100 --scheduling-timeout 2s\necho never\n")
    daemon = start_daemon(home, wait=False)
    try:
        submitted = json.loads(run_fray("submit", str(script), "--json", home=home.root, check=True).stdout)
        run_id = submitted["run_id"]
        wait_until(lambda: meta_of(home, run_id)["wait_reason"] == "no worker with gpu-type=h100",
                   what="the run waiting, with why")
        meta = wait_until(lambda: (m := meta_of(home, run_id))["phase"] == "ended" and m, timeout=30,
                          what="the run ended at its scheduling timeout")
        assert meta["attempts"] == [] and meta["end"]["status"] == "failed"
        assert meta["end"]["reason"] == "unschedulable: not placed within 2s: no worker with gpu-type=h100"
        [row] = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)["runs"]
        assert (row["status"], row["reason"]) == ("failed", meta["end"]["reason"])
        shown = run_fray("status", run_id, home=home.root, check=True, env={"COLUMNS": "200"}).stdout
        assert "unschedulable: not placed within 2s: no worker with gpu-type=h100" in shown
    finally:
        stop_daemon(daemon)
