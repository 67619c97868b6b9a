"""`fray control OP RUN`: record a person's request for a run.

stop|start|restart|pause|unpause change what the daemon does with the run;
config-set changes safe settings of a live run; blacklist-add|blacklist-remove
ban or unban the node a run is on (and move the run off it).

tune|terminate|resume, and pause --in-process, are runtime commands to the
workload itself (fray.state.runtime_commands): written under runs/<id>/commands/, read
by the workload with `report.commands()`, acknowledged by it. The two pauses
differ in who pauses: plain `pause` is fray's (the attempt checkpoints and is
released; `unpause` starts a new one), `pause --in-process` asks the running
workload to pause itself and keep its allocation (`resume` continues it).
"pause" kept its first meaning so scripts written against it keep working.

The request goes into the run's control.json (fray.ops.control, the same
requests the dashboard makes); the daemon acts on it, so one is started if
none serves FRAY_HOME. The output says what was asked and what the daemon
will do about it.
"""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import fray_prefix, home_of
from fray.errors import UsageError
from fray.ops import control as requests, daemon, lookup, nodes as node_table, runtime, settings as live_settings
from fray.state.layout import Home

HELP = {
    "stop": "End RUN as stopped_manual, stopping its attempt gracefully.",
    "start": "Run an ended RUN again, with fresh retry budgets.",
    "restart": "Stop RUN's attempt and start a new one now (or skip a backoff).",
    "pause": "Stop RUN's attempt and start none until unpause.",
    "unpause": "Let a paused RUN start attempts again.",
}


@click.group("control")
def control() -> None:
    """Ask the daemon to stop, start, restart, pause or unpause a run, or
    send its workload a runtime command: tune, pause --in-process, resume, terminate.

    RUN is a run id, a unique prefix of one, or a run name.
    """


GROUP = click.option("--group", metavar="GROUP", help="Instead of RUN, every run of this group (a sweep): a group "
                     "id, a unique prefix of one, or the sweep's name. Runs it does not apply to are skipped.")


def _request(ctx: click.Context, run: str | None, op: str, as_json: bool, group: str | None = None,
             with_dependents: bool = False) -> None:
    if (run is None) == (group is None):
        raise UsageError(f"give either RUN or --group GROUP: fray control {op} RUN, or fray control {op} --group GROUP")
    home = home_of(ctx)
    if group is not None:
        asked = requests.request_group(home, group, op)
        if asked.requested:
            daemon.ensure_running(home)
        output.emit(group_data(asked, fray_prefix(home)), as_json, render_group)
        return
    assert run is not None
    run_id = lookup.resolve(home, run)
    chain = requests.dependents_of(home, run_id) if with_dependents else []
    # The farthest first: no dependent may see its upstream stopped and start in between (an :any one would).
    also = [requests.request(home, dependent, op) for dependent, _name in reversed(chain)][::-1]
    asked = requests.request(home, run_id, op)
    daemon.ensure_running(home)
    data = {"run_id": run_id, "name": asked.meta.name, "op": op, "control": asked.control.to_dict(),
            "effect": asked.effect, "next": f"{fray_prefix(home)} status {run_id}"}
    if with_dependents:
        data["dependents"] = [{"run_id": r.run_id, "name": r.meta.name, "effect": r.effect} for r in also]
    output.emit(data, as_json, render_control)


def _make(op: str) -> click.Command:
    @click.command(op, help=HELP[op] + "\n\nRUN is a run id, a unique prefix of one, or a run name; "
                   "--group GROUP asks it of every run of a sweep.", short_help=HELP[op])
    @click.argument("run", required=False)
    @GROUP
    @output.json_option("Print JSON (schemas/cli-control.json; with --group schemas/cli-control-group.json).")
    @click.pass_context
    def command(ctx: click.Context, run: str | None, group: str | None, as_json: bool, **chain: bool) -> None:
        _request(ctx, run, op, as_json, group, chain.get("with_dependents", False))

    if op == "stop":
        command = click.option("--with-dependents", is_flag=True,
                               help="Also stop every run waiting for RUN (--after), and theirs.")(command)
    return command


for _op in requests.CONTROL_OPS:
    if _op != "pause":  # pause also sends the runtime command: below
        control.add_command(_make(_op))


# -- runtime commands to the workload (fray.state.runtime_commands) ------------------------

COMMAND_ID = click.option("--id", "command_id", metavar="ID",
                          help="The command's id (default: a new one); sending the same id again changes nothing.")
COMMAND_JSON = output.json_option("Print JSON (schemas/cli-command.json).")
REASON = click.option("--reason", metavar="TEXT", help="Why, for the workload and the audit log (at most 256 characters).")


