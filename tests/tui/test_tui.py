"""The dashboard, driven with Textual's pilot as a person would: what it shows and what each key writes.

Every key of the dashboard and the global keys are here; the other screens are
in test_tui_screens.py, live refresh, the terminal (tmux) and the browser in
test_tui_live.py. Control files are read back from disk after each action.
"""

from __future__ import annotations

import json

from fray.state import runs
from fray.tui.screens.detail import DetailScreen
from fray.tui.screens.dialogs import BanScreen, ConfirmScreen, HelpScreen
from fray.tui.screens.logs import LogsScreen
from fray.tui.screens.new_run import NewRunScreen
from tests.tui_support import dashboard, go_to, make_runs, run, screen_text, until


def control_of(home, run_id):
    return json.loads(home.run(run_id).control.read_text())


def audit_actions(home):
    if not home.audit.exists():
        return []
    return [json.loads(line)["action"] for line in home.audit.read_text().splitlines()]


def test_dashboard_shows_runs_counts_daemon_banner_and_recent_actions(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            text = screen_text(app)
            assert "5 runs" in text
            for name in ("train-gpt", "eval-sweep", "flaky-job", "hello"):
                assert name in text
            lines = {line.split()[1]: line for line in text.splitlines() if line[:1] in "●◐○↻✗✓■" and len(line.split()) > 1}
            assert "healthy_running" in lines["train-gpt"] and "gpu-node-7" in lines["train-gpt"]
            assert "12000" in lines["train-gpt"] and "1.234" in lines["train-gpt"]
            assert lines["train-gpt"].startswith("●") and lines["flaky-job"].startswith("✗")
            assert lines["hello"].startswith("✓") and lines["eval-sweep"].startswith("○")
            # the run whose meta.json is corrupt keeps its row, read from meta.json's last good copy
            assert lines["broken"].startswith("○") and "waiting for the daemon" in lines["broken"]
            assert "DAEMON STOPPED" in text and "fray daemon start" in text
            assert "Recent actions" in text and "attempt 1 started on gpu-node-7" in text
            header = text.splitlines()[0]
            assert "1 ● healthy_running" in header and "1 ✗ failed" in header and "daemon stopped" in header

    run(scenario())


def test_moving_keys_j_k_g_G_and_pages(home, tmp_path):
    script = tmp_path / "job.py"
    script.write_text("print('hi')\n")
    for i in range(60):
        runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=f"job-{i:02d}"), now=1_700_000_000 + i)

    async def scenario():
        async with dashboard(home, size=(100, 24)) as (app, pilot):
            table = app.screen.query_one("#runs")
            assert table.selected["name"] == "job-59"  # newest first
            await pilot.press("j", "j")
            assert table.selected["name"] == "job-57"
            await pilot.press("k")
            assert table.selected["name"] == "job-58"
            await pilot.press("G")
            assert table.selected["name"] == "job-00"
            await until(pilot, lambda: "job-00" in screen_text(app), what="the screen")  # scrolled into view
            await pilot.press("g")
            assert table.selected["name"] == "job-59"
            await pilot.press("ctrl+d")
            page = table.cursor
            assert page >= 5 and table.selected["name"] == f"job-{59 - page:02d}"
            await pilot.press("ctrl+d")
            assert table.cursor == 2 * page
            await until(pilot, lambda: f"job-{59 - 2 * page:02d}" in screen_text(app), what="the screen")
            await pilot.press("ctrl+u")
            assert table.cursor == page
            await pilot.press("down", "up", "up")
            assert table.cursor == page - 1

    run(scenario())


def test_enter_opens_details_escape_and_backspace_go_back(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "flaky-job")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="the DetailScreen")
            await until(pilot, lambda: "flaky-job" in screen_text(app) and "the workload exited with status 1" in screen_text(app), what="the screen")
            await pilot.press("escape")
            assert not isinstance(app.screen, DetailScreen)
            await pilot.press("enter")
            await pilot.press("backspace")
            assert app.screen.query_one("#runs").selected["name"] == "flaky-job"

    run(scenario())


