"""The `fray` command line without a running workload: help, lookups, bad input,
corrupt state, colour and import hygiene. Real processes, real files.

Runs are made with `runs.create_run` (what `fray submit` does before it starts
a daemon), so these tests need no daemon; tests/cli/test_cli_e2e.py runs real ones.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from fray.core import directives

from fray.state import runs
from fray.cli import render
from fray.ops import human
from fray.state.layout import Home
from tests.conftest import REPO, run_fray, schema_validate

ANSI = "\x1b["
HEAVY = ("textual", "paramiko", "cloudpickle", "plotext", "textual_plotext")


def make_run(home: Home, tmp_path: Path, name: str, text: str = "print('hi')\n", now: float | None = None) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(text)
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}), now=now).run_id


def fray_json(*args: str, schema: str) -> dict:
    proc = run_fray(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1
    schema_validate(schema, document)
    return document


def home_is_empty(home: Home) -> bool:
    return not home.root.exists() or not any(home.runs_dir.glob("*"))


# ---------------------------------------------------------------- help and usage


def test_help_lists_every_command():
    proc = run_fray("--help")
    assert proc.returncode == 0
    for command in ("submit", "list", "status", "logs", "control", "daemon"):
        assert f"  {command} " in proc.stdout


def test_mistyped_command_suggests_the_right_one():
    proc = run_fray("lsit")
    assert proc.returncode == 2
    assert "No such command 'lsit'" in proc.stderr and "Did you mean 'list'?" in proc.stderr


def test_submit_flags_are_the_directive_options():
    proc = run_fray("submit", "--help")
    assert proc.returncode == 0
    for option in directives.OPTIONS:
        assert option.flag in proc.stdout


def test_script_arguments_without_dashdash_get_a_hint(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    proc = run_fray("submit", str(script), "--lr", "3e-4")
    assert proc.returncode == 2
    assert "No such option --lr" in proc.stderr and "go after `--`" in proc.stderr
    proc = run_fray("submit", str(script), "--cpu", "2")
    assert proc.returncode == 2 and "Did you mean --cpus?" in proc.stderr
    assert not home.root.exists()


# ---------------------------------------------------------------- bad input leaves nothing behind


@pytest.mark.parametrize("case", ["missing", "directory", "directive", "flag", "cross-field", "not-utf8"])
def test_bad_submissions_exit_2_and_create_nothing(home, tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text("#!/usr/bin/env python\n#FRAY --cpus 2\n#FRAY --gpus lots\nprint(1)\n")
    args, expected = {
        "missing": ([str(tmp_path / "nope.py")], "script not found"),
        "directory": ([str(tmp_path)], "is a directory"),
        "directive": ([str(script)], f"{script}:3: --gpus lots: expected a whole number"),
        "flag": (["--cpus", "-1", str(tmp_path / "ok.py")], "--cpus -1: expected a whole number like 8"),
        "cross-field": (["--heartbeat-interval", "5m", "--heartbeat-timeout", "1m", str(tmp_path / "ok.py")],
                        "must be longer than --heartbeat-interval"),
        "not-utf8": ([str(tmp_path / "bin.py")], "is not UTF-8 text"),
    }[case]
    (tmp_path / "ok.py").write_text("print(1)\n")
    (tmp_path / "bin.py").write_bytes(b"\xff\xfe\x00junk")
    proc = run_fray("submit", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("fray: error: ")
    assert expected in proc.stderr
    assert proc.stdout == ""
    assert not home.root.exists()


def test_a_flag_error_reads_like_the_directive_error(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("#FRAY --mem lots\n")
    from_directive = run_fray("submit", str(script)).stderr
    script.write_text("print(1)\n")
    from_flag = run_fray("submit", "--mem", "lots", str(script)).stderr
    assert from_flag.removeprefix("fray: error: ").splitlines()[0] in from_directive


def test_unusable_fray_home_exits_2_with_the_reason(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    unusable = blocker / "home"
    proc = run_fray("submit", str(script), env={"FRAY_HOME": str(unusable)})
    assert proc.returncode == 2
    assert "cannot create the state directory" in proc.stderr and str(unusable) in proc.stderr
    proc = run_fray("--home", str(unusable), "list")
    assert proc.returncode == 2 and proc.stderr.startswith("fray: error: ")
    assert blocker.read_text() == "not a directory\n"


# ---------------------------------------------------------------- finding runs


def test_run_lookup_by_id_prefix_and_name(home, tmp_path):
    first = make_run(home, tmp_path, "alpha", now=1_700_000_000)
    second = make_run(home, tmp_path, "beta", now=1_700_000_100)
    assert fray_json("status", first, schema="cli-status")["run"]["run_id"] == first
    assert fray_json("status", "beta", schema="cli-status")["run"]["run_id"] == second
    assert fray_json("status", second[:-2], schema="cli-status")["run"]["run_id"] == second

    ambiguous = run_fray("status", "2023")
    assert ambiguous.returncode == 2
    assert "2 run ids start with '2023'" in ambiguous.stderr and first in ambiguous.stderr
    unknown = run_fray("logs", "gamma")
    assert unknown.returncode == 2 and "no run matches 'gamma'" in unknown.stderr
    for op in ("stop", "pause"):
        assert run_fray("control", op, "gamma").returncode == 2
    assert sorted(home.run_ids()) == [first, second]
    assert not home.daemon_lease.exists()  # a failed lookup starts no daemon


def test_status_of_a_run_waiting_for_its_first_attempt(home, tmp_path):
    run_id = make_run(home, tmp_path, "waiting")
    data = fray_json("status", run_id, schema="cli-status")
    assert data["run"]["status"] == "pending" and data["attempts"] == []
    human = run_fray("status", run_id)
    assert human.returncode == 0
    assert "○ pending" in human.stdout and "none yet" in human.stdout and data["dir"] in human.stdout


def test_logs_before_the_first_attempt(home, tmp_path):
    run_id = make_run(home, tmp_path, "early")
    proc = run_fray("logs", run_id)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "has no attempt yet" in proc.stderr and f"logs {run_id} -f" in proc.stderr
    data = fray_json("logs", run_id, schema="cli-logs")
    note = data.pop("note")  # the --json form says why there is nothing, as the text form does
    assert "has no attempt yet" in note and f"logs {run_id} -f" in note
    assert data == {"run_id": run_id, "attempt": None, "stream": "stdout", "task": None, "path": None, "lines": [],
                    "tasks": []}
    assert run_fray("logs", run_id, "--attempt", "2").returncode == 2


# ---------------------------------------------------------------- listing


def test_empty_list_says_how_to_submit_and_creates_nothing(home):
    proc = run_fray("list")
    assert proc.returncode == 0
    assert "No runs in" in proc.stdout and "fray submit" in proc.stdout
    data = fray_json("list", schema="cli-list")
    assert data["runs"] == [] and data["daemon"]["state"] == "stopped"
    assert not home.root.exists()


def test_list_limit_active_and_daemon_warning(home, tmp_path):
    ids = [make_run(home, tmp_path, f"r{i}", now=1_700_000_000 + i) for i in range(3)]
    data = fray_json("list", "--limit", "2", schema="cli-list")
    assert [r["run_id"] for r in data["runs"]] == ids[::-1][:2]
    assert data["counts"]["pending"] == 3
    assert len(fray_json("list", "--active", schema="cli-list")["runs"]) == 3
    human = run_fray("list", "--limit", "2").stdout
    assert "3 runs: 3 ○ pending" in human
    assert "warning: no daemon is running, so 3 active runs are not making progress" in human
    assert "showing the newest 2 of 3 runs" in human


def test_a_corrupt_meta_is_read_from_its_last_good_copy_and_listed_as_corrupt(home, tmp_path):
    good = make_run(home, tmp_path, "good", now=1_700_000_000)
    bad = make_run(home, tmp_path, "bad", now=1_700_000_100)
    home.run(bad).meta.write_text('{"run_id": "truncated')
    rows = {r["run_id"]: r for r in fray_json("list", schema="cli-list")["runs"]}
    assert rows[good]["status"] == "pending"
    assert rows[bad]["status"] == "pending" and rows[bad]["name"] == "bad"  # the run keeps its name and its state
    shown = fray_json("status", bad, schema="cli-status")
    assert shown["run"]["name"] == "bad"
    assert any(Path(p).name.startswith("meta.json.corrupt-") for p in shown["corrupt_files"])
    assert run_fray("status", bad).returncode == 0


def test_a_run_whose_meta_and_its_copy_are_both_corrupt_is_error_unknown_and_status_names_the_cause(home, tmp_path):
    good = make_run(home, tmp_path, "good", now=1_700_000_000)
    bad = make_run(home, tmp_path, "bad", now=1_700_000_100)
    home.run(bad).meta.write_text('{"run_id": "truncated')
    home.run(bad).meta_copy.write_text("[1,2]")
    data = fray_json("list", schema="cli-list")
    rows = {r["run_id"]: r for r in data["runs"]}
    assert rows[good]["status"] == "pending"
    assert rows[bad]["status"] == "error_unknown" and "meta.json was corrupt" in rows[bad]["reason"]
    human = run_fray("list")
    assert human.returncode == 0 and "error_unknown" in human.stdout
    status = run_fray("status", bad)
    assert status.returncode == 2
    assert f"run {bad} cannot be shown" in status.stderr and "meta.json" in status.stderr
    error = json.loads(run_fray("status", bad, "--json").stdout)
    schema_validate("cli-error", error)
    assert error["error"]["code"] == "corrupt_state"  # the state is damaged, not the command line
    assert any(p.name.startswith("meta.json.corrupt-") for p in home.run(bad).dir.iterdir())
    assert run_fray("logs", bad).returncode == 2


CLICK_ONLY = "import sys; from fray.cli.main import cli; cli.main(sys.argv[1:], prog_name='fray')"
WITH_MODULES = ("import atexit, json, sys; "
                "atexit.register(lambda: print('MODULES=' + json.dumps(sorted(sys.modules)), file=sys.stderr)); "
                "from fray.cli.entry import main; main(sys.argv[1:])")


def _fray_via(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.parametrize("args", [("list", "--json"), ("list", "--json", "--limit", "1"), ("list", "--limit=2", "--json"),
                                  ("list", "--active", "--tree", "--json")])
def test_list_json_prints_the_same_document_without_click(home, tmp_path, args):
    """`fray list --json` skips click (fray.cli.entry) and must not differ from the click command."""
    make_run(home, tmp_path, "first", now=1_700_000_000)
    make_run(home, tmp_path, "second", now=1_700_000_050)
    broken = make_run(home, tmp_path, "broken", now=1_700_000_100)
    home.run(broken).meta.write_text("{")
    assert _fray_via(CLICK_ONLY, "list").returncode == 0  # the first reader moves the corrupt file aside
    for full_args in (args, ("--home", str(home.root), *args)):
        fast, slow = _fray_via(WITH_MODULES, *full_args), _fray_via(CLICK_ONLY, *full_args)
        assert (fast.returncode, slow.returncode) == (0, 0), fast.stderr + slow.stderr
        documents = [json.loads(proc.stdout) for proc in (fast, slow)]
        for document in documents:
            schema_validate("cli-list", document)
            document.pop("generated_at")
        assert documents[0] == documents[1]
        modules = json.loads(fast.stderr.split("MODULES=", 1)[1])
        assert "click" not in modules


@pytest.mark.parametrize("args", [("list",), ("list", "--limit", "1"), ("list", "--active", "--tree")])
def test_list_prints_the_same_table_without_click(home, tmp_path, args):
    """`fray list` (the table) skips click too (fray.cli.entry, fray.cli.list_render) and must not differ."""
    make_run(home, tmp_path, "first", now=1_700_000_000)
    make_run(home, tmp_path, "second", now=1_700_000_050)
    for full_args in (args, ("--home", str(home.root), *args)):
        fast, slow = _fray_via(WITH_MODULES, *full_args), _fray_via(CLICK_ONLY, *full_args)
        assert (fast.returncode, slow.returncode) == (0, 0), fast.stderr + slow.stderr
        assert fast.stdout == slow.stdout and "second" in fast.stdout
        assert "click" not in json.loads(fast.stderr.split("MODULES=", 1)[1])
    (tmp_path / "a file").write_text("")  # a FRAY_HOME that cannot be read: the same error, the same exit code
    fast, slow = (_fray_via(program, "--home", str(tmp_path / "a file"), "list") for program in (WITH_MODULES, CLICK_ONLY))
    assert fast.returncode == slow.returncode != 0 and fast.stderr.split("MODULES=")[0] == slow.stderr


@pytest.mark.parametrize("args", [("list", "--limit", "-1"), ("list", "--bogus"), ("list", "--help"),
                                  ("list", "--json", "--limit", "-1"), ("list", "--json", "--limit"),
                                  ("list", "--json", "--bogus"), ("--help",), ("list", "--json", "--help"),
                                  ("status", "--json"), ("--home",), ("--verbose", "list", "--json")])
def test_anything_but_exactly_list_or_list_json_is_left_to_click(home, args):
    from fray.cli.entry import parse_list_json

    assert parse_list_json(list(args)) is None
    proc = _fray_via(WITH_MODULES, *args)
    assert "click" in json.loads(proc.stderr.split("MODULES=", 1)[1])  # usage errors and help have one source


def test_the_console_script_spans_the_clusters_the_user_config_names(home, tmp_path):
    """`fray list --json` with `remotes = [...]` in the user config is the many-cluster view, on the console
    script's fast path as through click: a host the ssh config lacks is refused before anything is asked."""
    config = tmp_path / "xdg" / "fray" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('remotes = ["nosuch"]\n')
    env = {k: v for k, v in os.environ.items() if k != "FRAY_REMOTE"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), FRAY_SSH_CONFIG=str(tmp_path / "no ssh config"))
    script = [sys.executable, "-c", "from fray.cli.entry import main; main()", "list", "--json"]
    spanned = subprocess.run(script, capture_output=True, text=True, timeout=60, env=env)
    assert spanned.returncode == 2
    assert "nosuch is not a Host" in json.loads(spanned.stdout)["error"]["message"]
    here = subprocess.run(script, capture_output=True, text=True, timeout=60, env={**env, "FRAY_REMOTE": ""})
    assert here.returncode == 0 and json.loads(here.stdout)["runs"] == []  # a remote session never spans


