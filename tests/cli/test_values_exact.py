"""Values pass through exactly: sweep values with `..`, `=`, paths and quoted commas reach the script as
typed, and `fray logs` to a pipe writes the workload's bytes unchanged (real daemon, real wrappers)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from fray.core.sweeps import grid
from fray.state.layout import Home
from tests.conftest import REPO, run_fray

ECHO_ARGS = ("#!/usr/bin/env python3\n#FRAY --heartbeat-interval 0.5\nimport json, sys\nfrom fray import report\n"
             "print(json.dumps(sys.argv[1:]))\nreport.final(ok=True)\n")
BINARY = bytes(range(256)) * 8 + b"\xff\xfe no newline at the end"


def test_sweep_values_are_taken_as_typed() -> None:
    assert grid.parse_axis("data=../data,../other").values == ("../data", "../other")
    assert grid.parse_axis('tag="a,b", c=d ,/x/y..z').values == ("a,b", "c=d", "/x/y..z")
    assert grid.parse_axis("seed=0..2").values == ("0", "1", "2")  # only A..B of integers is a range


def test_a_sweep_of_paths_and_quoted_commas_reaches_the_script_exactly(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "args.py"
    script.write_text(ECHO_ARGS)
    proc = run_fray("submit", str(script), "--sweep", "data=../data,../other", "--sweep", 'tag="a,b",k=v',
                    "--wait", "--json", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = sorted(tuple(json.loads(home.run(r["run_id"]).attempt(1).stdout.read_text()))
                  for r in json.loads(proc.stdout)["runs"])
    assert seen == sorted(("--data", d, "--tag", t) for d in ("../data", "../other") for t in ("a,b", "k=v"))


def test_logs_to_a_pipe_are_the_workloads_bytes_and_to_a_terminal_text(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "bin.py"
    script.write_text("#!/usr/bin/env python3\n#FRAY --heartbeat-interval 0.5\nimport sys\nfrom fray import report\n"
                      f"sys.stdout.buffer.write({BINARY!r})\nreport.final(ok=True)\n")
    proc = run_fray("submit", str(script), "--wait", "--json", timeout=90)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    piped = subprocess.run([sys.executable, "-m", "fray.cli.main", "logs", run_id], capture_output=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout == BINARY
    last = subprocess.run([sys.executable, "-m", "fray.cli.main", "logs", run_id, "-n", "1"], capture_output=True,
                          timeout=60)
    assert last.stdout == BINARY[BINARY.rindex(b"\n") + 1:]
    # A terminal gets text: invalid bytes shown as U+FFFD, never raw control bytes.
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "fray.cli.main", "logs", run_id, "-n", "1"], stdout=follower,
                             stderr=subprocess.DEVNULL, cwd=REPO, env={**os.environ, "NO_COLOR": "1"})
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    child.wait(timeout=30)
    os.close(leader)
    assert "\ufffd\ufffd no newline at the end" in shown.decode("utf-8")
