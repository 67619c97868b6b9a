"""`fray list` as text: the table of runs, its summary line and the daemon warning (no click: fray.cli.entry
prints `fray list` from these without loading it, as it prints `fray list --json`)."""

from __future__ import annotations

from typing import Any

from fray.cli import render
from fray.core.status import Status
from fray.ops import human

COLUMNS = (
    render.Column(""),
    render.Column("NAME", shrinkable=True, min_width=10),
    render.Column("RUN ID"),
    render.Column("STATUS"),
    render.Column("ATT", ">"),
    render.Column("NODE", shrinkable=True, min_width=6),
    render.Column("UPTIME", ">"),
    render.Column("HEARTBEAT", ">"),
    render.Column("STEP", ">"),
    render.Column("LOSS", ">"),
    render.Column("REASON", shrinkable=True, min_width=12),
)

# Runs that need no daemon: ended ones, and those whose files cannot be read.
ENDED_STATUSES = frozenset({Status.COMPLETED_SUCCESS.value, Status.ENDED_EXPIRED.value,
                            Status.STOPPED_MANUAL.value, Status.FAILED.value, Status.FAILED_CONFIG.value,
                            Status.FAILED_DEPENDENCY.value,
                            Status.ERROR_UNKNOWN.value})


def render_list(data: dict[str, Any]) -> list[str]:
    lines = [summary(data)]
    warning = daemon_warning(data)
    if warning:
        lines.append(warning)
    rows = data["runs"]
    total = sum(data["counts"].values())
    if not rows:
        lines.append("")
        if data.get("active_only"):
            lines.append("No active runs. `fray list` shows the ended ones too.")
        else:
            lines.append(f"No runs in {data['home']} yet. Submit one with: fray submit train.py")
        return lines
    lines.append("")
    lines.extend(render.table(COLUMNS, [row_cells(row) for row in rows],
                              width=render.terminal_width()))
    shown = sum(sum(row["counts"].values()) if row.get("kind") == "group" else 1 for row in rows)
    if shown < total:
        lines.append(f"… showing the newest {shown} of {total} runs (--limit)")
    return lines


def summary(data: dict[str, Any]) -> str:
    counts = {status: count for status, count in data["counts"].items() if count}
    total = sum(counts.values())
    scope = "active run" if data.get("active_only") else "run"
    parts = [render.style(f"{count} {human.icon(status)} {status}", **render.status_style(status))
             for status, count in counts.items()]
    daemon = data["daemon"]
    health = render.style(daemon["state"], **render.DAEMON_COLOURS.get(daemon["state"], {}))
    head = human.plural(total, scope) + (f" of group {data['group']}" if data.get("group") else "")
    failing = "".join(f" · {render.style(text, fg='red')}"
                      for text in human.failing_commands(daemon.get("lease"), data["generated_at"]))
    return f"{head}{': ' + ', '.join(parts) if parts else ''} · daemon {health}: {daemon['detail']}{failing}"


def daemon_warning(data: dict[str, Any]) -> str | None:
    """A warning when the daemon is stale, or stopped while runs still need it."""
    state = data["daemon"]["state"]
    waiting = sum(count for status, count in data["counts"].items() if status not in ENDED_STATUSES)
    as_of = human.as_of(data["daemon"], data["generated_at"])
    if state == "stale":
        text = (f"warning: the daemon has stopped completing cycles, so runs are not being watched{as_of}; "
                "see its log (daemon.log in FRAY_HOME) or restart it: fray daemon stop; fray daemon start")
    elif state == "stopped" and waiting:
        text = (f"warning: no daemon is running, so {human.plural(waiting, 'active run')} "
                f"{'is' if waiting == 1 else 'are'} not making progress{as_of}; start one: fray daemon start")
    else:
        return None
    return render.style(text, fg="yellow", bold=True)


def row_cells(row: dict[str, Any]) -> list[Any]:
    colour = render.status_style(row["status"])
    if row.get("kind") == "group":  # a sweep folded into one row (fray.core.sweeps.folding)
        return [(row["icon"], colour), f"{row['name']} [sweep of {row['size']}]", row["run_id"], (row["status"], colour),
                human.MISSING, human.MISSING, human.MISSING, human.MISSING, human.MISSING, human.MISSING,
                row["reason"]]
    status = row["status"] + (" (paused)" if row["paused"] and row["phase"] != "ended" else "")
    if row["phase"] == "queued" and row.get("priority"):
        status += f" · {row['priority']}"  # the band it waits in (fray.core.placement.priority)
    name = ("  " * (row["depth"] - 1) + "└ " if row.get("depth") else "") + row["name"]
    if "depth" in row and row.get("after"):  # in the tree: ` ⇠ train, sweep:fail`, the edges it was started --after
        name += " " + human.edges(row["after"])
    # An empty cell (every ended run's uptime, heartbeat, step and loss) without a call: 10,000 rows in `fray list`.
    attempt, uptime, beat, step, loss = (row["attempt"], row["uptime_sec"], row["heartbeat_age_sec"], row["step"],
                                         row["loss"])
    return [
        (row["icon"], colour),
        name,
        row["run_id"],
        (status, colour),
        human.MISSING if attempt is None else human.number(attempt),
        row["node"] or human.MISSING,
        human.MISSING if uptime is None else human.duration(uptime),
        human.MISSING if beat is None else human.duration(beat),
        human.MISSING if step is None else human.number(step),
        human.MISSING if loss is None else human.number(loss),
        row["reason"].replace("\n", " "),
    ]