def _send(ctx: click.Context, run: str, op: str, payload: dict[str, Any], command_id: str | None, as_json: bool,
          found: list[str] | None = None) -> None:
    home = home_of(ctx)
    run_id = lookup.resolve(home, run)
    sent = runtime.send(home, run_id, op, payload, command_id, found=found)
    data = {"run_id": run_id, "name": sent.meta.name, "op": op, "command": sent.command, "created": sent.created,
            "effect": sent.effect, "next": f"{fray_prefix(home)} status {run_id}"}
    output.emit(data, as_json, render_control)


@control.command("pause", short_help=HELP["pause"])
@click.argument("run", required=False)
@GROUP
@click.option("--in-process", is_flag=True,
              help="Ask the running workload to pause itself instead (a runtime command): it keeps its allocation "
                   "and carries on after `fray control resume RUN`.")
@REASON
@COMMAND_ID
@output.json_option("Print JSON (schemas/cli-control.json; with --in-process schemas/cli-command.json).")
@click.pass_context
def pause(ctx: click.Context, run: str | None, group: str | None, in_process: bool, reason: str | None,
          command_id: str | None, as_json: bool) -> None:
    """Stop RUN's attempt and start none until unpause (fray's pause: the
    attempt is asked to checkpoint, then released).

    With --in-process, send the workload a pause command instead: the attempt
    keeps running and holding its allocation; the workload pauses itself until
    `fray control resume RUN`. RUN is a run id, a unique prefix of one, or a run name.
    """
    if not in_process:
        if reason is not None or command_id is not None:
            raise UsageError("--reason and --id belong to `pause --in-process` (a runtime command); "
                             "plain `fray control pause RUN` takes neither")
        _request(ctx, run, "pause", as_json, group)
        return
    if group is not None or run is None:
        raise UsageError("pause --in-process takes one RUN (not --group): fray control pause RUN --in-process")
    _send(ctx, run, "pause", {"reason": reason} if reason is not None else {}, command_id, as_json)


@control.command("resume")
@click.argument("run")
@REASON
@COMMAND_ID
@COMMAND_JSON
@click.pass_context
def resume(ctx: click.Context, run: str, reason: str | None, command_id: str | None, as_json: bool) -> None:
    """Ask RUN's workload, paused with `pause --in-process`, to carry on.

    A run fray paused (plain `fray control pause`) has no workload running:
    `fray control unpause RUN` resumes that one.
    """
    home = home_of(ctx)
    run_id = lookup.resolve(home, run)
    if lookup.read_control(home, run_id).paused:
        raise UsageError(f"run {run_id} is paused by fray (`fray control pause`), so no workload runs to resume; "
                         f"`{fray_prefix(home)} control unpause {run_id}` starts it again")
    _send(ctx, run_id, "resume", {"reason": reason} if reason is not None else {}, command_id, as_json)


@control.command("tune")
@click.argument("run")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="learning_rate (0 < v <= 1), entropy_coef (0 <= v <= 0.1), clip_epsilon (0.05 <= v <= 0.3) "
                   "- at least one - and notes (text); repeatable.")
@COMMAND_ID
@COMMAND_JSON
@click.pass_context
def tune(ctx: click.Context, run: str, settings: tuple[str, ...], command_id: str | None, as_json: bool) -> None:
    """Ask RUN's workload to change hyperparameters as it runs, e.g. `--set learning_rate=1e-4`."""
    payload, found = runtime.parse_settings(list(settings))
    _send(ctx, run, "tune", payload, command_id, as_json, found)


@control.command("terminate")
@click.argument("run")
@click.option("--reason", metavar="TEXT", help="Why (required, at most 256 characters).")
@click.option("--final-checkpoint", is_flag=True, help="Ask the workload to save a checkpoint before it exits.")
@COMMAND_ID
@COMMAND_JSON
@click.pass_context
def terminate(ctx: click.Context, run: str, reason: str | None, final_checkpoint: bool, command_id: str | None,
              as_json: bool) -> None:
    """Ask RUN's workload to finish on its own terms (it decides how; `fray control stop` is fray's stop)."""
    payload: dict[str, Any] = {} if reason is None else {"reason": reason}
    if final_checkpoint:
        payload["final_checkpoint"] = True
    _send(ctx, run, "terminate", payload, command_id, as_json)


