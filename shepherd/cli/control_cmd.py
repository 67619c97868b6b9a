"""`fray control OP RUN`: record a person's request for a run.

stop|start|restart|pause|unpause change what the daemon does with the run;
config-set changes safe settings of a live run; blacklist-add|blacklist-remove
ban or unban the node a run is on (and move the run off it).

The request goes into the run's control.json (runs.request, which also audits
it); the daemon acts on it, so one is started if none serves FRAY_HOME. The
output says what was asked and what the daemon will do about it.
"""

from __future__ import annotations

from typing import Any

import click

from shepherd import blacklist, directives, lease, runs
from shepherd.cli import output, render
from shepherd.cli.main import fray_prefix, home_of
from shepherd.errors import UsageError
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


@control.command("config-set")
@click.argument("run")
@click.argument("settings", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-control.json).")
@click.pass_context
def config_set(ctx: click.Context, run: str, settings: tuple[str, ...], as_json: bool) -> None:
    """Change safe settings of a live RUN, e.g. `max-retries=5 heartbeat-timeout=10m`.

    KEY is a #FRAY option without its dashes; VALUE is read as in a directive.
    Retries, keep-alive, timeouts, grace periods and backoff can change; resources cannot.
    """
    home = home_of(ctx)
    run_id = runs.resolve(home, run)
    parsed = dict(parse_setting(item) for item in settings)
    record = runs.set_overrides(home, run_id, parsed)
    meta = runs.read_meta(home, run_id)
    lease.ensure_running(home)
    shown = ", ".join(f"{key}={value}" for key, value in parsed.items())
    data = {"run_id": run_id, "name": meta.name, "op": "config-set", "control": record.to_dict(),
            "effect": f"the daemon applies {shown} now; new attempts use them", "settings": parsed,
            "next": f"{fray_prefix(home)} status {run_id}"}
    output.emit(data, as_json, render_control)


def parse_setting(item: str) -> tuple[str, Any]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip("-"):
        raise UsageError(f"{item!r}: expected KEY=VALUE, like max-retries=5")
    return directives.parse_flag_value("--" + key.strip("-").replace("_", "-"), value)


@control.command("blacklist-add")
@click.argument("run")
@click.option("--node", help="The node to ban (default: the one RUN's current attempt runs on).")
@click.option("--ttl", default="1d", show_default=True, metavar="DURATION", help="How long, or 'never'.")
@click.option("--reason", default=None, help="Why (default: 'bad for RUN').")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-control.json).")
@click.pass_context
def blacklist_add(ctx: click.Context, run: str, node: str | None, ttl: str, reason: str | None, as_json: bool) -> None:
    """Ban the node RUN is on and move RUN elsewhere (a restart that costs no retry)."""
    from shepherd.cli.nodes_cmd import parse_ttl

    home = home_of(ctx)
    run_id = runs.resolve(home, run)
    meta = runs.read_meta(home, run_id)
    target = node or _node_of(meta, run_id)
    blacklist.ban(home, target, reason or f"bad for run {run_id}", parse_ttl(ttl), source_run=run_id)
    attempt = meta.in_flight
    moving = attempt is not None and attempt.node == target
    record = runs.request(home, run_id, "restart") if moving else runs.read_control(home, run_id)
    lease.ensure_running(home)
    if meta.spec.backend == "local":
        effect_text = f"{target} is blacklisted; the local backend has only this machine, so runs stay here"
        if moving and attempt:
            effect_text += f" (attempt {attempt.number} restarts)"
    elif moving and attempt:
        effect_text = f"{target} is blacklisted; attempt {attempt.number} restarts elsewhere"
    else:
        effect_text = f"{target} is blacklisted; new attempts avoid it"
    data = {"run_id": run_id, "name": meta.name, "op": "blacklist-add", "control": record.to_dict(),
            "effect": effect_text, "node": target, "next": f"{fray_prefix(home)} nodes list"}
    output.emit(data, as_json, render_control)


@control.command("blacklist-remove")
@click.argument("run")
@click.option("--node", help="The node to unban (default: the one RUN's latest attempt ran on).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-control.json).")
@click.pass_context
def blacklist_remove(ctx: click.Context, run: str, node: str | None, as_json: bool) -> None:
    """Let runs use RUN's node again."""
    home = home_of(ctx)
    run_id = runs.resolve(home, run)
    meta = runs.read_meta(home, run_id)
    target = node or _node_of(meta, run_id)
    blacklist.unban(home, target, source_run=run_id)
    data = {"run_id": run_id, "name": meta.name, "op": "blacklist-remove",
            "control": runs.read_control(home, run_id).to_dict(), "effect": f"{target} may be used again",
            "node": target, "next": f"{fray_prefix(home)} nodes list"}
    output.emit(data, as_json, render_control)


def _node_of(meta: Meta, run_id: str) -> str:
    node = next((a.node for a in reversed(meta.attempts) if a.node), None)
    if node is None:
        raise UsageError(f"run {run_id} has not run on any node yet; name one with --node")
    return node


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
