"""Sweeps on the local backend, through the real CLI and daemon: points, --max-parallel, folding, group stop.

The Slurm side (one job array, %K, retries of failed points only) is tests/test_sweep_slurm.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.core import sweep
from fray.errors import UsageError


def test_axes_make_the_cartesian_product_first_axis_slowest_and_ranges_include_both_ends() -> None:
    axes = sweep.parse_axes(["lr=1e-3,3e-4", "seed=0..2"])
    points = sweep.points(axes)
    assert [sweep.point_args(p) for p in points[:4]] == [
        ["--lr", "1e-3", "--seed", "0"], ["--lr", "1e-3", "--seed", "1"], ["--lr", "1e-3", "--seed", "2"],
        ["--lr", "3e-4", "--seed", "0"]]
    assert len(points) == 6 and points[5].values == {"lr": 0.0003, "seed": 2}
    assert sweep.points(sweep.parse_axes(["opt=adam,sgd"]))[1].values == {"opt": "sgd"}


@pytest.mark.parametrize("text, says", [
    ("lr", "no '='"), ("lr=", "an empty value"), ("lr=1,,2", "an empty value"), ("1x=3", "is not a parameter name"),
    ("seed=5..2", "is empty"), ("seed=0..x", "two integers"), ("seed=0..1000000", "at most"),
])
def test_bad_sweep_syntax_says_what_and_how_to_write_it(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        sweep.parse_axes([text])


def test_an_axis_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="given twice"):
        sweep.parse_axes(["lr=1", "lr=2"])


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "point.sh"
    path.write_text("#!/bin/bash\n#FRAY --heartbeat-interval 0.5 --stop-grace 2\n" + body)
    return path


def runs_of(home, group: str) -> list[dict]:
    data = json.loads(run_fray("list", "--group", group, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", data)
    return data["runs"]


def test_a_sweep_runs_each_point_with_its_args_and_env_at_most_k_at_once(home, daemon, tmp_path) -> None:
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    body = (f'echo "$* | $FRAY_SWEEP_INDEX | $FRAY_SWEEP_PARAMS"\n'
            f'date +%s.%N > {stamps}/$FRAY_SWEEP_INDEX.start; sleep 0.6; date +%s.%N > {stamps}/$FRAY_SWEEP_INDEX.end\n')
    done = run_fray("submit", str(script(tmp_path, body)), "--sweep", "lr=0.1,0.01", "--sweep", "seed=1..3",
                    "--max-parallel", "2", "--json", "--", "--data", "x y", home=home.root, check=True)
    data = json.loads(done.stdout)
    schema_validate("cli-sweep", data)
    assert data["size"] == 6 and data["max_parallel"] == 2 and data["name"] == "point"
    assert data["runs"][4]["args"] == ["--data", "x y", "--lr", "0.01", "--seed", "2"]
    wait_until(lambda: all(r["phase"] == "ended" for r in runs_of(home, data["group"])), timeout=60,
               what="every point to end")
    rows = runs_of(home, "point")  # by the sweep's name, in index order
    assert [r["run_id"] for r in rows] == [r["run_id"] for r in data["runs"]]
    assert {r["status"] for r in rows} == {"completed_success"}
    out = home.run(data["runs"][4]["run_id"]).attempt(1).stdout.read_text()
    assert out == '--data x y --lr 0.01 --seed 2 | 4 | {"lr":0.01,"seed":2}\n'
    spans = [(float((stamps / f"{i}.start").read_text()), float((stamps / f"{i}.end").read_text())) for i in range(6)]
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert overlap == 2  # --max-parallel 2: two at a time, never three

    listed = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", listed)
    (row,) = listed["runs"]  # the sweep, folded into one row
    assert row["kind"] == "group" and row["counts"] == {"completed_success": 6} and row["size"] == 6
    assert listed["counts"]["completed_success"] == 6
    human = run_fray("list", home=home.root, check=True).stdout
    assert "point [sweep of 6]" in human and "6 runs: 6 completed_success" in human


def test_stop_group_stops_the_running_points_and_the_waiting_ones(home, daemon, tmp_path) -> None:
    body = "trap 'exit 0' TERM\nwhile true; do sleep 0.1; done\n"
    data = json.loads(run_fray("submit", str(script(tmp_path, body)), "--name", "serve", "--sweep", "i=0..3",
                               "--max-parallel", "2", "--json", home=home.root, check=True).stdout)
    wait_until(lambda: sum(r["status"] == "healthy_running" for r in runs_of(home, "serve")) == 2, timeout=30,
               what="two points running")
    waiting = [r for r in runs_of(home, "serve") if r["phase"] == "queued"]
    assert len(waiting) == 2 and all("--max-parallel 2" in r["reason"] for r in waiting)
    stopped = run_fray("control", "stop", "--group", "serve", "--json", home=home.root, check=True)
    answer = json.loads(stopped.stdout)
    schema_validate("cli-control-group", answer)
    assert answer["group"] == data["group"] and len(answer["runs"]) == 4 and answer["skipped"] == []
    wait_until(lambda: all(r["phase"] == "ended" for r in runs_of(home, "serve")), timeout=30, what="all stopped")
    assert {r["status"] for r in runs_of(home, "serve")} == {"stopped_manual"}
    again = run_fray("control", "stop", "--group", "serve", home=home.root, check=True).stdout
    assert "asked of 0 of the 4 runs" in again and "skipped 4: already ended (stopped_manual)" in again


def test_bad_sweep_input_is_refused_whole_and_writes_nothing(home, tmp_path) -> None:
    path = script(tmp_path, "true\n")
    bad = run_fray("submit", str(path), "--sweep", "seed=3..1", "--json", home=home.root)
    assert bad.returncode == 2
    error = json.loads(bad.stdout)
    schema_validate("cli-error", error)
    assert "the range 3..1 is empty" in error["error"]["message"]
    alone = run_fray("submit", str(path), "--max-parallel", "2", home=home.root)
    assert alone.returncode == 2 and "give the points with --sweep" in alone.stderr
    zero = run_fray("submit", str(path), "--sweep", "a=1,2", "--max-parallel", "0", home=home.root)
    assert zero.returncode == 2 and "at least 1" in zero.stderr
    watching = run_fray("submit", str(path), "--sweep", "a=1,2", "--wait", home=home.root)
    assert watching.returncode == 2 and "fray list --group" in watching.stderr
    assert not home.runs_dir.exists() or home.run_ids() == []
    unknown = run_fray("list", "--group", "nope", home=home.root)
    assert unknown.returncode == 2 and "no group matches 'nope'" in unknown.stderr


def test_the_dashboard_shows_a_sweep_as_one_row_that_enter_unfolds_and_s_p_act_on_all_of(home, tmp_path) -> None:
    from fray.ops import sweep as sweeping
    from fray.state import runs
    from tests.tui_support import dashboard, run, screen_text, until

    alone = tmp_path / "alone.sh"
    alone.write_text("true\n")
    runs.create_run(home, runs.SubmitOptions(script=alone, overrides={}))
    # The points outlast the test: the daemon the first group request starts may run some of them,
    # and a point that finished between "pause" and "stop" would rightly be skipped by the stop.
    created = sweeping.submit_sweep(home, script(tmp_path, "sleep 120\n"), ["seed=0..2"], name="seeds")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            lines = app.screen.table.visible_lines()
            assert any("seeds" in line and "3 runs: 3 pending" in line for line in lines)
            assert not any("seeds-0" in line for line in lines) and any("alone" in line for line in lines)
            assert app.screen.table.move_to_run(f"group:{created[0].sweep['id']}")
            await pilot.press("enter")
            await until(pilot, lambda: any("seeds-2" in line for line in app.screen.table.visible_lines()))
            # s, p and r on the group row act on every run of it, after asking; "n" changes nothing.
            await pilot.press("s")
            await until(pilot, lambda: "Stop the sweep seeds?" in screen_text(app), what="the question")
            await pilot.press("n")
            assert all(not runs.read_control(home, m.run_id).stop_requested for m in created)
            await pilot.press("p")
            await until(pilot, lambda: "Pause the sweep seeds?" in screen_text(app), what="the question")
            await pilot.press("y")
            await until(pilot, lambda: all(runs.read_control(home, m.run_id).paused for m in created),
                        what="every point paused")
            await pilot.press("s")
            await until(pilot, lambda: "Stop the sweep seeds?" in screen_text(app), what="the question")
            await pilot.press("y")
            await until(pilot, lambda: all(runs.read_control(home, m.run_id).stop_requested for m in created),
                        what="every point asked to stop")
            await until(pilot, lambda: any("requested stop for 3 runs of seeds" in n.message
                                           for n in app._notifications), what="the notice")

    run(scenario())