@control.command("config-set")
@click.argument("run")
@click.argument("settings", nargs=-1, required=True, metavar="KEY=VALUE...")
@output.json_option("Print JSON (schemas/cli-control.json).")
@click.pass_context
def config_set(ctx: click.Context, run: str, settings: tuple[str, ...], as_json: bool) -> None:
    """Change safe settings of a live RUN, e.g. `max-retries=5 heartbeat-timeout=10m`.

    KEY is a #FRAY option without its dashes; VALUE is read as in a directive.
    Retries, keep-alive, timeouts, grace periods and backoff can change; resources cannot.
    """
    home = home_of(ctx)
    run_id = lookup.resolve(home, run)
    parsed = dict(live_settings.parse_setting(item) for item in settings)
    record, effect = live_settings.change(home, run_id, parsed)
    meta = lookup.read_meta(home, run_id)
    daemon.ensure_running(home)
    data = {"run_id": run_id, "name": meta.name, "op": "config-set", "control": record.to_dict(),
            "effect": effect, "settings": parsed, "next": f"{fray_prefix(home)} status {run_id}"}
    output.emit(data, as_json, render_control)


def group_data(asked: requests.GroupRequested, prefix: str) -> dict[str, Any]:
    """`fray control OP --group GROUP --json` (schemas/cli-control-group.json)."""
    return {"group": asked.group, "op": asked.op,
            "runs": [{"run_id": r.run_id, "name": r.meta.name, "effect": r.effect} for r in asked.requested],
            "skipped": [{"run_id": run_id, "name": name, "why": why} for run_id, name, why in asked.skipped],
            "next": f"{prefix} list --group {asked.group}"}


def render_group(data: dict[str, Any]) -> list[str]:
    lines = [f"{data['op']}: asked of {len(data['runs'])} of the {len(data['runs']) + len(data['skipped'])} runs "
             f"of group {render.style(data['group'], bold=True)}"]
    if data["runs"]:
        lines.append(f"  e.g. {data['runs'][0]['name']}: {data['runs'][0]['effect']}")
    whys: dict[str, int] = {}
    for skipped in data["skipped"]:
        whys[skipped["why"]] = whys.get(skipped["why"], 0) + 1
    lines += [f"  skipped {count}: {why}" for why, count in whys.items()]
    lines.append(f"next: {data['next']}")
    return lines


@control.command("blacklist-add")
@click.argument("run")
@click.option("--node", help="The node to ban (default: the one RUN's current attempt runs on).")
@click.option("--ttl", default="1d", show_default=True, metavar="DURATION", help="How long, or 'never'.")
@click.option("--reason", default=None, help="Why (default: 'bad for RUN').")
@output.json_option("Print JSON (schemas/cli-control.json).")
@click.pass_context
def blacklist_add(ctx: click.Context, run: str, node: str | None, ttl: str, reason: str | None, as_json: bool) -> None:
    """Ban the node RUN is on and move RUN elsewhere (a restart that costs no retry)."""
    home = home_of(ctx)
    run_id = lookup.resolve(home, run)
    target = node or _node_of(home, run_id)
    change = requests.ban_run_node(home, run_id, target, node_table.parse_ttl(ttl), reason)
    daemon.ensure_running(home)
    data = {"run_id": run_id, "name": change.meta.name, "op": "blacklist-add", "control": change.control.to_dict(),
            "effect": change.effect, "node": change.node, "next": f"{fray_prefix(home)} nodes list"}
    output.emit(data, as_json, render_control)


@control.command("blacklist-remove")
@click.argument("run")
@click.option("--node", help="The node to unban (default: the one RUN's latest attempt ran on).")
@output.json_option("Print JSON (schemas/cli-control.json).")
@click.pass_context
def blacklist_remove(ctx: click.Context, run: str, node: str | None, as_json: bool) -> None:
    """Let runs use RUN's node again."""
    home = home_of(ctx)
    run_id = lookup.resolve(home, run)
    change = requests.unban_run_node(home, run_id, node or _node_of(home, run_id))
    data = {"run_id": run_id, "name": change.meta.name, "op": "blacklist-remove", "control": change.control.to_dict(),
            "effect": change.effect, "node": change.node, "next": f"{fray_prefix(home)} nodes list"}
    output.emit(data, as_json, render_control)


def _node_of(home: Home, run_id: str) -> str:
    node = requests.node_of(lookup.read_meta(home, run_id))
    if node is None:
        raise UsageError(f"run {run_id} has not run on any node yet; name one with --node")
    return node


def render_control(data: dict[str, Any]) -> list[str]:
    lines = [f"requested {render.style(data['op'], bold=True)} for run {data['run_id']} ({data['name']})",
             f"  {data['effect']}"]
    if "dependents" in data:
        lines.append(f"  and for {len(data['dependents'])} run(s) waiting for it (--after):")
        lines += [f"    {d['name']} ({d['run_id']}): {d['effect']}" for d in data["dependents"]]
    return lines + [f"  follow it with: {data['next']}"]
