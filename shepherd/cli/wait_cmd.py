"""`fray wait RUN... | --group G`: wait until runs end, saying on stderr what each does meanwhile.

What is news and the exit codes are fray.core.waiting's (0 every run
succeeded, 1 one did not, 3 one can never start, 130 interrupted); the
polling is fray.ops.wait.Watch. stdout holds only the end: one line per run,
or with --json one document (schemas/cli-wait.json).
"""

from __future__ import annotations

from typing import Any

import click

from fray.cli import output, render
from fray.cli.narration import Narrator
from fray.cli.main import fray_prefix, home_of
from fray.core import waiting
from fray.errors import UsageError
from fray.ops import lookup, wait as waits
from fray.state.layout import Home


@click.command("wait")
@click.argument("refs", nargs=-1, metavar="RUN...")
@click.option("--group", "-g", metavar="GROUP", help="Wait for every run of this group (a sweep, a job group).")
@output.json_option("Print one JSON document at the end (schemas/cli-wait.json).")
@click.pass_context
def wait_cmd(ctx: click.Context, refs: tuple[str, ...], group: str | None, as_json: bool) -> None:
    """Wait until RUNs (or a --group) end; each change of status is told on stderr with its reason.

    Exit 0 if every run completed_success, 1 if one ended otherwise (failed,
    failed_config, stopped...), 3 if one can never start where it is (the wait
    gives up; the run is left as it is), 130 on Ctrl-C (the runs go on).
    """
    home = home_of(ctx)
    if bool(refs) == bool(group):
        raise UsageError("name the runs to wait for (fray wait RUN...) or one group (fray wait --group GROUP)")
    names: dict[str, str] = {}
    if group:
        _, names = waits.group_members(home, group)
        run_ids = list(names)
    else:
        run_ids = [lookup.resolve(home, ref) for ref in refs]
    ctx.exit(watch_and_report(home, run_ids, as_json, names))


def watch_and_report(home: Home, run_ids: list[str], as_json: bool,
                     names: dict[str, str] | None = None) -> int:
    """Narrate on stderr until the wait is decided, print how it ended; its exit code (also `submit --wait`
    of a sweep). On a terminal, what stderr has told already (each run's end, the count) is not printed again
    on stdout: both are the same screen."""
    narrator = Narrator.for_stderr()
    watch = waits.Watch(home, run_ids, narrator.told, lambda line: narrator.told(render.style(line, bold=True)),
                        names)
    try:
        code = watch.run(on_tick=lambda: narrator.live(watch.live()))
    except KeyboardInterrupt:
        narrator.done()
        output.note(f"\nstopped waiting; the runs go on (`{fray_prefix(home)} list`)")
        return waiting.EXIT_INTERRUPTED
    narrator.done()
    data = waits.wait_view(watch, code)
    if not as_json and narrator.terminal and render.terminal_width() is not None:
        output.emit(data, False, lambda d: render_wait(d, told_count=watch.last_count))
    else:
        output.emit(data, as_json, render_wait)
    return code


def render_wait(data: dict[str, Any], told_count: str | None = None) -> list[str]:
    """How the wait ended. `told_count`: on a terminal, what stderr has already shown there (each run's last
    status, and this count line), which is then not repeated."""
    told = told_count is not None
    lines = [] if told else [f"{run['name']} ({run['run_id']}): {render.status_label(run['status'])}: {run['reason']}"
                             for run in data["runs"]]
    failed = [run for run in data["runs"] if run["ended"] and run["status"] != "completed_success"]
    if len(data["runs"]) > 1 and data["summary"] != told_count:
        lines.append(data["summary"])
    if failed and len(data["runs"]) > 1:
        lines.append("did not succeed: " + ", ".join(run["run_id"] for run in failed))
    if data["exit_code"] == waiting.EXIT_NEVER_STARTS:
        lines.append("gave up: a run can never start where it is (see its reason); it is left as it is")
    return lines