def test_restart_asks_first_then_writes_control_json(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "train-gpt")
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the ConfirmScreen")
            await until(pilot, lambda: "Restart train-gpt" in screen_text(app), what="the screen")
            await pilot.press("n")  # no: nothing is written
            await until(pilot, lambda: control_of(home, ids["healthy"])["restart_nonce"] == 0, what="control.json")
            await pilot.press("r")
            await pilot.press("y")
            await until(pilot, lambda: control_of(home, ids["healthy"])["restart_nonce"] == 1, what="control.json")
            assert app.ensure_daemon.calls == [home]  # as `fray control restart`, the daemon is made to run
            assert "control.restart" in audit_actions(home)

    run(scenario())


def test_stop_asks_first_and_refuses_an_ended_run(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "train-gpt")
            await pilot.press("s")
            await until(pilot, lambda: "Stop train-gpt" in screen_text(app), what="the screen")
            await pilot.press("y")
            await until(pilot, lambda: control_of(home, ids["healthy"])["stop_requested"] is True, what="control.json")
            await go_to(app, pilot, "hello")
            await pilot.press("s")
            assert not isinstance(app.screen, ConfirmScreen)  # nothing to stop: a warning, no question
            await until(pilot, lambda: control_of(home, ids["done"])["stop_requested"] is False, what="control.json")

    run(scenario())


def test_pause_asks_first_and_p_again_unpauses(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "eval-sweep")
            await pilot.press("p")
            await until(pilot, lambda: "Pause eval-sweep" in screen_text(app), what="the screen")
            await pilot.press("y")
            await until(pilot, lambda: control_of(home, ids["pending"])["paused"] is True, what="control.json")
            await app.refresh_now()
            await until(pilot, lambda: "pending (paused)" in screen_text(app), what="the screen")
            await pilot.press("p")  # unpausing is not destructive: no question
            assert not isinstance(app.screen, ConfirmScreen)
            await until(pilot, lambda: control_of(home, ids["pending"])["paused"] is False, what="control.json")

    run(scenario())


def test_r_on_an_ended_run_starts_it_again(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "flaky-job")
            await pilot.press("r")
            await until(pilot, lambda: "Start flaky-job" in screen_text(app), what="the screen")
            await pilot.press("y")
            await until(pilot, lambda: control_of(home, ids["failed"])["start_nonce"] == 1, what="control.json")

    run(scenario())


def test_t_opens_the_logs_of_the_selected_run(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "train-gpt")
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, LogsScreen), what="the LogsScreen")
            await until(pilot, lambda: "step 299 loss 1.701" in screen_text(app), what="the log's last line")

    run(scenario())


def test_b_blacklists_the_runs_node_and_moves_the_run(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "train-gpt")
            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, BanScreen), what="the BanScreen")
            assert app.screen.query_one("#node").value == "gpu-node-7"
            app.screen.query_one("#ttl").value = "2h"
            app.screen.query_one("#reason").value = "ECC errors"
            await pilot.press("enter")
            await until(pilot, home.blacklist.exists, what="blacklist.json")
            listed = json.loads(home.blacklist.read_text())["nodes"]
            assert listed["gpu-node-7"]["reason"] == "ECC errors"
            assert listed["gpu-node-7"]["source_run"] == ids["healthy"]
            assert 7100 < listed["gpu-node-7"]["expires_at"] - listed["gpu-node-7"]["added_at"] <= 7200
            await until(pilot, lambda: control_of(home, ids["healthy"])["restart_nonce"] == 1, what="control.json")  # it was on that node: it moves
            assert "nodes.ban" in audit_actions(home)

    run(scenario())


def test_a_bad_ttl_is_refused_in_the_ban_form(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await go_to(app, pilot, "train-gpt")
            await pilot.press("b")
            app.screen.query_one("#ttl").value = "5x"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, BanScreen), what="the BanScreen")
            await until(pilot, lambda: "--ttl 5x" in screen_text(app), what="the screen")
            await pilot.press("escape")
            assert not home.blacklist.exists()

    run(scenario())


