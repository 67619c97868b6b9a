"""The run screen's curves with the pilot, and bad histories through the dashboard, `fray plot` and `fray usage`."""

from __future__ import annotations

import json
import struct
import zlib

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray.ops.png_chart import AXIS, GLYPH_WIDTH, Canvas
from fray.state import runs, store
from fray.tui.screens.detail import DetailScreen
from fray.wrapper import history
from tests.e2e.test_goodput_e2e import TRAIN
from tests.tui_support import dashboard, go_to, make_runs, run, screen_text, until


def real_run(home, tmp_path) -> str:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    script.chmod(0o755)
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={})).run_id
    daemon = start_daemon(home)
    try:
        wait_until(lambda: (store.read_json(home.meta_file(run_id), "meta") or {}).get("phase") == "ended",
                   timeout=90, what="the run to end")
    finally:
        stop_daemon(daemon)
    return run_id


def test_the_run_screen_draws_the_loss_of_both_attempts_and_m_picks_another_metric(home, tmp_path):
    run_id = real_run(home, tmp_path)

    async def scenario():
        async with dashboard(home, size=(160, 90), run_id=run_id) as (app, pilot):
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="the DetailScreen")
            await until(pilot, lambda: "loss by step" in screen_text(app), what="the loss curve")
            text = screen_text(app)
            assert "Curves: loss" in text and "m: next metric of loss, lr" in text
            assert ("loss: 23 points in 2 attempt(s) (attempt 1 cyan, attempt 2 orange); 1 restart(s) (red lines), "
                    "3 steps redone") in text
            assert "loss by wall time" in text and "attempt 1" in text and "attempt 2" in text
            assert "goodput" in text and "from the steps" in text
            await pilot.press("m")
            await until(pilot, lambda: "lr by step" in screen_text(app), what="the lr curve")
            assert "Curves: lr" in screen_text(app)

    run(scenario())


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, size = 8, b"", (0, 0)
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    return size[0], size[1], zlib.decompress(idat)


