"""`fray usage`: figures from known attempt times (pure and through the real CLI), and from a real daemon's attempts."""

from __future__ import annotations

import json
import time

import pytest

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray.core.model import Attempt, End, Meta, RunSpec
from fray.core.usage import Resources, spans_of, tally
from fray.state import runs, store

DAY = 86400.0


def attempt(number: int, started: float | None, ended: float | None, cause: str | None, node: str | None = None,
            partition: str | None = None) -> Attempt:
    return Attempt(number=number, state="ended" if ended is not None or started is None else "running",
                   backend="local", submitted_at=(started or 0) - 5, node=node, started_at=started,
                   ended_at=ended, cause=cause, partition=partition)


def meta(name: str, spec: RunSpec, attempts: list[Attempt], created: float, **family) -> Meta:
    made = runs.new_meta(name, created, "/tmp", spec, source="/tmp/x.sh", frozen="script.sh", script=b"x", **family)
    made.attempts = attempts
    if attempts and not attempts[-1].in_flight:
        made.phase = "ended"
        made.end = End("completed_success", "done", attempts[-1].ended_at or created)
    elif attempts:
        made.phase = "active"
    return made


def test_figures_from_known_attempt_times():
    t = 1_000_000.0
    train = meta("train", RunSpec(cpus=4, gpus=2), [
        attempt(1, t, t + 600, "node_fault", "n1", "gpu"),        # lost: the node failed it
        attempt(2, t + 700, t + 4300, "success", "n2", "gpu")], t)
    serve = meta("serve", RunSpec(cpus=2, replicas=3), [
        attempt(1, t + 1000, t + 2000, "restarted", "n3"),        # replaced by a restart: lost
        attempt(2, t + 2000, None, None, "n3")], t)               # still running: useful up to now
    spans = spans_of(train, Resources(4, 2)) + spans_of(serve, Resources(6, 0))
    now = t + 5000
    rows, total = tally(spans, "run", None, now)
    by_run = {row.label: row.to_dict() for row in rows}
    expected = {"attempts": 2, "wall_sec": 4200.0, "lost_sec": 600.0, "useful_sec": 3600.0,
                "goodput": round(3600 / 4200, 4), "cpu_hours": round(4 * 4200 / 3600, 4),
                "gpu_hours": round(2 * 4200 / 3600, 4)}
    assert {key: by_run["train"][key] for key in expected} == expected
    assert (by_run["serve"]["wall_sec"], by_run["serve"]["lost_sec"], by_run["serve"]["running"]) == (4000.0, 1000.0, 1)
    assert by_run["serve"]["cpu_hours"] == round(6 * 4000 / 3600, 4) and by_run["serve"]["gpu_hours"] == 0
    assert [row.label for row in rows] == ["train", "serve"]  # most wall time first
    assert (total.wall_sec, total.lost_sec, len(total.runs)) == (8200.0, 1600.0, 2)
    # A window from t+1500 cuts train's first attempt away and the others at its start.
    rows, total = tally(spans, "node", t + 1500, now)
    assert {row.key: (row.wall_sec, row.lost_sec) for row in rows} == {"n2": (2800.0, 0.0), "n3": (3500.0, 500.0)}


def test_an_attempt_that_never_started_used_nothing():
    never = meta("never", RunSpec(gpus=8), [attempt(1, None, None, "submit_failed")], 0.0)
    assert spans_of(never, Resources(1, 8)) == []
    rows, total = tally([], "run", None, 10.0)
    assert rows == [] and total.goodput is None


@pytest.fixture
def known_runs(home):
    """Three runs written as the daemon would have left them, with attempt times a test can compute from."""
    store.ensure_home(home)
    t = time.time() - DAY
    train = meta("train", RunSpec(cpus=4, gpus=2), [
        attempt(1, t, t + 600, "node_fault", "n1", "gpu"),
        attempt(2, t + 700, t + 4300, "success", "n2", "gpu")], t)
    sweep = meta("sweep", RunSpec(backend="tpu", tpu="v4-32", zones=["us-central2-b"]),
                 [attempt(1, t + 1000, None, None, "slice-1")], t + 1, group={"id": "g1", "kind": "sweep", "name": "lr-sweep", "size": 1, "index": 0})
    child = meta("child", RunSpec(gpus=1), [attempt(1, t + 100, t + 1900, "workload_failure", "n1", "gpu")], t + 2,
                 parent_run_id=train.run_id, parent_attempt=2, namespace=train.run_id)
    for made in (train, sweep, child):
        runs.write_run(home, runs.NewRun(made, {"script.sh": b"x"}))
    return {"t": t, "train": train.run_id, "sweep": sweep.run_id, "child": child.run_id}


def usage_json(home, *args):
    data = json.loads(run_fray("usage", "--json", *args, home=home.root, check=True).stdout)
    schema_validate("cli-usage", data)
    return data


def test_fray_usage_by_run_counts_failed_attempts_as_lost_and_a_running_one_up_to_now(home, known_runs):
    data = usage_json(home, "--since", "all")
    rows = {row["key"]: row for row in data["rows"]}
    train, sweep, child = rows[known_runs["train"]], rows[known_runs["sweep"]], rows[known_runs["child"]]
    assert (train["label"], train["wall_sec"], train["lost_sec"], train["goodput"]) == ("train", 4200, 600, 0.8571)
    assert (train["cpu_hours"], train["gpu_hours"]) == (4.6667, 2.3333)
    assert (child["lost_sec"], child["goodput"], child["gpu_hours"]) == (1800, 0.0, 0.5)
    running_for = data["generated_at"] - (known_runs["t"] + 1000)
    assert sweep["running"] == 1 and sweep["wall_sec"] == pytest.approx(running_for, abs=0.01)
    assert sweep["tpu_chip_hours"] == pytest.approx(16 * running_for / 3600, abs=0.001)  # v4-32: 16 chips
    assert data["total"]["runs"] == 3 and data["total"]["attempts"] == 4
    text = run_fray("usage", "--since", "all", home=home.root, check=True).stdout
    assert "Usage by run, all time" in text and "TPU CHIP-H" in text and "86%" in text and "1 (1 running)" in text


