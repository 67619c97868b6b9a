"""Sweeps on the local backend, through the real CLI and daemon: points, --max-parallel, folding, group stop.

The Slurm side (one job array, %K, retries of failed points only) is tests/backends/slurm/test_sweep_slurm.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.core.sweeps import grid
from fray.errors import UsageError


def test_axes_make_the_cartesian_product_first_axis_slowest_and_ranges_include_both_ends() -> None:
    axes = grid.parse_axes(["lr=1e-3,3e-4", "seed=0..2"])
    points = grid.points(axes)
    assert [grid.point_args(p) for p in points[:4]] == [
        ["--lr", "1e-3", "--seed", "0"], ["--lr", "1e-3", "--seed", "1"], ["--lr", "1e-3", "--seed", "2"],
        ["--lr", "3e-4", "--seed", "0"]]
    assert len(points) == 6 and points[5].values == {"lr": 0.0003, "seed": 2}
    assert grid.points(grid.parse_axes(["opt=adam,sgd"]))[1].values == {"opt": "sgd"}


@pytest.mark.parametrize("text, says", [
    ("lr", "no '='"), ("lr=", "an empty value"), ("lr=1,,2", "an empty value"), ("1x=3", "is not a parameter name"),
    ("seed=5..2", "is empty"), ("tag=\"a,b", "quote a value with a comma"), ("seed=0..1000000", "at most"),
])
def test_bad_sweep_syntax_says_what_and_how_to_write_it(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        grid.parse_axes([text])


def test_an_axis_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="given twice"):
        grid.parse_axes(["lr=1", "lr=2"])


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


def test_a_sweep_paused_before_the_daemon_wrote_its_points_starts_none_until_unpaused(home, tmp_path) -> None:
    from fray.ops import sweeps as sweeping
    from fray.state import runs

    created = sweeping.submit_sweep(home, script(tmp_path, "echo ran\n"), ["seed=0..3"], name="later")
    asked = run_fray("control", "pause", "--group", "later", "--json", home=home.root, check=True)  # starts a daemon
    answer = json.loads(asked.stdout)
    schema_validate("cli-control-group", answer)
    assert [r["run_id"] for r in answer["runs"]] == [m.run_id for m in created] and answer["skipped"] == []
    assert all("no attempt starts until `fray control unpause`" in r["effect"] for r in answer["runs"])
    try:
        wait_until(lambda: not home.group(created[0].sweep["id"]).dir.exists(), timeout=30,
                   what="the daemon to write the points")
        shown = run_fray("list", "--group", "later", home=home.root, check=True).stdout
        assert shown.count("paused: `fray control unpause` resumes it") == 4, shown
        assert all(runs.read_meta(home, m.run_id).attempts == [] for m in created)
        run_fray("control", "unpause", "--group", "later", home=home.root, check=True)
        wait_until(lambda: all(r["phase"] == "ended" for r in runs_of(home, "later")), timeout=60,
                   what="every point to run once unpaused")
        assert {r["status"] for r in runs_of(home, "later")} == {"completed_success"}
        assert all(home.run(m.run_id).attempt(1).stdout.read_text() == "ran\n" for m in created)
    finally:
        run_fray("daemon", "stop", home=home.root)


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
    assert not home.runs_dir.exists() or home.run_ids() == []
    unknown = run_fray("list", "--group", "nope", home=home.root)
    assert unknown.returncode == 2 and "no group matches 'nope'" in unknown.stderr


def test_the_dashboard_shows_a_sweep_as_one_row_that_enter_unfolds_and_s_p_act_on_all_of(home, tmp_path) -> None:
    from fray.ops import sweeps as sweeping
    from fray.state import runs
    from fray.state.sweeps import unwritten
    from tests.tui_support import dashboard, run, screen_text, until

    alone = tmp_path / "alone.sh"
    alone.write_text("true\n")
    runs.create_run(home, runs.SubmitOptions(script=alone, overrides={}))
    created = sweeping.submit_sweep(home, script(tmp_path, "true\n"), ["seed=0..2"], name="seeds")
    record = home.group(created[0].sweep["id"])

    async def scenario():
        async with dashboard(home) as (app, pilot):
            lines = app.screen.table.visible_lines()
            assert any("seeds" in line and "3 runs: 3 pending" in line for line in lines)
            assert not any("seeds-0" in line for line in lines) and any("alone" in line for line in lines)
            assert app.screen.table.move_to_run(f"group:{created[0].sweep['id']}")
            await pilot.press("enter")
            await until(pilot, lambda: any("seeds-2" in line for line in app.screen.table.visible_lines()))
            # s, p and r on the group row act on every run of it, after asking; "n" changes nothing.
            # No daemon has written the points yet: what is asked goes into the sweep's record at once.
            await pilot.press("s")
            await until(pilot, lambda: "Stop the sweep seeds?" in screen_text(app), what="the question")
            await pilot.press("n")
            assert unwritten.asked(record) is None
            await pilot.press("p")
            await until(pilot, lambda: "Pause the sweep seeds?" in screen_text(app), what="the question")
            await pilot.press("y")
            await until(pilot, lambda: any("requested pause for 3 runs of seeds" in n.message
                                           for n in app._notifications), what="the pause notice")
            assert unwritten.asked(record).paused
            await until(pilot, lambda: sum("paused" in line for line in app.screen.table.visible_lines()) == 3,
                        what="the points shown paused")
            await pilot.press("s")
            await until(pilot, lambda: "Stop the sweep seeds?" in screen_text(app), what="the question")
            await pilot.press("y")
            await until(pilot, lambda: any("requested stop for 3 runs of seeds" in n.message
                                           for n in app._notifications), what="the stop notice")
            assert unwritten.asked(record).stop_requested
            assert app.ensure_daemon.calls  # and it made sure a daemon would act on it

    run(scenario())
    # The daemon writes the points with what was asked: none of them ever starts.
    run_fray("daemon", "start", home=home.root, check=True)
    try:
        wait_until(lambda: all(r["phase"] == "ended" for r in runs_of(home, "seeds")), timeout=30,
                   what="every point to end")
        assert {r["status"] for r in runs_of(home, "seeds")} == {"stopped_manual"}
        assert all(runs.read_meta(home, m.run_id).attempts == [] for m in created)
        assert all(runs.read_control(home, m.run_id).stop_requested for m in created)
    finally:
        run_fray("daemon", "stop", home=home.root)