def test_remote_is_an_option_of_fray_with_click_errors_and_local_help(home, tmp_path):
    missing = run_fray("list", "--json", "--remote")
    assert missing.returncode == 2
    error = json.loads(missing.stdout)
    schema_validate("cli-error", error)
    assert error["error"]["message"] == "Option '--remote' requires an argument."
    unknown = run_fray("lsit", "--remote", "login", env={"FRAY_SSH_CONFIG": str(tmp_path / "none")})
    assert unknown.returncode == 2 and "Did you mean 'list'?" in unknown.stderr  # said here, not asked there
    helped = run_fray("status", "--help", "--remote", "127.0.0.1:1")  # no host is asked for help
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: fray status ")


def test_status_json_prints_the_same_document_without_click(home, tmp_path):
    """`fray status RUN --json` skips click too (fray.cli.entry, fray.cli.status_data) and must not differ."""
    run_id = make_run(home, tmp_path, "only", now=1_700_000_000)
    for args in (("status", run_id, "--json"), ("--home", str(home.root), "status", "--json", "only")):
        fast, slow = _fray_via(WITH_MODULES, *args), _fray_via(CLICK_ONLY, *args)
        assert (fast.returncode, slow.returncode) == (0, 0), fast.stderr + slow.stderr
        documents = [json.loads(proc.stdout) for proc in (fast, slow)]
        for document in documents:
            schema_validate("cli-status", document)
            document.pop("daemon"), document.pop("goodput")  # what moves with the clock between the two
        assert documents[0] == documents[1]
        assert "click" not in json.loads(fast.stderr.split("MODULES=", 1)[1])
    missing = _fray_via(WITH_MODULES, "status", "nosuch", "--json")
    assert missing.returncode == 2 and json.loads(missing.stdout)["error"]["code"] == "run_not_found"
    from fray.cli.entry import parse_status_json

    assert parse_status_json(["status", "r", "--json"]) == (None, "r")
    assert parse_status_json(["--home=/h", "status", "r", "--json"]) == ("/h", "r")
    for args in (["status", "--json"], ["status", "r"], ["status", "-x", "--json"], ["status", "r", "s", "--json"]):
        assert parse_status_json(args) is None, args


