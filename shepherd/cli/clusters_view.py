"""Every cluster in one view: `fray list` and `fray usage` over this machine and the remote hosts,
and `status`, `logs`, `control` routed to the cluster that holds the run.

Which clusters: fray.remote.clusters (`--remote a,b`, `--remote all`, or the user config's `remotes`).
Each answers its own `--json` document, asked in parallel with a per-host timeout; fray.ops.clusters
merges them, every row carrying its `cluster` (schemas/cli-clusters-list.json, cli-clusters-usage.json),
and here they are rendered with a CLUSTER column. A cluster that could not answer (down, refused, timed out) is one
row saying so; the others are shown all the same, and the exit code is 0 once the view is printed.

The dashboard (`tui`, `web`) spanning clusters runs here, told which (a hidden `--clusters local,a,b`):
it asks the hosts itself (fray.ops.remote_runs) and shows them with a CLUSTER column.

A run-scoped command (`status RUN`, `logs RUN`, `control OP RUN`) first asks every cluster for RUN
(`fray status RUN`) and then runs there, exactly as `--remote HOST` would: on the one cluster that
has it, or refused (exit 2) when none or several do.
"""

from __future__ import annotations

from typing import Any

from fray.core.command_line import JSON_FLAG, own_words
from fray.errors import UsageError
from fray.remote import clusters

# Every `fray` command with a --remote or a `remotes` default asks `spanned` first (fray.cli.route),
# so the renderers (list_render, ops) are imported only inside the functions that draw a many-cluster view.

FANNED = ("list", "usage")
ROUTED = ("status", "logs", "control")
DASHBOARD = ("tui", "web")
# Options of the routed commands that take a value (the value is not their RUN).
VALUE_OPTIONS = frozenset({"--home", "--attempt", "--lines", "-n", "--task", "--group", "--id", "--reason", "--set",
                           "--node", "--ttl"})


def spanned(given: str | None, command: str) -> list[str] | None:
    """The clusters `command` spans, `local` first, or None when it runs on one; `given` is what --remote
    said (None: not given). UsageError for a one-cluster command over several."""
    if given is None and command not in FANNED + ROUTED + DASHBOARD:
        return None  # `remotes` is for the views and the run's own cluster; the rest stays where it was
    names = clusters.chosen(given)
    if names is None or command in FANNED + ROUTED + DASHBOARD:
        return names
    raise UsageError(f"`fray {command}` acts on one cluster: give --remote HOST (one of "
                     f"{', '.join(names[1:])}), or none for this machine")


def show(names: list[str], args: list[str]) -> int:
    """Print the many-cluster view `args` (`list ...` or `usage ...`) asks for over `names`; exit code 0."""
    from fray.cli import output
    from fray.ops import clusters as views

    listing = args[0] == "list"
    data = (views.list_view if listing else views.usage_view)(names, args)
    output.emit(data, JSON_FLAG in args, render_list if listing else render_usage)
    return 0


def locate(names: list[str], argv: list[str]) -> str:
    """The one cluster that has the run (or `--group`) `argv` names; UsageError otherwise."""
    positional, group = _arguments(argv)
    at = 2 if positional[:1] == ["control"] else 1
    if group is not None:
        run, probe, key = group, ["list", "--group", group], "runs"
    elif len(positional) > at:
        run, probe, key = positional[at], ["status", positional[at]], "run"
    else:
        raise UsageError(f"`fray {' '.join(positional)}` over several clusters needs a RUN to find (or --remote HOST)")
    answers = clusters.ask_all(names, probe, clusters.timeout_sec())
    found = [a.cluster for a in answers if a.exit_code == 0 and isinstance(a.document, dict) and key in a.document]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"{run!r} names a run on each of {', '.join(found)}: give its run id, or --remote HOST")
    unreachable = [f"{a.cluster} ({a.error})" for a in answers if a.document is None]
    tail = f"; not asked: {', '.join(unreachable)}" if unreachable else ""
    asked = [a.cluster for a in answers if a.document is not None]
    raise UsageError(f"no run matches {run!r} on {', '.join(asked) or 'any cluster'}{tail} "
                     "(`fray list` shows every cluster's runs)")


def _arguments(argv: list[str]) -> tuple[list[str], str | None]:
    """(the command's words that are not options or their values, the --group value) of a routed command."""
    words = own_words(argv)
    positional: list[str] = []
    group = None
    index = 0
    while index < len(words):
        word = words[index]
        if word in VALUE_OPTIONS and index + 1 < len(words):
            group = words[index + 1] if word == "--group" else group
            index += 2
            continue
        if word.startswith("--group="):
            group = word.split("=", 1)[1]
        elif not word.startswith("-"):
            positional.append(word)
        index += 1
    return positional, group


def render_list(data: dict[str, Any]) -> list[str]:
    from fray.cli import list_render, render
    from fray.ops import human

    total = sum(data["counts"].values())
    parts = [render.style(f"{count} {human.icon(status)} {status}", **render.status_style(status))
             for status, count in data["counts"].items() if count]
    ok = [c for c in data["clusters"] if c["state"] == "ok"]
    lines = [f"{human.plural(total, 'run')} on {human.plural(len(ok), 'cluster')}"
             f"{': ' + ', '.join(parts) if parts else ''}"]
    for cluster in data["clusters"]:
        if cluster["state"] != "ok":
            lines.append(render.style(f"warning: {cluster['cluster']}: {cluster['detail']}", fg="yellow", bold=True))
    lines.append("")
    columns = (render.Column("CLUSTER"), *list_render.COLUMNS)
    cells = [[row["cluster"], *list_render.row_cells(row)] for row in data["runs"]]
    cells += [[c["cluster"], "", human.MISSING, human.MISSING, (c["state"], {"fg": "yellow"}),
               *[human.MISSING] * 6, c["detail"]] for c in data["clusters"] if c["state"] != "ok"]
    lines += render.table(columns, cells, width=render.terminal_width())
    return lines


def render_usage(data: dict[str, Any]) -> list[str]:
    from fray.cli import render
    from fray.ops import human

    window = "all time" if data["since"] is None else f"since {data['since_text']}"
    lines = [render.heading(f"Usage by {data['by']}, {window}, on "
                            f"{human.plural(sum(c['state'] == 'ok' for c in data['clusters']), 'cluster')}")]
    for cluster in data["clusters"]:
        if cluster["state"] != "ok":
            lines.append(render.style(f"warning: {cluster['cluster']}: {cluster['detail']}", fg="yellow", bold=True))
    columns = [render.Column("CLUSTER"), render.Column(data["by"].upper()), render.Column("NAME", shrinkable=True),
               render.Column("RUNS", ">"), render.Column("ATTEMPTS", ">"), render.Column("WALL", ">"),
               render.Column("LOST", ">"), render.Column("GOODPUT", ">"), render.Column("CPU-H", ">"),
               render.Column("GPU-H", ">")]

    def cells(row: dict[str, Any], cluster: str) -> list[str]:
        goodput = human.MISSING if row["goodput"] is None else f"{row['goodput']:.0%}"
        return [cluster, row["key"], row["label"], str(row["runs"]), str(row["attempts"]),
                human.duration(row["wall_sec"]), human.duration(row["lost_sec"]), goodput,
                f"{row['cpu_hours']:.2f}", f"{row['gpu_hours']:.2f}"]

    rows = [cells(row, row["cluster"]) for row in data["rows"]] + [cells(data["total"], "all")]
    return lines + render.table(columns, rows, render.terminal_width())
