"""The progress history: what report.progress/checkpoint append (fray.wrapper.history), and how readers merge it
(fray.core.history) and account for it (fray.core.goodput)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from fray.core import goodput, history as core_history
from fray.wrapper import contract, history, report, versions

SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "history-line.json").read_text())


@pytest.fixture
def attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "att'empt; 1"
    folder.mkdir()
    for name in list(os.environ):
        if name.startswith("FRAY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv(contract.ENV_ATTEMPT_DIR, str(folder))
    monkeypatch.setenv(contract.ENV_CHECKPOINT_DIR, str(tmp_path / "ckpt"))
    return folder


def lines_of(data: bytes) -> list[dict]:
    records = [json.loads(raw) for raw in data.splitlines()]
    for record in records:
        errors = list(Draft202012Validator(SCHEMA).iter_errors(record))
        assert not errors, errors
    return records


def read_all(folder: Path) -> bytes:
    report.flush()  # what report.progress holds is written within half a second: now
    plain = folder / contract.HISTORY
    if plain.exists():
        return plain.read_bytes()
    chunks = folder / (contract.HISTORY + versions.SUFFIX)
    return b"".join((chunks / name).read_bytes() for name in sorted(os.listdir(chunks)))


def test_each_progress_step_and_checkpoint_is_appended(attempt: Path) -> None:
    for step in range(1, 4):
        report.progress(step=step, loss=1.0 / step, lr=3e-4, phase="warmup")
    with report.checkpoint("step-3"):
        pass
    report.progress(step=4, loss=float("nan"))
    records = lines_of(read_all(attempt))
    assert [r["step"] for r in records] == [1, 2, 3, 3, 4]
    assert records[0]["metrics"] == {"loss": 1.0, "lr": 3e-4}  # a string is not a metric
    assert records[3] == {"t": records[3]["t"], "step": 3, "checkpoint": "step-3"}
    assert records[4]["metrics"] == {"loss": "nan"}


def test_a_checkpoint_can_name_the_step_it_holds(attempt: Path) -> None:
    report.progress(step=20)
    with report.checkpoint("ck", step=10):
        pass
    assert lines_of(read_all(attempt))[-1]["step"] == 10


def test_the_history_is_thinned_as_it_grows_and_stays_under_its_cap(attempt: Path, monkeypatch) -> None:
    monkeypatch.setattr(history, "LEVEL_BYTES", 2048)
    monkeypatch.setattr(history, "MAX_BYTES", 16 * 1024)
    for step in range(20000):  # the writer itself: 20,000 fsynced progress.json files would take a minute
        history.record_progress(attempt, {"updated_at": 1.0 + step, "step": step, "loss": 1.0})
    data = read_all(attempt)
    assert len(data) <= 16 * 1024
    steps = [r["step"] for r in lines_of(data)]
    assert steps[:10] == list(range(10))  # the start is kept whole
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert max(gaps) >= 64 and gaps == sorted(gaps)  # thinner and thinner, never denser again
    with report.checkpoint("late", step=19999):
        pass  # marks have their reserve past the cap
    assert lines_of(read_all(attempt))[-1]["checkpoint"] == "late"


def test_the_write_once_layout_writes_chunks_never_touched_again(attempt: Path, monkeypatch) -> None:
    monkeypatch.setenv(contract.ENV_RECORDS, contract.RECORDS_WRITE_ONCE)
    for step in range(1, 200):
        report.progress(step=step, loss=float(step))
    with report.checkpoint("step-199"):
        pass  # flushes what is buffered
    assert not (attempt / contract.HISTORY).exists()
    folder = attempt / (contract.HISTORY + versions.SUFFIX)
    chunks = [(folder / name).read_bytes() for name in sorted(os.listdir(folder))]
    # Whole lines, CHUNK_LINES or more a chunk (however report.progress's thread grouped them), the mark last.
    assert all(len(chunk.splitlines()) >= history.CHUNK_LINES for chunk in chunks[:-1]) and len(chunks) >= 2
    assert all(chunk.endswith(b"\n") for chunk in chunks) and b"step-199" in chunks[-1]
    records = lines_of(read_all(attempt))
    assert [r["step"] for r in records] == [*range(1, 200), 199]


def test_the_shell_twin_appends_too_in_both_layouts(attempt: Path) -> None:
    for mode in ("rename", contract.RECORDS_WRITE_ONCE):
        folder = attempt / mode
        folder.mkdir()
        env = {**os.environ, contract.ENV_ATTEMPT_DIR: str(folder), contract.ENV_RECORDS: mode}
        for step in (1, 2):
            subprocess.run([sys.executable, "-m", "fray.wrapper.report", "progress", "--step", str(step), "--loss", "0.5"],
                           env=env, check=True)
        assert [r["step"] for r in lines_of(read_all(folder))] == [1, 2]


def point_lines(*rows: tuple) -> bytes:
    return b"".join(history.line(t, step, {"loss": loss}) for t, step, loss in rows)


def test_a_line_cut_by_a_kill_and_junk_are_skipped() -> None:
    data = point_lines((1.0, 1, 0.5), (2.0, 2, 0.4)) + b'not json\n{"t": 3}\n[1]\n' + b'{"t": 4.0, "step": 3, "met'
    parsed = core_history.parse(1, data)
    assert [p.step for p in parsed.points] == [1, 2]
    assert parsed.skipped == 4


def test_bad_metric_values_are_skipped_and_non_finite_kept_as_such() -> None:
    data = (b'{"t": 1, "step": 1, "metrics": {"loss": "nan", "acc": "high", "ok": true, "lr": 0.1, "g": "-inf", '
            b'"huge": 1' + b'0' * 400 + b'}}\n' + b'{"t": 1' + b'0' * 400 + b', "step": 2}\n')
    parsed = core_history.parse(1, data)
    assert parsed.points[0].metrics["huge"] == math.inf and len(parsed.points) == 1  # a time past floats: skipped
    metrics = parsed.points[0].metrics
    assert math.isnan(metrics["loss"]) and metrics["g"] == -math.inf and metrics["lr"] == 0.1
    assert "acc" not in metrics and parsed.skipped == 3
    series = core_history.merge([parsed])
    assert core_history.finite_values(series, "loss") == []
    assert len(core_history.not_finite_points(series, "loss")) == 1


def test_merge_marks_restarts_and_the_steps_done_twice() -> None:
    first = core_history.parse(1, point_lines(*[(float(s), s, 1.0) for s in range(1, 16)])
                               + history.line(10.5, 10, checkpoint="step-10"))
    second = core_history.parse(2, point_lines(*[(30.0 + s, s, 0.5) for s in range(11, 21)]))
    series = core_history.merge([first, second])
    assert [(r.attempt, r.step, r.redone_steps) for r in series.restarts] == [(2, 11, 5)]
    assert [p.step for p in series.points if p.redone] == [11, 12, 13, 14, 15]
    assert all(p.attempt == 1 for p in series.points if p.redone)
    assert series.metrics == ["loss"] and series.checkpoints[0].step == 10


def test_steps_going_back_inside_an_attempt_and_a_metric_renamed_mid_run() -> None:
    data = (b''.join(history.line(float(s), s, {"loss": 1.0}) for s in (1, 2, 3))
            + b''.join(history.line(10.0 + s, s, {"train_loss": 1.0}) for s in (2, 3, 4)))
    series = core_history.merge([core_history.parse(1, data)])
    assert [(r.attempt, r.step) for r in series.restarts] == [(1, 2)]
    assert series.metrics == ["loss", "train_loss"]


def times(number: int, submitted: float, started: float | None, ended: float | None, cause: str | None):
    return goodput.AttemptTimes(number, submitted, started, ended, cause)


def test_goodput_from_the_steps_counts_each_cause() -> None:
    # attempt 1: queued 5 s, starts at 5, steps 1..15 at 6..20 (1 s each), hangs, ended at 40 by fray.
    # attempt 2: submitted at 42 (2 s backoff), starts at 45, resumes at step 11 (checkpoint 10), steps 11..30 at 47..66.
    first = [(5.0 + s, s, 1.0) for s in range(1, 16)]
    second = [(36.0 + s, s, 1.0) for s in range(11, 31)]
    series = core_history.merge([
        core_history.parse(1, point_lines(*first) + history.line(15.5, 10, checkpoint="step-10")),
        core_history.parse(2, point_lines(*second)),
    ])
    attempts = [times(1, 0.0, 5.0, 40.0, "progress_stall"), times(2, 42.0, 45.0, 67.0, "success")]
    figures = goodput.breakdown(goodput.stretches(attempts, series, now=100.0))
    assert figures.basis == "steps" and figures.wall_sec == pytest.approx(67.0)
    assert figures.useful_sec == pytest.approx(30.0)  # 30 distinct steps of 1 s
    assert figures.lost_sec["redone"] == pytest.approx(5.0 + 1.0)  # steps 11..15, and the step in flight at the hang
    assert figures.lost_sec["detection"] == pytest.approx(40.0 - 21.0)
    assert figures.lost_sec["backoff"] == pytest.approx(2.0)
    assert figures.lost_sec["queue"] == pytest.approx(5.0 + 3.0)
    assert figures.lost_sec["start"] == pytest.approx(0.0 + 1.0)
    assert figures.lost_sec["idle"] == pytest.approx(1.0)
    assert figures.goodput == pytest.approx(30.0 / 67.0)


@pytest.mark.parametrize("offset, shifted", [(-0.2, False), (1.5, False), (-300.0, True), (180.0, True)])
def test_a_clock_offset_within_the_sighting_delay_moves_no_point(offset: float, shifted: bool) -> None:
    """The daemon's estimate of a node's clock is short of the truth by its sighting delay: a node on the
    daemon's own clock reads -0.2 s under load, and moving its points by that put its last steps after its
    attempt's end, their redone time uncounted. Minutes apart, the points move onto the daemon's clock."""
    from fray.ops import history as ops_history

    crashed = core_history.parse(1, point_lines(*[(10.0 + 0.05 * s, s, 1.0) for s in range(1, 14)]))
    moved = ops_history._on_daemon_clock(crashed, offset)
    assert [p.t for p in moved.points] == [p.t - offset if shifted else p.t for p in crashed.points]
    if not shifted:  # steps 11..13 redone after a restart at step 11, all inside attempt 1's times
        series = core_history.merge([moved, core_history.parse(2, point_lines((20.0, 11, 1.0)))])
        attempts = [times(1, 9.0, 10.0, 10.0 + 0.05 * 13 + 0.01, "workload_failure"),
                    times(2, 19.0, 19.5, 21.0, "success")]
        assert goodput.breakdown(goodput.stretches(attempts, series, now=30.0)).lost_sec["redone"] >= 0.15


def test_without_steps_the_figure_is_the_attempts_and_says_so() -> None:
    attempts = [times(1, 0.0, 1.0, 11.0, "workload_failure"), times(2, 12.0, 13.0, 43.0, "success")]
    series = core_history.merge([])
    assert goodput.stretches(attempts, series, now=50.0) == []
    figures = goodput.attempt_figures(attempts, 50.0, frozenset({"success"}))
    assert figures.basis == "attempts" and figures.goodput == pytest.approx(30.0 / 40.0)


def test_the_reader_parses_only_what_was_appended_since_its_last_read(tmp_path: Path) -> None:
    from fray.ops.history import attempt_history
    from fray.state.layout import AttemptPaths

    files = AttemptPaths(tmp_path)
    files.history.write_bytes(point_lines((1.0, 1, 0.5)))
    assert [p.step for p in attempt_history(files, 1).points] == [1]
    with open(files.history, "ab") as handle:
        handle.write(point_lines((2.0, 2, 0.4)) + b'{"t": 3.0, "st')  # a line still being written
    again = attempt_history(files, 1)
    assert [p.step for p in again.points] == [1, 2] and again.skipped == 1
    with open(files.history, "ab") as handle:
        handle.write(b'ep": 3}\n')
    again = attempt_history(files, 1)
    assert [p.step for p in again.points] == [1, 2, 3] and again.skipped == 0
    files.history.write_bytes(point_lines((9.0, 9, 0.1)))  # replaced by a shorter file: read again whole
    assert [p.step for p in attempt_history(files, 1).points] == [9]


from hypothesis import given, settings, strategies as st  # noqa: E402

_values = st.one_of(st.floats(allow_nan=True), st.integers(-10**30, 10**30), st.text(max_size=3), st.booleans(),
                    st.none(), st.sampled_from(["nan", "inf", "-inf"]))
_records = st.fixed_dictionaries({"t": st.floats(90, 500), "step": st.integers(-2, 50)},
                                 optional={"metrics": st.dictionaries(st.sampled_from(["loss", "lr", "acc"]), _values),
                                           "checkpoint": st.text(max_size=4)})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_records, max_size=12), min_size=1, max_size=4), st.binary(max_size=20))
def test_any_history_merges_and_accounts_without_raising(attempt_records, junk) -> None:
    parsed = []
    for number, records in enumerate(attempt_records, start=1):
        data = b"".join(json.dumps(r).encode() + b"\n" for r in records) + junk
        parsed.append(core_history.parse(number, data))
    series = core_history.merge(parsed)
    attempts = [times(n, 100.0 * n, 100.0 * n + 5, 100.0 * n + 90, "workload_failure")
                for n in range(1, len(attempt_records) + 1)]
    found = goodput.stretches(attempts, series, now=1e6)
    if found:
        assert all(a.end == pytest.approx(b.start) for a, b in zip(found, found[1:]))  # no gap, no overlap
        figures = goodput.breakdown(found)
        assert figures.wall_sec == pytest.approx(found[-1].end - attempts[0].submitted_at)
        assert 0 <= figures.goodput <= 1


@pytest.mark.parametrize("metrics", [
    {}, {"loss": 0.31}, {"loss": 1e-300, "lr": 3e-4, "tokens": 10**20, "neg": -0.0},
    {'na"me\\ é\n': 1.5, "loss": "nan", "g": "-inf"}, {f"m{i:03}": i / 7 for i in range(200)},  # cut to the cap
])
def test_a_point_line_built_by_hand_is_the_line_the_encoder_writes(metrics: dict) -> None:
    class Float(float):  # numpy's float64 is a float subclass whose repr is not a number
        def __repr__(self) -> str:
            return f"Float({float(self)})"

    for t, step in ((1764151234.5126, 0), (2.0, 10**12)):
        assert history.point_line(t, step, metrics) == history.line(t, step, metrics)
    assert history.point_line(1.0, 1, {"x": Float(0.5)}) == history.line(1.0, 1, {"x": 0.5})
