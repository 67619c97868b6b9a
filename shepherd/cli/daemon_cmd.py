"""`fray daemon start|stop|status|run`: the daemon that serves FRAY_HOME.

`start` spawns one in the background unless one is serving (fray.ops.daemon);
`stop` asks it to exit (attempts keep running, and the next daemon adopts them);
`status` shows its health and lease and exits 0 either way; `run` is the daemon
itself in the foreground, for supervisors and debugging.
"""

from __future__ import annotations

import time
from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.ops import daemon as daemons, human

JSON_HELP = "Print JSON (schemas/cli-daemon.json)."


@click.group("daemon")
def daemon() -> None:
    """Start, stop or inspect the daemon that serves FRAY_HOME.

    Any `fray submit` or `fray control` starts it when none is running.
    """


@daemon.command("start")
@output.json_option(JSON_HELP)
@click.pass_context
def start(ctx: click.Context, as_json: bool) -> None:
    """Start a daemon in the background unless one is running."""
    output.emit(daemons.start(home_of(ctx)), as_json, render_daemon)


@daemon.command("stop")
@output.json_option(JSON_HELP)
@click.pass_context
def stop(ctx: click.Context, as_json: bool) -> None:
    """Stop the daemon; attempts keep running and the next daemon adopts them."""
    output.emit(daemons.stop(home_of(ctx)), as_json, render_daemon)


@daemon.command("status")
@output.json_option(JSON_HELP)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Whether a daemon serves FRAY_HOME, and its lease (exit 0 either way)."""
    output.emit(daemons.daemon_view(home_of(ctx)), as_json, render_daemon)


@daemon.command("run")
@output.json_option("When it exits, print its status as JSON.")
@click.pass_context
def run(ctx: click.Context, as_json: bool) -> None:
    """Run the daemon in the foreground until interrupted (Ctrl-C or SIGTERM)."""
    home = home_of(ctx)
    code = daemons.run(home)
    if as_json:
        output.emit(daemons.daemon_view(home, "run"), True, render_daemon)
    ctx.exit(code)


def render_daemon(data: dict[str, Any]) -> list[str]:
    state = data["state"]
    label = render.style(state, **render.DAEMON_COLOURS.get(state, {}))
    action, changed = data["action"], data["changed"]
    home = data["home"]
    if action == "start":
        head = f"daemon started for {home}" if changed else f"a daemon is already running for {home}"
    elif action == "stop":
        head = f"daemon stopped for {home}; its attempts keep running" if changed else f"no daemon was running for {home}"
    else:
        head = f"daemon {label} for {home}"
    lines = [head, f"  {label}: {data['detail']}"]
    record = data["lease"]
    if record:
        facts = [("pid", f"{record['pid']} on {record['host']}"), ("version", record["version"]),
                 ("acting since", human.timestamp(record["started_at"])),
                 ("cycles", f"{record['cycles']}, every {human.duration(record['poll_interval_sec'])}"
                            + (f", last took {record['last_cycle_ms']:.0f} ms" if "last_cycle_ms" in record else "")),
                 ("active runs", human.number(record.get("active_runs")))]
        if record.get("generation") is not None:
            facts.append(("lease", f"generation {record['generation']}; a daemon of another host takes over after "
                                   f"{human.duration(record.get('lease_timeout_sec'))} without a renewal"))
        if record.get("last_error"):
            facts.append(("last error", render.style(record["last_error"], fg="red")))
        if record.get("config_error"):
            facts.append(("config", render.style(record["config_error"], fg="red")))
        facts += [("failing", render.style(text, fg="red")) for text in human.failing_commands(record, time.time())]
        lines += render.key_values(facts)
    others = [h for h in data.get("hosts", ()) if h["role"] != "stopped" or h["host"] == data.get("this_host")]
    if others:
        lines.append("  hosts:")
        lines += render.key_values([(h["host"] + (" (this host)" if h["host"] == data.get("this_host") else ""),
                                     _host_line(h)) for h in others], indent="    ")
    if state != "running":
        lines.append("  start one with: fray daemon start")
    return lines


def _host_line(record: dict[str, Any]) -> str:
    """One host's daemon: its role, and what this host can tell of it."""
    role = {"active": "acting", "standby": "standing by", "stopped": "stopped"}[record["role"]]
    if record["role"] == "stopped":
        return f"stopped (was pid {record['pid']})"
    if record["seen"] == "gone":
        return f"{role} as pid {record['pid']}, but that process is gone"
    holder = record.get("holder")
    watching = f", watching pid {holder['pid']} on {holder['host']}" if record["role"] == "standby" and holder else ""
    return f"{role}, pid {record['pid']}{watching}"
