"""What an attempt hands a job that resumes by a flag and logs to a tracker, and how a file its snapshot left
out is told: --retry-args, the trackers' variables, snapshot_left_out (the contract; e2e tests run them)."""

from __future__ import annotations

import json
import sqlite3

from fray.wrapper import left_out, resume_args, trackers

RUN = "20261201-120000-train-ab12"


def test_retry_args_come_after_the_first_attempt_and_only_when_the_checkpoint_is_there(tmp_path):
    assert resume_args.decide(1, ["--init_from=resume"], None, str(tmp_path))[0] == []
    assert resume_args.decide(2, ["--init_from=resume"], None, str(tmp_path))[0] == ["--init_from=resume"]
    added, record = resume_args.decide(3, ["--resume"], "out/ckpt.pt", str(tmp_path))
    assert added == [] and record["reason"].startswith("out/ckpt.pt does not exist")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ckpt.pt").write_text("{}")
    added, record = resume_args.decide(3, ["--resume"], "out/ckpt.pt", str(tmp_path))
    assert added == ["--resume"] and record == {"args": ["--resume"], "if_exists": "out/ckpt.pt", "added": True,
                                                "reason": "attempt 3, and out/ckpt.pt exists"}
    assert resume_args.decide(2, [], None, str(tmp_path)) == ([], None)


def test_every_attempt_names_one_wandb_run_unless_the_user_chose_one(tmp_path):
    env = trackers.environment({}, RUN, 1, str(tmp_path))
    assert env["WANDB_RUN_ID"] == RUN and env["WANDB_RESUME"] == "allow"
    assert json.loads(env["MLFLOW_RUN_CONTEXT"]) == {"fray.run_id": RUN}
    assert env["FRAY_TRACKER_VARS"] == "MLFLOW_RUN_CONTEXT,WANDB_RESUME,WANDB_RUN_ID"
    mine = trackers.environment({"WANDB_RUN_ID": "my-run", "WANDB_RESUME": "must"}, RUN, 2, str(tmp_path))
    assert "WANDB_RUN_ID" not in mine and "WANDB_RESUME" not in mine


def test_a_job_launched_from_a_fray_job_gets_its_own_runs_not_its_parents(tmp_path):
    parent = {"FRAY_RUN_ID": "parent", "WANDB_RUN_ID": "parent", "WANDB_RESUME": "allow", "MLFLOW_RUN_ID": "abc",
              "MLFLOW_RUN_CONTEXT": "{}", "FRAY_TRACKER_VARS": "MLFLOW_RUN_CONTEXT,MLFLOW_RUN_ID,WANDB_RESUME,WANDB_RUN_ID"}
    env = trackers.environment(parent, RUN, 1, str(tmp_path))
    assert env["WANDB_RUN_ID"] == RUN and env["MLFLOW_RUN_ID"] is None  # unset: the parent's run is not this one's


def mlflow_database(path, tagged: dict[str, str]) -> None:
    """The two tables of MLflow's SQLite store that hold a run and its tags (their columns as MLflow names them)."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (run_uuid TEXT PRIMARY KEY, lifecycle_stage TEXT, start_time INTEGER)")
        db.execute("CREATE TABLE tags (key TEXT, value TEXT, run_uuid TEXT)")
        for number, (run_uuid, fray_run) in enumerate(tagged.items()):
            db.execute("INSERT INTO runs VALUES (?, 'active', ?)", (run_uuid, number))
            db.execute("INSERT INTO tags VALUES ('fray.run_id', ?, ?)", (fray_run, run_uuid))


def test_mlflow_resumes_the_run_the_first_attempt_made_in_a_local_store(tmp_path):
    mlflow_database(tmp_path / "mlflow.db", {"0f3a": "another-run", "9c1e": RUN})
    assert "MLFLOW_RUN_ID" not in trackers.environment({}, RUN, 1, str(tmp_path))  # it does not exist yet
    assert trackers.environment({}, RUN, 2, str(tmp_path))["MLFLOW_RUN_ID"] == "9c1e"
    mlflow_database(tmp_path / "other.db", {"77aa": RUN})
    env = trackers.environment({"MLFLOW_TRACKING_URI": "sqlite:///other.db"}, RUN, 2, str(tmp_path))
    assert env["MLFLOW_RUN_ID"] == "77aa"
    tag = tmp_path / "store" / "1" / "5d2b" / "tags"
    tag.mkdir(parents=True)
    (tag / "fray.run_id").write_text(RUN)
    env = trackers.environment({"MLFLOW_TRACKING_URI": f"file://{tmp_path / 'store'}"}, RUN, 2, str(tmp_path))
    assert env["MLFLOW_RUN_ID"] == "5d2b"


def test_a_tracking_server_cannot_be_searched_so_the_attempt_says_so(tmp_path):
    told = []
    env = trackers.environment({"MLFLOW_TRACKING_URI": "https://mlflow.example"}, RUN, 2, str(tmp_path), told.append)
    assert "MLFLOW_RUN_ID" not in env and "starts an MLflow run of its own" in told[0]


def test_a_missing_file_the_snapshot_left_out_is_found_from_the_last_lines_of_stderr(tmp_path):
    home, code = tmp_path / "home", tmp_path / "home" / "runs" / RUN / "code"
    code.mkdir(parents=True)
    (home / "runs" / RUN / "left-out.json").write_text(json.dumps({
        "root": "/src/nanogpt", "folders": ["out/"], "files": {"data/shakespeare_char/train.bin": ".gitignore:3 *.bin"},
        "complete": True, "rules": {"out/": ".gitignore:9 out/"}}))
    tail = ["Traceback (most recent call last):", '  File "train.py", line 114, in <module>',
            "FileNotFoundError: [Errno 2] No such file or directory: 'data/shakespeare_char/train.bin'"]
    found = left_out.lookup(str(home), RUN, str(code), str(code), tail)
    assert found == left_out.Missing("data/shakespeare_char/train.bin", ".gitignore:3 *.bin",
                                     "/src/nanogpt/data/shakespeare_char/train.bin", None)
    assert "`!data/shakespeare_char/train.bin` in .frayignore" in left_out.message(found)
    inside = left_out.lookup(str(home), RUN, str(code), str(code / "sub"),
                             [f"cat: {code}/out/ckpt.pt: No such file or directory"])
    assert inside.folder == "out/" and "`!out/`" in left_out.message(inside)
    assert left_out.lookup(str(home), RUN, str(code), str(code), ["No such file or directory: '/etc/nothing'"]) is None
    assert left_out.lookup(str(home), RUN, str(code), str(code), ["No such file or directory: 'data/other.bin'"]) is None
