"""`fray status RUN`: one run in full (fray.cli.status_data), as text or JSON."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import home_of
from fray.cli.status_data import status_data
from fray.core import values
from fray.ops import declared, detail, human

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
CAUSE_COLOURS: dict[str, dict[str, Any]] = {"neutral": {}, "good": {"fg": "green"}, "bad": {"fg": "red"}}


@click.command("status")
@click.argument("run")
@output.json_option("Print JSON (schemas/cli-status.json).")
@click.pass_context
def status(ctx: click.Context, run: str, as_json: bool) -> None:
    """One run in full: status, spec, attempts, the last failure, recent events, files.

    RUN is a run id, a unique prefix of one, or a run name.
    """
    output.emit(status_data(home_of(ctx), run), as_json, render_status)


def render_status(data: dict[str, Any]) -> list[str]:
    """`fray status RUN` as text: the run's facts and what to type now, then its family, attempts, last failure,
    commands, recent events, files and the daemon's line."""
    now = time.time()
    row = data["run"]
    width = render.terminal_width()
    lines = [f"{render.status_label(row['status'])}  {render.style(row['name'], bold=True)}  ({row['run_id']})"]
    lines += render.key_values(_wait_facts(data, now) + _setting_facts(data) + _state_facts(data, now))
    if data.get("next_steps"):  # right under the run: what to type now (docs/failures.md)
        lines += ["", render.heading("What now")] + render.indent_block(data["next_steps"], "  ")
    lines += family_lines(data.get("family"))
    lines += _attempt_lines(data["attempts"], now, width) + _failure_lines(data["attempts"])
    lines += command_lines(data.get("commands"), now, width)
    lines += _event_lines(data["events"], now, width) + _file_lines(data)
    daemon = data["daemon"]
    lines += ["", f"daemon: {render.style(daemon['state'], **render.DAEMON_COLOURS.get(daemon['state'], {}))}"
                  f" ({daemon['detail']})", f"logs:   {data['next'][0]}"]
    return lines


def _setting_facts(data: dict[str, Any]) -> list[tuple[str, str]]:
    """What the run was asked to be: its dependencies, mode, resources, budgets, code, interpreter, tasks."""
    spec = data["spec"]
    facts = [("after", detail.after_summary(spec))] if detail.after_summary(spec) else []
    facts += [
        ("mode", detail.mode_summary(spec)),
        ("resources", detail.resources_summary(spec)),
        ("heartbeat", f"every {values.format_duration(spec['heartbeat_interval_sec'])}, restart after "
                      f"{values.format_duration(spec['heartbeat_timeout_sec'])} without one"),
        ("failures", detail.failures_summary(data["counters"], data["budgets"])),
        *([("backoff", detail.backoff_summary(data["budgets"]["backoff"]))]
          if data["budgets"] and data["budgets"].get("backoff") else []),
    ]
    if spec.get("code") is not None:
        facts.append(("code", human.code(spec)))
    elif detail.synced_code(spec):
        facts.append(("code", detail.synced_code(spec)))
    left_out = declared.left_out_lines(spec)
    if left_out:
        facts.append(("left out", left_out[0] + " " + "; ".join(line.strip() for line in left_out[1:-1])))
    if declared.workdir_line(data.get("workdir")):
        facts.append(("outputs", declared.workdir_line(data.get("workdir"))))
    if spec.get("python") or spec.get("module"):
        facts.append(("python", human.interpreter(spec)))
    if declared.progress_sources(spec):
        facts.append(("reads", "progress from " + declared.progress_sources(spec)))
    if declared.retry_args_line(spec, data["attempts"]):
        facts.append(("retry args", declared.retry_args_line(spec, data["attempts"])))
    tasks = detail.tasks_summary(spec)
    return facts + ([("tasks", tasks)] if tasks else [])


