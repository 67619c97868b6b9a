"""`fray status RUN`: one run in full, from views.status_view.

RUN is a run id, a unique id prefix, or a name. A run whose meta.json cannot be
read is an error here (exit 2, with the reason): there is nothing to show but
the reason, and `fray list` already shows that.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from fray.core import directives

from fray.state import runs

from fray.ops import views
from fray.cli import output, render
from fray.cli.main import fray_prefix, home_of
from fray.errors import UsageError

ATTEMPT_COLUMNS = (
    render.Column("#", ">"),
    render.Column("STATE"),
    render.Column("NODE", shrinkable=True, min_width=6),
    render.Column("STARTED"),
    render.Column("DURATION", ">"),
    render.Column("EXIT", ">"),
    render.Column("CAUSE"),
    render.Column("DETAIL", shrinkable=True, min_width=12),
)
EVENT_COLUMNS = (render.Column("TIME"), render.Column("KIND"), render.Column("#", ">"),
                 render.Column("REASON", shrinkable=True, min_width=12))
COMMAND_COLUMNS = (render.Column("ID"), render.Column("TYPE"), render.Column("AGE", ">"), render.Column("DELIVERED"),
                   render.Column("PAYLOAD", shrinkable=True, min_width=12))
GOOD_CAUSES = frozenset({"success"})
NEUTRAL_CAUSES = frozenset({"stopped", "restarted", "paused", "expired"})


@click.command("status")
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-status.json).")
@click.pass_context
def status(ctx: click.Context, run: str, as_json: bool) -> None:
    """One run in full: status, spec, attempts, the last failure, recent events, files.

    RUN is a run id, a unique prefix of one, or a run name.
    """
    home = home_of(ctx)
    run_id = runs.resolve(home, run)
    data = views.status_view(home, run_id)
    if data["spec"] is None:
        raise UsageError(f"run {run_id} cannot be shown: {data['run']['reason']}")
    data["next"] = [f"{fray_prefix(home)} logs {run_id}"]
    data["family"] = views.family_view(home, runs.read_meta(home, run_id))
    output.emit(data, as_json, render_status)


def render_status(data: dict[str, Any]) -> list[str]:
    now = time.time()
    row, spec, counters = data["run"], data["spec"], data["counters"]
    width = render.terminal_width()
    lines = [f"{render.status_label(row['status'])}  {render.style(row['name'], bold=True)}  ({row['run_id']})"]
    facts = [("reason", row["reason"])]
    if data["wait_reason"] and row["phase"] != "ended":
        facts.append(("waiting", data["wait_reason"]))
    if data["next_attempt_at"]:
        facts.append(("next attempt", render.timestamp(data["next_attempt_at"], now)))
    facts += [
        ("mode", mode_summary(spec)),
        ("resources", f"{render.resources(spec)} on {spec['backend']}"),
        ("heartbeat", f"every {directives.format_duration(spec['heartbeat_interval_sec'])}, restart after "
                      f"{directives.format_duration(spec['heartbeat_timeout_sec'])} without one"),
        ("failures", f"{counters['workload_failures']} workload, {counters['node_failures']} node-side, "
                     f"{counters['consecutive_fast_failures']} fast in a row"),
    ]
    progress = data["progress"]
    if progress:
        facts.append(("progress", progress_summary(progress, now)))
    requests = control_summary(data["control"])
    if requests:
        facts.append(("requested", requests))
    facts.append(("submitted", f"{render.timestamp(row['created_at'], now)} by {data['submitted_by'].get('user')}"
                               f"@{data['submitted_by'].get('host')}"))
    if data["end"]:
        facts.append(("ended", render.timestamp(data["end"]["at"], now)))
    lines += render.key_values(facts)

    lines += family_lines(data.get("family"))
    lines += ["", render.heading("Attempts")]
    if data["attempts"]:
        cells = [attempt_cells(a, now) for a in data["attempts"]]
        lines += render.indent_block(render.table(ATTEMPT_COLUMNS, cells, width=width and width - 2), "  ")
    else:
        lines.append("  none yet")

    failed = last_failure(data["attempts"])
    if failed:
        failure = failed["failure"]
        lines += ["", render.heading(f"Last failure (attempt {failed['number']}, exit {failure['exit_code']})")]
        lines.append(f"  {failure['message']}")
        tail = failure.get("stderr_tail") or []
        if tail:
            lines.append("  stderr (last lines):")
            lines += render.indent_block(tail, "    ")

    lines += command_lines(data.get("commands"), now, width)

    if data["events"]:
        lines += ["", render.heading(f"Recent events ({len(data['events'])})")]
        cells = [[render.timestamp(e["at"], now), e["kind"], render.number(e.get("attempt")), e["reason"]]
                 for e in data["events"]]
        lines += render.indent_block(render.table(EVENT_COLUMNS, cells, width=width and width - 2), "  ")

    files = [("run dir", data["dir"])]
    if data["attempts"]:
        latest = data["attempts"][-1]
        files += [("stdout", latest["stdout"]), ("stderr", latest["stderr"])]
    lines += ["", render.heading("Files")] + render.key_values(files)
    if data["corrupt_files"]:
        lines += ["", render.style("Corrupt files (moved aside)", fg="red", bold=True)]
        lines += render.indent_block(data["corrupt_files"], "  ")
    daemon = data["daemon"]
    lines += ["", f"daemon: {render.style(daemon['state'], **render.DAEMON_COLOURS.get(daemon['state'], {}))}"
                  f" ({daemon['detail']})", f"logs:   {data['next'][0]}"]
    return lines


def family_lines(family: dict[str, Any] | None) -> list[str]:
    """Parent, children and namespace of a run launched through the cluster API (or that launched some)."""
    if not family:
        return []
    lines = ["", render.heading("Family")]
    facts = []
    if family["namespace"]:
        facts.append(("namespace", family["namespace"]))
    parent = family["parent"]
    if parent:
        facts.append(("parent", f"{render.status_label(parent['status'])}  {parent['name']}  ({parent['run_id']}, "
                                f"attempt {family['parent_attempt'] or '?'})"))
    if family["group"]:
        group = family["group"]
        facts.append(("group", f"{group['id']}: member {group['index'] + 1} of {group['size']}"))
    if family["reservation"]:
        facts.append(("reservation", family["reservation"]))
    lines += render.key_values(facts)
    children = family["children"]
    if children:
        lines.append(f"  children ({len(children)}):")
        lines += [f"    {render.status_label(c['status'])}  {c['name']}  ({c['run_id']})" for c in children]
    return lines


def command_lines(commands: dict[str, Any] | None, now: float, width: int | None) -> list[str]:
    """The runtime commands the workload has not acknowledged yet, with their age."""
    if not commands or not (commands["unacknowledged"] or commands["acknowledged"]):
        return []
    waiting = commands["unacknowledged"]
    lines = ["", render.heading(f"Runtime commands ({len(waiting)} not acknowledged, "
                                f"{commands['acknowledged']} acknowledged)")]
    cells = [[c["id"], c["type"], render.duration(c["age_sec"]),
              f"{render.timestamp(c['delivered_at'], now)} (attempt {c['delivered_attempt']})" if c["delivered_at"]
              else "not yet", json.dumps(c["payload"], separators=(",", ":"))] for c in waiting]
    if cells:
        lines += render.indent_block(render.table(COMMAND_COLUMNS, cells, width=width and width - 2), "  ")
    return lines


def mode_summary(spec: dict[str, Any]) -> str:
    retries = (f"allows {render.plural(spec['max_retries'], 'workload failure')} and "
               f"{spec['max_retries_preemption']} node-side")
    if spec["mode"] == "indefinite":
        keep = directives.format_duration(spec["keep_alive_sec"]) if spec["keep_alive_sec"] else "until stopped"
        return f"indefinite (keep alive {keep}), {retries}"
    return f"run_once, {retries}"


def progress_summary(progress: dict[str, Any], now: float) -> str:
    parts = [f"{key} {render.number(progress[key])}" for key in ("step", "loss", "samples_per_sec", "checkpoint_version")
             if progress.get(key) is not None]
    return f"{', '.join(parts) or 'reported'} ({render.age(progress['updated_at'], now)})"


def control_summary(control: dict[str, Any]) -> str:
    asked = []
    if control.get("stop_requested"):
        asked.append("stop")
    if control.get("paused"):
        asked.append("paused")
    if asked and control.get("updated_by"):
        return f"{', '.join(asked)} (by {control['updated_by']})"
    return ", ".join(asked)


def attempt_cells(attempt: dict[str, Any], now: float) -> list[Any]:
    started = attempt["started_at"]
    if started is None:
        took = None
    else:
        took = (attempt["ended_at"] or now) - started
    cause = attempt["cause"]
    colour = {} if cause is None or cause in NEUTRAL_CAUSES else {"fg": "green"} if cause in GOOD_CAUSES else {"fg": "red"}
    return [
        str(attempt["number"]),
        attempt["state"],
        attempt["node"] or render.MISSING,
        render.timestamp(started or attempt["submitted_at"], now),
        render.duration(took),
        render.number(attempt["exit_code"]),
        (cause or render.MISSING, colour),
        (attempt["detail"] or "").replace("\n", " "),
    ]


def last_failure(attempts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last attempt that failed and left a failure record (not one fray stopped on request)."""
    return next((a for a in reversed(attempts)
                 if a.get("failure") and a["cause"] not in NEUTRAL_CAUSES | GOOD_CAUSES), None)