def drawn(raw: bytes, width: int, text: str) -> int:
    """How many times `text` stands in the image (rows of `raw` as png_pixels gives them), as fray's font draws it."""
    glyphs = Canvas(GLYPH_WIDTH * len(text), 10)
    glyphs.text(0, 0, text, AXIS)
    stride, span = 1 + 3 * width, 3 * glyphs.width
    want = [bytes(glyphs.pixels[r * span:(r + 1) * span]) for r in range(glyphs.height)]
    found = 0
    for y in range(len(raw) // stride - glyphs.height + 1):
        row = raw[y * stride + 1:(y + 1) * stride]
        at = row.find(want[0])
        while at != -1:
            starts = [(y + r) * stride + 1 + at for r in range(glyphs.height)]
            if at % 3 == 0 and all(raw[s:s + span] == want[r] for r, s in enumerate(starts)):
                found += 1
            at = row.find(want[0], at + 1)
    return found


def test_fray_plot_prints_both_axes_and_writes_a_png_with_each_attempts_colour(home, tmp_path):
    run_id = real_run(home, tmp_path)
    png = tmp_path / "loss curve's.png"
    out = run_fray("plot", run_id, "--png", str(png), home=home.root, check=True).stdout
    assert "loss by step" in out and "loss by wall time" in out and "3 steps redone" in out
    width, height, raw = png_pixels(png.read_bytes())
    assert (width, height) == (900, 640) and len(raw) == height * (1 + 3 * width)
    for colour in ((0, 200, 220), (255, 150, 30), (230, 60, 60)):  # attempt 1, attempt 2, the restart line
        assert bytes(colour) in raw
    # the axes' titles: the metric over each panel's y axis, step and time under their x axes
    titles = ("LOSS", "STEP", "SECONDS SINCE SUBMIT")
    assert [drawn(raw, width, title) for title in titles] == [2, 1, 1]
    bad = run_fray("plot", run_id, "--metric", "accuracy", home=home.root)
    assert bad.returncode == 2 and "no metric 'accuracy'" in bad.stderr and "loss, lr" in bad.stderr


def hostile_history(home, run_id: str) -> None:
    """Everything a history can hold that it should not: junk, a cut line, non-numbers, NaN, a renamed
    metric, steps going back, a record that is not an object."""
    folder = home.run(run_id).attempt(1).dir
    lines = [history.line(1000.0 + s, s, {"loss": 1.0 / s}) for s in range(1, 6)]
    lines += [b'{"t": 1006, "step": 6, "metrics": {"loss": "nan", "acc": "high", "flag": true}}\n',
              b'not json at all\n', b'[1, 2]\n', b'{"t": "soon", "step": 7}\n',
              history.line(1007.0, 3, {"train_loss": 0.5}), history.line(1008.0, 4, {"train_loss": float("1e308")}),
              b'{"t": 1009, "step": 9, "metr']
    (folder / "history.jsonl").write_bytes(b"".join(lines))


def test_a_hostile_history_is_shown_not_crashed_on(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    hostile_history(home, ids["healthy"])
    out = run_fray("plot", ids["healthy"], home=home.root, check=True).stdout
    assert "1 not finite (x)" in out and "6 unreadable lines or values skipped" in out and "also: train_loss" in out
    out = run_fray("plot", ids["healthy"], "--metric", "train_loss", home=home.root, check=True).stdout
    assert "train_loss: 1 points" in out and "1 not finite (x)" in out  # 1e308: too large to draw, marked
    usage = json.loads(run_fray("usage", "--json", "--since", "all", home=home.root, check=True).stdout)
    schema_validate("cli-usage", usage)
    status = json.loads(run_fray("status", ids["healthy"], "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    assert status["goodput"]["restarts"] == 1  # 6 -> 3 inside the attempt (progress.json adds step 12000 after it)

    async def scenario():
        async with dashboard(home, size=(160, 90), run_id=ids["healthy"]) as (app, pilot):
            await until(pilot, lambda: "loss by step" in screen_text(app), what="the loss curve")
            assert "not finite" in screen_text(app)
            await pilot.press("m")
            await until(pilot, lambda: "train_loss by step" in screen_text(app), what="the renamed metric")

    run(scenario())


def test_fray_plot_group_overlays_the_runs_of_a_sweep(home, daemon, tmp_path):
    script = tmp_path / "point.sh"
    script.write_text("#!/bin/bash\n#FRAY --heartbeat-interval 0.5\n"
                      "for s in 1 2 3; do python3 -m fray.wrapper.report progress --step $s --loss 0.$s$FRAY_SWEEP_INDEX; done\n")
    data = json.loads(run_fray("submit", str(script), "--name", "sw", "--sweep", "lr=0.1,0.01", "--json",
                               home=home.root, check=True).stdout)

    def ended() -> bool:
        listed = json.loads(run_fray("list", "--group", "sw", "--json", home=home.root, check=True).stdout)
        return all(r["phase"] == "ended" for r in listed["runs"])

    wait_until(ended, timeout=60, what="both points to end")
    png = tmp_path / "sweep.png"
    out = run_fray("plot", "--group", "sw", "--png", str(png), home=home.root, check=True).stdout
    assert "loss: 6 points in 2 of 2 runs (sw-0 cyan, sw-1 orange)" in out and "wrote" in out
    width, height, raw = png_pixels(png.read_bytes())
    assert bytes((0, 200, 220)) in raw and bytes((255, 150, 30)) in raw  # one colour per run
    assert data["group"]
    neither = run_fray("plot", home=home.root)
    assert neither.returncode == 2 and "give a RUN or --group GROUP" in neither.stderr


def test_c_on_a_sweeps_row_overlays_its_runs_and_m_picks_another_metric(home, daemon, tmp_path):
    script = tmp_path / "point.sh"
    script.write_text("#!/bin/bash\n#FRAY --heartbeat-interval 0.5\n"
                      "for s in 1 2 3; do python3 -m fray.wrapper.report progress --step $s "
                      "--loss 0.$s$FRAY_SWEEP_INDEX --extra '{\"acc\": 0.'$s'}'; done\n")
    run_fray("submit", str(script), "--name", "sw", "--sweep", "lr=0.1,0.01", "--json", home=home.root, check=True)

    def ended() -> bool:
        listed = json.loads(run_fray("list", "--group", "sw", "--json", home=home.root, check=True).stdout)
        return len(listed["runs"]) == 2 and all(r["phase"] == "ended" for r in listed["runs"])

    wait_until(ended, timeout=60, what="both points to end")

    async def scenario():
        async with dashboard(home, size=(160, 60)) as (app, pilot):
            await go_to(app, pilot, "sw")  # the sweep's one row
            await pilot.press("c")
            await until(pilot, lambda: "loss by step" in screen_text(app), what="the sweep's loss curves")
            text = screen_text(app)
            assert "sweep sw" in text and "loss by wall time" in text
            assert "loss: 6 points in 2 of 2 runs (sw-0 cyan, sw-1 orange)" in text
            assert "m: next metric of" in text and "acc" in text
            points = [line.split() for line in text.splitlines() if line.split()[:1] in (["sw-0"], ["sw-1"])]
            assert points == [["sw-0", "lr=0.1", "✓", "completed_success", "3", "0.3"],  # last step, last loss
                              ["sw-1", "lr=0.01", "✓", "completed_success", "3", "0.31"]], text
            await pilot.press("m")
            await until(pilot, lambda: "acc by step" in screen_text(app), what="the acc curves")
            assert "acc: 6 points in 2 of 2 runs" in screen_text(app) and "LAST ACC" in screen_text(app)
            await pilot.press("escape")
            await until(pilot, lambda: "sweep sw" not in screen_text(app), what="back to the runs")

    run(scenario())
