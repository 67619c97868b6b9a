"""fray.wrapper.report: what a workload tells fray, from Python and from the shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fray.wrapper import contract, report

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = Path(__file__).parents[2] / "schemas"


def load(path: Path, schema: str) -> Any:
    report.flush()  # progress() returns before its thread writes: write what it holds now
    document = json.loads(path.read_text(encoding="utf-8"))
    schema_doc = json.loads((SCHEMAS / f"{schema}.json").read_text())
    errors = list(Draft202012Validator(schema_doc).iter_errors(document))
    assert not errors, f"{schema}.json: " + "; ".join(e.message for e in errors)
    return document


@pytest.fixture
def attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "att'empt; 1"
    folder.mkdir()
    for name in list(os.environ):
        if name.startswith("FRAY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv(contract.ENV_ATTEMPT_DIR, str(folder))
    return folder


def test_progress_writes_a_valid_document(attempt: Path) -> None:
    written = report.progress(step=10, loss=0.25, samples_per_sec=120.5, checkpoint_version=1, lr=3e-4, phase="warmup")
    document = load(attempt / contract.PROGRESS, "progress")
    assert document == written
    assert document["step"] == 10 and document["loss"] == 0.25 and document["samples_per_sec"] == 120.5
    assert document["checkpoint_version"] == 1
    assert document["extra"] == {"lr": 3e-4, "phase": "warmup"}
    assert isinstance(document["updated_at"], float)


@pytest.mark.parametrize("counter", ["step", "checkpoint_version"])
def test_counters_must_not_decrease(attempt: Path, counter: str) -> None:
    report.progress(**{counter: 5})
    report.progress(**{counter: 5})  # equal is fine
    with pytest.raises(ValueError, match=f"{counter} went back from 5 to 4"):
        report.progress(**{counter: 4})
    assert load(attempt / contract.PROGRESS, "progress")[counter] == 5
    report.progress(**{counter: 6})
    assert load(attempt / contract.PROGRESS, "progress")[counter] == 6


def test_a_refused_update_writes_nothing(attempt: Path) -> None:
    report.progress(step=7, loss=1.0)
    report.flush()
    before = (attempt / contract.PROGRESS).read_bytes()
    with pytest.raises(ValueError):
        report.progress(step=6, loss=0.5)
    report.flush()
    assert (attempt / contract.PROGRESS).read_bytes() == before


def test_counters_left_out_keep_their_last_value(attempt: Path) -> None:
    report.progress(step=3, checkpoint_version=2, loss=0.9)
    document = report.progress(loss=0.8)
    assert document is not None
    assert (document["step"], document["checkpoint_version"], document["loss"]) == (3, 2, 0.8)
    assert load(attempt / contract.PROGRESS, "progress") == document


def test_non_finite_numbers_are_kept_out_of_the_json(attempt: Path) -> None:
    document = report.progress(step=1, loss=float("nan"), samples_per_sec=float("inf"))
    assert document is not None
    assert document["loss"] is None and document["samples_per_sec"] is None
    assert document["extra"] == {"loss_not_finite": "nan", "samples_per_sec_not_finite": "inf"}
    load(attempt / contract.PROGRESS, "progress")


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"step": -1}, ValueError),
        ({"step": True}, TypeError),
        ({"step": 1.5}, TypeError),
        ({"checkpoint_version": "3"}, TypeError),
        ({"loss": "low"}, TypeError),
        ({"samples_per_sec": -2.0}, ValueError),
        ({"extra_thing": object()}, ValueError),
        ({"extra_thing": float("nan")}, ValueError),
    ],
)
def test_bad_values_are_refused(attempt: Path, kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        report.progress(**kwargs)
    report.flush()
    assert not (attempt / contract.PROGRESS).exists()


def test_numbers_that_only_look_like_numbers_are_accepted(attempt: Path) -> None:
    class Scalar:  # numpy/torch scalars: __index__ for counts, __float__ for measures
        def __index__(self) -> int:
            return 12

        def __float__(self) -> float:
            return 0.5

    document = report.progress(step=Scalar(), loss=Scalar())
    assert document is not None and (document["step"], document["loss"]) == (12, 0.5)


def test_a_corrupt_progress_file_does_not_block_reporting(attempt: Path) -> None:
    (attempt / contract.PROGRESS).write_text("{not json")
    report.progress(step=1)
    assert load(attempt / contract.PROGRESS, "progress")["step"] == 1


def test_final_writes_result_json(attempt: Path) -> None:
    assert report.final(accuracy=0.93, labels=["a", "b"]) == {"accuracy": 0.93, "labels": ["a", "b"]}
    assert load(attempt / contract.RESULT, "result") == {"accuracy": 0.93, "labels": ["a", "b"]}
    with pytest.raises(ValueError, match="must be JSON"):
        report.final(accuracy=float("nan"))
    assert load(attempt / contract.RESULT, "result")["accuracy"] == 0.93


def test_outside_a_fray_job_everything_is_a_no_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("FRAY_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    assert report.progress(step=1) is None
    assert report.final(x=1) is None
    assert report.checkpoint_dir() is None and report.resuming() is False and report.attempt_dir() is None
    assert list(tmp_path.iterdir()) == []


def test_checkpoint_dir_and_resuming(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(contract.ENV_CHECKPOINT_DIR, str(tmp_path / "ck"))
    monkeypatch.setenv(contract.ENV_RESUME, "1")
    assert report.checkpoint_dir() == tmp_path / "ck" and report.resuming() is True
    monkeypatch.setenv(contract.ENV_RESUME, "0")
    assert report.resuming() is False


# -- the command line twin -------------------------------------------------------


def cli(attempt: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_")}
    env["PYTHONPATH"] = str(REPO)
    if attempt is not None:
        env[contract.ENV_ATTEMPT_DIR] = str(attempt)
    return subprocess.run(
        [sys.executable, "-m", "fray.wrapper.report", *args], env=env, capture_output=True, text=True, timeout=20
    )


def test_cli_progress_and_final(tmp_path: Path) -> None:
    proc = cli(tmp_path, "progress", "--step", "10", "--loss", "0.3", "--checkpoint-version", "2", "--extra", '{"lr": 0.1}')
    assert proc.returncode == 0, proc.stderr
    document = load(tmp_path / contract.PROGRESS, "progress")
    assert (document["step"], document["loss"], document["checkpoint_version"]) == (10, 0.3, 2)
    assert document["extra"] == {"lr": 0.1}

    proc = cli(tmp_path, "progress", "--step", "9")
    assert proc.returncode == 1 and "step went back from 10 to 9" in proc.stderr
    assert load(tmp_path / contract.PROGRESS, "progress")["step"] == 10

    proc = cli(tmp_path, "final", "--json", '{"acc": 0.9, "step": 10}')
    assert proc.returncode == 0, proc.stderr
    assert load(tmp_path / contract.RESULT, "result") == {"acc": 0.9, "step": 10}


@pytest.mark.parametrize(
    "args",
    [("final", "--json", "[1, 2]"), ("final", "--json", "{oops"), ("progress", "--step", "ten"), ("bogus",), ()],
)
def test_cli_bad_arguments_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = cli(tmp_path, *args)
    assert proc.returncode == 2 and proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_outside_a_job_is_a_quiet_no_op(tmp_path: Path) -> None:
    proc = cli(None, "progress", "--step", "1")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_progress_write_that_fails_warns_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(contract.ENV_ATTEMPT_DIR, str(tmp_path / "no such folder"))
    assert report.progress(step=1) is not None
    report.flush()
    assert capsys.readouterr().err.count("progress not recorded") == 1
    report.progress(step=2)
    report.flush()
    assert "progress not recorded" not in capsys.readouterr().err  # told once, not every half second
    with pytest.raises(OSError):
        report.final(acc=1.0)  # the result is not advisory


def test_the_stall_clock_moves_only_when_the_step_does(attempt: Path) -> None:
    first = report.progress(step=5)
    assert first is not None
    again = report.progress(step=5, loss=0.1)
    assert again is not None and again["step_changed_at"] == first["step_changed_at"]
    moved = report.progress(step=6)
    assert moved is not None and moved["step_changed_at"] == moved["updated_at"] >= first["step_changed_at"]