def test_n_checks_the_script_then_submits_a_new_run(home, tmp_path):
    make_runs(home, tmp_path / "scripts")
    bad = tmp_path / "bad.py"
    bad.write_text("#FRAY --gpus lots\nprint('x')\n")
    good = tmp_path / "new job's; script.py"
    good.write_text("#FRAY --name fresh-run\n#FRAY --cpus 2\nprint('x')\n")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            before = set(home.run_ids())
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, NewRunScreen), what="the NewRunScreen")
            app.screen.query_one("#script").value = str(bad)
            await pilot.press("enter")
            await until(pilot, lambda: "--gpus" in screen_text(app), what="the directive error")
            assert app.screen.query_one("#submit").disabled
            await pilot.press("ctrl+s")
            assert set(home.run_ids()) == before  # nothing written for a bad script
            app.screen.query_one("#script").value = str(good)
            await pilot.press("enter")
            await until(pilot, lambda: "name: fresh-run" in screen_text(app) and "2 CPUs" in screen_text(app), what="the screen")
            await pilot.press("ctrl+s")
            await until(pilot, lambda: set(home.run_ids()) - before, what="the new run")
            created = set(home.run_ids()) - before
            assert len(created) == 1
            run_id = created.pop()
            assert runs.read_meta(home, run_id).spec.cpus == 2
            assert app.ensure_daemon.calls == [home]
            await until(pilot, lambda: app.screen.query_one("#runs").selected
                        and app.screen.query_one("#runs").selected["run_id"] == run_id, what="the cursor on the new run")

    run(scenario())


def test_slash_filters_as_you_type_and_escape_clears(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await pilot.press("slash")
            await pilot.press(*"flaky")
            table = app.screen.query_one("#runs")
            assert [table.rows[i]["name"] for i in table.order] == ["flaky-job"]
            assert "(1 shown)" in screen_text(app) and "train-gpt" not in "\n".join(table.visible_lines())
            await pilot.press("enter")  # keep the filter, back to the table
            assert table.has_focus
            await pilot.press("escape")
            assert len(table.order) == 5
            await pilot.press("slash", *"gpu-node-3 fail")  # words of several columns
            assert [table.rows[i]["name"] for i in table.order] == ["flaky-job"]
            await until(pilot, lambda: "/gpu-node-3 fail" in screen_text(app), what="the screen")
            await pilot.press("escape", "slash", *"qgG1?")  # while typing, keys are text, not commands
            assert table.filter_text == "qgG1?" and app.is_running and app.screen is not None
            await until(pilot, lambda: "(0 shown)" in screen_text(app), what="the screen")
            await pilot.press("backspace", "backspace", "backspace", "backspace", "backspace", "enter")
            assert len(table.order) == 5 and not table.typing_filter
            await pilot.press("j")  # and after Enter, keys are commands again
            assert table.cursor == 1

    run(scenario())


def test_sorting_by_column_keeps_the_cursor_on_its_run(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            table = app.screen.query_one("#runs")
            await go_to(app, pilot, "hello")
            await pilot.press("o")  # sort by name
            names = [table.rows[i]["name"] for i in table.order]
            assert names == sorted(names, key=str.lower)
            assert table.selected["name"] == "hello"
            await until(pilot, lambda: "NAME▲" in screen_text(app), what="the screen")
            await pilot.press("O")
            assert [table.rows[i]["name"] for i in table.order] == names[::-1]

    run(scenario())


def test_question_mark_shows_help_and_escape_closes_it(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the HelpScreen")
            text = screen_text(app)
            assert "Ctrl+u/Ctrl+d" in text and "blacklist" in text and "follow" in text
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)

    run(scenario())


def test_capital_r_refreshes_now(home, tmp_path):
    make_runs(home, tmp_path / "scripts")
    script = tmp_path / "late.py"
    script.write_text("print(1)\n")

    async def scenario():
        async with dashboard(home) as (app, pilot):  # no watcher, no timer: only R brings news
            runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name="late-arrival"))
            await pilot.pause()
            assert "late-arrival" not in screen_text(app)
            await pilot.press("R")
            await until(pilot, lambda: "late-arrival" in screen_text(app), what="the new run after R")
            await until(pilot, lambda: "6 runs" in screen_text(app), what="the screen")

    run(scenario())


def test_q_quits(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await pilot.press("q")
            await pilot.pause()
            assert app.return_code == 0 and not app.is_running

    run(scenario())


def test_screens_switch_with_digits(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        from fray.tui.screens.nodes import NodesScreen
        from fray.tui.screens.queue import QueueScreen

        async with dashboard(home) as (app, pilot):
            await pilot.press("3")
            await until(pilot, lambda: isinstance(app.screen, NodesScreen), what="the NodesScreen")
            await pilot.press("2")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), what="the QueueScreen")
            await pilot.press("1")
            assert app.screen.query_one("#runs") is not None

    run(scenario())
