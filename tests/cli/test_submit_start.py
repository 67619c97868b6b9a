"""`fray submit SCRIPT --json`'s own start: its time to the run's first heartbeat is mostly the modules it
loads (tests/bench/bench_scale.py), so a plain submit of a script outside git, to a daemon already serving,
loads none of what only other submits need, and still settles the interpreter as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import schema_validate

WITH_MODULES = ("import atexit, json, sys; "
                "atexit.register(lambda: print('MODULES=' + json.dumps(sorted(sys.modules)), file=sys.stderr)); "
                "from fray.cli.entry import main; main(sys.argv[1:])")

# What a plain local submit has no use for: the wrapper's launcher (argparse), a process runner (git, conda,
# nvidia-smi, sinfo), the audit log (socket), secrets (base64, hmac), the TPU table.
NOT_NEEDED = ("fray.wrapper.workload", "argparse", "subprocess", "fray.backends.external", "fray.state.audit",
              "socket", "secrets", "fray.core.tpu_topology")


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