def test_submit_json_prints_the_same_document_without_click(home, tmp_path):
    """`fray submit SCRIPT --json` skips click too (fray.cli.entry): the same run, document and errors."""
    script = tmp_path / "job.py"
    script.write_text("#FRAY --cpus 1\nprint('hi')\n")
    documents = []
    for program in (WITH_MODULES, CLICK_ONLY):
        proc = _fray_via(program, "--home", str(home.root), "submit", str(script), "--json")
        assert proc.returncode == 0, proc.stderr
        document = json.loads(proc.stdout)
        schema_validate("cli-submit", document)
        assert home.run(document["run_id"]).meta.exists()
        for moving in ("run_id", "dir", "daemon", "next"):  # this run's own names, and the daemon's clock
            document.pop(moving)
        document["script"].pop("frozen")
        documents.append(document)
        if program == WITH_MODULES:
            assert "click" not in json.loads(proc.stderr.split("MODULES=", 1)[1])
    assert documents[0] == documents[1]
    fast = _fray_via(WITH_MODULES, "--home", str(home.root), "submit", str(tmp_path / "nosuch.py"), "--json")
    slow = run_fray("submit", str(tmp_path / "nosuch.py"), "--json", home=home.root)
    assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout) and slow.returncode == 2, fast.stdout
    from fray.cli.arguments import normalize
    from fray.cli.entry import SubmitArgs, submit_plain

    assert submit_plain(normalize(["submit", "a.py", "--json"])) == SubmitArgs(None, "a.py", False, True)
    assert submit_plain(normalize(["--json", "--home", "/h", "submit", "a.py"])) == SubmitArgs("/h", "a.py", False, True)
    assert submit_plain(normalize(["submit", "a.py"])) == SubmitArgs(None, "a.py", False, False)
    assert submit_plain(normalize(["submit", "--wait", "a.py", "--json"])) == SubmitArgs(None, "a.py", True, True)
    assert submit_plain(normalize(["submit", "a.py", "--wait"])) == SubmitArgs(None, "a.py", True, False)
    for args in (["submit", "--gpus", "1", "a.py", "--json"], ["submit", "a.py", "--json", "--", "x"], ["submit"],
                 ["submit", "--wait"], ["submit", "a.py", "b.py"], ["submit", "--wait", "--wait", "a.py"],
                 ["submit", "--follow", "a.py"], ["submit", "-f", "a.py"], ["submit", "a.py", "--help"]):
        assert submit_plain(normalize(args)) is None, args