def test_fray_usage_groups_by_family_partition_and_node_and_cuts_at_since(home, known_runs):
    by_group = {row["key"]: row for row in usage_json(home, "--since", "all", "--by", "group")["rows"]}
    assert set(by_group) == {known_runs["train"], "g1"}  # the child counts with its parent's family
    assert by_group["g1"]["label"] == "lr-sweep"  # a sweep is shown by the name a person gave it
    assert by_group[known_runs["train"]]["runs"] == 2 and by_group[known_runs["train"]]["wall_sec"] == 6000
    by_partition = {row["key"]: row["wall_sec"] for row in usage_json(home, "--since", "all", "--by", "partition")["rows"]}
    assert by_partition["gpu"] == 6000 and "-" in by_partition  # the TPU slice has no partition
    by_node = {row["key"]: (row["wall_sec"], row["goodput"]) for row in
               usage_json(home, "--since", "all", "--by", "node")["rows"]}
    assert by_node["n1"] == (2400, 0.0) and by_node["n2"] == (3600, 1.0)
    recent = usage_json(home, "--since", "12h")  # everything but the running slice ended a day ago
    assert [row["key"] for row in recent["rows"]] == [known_runs["sweep"]]
    assert recent["rows"][0]["wall_sec"] == pytest.approx(12 * 3600, abs=0.01)
    assert "Usage by node" in run_fray("usage", "--by", "node", "--since", "all", home=home.root, check=True).stdout


@pytest.mark.parametrize("args, words", [(("--since", "a week"), "--since 'a week': expected a duration"),
                                         (("--since", "0"), "longer than 0"),
                                         (("--by", "user"), "--by 'user': choose one of run, group, partition, node")])
def test_bad_usage_arguments_say_what_is_valid(home, args, words):
    done = run_fray("usage", *args, home=home.root)
    assert done.returncode == 2 and words in done.stderr
    error = json.loads(run_fray("usage", "--json", *args, home=home.root).stdout)
    schema_validate("cli-error", error)
    assert words in error["error"]["message"]


def test_usage_of_a_real_run_that_failed_once_then_succeeded(home, tmp_path):
    script = tmp_path / "second.sh"
    script.write_text("#!/bin/bash\n#FRAY --backoff-base 0.1\nsleep 0.5\n"
                      "if [ \"$FRAY_ATTEMPT\" = 1 ]; then exit 3; fi\npython3 -m fray.wrapper.report final\n")
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={})).run_id
    daemon = start_daemon(home)
    try:
        wait_until(lambda: (store.read_json(home.meta_file(run_id), "meta") or {}).get("phase") == "ended",
                   timeout=60, what="the run to end")
    finally:
        stop_daemon(daemon)
    recorded = store.read_json(home.meta_file(run_id), "meta")
    assert recorded["end"]["status"] == "completed_success", recorded["end"]
    first, second = recorded["attempts"]
    [row] = usage_json(home)["rows"]
    assert row["attempts"] == 2
    assert row["lost_sec"] == pytest.approx(first["ended_at"] - first["started_at"], abs=0.001)
    assert row["useful_sec"] == pytest.approx(second["ended_at"] - second["started_at"], abs=0.001)
    assert 0 < row["goodput"] < 1 and row["cpu_hours"] == pytest.approx(row["wall_sec"] / 3600, abs=1e-4)


def test_runs_with_steps_count_their_stretches_cut_at_the_window_and_say_mixed_beside_runs_without():
    from fray.core.goodput import Stretch

    t = 1_000_000.0
    steps = meta("steps", RunSpec(), [attempt(1, t, t + 100, "node_fault", "n1"),
                                      attempt(2, t + 120, t + 220, "success", "n2")], t)
    stretches = [Stretch(1, t - 5, t, "queue"), Stretch(1, t, t + 80, "useful"), Stretch(1, t + 80, t + 100, "detection"),
                 Stretch(2, t + 100, t + 115, "backoff"), Stretch(2, t + 115, t + 120, "queue"),
                 Stretch(2, t + 120, t + 140, "redone"), Stretch(2, t + 140, t + 220, "useful")]
    plain = meta("plain", RunSpec(), [attempt(1, t, t + 50, "workload_failure", "n3")], t)
    spans = spans_of(steps, Resources(1, 0), stretches) + spans_of(plain, Resources(1, 0))
    rows, total = tally(spans, "run", None, t + 1000)
    by_run = {row.label: row.to_dict() for row in rows}
    assert by_run["steps"]["basis"] == "steps" and by_run["steps"]["useful_sec"] == 160.0
    assert by_run["steps"]["lost_by_cause"] == {"queue": 10.0, "detection": 20.0, "backoff": 15.0, "redone": 20.0}
    assert by_run["steps"]["goodput"] == round(160 / 225, 4) and by_run["steps"]["wall_sec"] == 200.0
    assert by_run["plain"]["basis"] == "attempts" and by_run["plain"]["lost_by_cause"] == {"failed_attempts": 50.0}
    assert total.basis == "mixed"
    rows, _ = tally(spans, "run", t + 130, t + 1000)  # the window cuts the redone stretch in half
    assert {row.label: row.to_dict()["lost_by_cause"] for row in rows} == {"steps": {"redone": 10.0}}
