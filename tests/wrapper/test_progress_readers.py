"""Progress read from what a job already emits: its printed lines (--progress-pattern) and its TensorBoard event
files (--progress-tensorboard), written to the same progress.json and history as report.progress."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fray.wrapper import history, logscan, records, tensorboard, tfevents
from fray.wrapper.logscan import LogScan, Matcher

DATA = Path(__file__).parent / "data"
NANOGPT = "iter (?P<step>\\d+): loss (?P<loss>[0-9.]+), time (?P<iter_ms>[0-9.]+)ms"


def progress(folder: Path) -> dict:
    return records.read_json(folder / "progress.json")


def points(folder: Path) -> list[dict]:
    path = folder / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_matching_line_gives_its_step_loss_and_other_metrics():
    matcher = Matcher([NANOGPT])
    for line in ["step 0: train loss 4.2, val loss 4.2", "iter 0: loss 4.2210, time 146.48ms", "compiling...",
                 "iter 1: loss 3.9000, time 120.00ms"]:
        matcher.feed(line)
    assert matcher.values == {"step": 1, "loss": 3.9, "iter_ms": 120.0}
    assert [p["step"] for p in matcher.take_points()] == [0, 1]


def test_two_patterns_add_up_a_progress_bar_step_and_a_logged_loss():
    matcher = Matcher(["(?P<step>\\d+)/(?P<total_steps>\\d+) \\[", "'loss': (?P<loss>[0-9.]+)"])
    for line in [" 10%|█         | 50/500 [00:05<00:45, 10.0it/s]", "{'loss': 2.31, 'learning_rate': 5e-05, 'epoch': 0.1}",
                 " 20%|██        | 100/500 [00:10<00:40, 10.0it/s]"]:
        matcher.feed(line)
    assert matcher.values == {"step": 100, "total_steps": 500, "loss": 2.31}


def test_a_step_that_goes_back_is_not_progress_and_text_is_no_number():
    matcher = Matcher(["step (?P<step>\\S+) acc (?P<acc>\\S+)"])
    for line in ["step 10 acc 0.5", "step 3 acc 0.9", "step ten acc high", "step 11 acc nan"]:
        matcher.feed(line)
    assert matcher.went_back == (10, 3)
    assert matcher.values["step"] == 11 and str(matcher.values["acc"]) == "nan"
    assert logscan.document(matcher.values, 1.0)["extra"] == {"acc_not_finite": "nan"}


def test_the_logs_are_tailed_into_progress_json_and_history_carriage_returns_and_the_last_lines_included(tmp_path):
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out.write_bytes(b"")
    err.write_bytes(b"")
    scan = LogScan([NANOGPT], [str(out), str(err)], str(tmp_path), log=print)
    with open(out, "ab") as handle:
        handle.write(b"".join(f"iter {i}: loss {1.0 / (i + 1):.4f}, time 10.00ms\n".encode() for i in range(50)))
        handle.write(b"iter 50: loss 0.0196, time 1")  # half a line: not yet
    with open(err, "ab") as handle:
        handle.write(b"progress\riter 48: loss 0.1, time 1ms\r")  # a line rewritten by \r; an older step: skipped
    scan.scan()
    assert progress(tmp_path)["step"] == 49 and progress(tmp_path)["extra"] == {"iter_ms": 10.0}
    assert [p["step"] for p in points(tmp_path)] == list(range(50))
    with open(out, "ab") as handle:
        handle.write(b"0.00ms\n")
    scan.stop()  # the workload has exited: what it wrote last counts
    assert progress(tmp_path)["step"] == 50 and progress(tmp_path)["loss"] == 0.0196
    assert points(tmp_path)[-1] == {"t": points(tmp_path)[-1]["t"], "step": 50,
                                    "metrics": {"iter_ms": 10.0, "loss": 0.0196}}


def test_a_flood_is_read_in_bounded_polls_and_a_bounded_number_of_points(tmp_path):
    out = tmp_path / "stdout.log"
    out.write_bytes(b"".join(f"iter {i}: loss 0.5, time 1.00ms\n".encode() for i in range(200_000)))
    scan = LogScan([NANOGPT], [str(out)], str(tmp_path), log=print)
    scan.scan()
    assert progress(tmp_path)["step"] == 199_999
    assert 1 < len(points(tmp_path)) <= logscan.MAX_POINTS_PER_POLL
    scan.stop()


# ---------------------------------------------------------------- TensorBoard


def test_real_pytorch_event_files_are_read_by_hand():
    """Written by torch 2.13's SummaryWriter: add_scalar (simple_value), add_scalar(new_style=True) (a scalar
    tensor), a histogram and a text summary (no scalars: skipped)."""
    simple = tfevents.Records().feed((DATA / "torch-simple-value.tfevents").read_bytes())
    assert [(s.step, s.tag, round(s.value, 4)) for s in simple if s.tag == "loss"] == [
        (0, "loss", 2.0), (10, "loss", 1.9), (20, "loss", 1.8), (30, "loss", 1.7), (40, "loss", 1.6)]
    assert {s.tag for s in simple} == {"loss", "lr"}
    tensor = tfevents.Records().feed((DATA / "torch-new-style.tfevents").read_bytes())
    assert [(s.step, s.tag, round(s.value, 4)) for s in tensor] == [(0, "train/loss", 1.5), (10, "train/loss", 1.4),
                                                                    (20, "train/loss", 1.3)]


def test_a_record_cut_short_waits_for_the_rest_and_garbage_stops_the_file_not_the_wrapper():
    data = tfevents.encode_scalar_event(7, "loss", 0.5) + tfevents.encode_scalar_event(8, "loss", 0.25, as_tensor=True)
    records = tfevents.Records()
    assert records.feed(data[:30]) == []
    assert [(s.step, s.value) for s in records.feed(data[30:])] == [(7, 0.5), (8, 0.25)]
    broken = tfevents.Records()
    assert broken.feed(b"\xff" * 64) == [] and "not an event file" in broken.broken


def test_event_files_under_the_folder_are_progress_and_an_earlier_attempts_are_not(tmp_path):
    logs = tmp_path / "work" / "runs" / "version_0"
    logs.mkdir(parents=True)
    old = logs / "events.out.tfevents.1.host.1.0"
    old.write_bytes(b"".join(tfevents.encode_scalar_event(s, "loss", 9.0) for s in range(100, 200)))
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    scan = tensorboard.TensorBoardScan(str(tmp_path / "work" / "runs"), str(attempt), log=print)
    new = logs / "events.out.tfevents.2.host.2.0"
    new.write_bytes(b"".join(tfevents.encode_scalar_event(s, "train/loss", 1.0 / (s + 1)) +
                             tfevents.encode_scalar_event(s, "lr", 0.1) for s in range(0, 30)))
    scan.scan()
    assert progress(attempt)["step"] == 29 and progress(attempt)["extra"].keys() == {"train/loss", "lr"}
    assert round(progress(attempt)["loss"], 6) == round(1 / 30, 6)  # train/loss is the loss (float32 in the file)
    with open(new, "ab") as handle:
        handle.write(tfevents.encode_scalar_event(30, "train/loss", 0.01))
    scan.stop()
    assert progress(attempt)["step"] == 30
    steps = [p["step"] for p in points(attempt)]
    assert steps == list(range(31)) and 100 not in steps


def test_a_copy_of_real_files_appearing_mid_attempt_is_read_whole(tmp_path):
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    scan = tensorboard.TensorBoardScan(str(tmp_path / "runs"), str(attempt), log=print)
    (tmp_path / "runs").mkdir()
    shutil.copy(DATA / "torch-simple-value.tfevents", tmp_path / "runs" / "events.out.tfevents.3.h.3.0")
    scan.stop()
    assert progress(attempt)["step"] == 40 and round(progress(attempt)["loss"], 4) == 1.6
    assert [p["step"] for p in points(attempt)] == [0, 10, 20, 30, 40]
    assert history.metrics_of(progress(attempt)).keys() == {"loss", "lr"}