def _wait_facts(data: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """Why it is where it is, and what it waits for."""
    row = data["run"]
    facts = [("reason", row["reason"])]
    if data["wait_reason"] and row["phase"] != "ended":
        facts.append(("waiting", data["wait_reason"]))
    if data["next_attempt_at"]:
        facts.append(("next attempt", human.timestamp(data["next_attempt_at"], now)))
    return facts


def _state_facts(data: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """How its attempts went: hangs, clocks, progress, goodput, requests, when it was submitted and ended."""
    row = data["run"]
    facts = detail.hang_summaries(data["attempts"]) + detail.clock_summaries(data["attempts"])
    if data["progress"]:
        facts.append(("progress", detail.progress_summary(data["progress"], now)))
    if data.get("goodput") and data["goodput"]["goodput"] is not None:
        facts.append(("goodput", detail.goodput_summary(data["goodput"])))
    requests = detail.control_summary(data["control"])
    if requests:
        facts.append(("requested", requests))
    facts.append(("submitted", detail.submitted_summary(row["created_at"], data["submitted_by"], now)))
    if data["end"]:
        facts.append(("ended", human.timestamp(data["end"]["at"], now)))
    return facts


def _attempt_lines(attempts: list[dict[str, Any]], now: float, width: int | None) -> list[str]:
    lines = ["", render.heading("Attempts")]
    if not attempts:
        return lines + ["  none yet"]
    cells = [attempt_cells(a, now) for a in attempts]
    return lines + render.indent_block(render.table(ATTEMPT_COLUMNS, cells, width=width and width - 2), "  ")


def _failure_lines(attempts: list[dict[str, Any]]) -> list[str]:
    """The last failure: which attempt (and task), its exit, its message and the last lines of its stderr."""
    failed = detail.last_failure(attempts)
    if not failed:
        return []
    failure = failed["failure"]
    task = f", task {failed['failed_task']}" if failed.get("failed_task") is not None else ""
    lines = ["", render.heading(f"Last failure (attempt {failed['number']}{task}, exit {failure['exit_code']})"),
             f"  {failure['message']}"]
    tail = failure.get("stderr_tail") or []
    if tail:
        lines += ["  stderr (last lines):"] + render.indent_block(tail, "    ")
    return lines


def _event_lines(events: list[dict[str, Any]], now: float, width: int | None) -> list[str]:
    if not events:
        return []
    cells = [[human.timestamp(e["at"], now), e["kind"], human.number(e.get("attempt")), e["reason"]] for e in events]
    return (["", render.heading(f"Recent events ({len(events)})")]
            + render.indent_block(render.table(EVENT_COLUMNS, cells, width=width and width - 2), "  "))


def _file_lines(data: dict[str, Any]) -> list[str]:
    """The run's folder and its latest attempt's output, and any file moved aside as corrupt."""
    files = [("run dir", data["dir"])]
    if data["attempts"]:
        latest = data["attempts"][-1]
        files += [("stdout", latest["stdout"]), ("stderr", latest["stderr"])]
    lines = ["", render.heading("Files")] + render.key_values(files)
    if data["corrupt_files"]:
        lines += ["", render.style("Corrupt files (moved aside)", fg="red", bold=True)]
        lines += render.indent_block(data["corrupt_files"], "  ")
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
    cells = [[c["id"], c["type"], human.duration(c["age_sec"]),
              f"{human.timestamp(c['delivered_at'], now)} (attempt {c['delivered_attempt']})" if c["delivered_at"]
              else "not yet", json.dumps(c["payload"], separators=(",", ":"))] for c in waiting]
    if cells:
        lines += render.indent_block(render.table(COMMAND_COLUMNS, cells, width=width and width - 2), "  ")
    return lines


def attempt_cells(attempt: dict[str, Any], now: float) -> list[Any]:
    started = attempt["started_at"]
    took = detail.attempt_took(attempt, now)
    cause = attempt["cause"]
    colour = CAUSE_COLOURS[detail.cause_kind(cause)]
    return [
        str(attempt["number"]),
        attempt["state"],
        attempt["node"] or human.MISSING,
        human.timestamp(started or attempt["submitted_at"], now),
        human.duration(took),
        human.number(attempt["exit_code"]),
        (cause or human.MISSING, colour),
        (attempt["detail"] or "").replace("\n", " "),
    ]