def test_the_list_fast_path_reads_its_options_as_click_does():
    from fray.cli.entry import ListArgs, parse_list_json

    assert parse_list_json(["list", "--json"]) == ListArgs(None, False, None, False)
    assert parse_list_json(["--home=/h", "list", "--limit", "0", "--json", "--tree", "--limit=7", "--active"]) == \
        ListArgs("/h", True, 7, True)
    assert parse_list_json(["--home", "/a", "--home", "/b", "list", "--json"]) == ListArgs("/b", False, None, False)


# ---------------------------------------------------------------- colour


def test_piped_output_has_no_ansi_escapes(home, tmp_path):
    run_id = make_run(home, tmp_path, "plain")
    for args in (["list"], ["status", run_id], ["daemon", "status"], ["--help"]):
        proc = run_fray(*args)
        assert proc.returncode == 0
        assert ANSI not in proc.stdout + proc.stderr, args


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run fray with a pseudo-terminal as stdout; what it printed."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fray.cli.main", *args], stdout=terminal,
                            stderr=subprocess.PIPE, env={**os.environ, **env})
    os.close(terminal)
    chunks = []
    while True:
        try:
            data = os.read(controller, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=30)
    os.close(controller)
    return b"".join(chunks).decode()


def test_a_terminal_gets_colour_unless_no_color(home, tmp_path):
    make_run(home, tmp_path, "tty")
    assert ANSI in _on_a_terminal(["list"], {})
    assert ANSI not in _on_a_terminal(["list"], {"NO_COLOR": "1"})


