"""`fray control stop|start|restart|pause|unpause RUN`: record a person's request.

The request goes into the run's control.json (runs.request, which also audits
it); the daemon acts on it, so one is started if none serves FRAY_HOME. The
output says what was asked and what the daemon will do about it.
"""

from __future__ import annotations

from typing import Any

import click

from shepherd import lease, runs
from shepherd.cli import output, render
from shepherd.cli.main import fray_prefix, home_of
from shepherd.model import Meta

HELP = {
    "stop": "End RUN as stopped_manual, stopping its attempt gracefully.",
    "start": "Run an ended RUN again, with fresh retry budgets.",
    "restart": "Stop RUN's attempt and start a new one now (or skip a backoff).",
    "pause": "Stop RUN's attempt and start none until unpause.",
    "unpause": "Let a paused RUN start attempts again.",
}


@click.group("control")
def control() -> None:
    """Ask the daemon to stop, start, restart, pause or unpause a run.

    RUN is a run id, a unique prefix of one, or a run name.
    """


def _make(op: str) -> click.Command:
    @click.command(op, help=HELP[op] + "\n\nRUN is a run id, a unique prefix of one, or a run name.",
                   short_help=HELP[op])
    @click.argument("run")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-control.json).")
    @click.pass_context
    def command(ctx: click.Context, run: str, as_json: bool) -> None:
        home = home_of(ctx)
        run_id = runs.resolve(home, run)
        control_record = runs.request(home, run_id, op)
        meta = runs.read_meta(home, run_id)
        lease.ensure_running(home)
        data = {"run_id": run_id, "name": meta.name, "op": op, "control": control_record.to_dict(),
                "effect": effect(op, meta), "next": f"{fray_prefix(home)} status {run_id}"}
        output.emit(data, as_json, render_control)

    return command


for _op in runs.CONTROL_OPS:
    control.add_command(_make(_op))


def effect(op: str, meta: Meta) -> str:
    """What the daemon will do about `op`, for this run as it is now."""
    attempt = meta.in_flight
    grace = render.duration(meta.spec.stop_grace_sec)
    if op == "stop":
        if attempt:
            return (f"attempt {attempt.number} is asked to stop (killed if still running after {grace}); "
                    "the run then ends as stopped_manual")
        return "no attempt starts; the run ends as stopped_manual"
    if op == "start":
        return f"the run becomes active again with fresh retry budgets; attempt {len(meta.attempts) + 1} starts"
    if op == "restart":
        if attempt:
            return f"attempt {attempt.number} is stopped and attempt {attempt.number + 1} starts right after"
        return "any backoff is skipped: the next attempt starts now"
    if op == "pause":
        if attempt:
            return (f"attempt {attempt.number} is asked to stop (it should checkpoint; killed after {grace}); "
                    "no attempt starts until `fray control unpause`")
        return "no attempt starts until `fray control unpause`"
    return "the run may start attempts again"


def render_control(data: dict[str, Any]) -> list[str]:
    return [f"requested {render.style(data['op'], bold=True)} for run {data['run_id']} ({data['name']})",
            f"  {data['effect']}", f"  follow it with: {data['next']}"]
