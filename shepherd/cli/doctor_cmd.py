"""`fray doctor`: check the cluster as fray needs it (fray.ops.doctor), each finding with its fix.

Exits 0 when every check is ok or only warns, 1 when one fails; `--json` prints
schemas/cli-doctor.json. Steps are told on stderr as they happen (the probe job
may wait in a queue), so stdout stays the report.
"""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.core.backend_names import BACKEND_NAMES
from fray.ops import doctor as doctors

MARKS = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red"), "info": ("info", "blue")}


@click.command("doctor")
@click.option("--backend", type=click.Choice(BACKEND_NAMES),
              help="Where the probe job runs (default: config.json's default_backend).")
@click.option("--no-job", "no_job", is_flag=True, help="Check this host only: no probe job on the backend.")
@click.option("--timeout", default=120.0, show_default=True, metavar="SECONDS",
              help="How long the probe job may take to start and answer (it may wait in a queue).")
@output.json_option("Print JSON (schemas/cli-doctor.json).")
@click.pass_context
def doctor(ctx: click.Context, backend: str | None, no_job: bool, timeout: float, as_json: bool) -> None:
    """Check FRAY_HOME's file system, locks, the daemon, a round trip to a node and the clocks.

    Run it on two login hosts at once to learn whether their flock is coherent. The probe job is a real
    run (named fray-doctor): it shows in `fray list`.
    """
    report = doctors.run(home_of(ctx), backend, job=not no_job, timeout=timeout,
                         on_step=lambda line: click.echo(f"doctor: {line}", err=True))
    output.emit(report, as_json, render_report)
    ctx.exit(1 if report["verdict"] == "fail" else 0)


def render_report(data: dict[str, Any]) -> list[str]:
    mount = data["mount"]
    lines = [f"fray doctor for {data['home']} on {data['host']} (probe: {data['backend']})",
             f"  mounted at {mount['point']}: {mount['fstype']} from {mount['source']}"]
    for finding in data["findings"]:
        word, colour = MARKS[finding["status"]]
        lines.append(f"  {render.style(word.ljust(4), fg=colour, bold=True)}  {finding['check']}: {finding['summary']}")
        if finding["fix"]:
            lines.append(f"        fix: {finding['fix']}")
    verdict = {"ok": "everything fray needs is in place", "warn": "fray works here; see the warnings",
               "fail": "fray cannot work here as it is: see what failed"}[data["verdict"]]
    lines.append(verdict)
    return lines