# ---------------------------------------------------------------- daemon commands without a daemon


def test_daemon_status_and_stop_when_none_runs(home):
    data = fray_json("daemon", "status", schema="cli-daemon")
    assert data["state"] == "stopped" and data["lease"] is None and data["changed"] is False
    data = fray_json("daemon", "stop", schema="cli-daemon")
    assert data["changed"] is False
    assert "no daemon was running" in run_fray("daemon", "stop").stdout


# ---------------------------------------------------------------- import hygiene

PROBE = """
import json, sys
from fray.cli.main import cli
code = cli.main(sys.argv[1:], prog_name="fray", standalone_mode=False)
print("MODULES=" + json.dumps(sorted(sys.modules)))
"""


def _modules_after(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    marker = next(line for line in proc.stdout.splitlines() if line.startswith("MODULES="))
    return set(json.loads(marker.removeprefix("MODULES=")))


@pytest.mark.parametrize("args", [("--help",), ("list",), ("list", "--json"), ("status", "--help")])
def test_light_commands_import_nothing_heavy(home, tmp_path, args):
    make_run(home, tmp_path, "probe")
    modules = _modules_after(*args)
    tops = {m.split(".")[0] for m in modules}
    assert not tops & set(HEAVY), tops & set(HEAVY)
    assert not {"fray.daemon.loop", "fray.backends", "watchfiles"} & modules
    if args == ("--help",):  # no subcommand's module: they load when used
        from fray.cli.main import COMMANDS

        assert not {target.split(":")[0] for target, _ in COMMANDS.values()} & modules


# ---------------------------------------------------------------- rendering (pure)


@pytest.mark.parametrize("seconds, text", [(0.42, "0.4s"), (45, "45s"), (192, "3m12s"), (7500, "2h05m"),
                                           (3 * 86400 + 4 * 3600, "3d04h"), (None, "-")])
def test_durations_read_as_people_write_them(seconds, text):
    assert human.duration(seconds) == text


def test_tables_align_and_fit_the_width():
    columns = (render.Column("NAME"), render.Column("N", ">"), render.Column("REASON", shrinkable=True, min_width=5))
    lines = render.table(columns, [["a", "1", "short"], ["longer", "22", "a reason that is far too long"]], width=30)
    assert [len(line) <= 30 for line in lines] == [True] * 3
    assert lines[0].startswith("NAME     N  REASON")
    assert lines[2].endswith("…")
    assert human.timestamp(time.time()).count(":") == 2


def test_a_table_laid_out_whole_reads_as_one_cut_to_fit(monkeypatch):
    """A table with nothing to cut or colour is laid out a line at a time (`fray list` into a pipe): the same text
    as the column-by-column layout gives, trailing blanks dropped, braces and percent signs in cells printed as
    they are."""
    columns = (render.Column("NAME"), render.Column("N", ">"), render.Column("REASON", shrinkable=True, min_width=5),
               render.Column("LAST"))
    rows = [["a", "1", "{short}", ""], ["longer", ("22", {"fg": "red"}), "a reason", "x "], ["10%", "3", "%s of {}", ""],
            ["", "", "", ""]]
    whole = render.table(columns, rows)
    assert whole == ["NAME     N  REASON    LAST", "a        1  {short}", "longer  22  a reason  x", "10%      3  %s of {}", ""]
    assert render.table(columns, rows, gap=" % ")[1] == "a      %  1 % {short}  %"
    assert render.table(columns, rows, width=1000) == whole  # wide enough: nothing cut, the same text
    monkeypatch.setattr(render, "colour_enabled", lambda stream=None: True)  # column by column, coloured
    assert [click.unstyle(line) for line in render.table(columns, rows)] == whole


def test_json_output_writes_keys_that_are_not_strings_as_strings_and_refuses_what_json_cannot_hold():
    """--json documents with string keys only (most) take orjson's faster path; one with other keys (a count
    per attempt number, a status enum) reads the same as before, and a value JSON cannot hold is still an error."""
    import orjson

    from fray.cli import output
    from fray.core.status import Status

    mixed = {"runs": [{"run_id": "r", "loss": 0.5}], "by_attempt": {1: 2, 3: None}, Status.FAILED: "x"}
    assert output.json_bytes(mixed) == b'{"runs":[{"run_id":"r","loss":0.5}],"by_attempt":{"1":2,"3":null},"failed":"x"}\n'
    assert json.loads(output.dumps(mixed)) == json.loads(output.json_bytes(mixed))
    assert output.json_bytes({"a": [1, {"b": True}]}) == b'{"a":[1,{"b":true}]}\n'
    for bad in ({"n": 2 ** 70}, {"o": object()}):
        with pytest.raises(orjson.JSONEncodeError):
            output.json_bytes(bad)


# ---------------------------------------------------------------- the schemas of --json

CLI_SCHEMAS = ("cli-submit", "cli-list", "cli-status", "cli-logs", "cli-logs-line", "cli-control", "cli-daemon",
               "cli-usage", "cli-sync", "cli-remote-trust")
def _load_schema(name: str) -> dict:
    return json.loads((REPO / "schemas" / f"{name}.json").read_text())


@pytest.mark.parametrize("name", CLI_SCHEMAS)
def test_cli_schemas_compile_and_reuse_the_state_schemas(name):
    import jsonschema

    from fray.core import validation

    schema = _load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    validation.validator(name)  # only keywords fray's own validator supports; every $ref resolves
    validation.is_valid(name)
    if name == "cli-status":
        # `fray status` shows each attempt record plus its files: every attempt field must be there.
        attempt = schema["$defs"]["status_attempt"]["properties"]
        assert set(_load_schema("meta")["$defs"]["attempt"]["properties"]) <= set(attempt), \
            "schemas/cli-status.json#/$defs/status_attempt lacks a field of meta.json#/$defs/attempt"


def test_every_lazy_subcommand_loads_and_has_help():
    from click.testing import CliRunner

    from fray.cli.main import COMMANDS, cli

    for name in COMMANDS:
        result = CliRunner().invoke(cli, [name, "--help"], prog_name="fray")
        assert result.exit_code == 0, (name, result.output)
        assert f"fray {name}" in result.output


@pytest.mark.parametrize("argv", [
    ["nodes", "--json", "list"], ["--json", "nodes", "list"], ["nodes", "list", "--json"],
])
def test_json_is_accepted_in_any_position(home, argv):
    proc = run_fray(*argv)
    assert proc.returncode == 0, proc.stderr
    schema_validate("cli-nodes", json.loads(proc.stdout))


def test_home_is_accepted_after_the_command(tmp_path):
    elsewhere = tmp_path / "other home"
    proc = run_fray("list", "--json", "--home", str(elsewhere), home=tmp_path / "unused")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["home"] == str(elsewhere)


@pytest.mark.parametrize(("argv", "code"), [
    (["--json", "status", "no-such-run"], "run_not_found"),
    (["status", "--json"], "usage"),
    (["--json", "bogus"], "usage"),
    (["list", "--json", "--limit", "x"], "usage"),
    (["--json"], "usage"),
])
def test_under_json_every_error_is_one_json_object_on_stdout_with_the_same_exit_code(home, argv, code):
    proc = run_fray(*argv)
    plain = run_fray(*[a for a in argv if a != "--json"])
    assert proc.returncode == plain.returncode == 2
    error = json.loads(proc.stdout)
    schema_validate("cli-error", error)
    assert error["error"]["code"] == code and error["error"]["exit_code"] == 2
    assert proc.stdout.count("\n") == 1 and proc.stderr == ""
