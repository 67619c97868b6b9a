"""`fray submit SCRIPT --json`'s own start: its time to the run's first heartbeat is mostly the modules it
loads (tests/bench/bench_scale.py), so a plain submit of a script outside git, to a daemon already serving,
loads none of what only other submits need, and still settles the interpreter as before."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import schema_validate

WITH_MODULES = ("import atexit, json, sys; "
                "atexit.register(lambda: print('MODULES=' + json.dumps(sorted(sys.modules)), file=sys.stderr)); "
                "from fray.cli.entry import main; main(sys.argv[1:])")

# What a plain local submit has no use for: the wrapper's launcher (argparse), a process runner (git, conda,
# nvidia-smi, sinfo), the audit log (socket), secrets (base64, hmac), the TPU table, the constraint parser.
NOT_NEEDED = ("fray.wrapper.workload", "argparse", "subprocess", "fray.backends.external", "fray.state.audit",
              "socket", "secrets", "fray.core.tpu_topology", "fray.core.placement.constraints",
              "fray.core.placement.slurm")


def _submit(home: Path, script: Path) -> tuple[dict, list[str]]:
    proc = subprocess.run([sys.executable, "-c", WITH_MODULES, "--home", str(home), "submit", str(script), "--json"],
                          capture_output=True, text=True, timeout=60, cwd=script.parent,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    schema_validate("cli-submit", document)
    return document, json.loads(proc.stderr.split("MODULES=", 1)[1])


def test_a_plain_submit_loads_only_what_it_uses(home, daemon, tmp_path):
    project = tmp_path / "project"  # not a git work tree: no git to run
    project.mkdir()
    script = project / "job.py"
    script.write_text("print('hi')\n")
    document, modules = _submit(home.root, script)
    assert (home.root / "runs" / document["run_id"] / "meta.json").exists()
    assert document["spec"]["python"]  # a .py without #!: the python3 on PATH, as before
    assert sorted(set(NOT_NEEDED) & set(modules)) == []


def test_a_script_with_a_shebang_still_runs_under_it(home, daemon, tmp_path):
    """The `#!` line is read without the wrapper's launcher; a script with one is run by its interpreter."""
    for text, python in (("#!/bin/sh\necho hi\n", None), ("#!/usr/bin/env python3\nprint('hi')\n", None),
                         ("# not a shebang\nprint('hi')\n", "python3"), ("", "python3")):
        script = tmp_path / "job.py"
        script.write_text(text)
        document, _ = _submit(home.root, script)
        chosen = document["spec"]["python"]
        assert (chosen is None) if python is None else Path(chosen).name.startswith(python), (text, chosen)


CLICK_ONLY = "import sys; from fray.cli.main import cli; cli.main(sys.argv[1:], prog_name='fray')"


def _both(home: Path, *args: str) -> list[subprocess.CompletedProcess[str]]:
    """`fray --home HOME ARGS` through the console script (its fast path) and through click."""
    return [subprocess.run([sys.executable, "-c", program, "--home", str(home), *args], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
            for program in (WITH_MODULES, CLICK_ONLY)]


def _steady(text: str) -> str:
    """The output with what differs between two submissions (the run's id, the daemon's clock) taken out."""
    text = re.sub(r"\d{8}-\d{6}-[\w.-]+-[0-9a-f]{4}", "RUN", text)
    return re.sub(r"last cycle [\d.]+s ago", "last cycle ago", text)


def test_submit_and_submit_wait_print_the_same_without_click(home, daemon, tmp_path):
    """`fray submit SCRIPT [--wait] [--json]` takes the console script's fast path (fray.cli.entry): the
    same output on stdout and the same exit code as the click command, for a run that succeeds or fails."""
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("print('hi')\n")
    bad.write_text("#FRAY --max-retries 0\nraise SystemExit(3)\n")  # failed at once, no retries
    for args, code in (((str(good),), 0), (("--wait", str(good)), 0), ((str(bad), "--wait"), 1)):
        fast, slow = _both(home.root, "submit", *args)
        assert (fast.returncode, slow.returncode) == (code, code), fast.stderr + slow.stderr
        assert _steady(fast.stdout) == _steady(slow.stdout), (fast.stdout, slow.stdout)
        assert "MODULES=" in fast.stderr and "fray.cli.main" not in json.loads(fast.stderr.split("MODULES=", 1)[1])
    for script, code in ((good, 0), (bad, 1)):
        documents = []
        for proc in _both(home.root, "submit", str(script), "--wait", "--json"):
            assert proc.returncode == code, proc.stderr
            document = json.loads(proc.stdout)
            schema_validate("cli-submit", document)
            assert document["end"]["status"] == ("completed_success" if code == 0 else "failed")
            for moving in ("run_id", "dir", "daemon", "next"):
                document.pop(moving)
            document["script"].pop("frozen")
            document["end"].pop("at")
            documents.append(document)
        assert documents[0] == documents[1]


def test_a_refused_submit_says_the_same_without_click(home, tmp_path):
    fast, slow = _both(home.root, "submit", "--wait", str(tmp_path / "nosuch.py"))
    assert fast.returncode == slow.returncode == 2
    assert fast.stderr.split("MODULES=")[0] == slow.stderr and "script not found" in slow.stderr
    assert not any((home.root / "runs").glob("*"))  # nothing written
