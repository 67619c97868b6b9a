"""`fray submit SCRIPT [ARGS]...`: create a run and make sure a daemon serves it.

The run-spec flags are generated from `directives.OPTIONS`, so every `#FRAY`
option is also a flag with the same name, help and parser; a flag given on the
command line overrides the script's directive. Everything is checked before
anything is written: a bad flag, script or directive leaves FRAY_HOME untouched.
"""

from __future__ import annotations

import difflib
import time
from pathlib import Path
from typing import Any, Callable

import click
from click.core import ParameterSource

from fray.cli import output, render, submit_wait
from fray.cli.main import fray_prefix, home_of
from fray.core import directives
from fray.core.waiting import EXIT_NEVER_STARTS
from fray.core.model import Meta
from fray.errors import UsageError
from fray.ops import human, submit as submitting
from fray.state.layout import Home

# Only a sweep, --wait or --follow loads fray.ops.sweeps, .wait and .logs: a plain submit's time to its
# run's first heartbeat is mostly this process's start (tests/bench/bench_scale.py); `fray submit SCRIPT
# [--wait] [--json]` with no other flag does not come here at all (fray.cli.entry, fray.cli.submit_wait).


class SubmitCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            flags = [name for param in self.params for name in getattr(param, "opts", ()) if name.startswith("--")]
            guesses = difflib.get_close_matches(exc.option_name, [f for f in flags if f != "--help"], n=1)
            hint = f" Did you mean {guesses[0]}?" if guesses else ""
            raise click.UsageError(f"No such option {exc.option_name}.{hint} Arguments for the script go after "
                                   f"`--`: fray submit SCRIPT [FLAGS] -- ARGS...", ctx) from None


def _param(option: directives.DirectiveOption) -> str:
    return f"opt_{option.field}"


def _spec_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """One click option per `directives.OPTIONS` entry, in the table's order."""
    for option in reversed(directives.OPTIONS):
        if option.is_flag:
            decorator = click.option(option.flag, _param(option), is_flag=True, default=False, help=option.help)
        else:
            decorator = click.option(option.flag, _param(option), metavar=option.metavar, help=option.help,
                                     multiple=option.repeatable, default=() if option.repeatable else None)
        command = decorator(command)
    return command


def _overrides(ctx: click.Context, values: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(name, RunSpec overrides) from the flags given on the command line, parsed as directives are."""
    name: str | None = None
    overrides: dict[str, Any] = {}
    for option in directives.OPTIONS:
        if ctx.get_parameter_source(_param(option)) is not ParameterSource.COMMANDLINE:
            continue
        raw = values[_param(option)]
        raws = ["true" if raw else "false"] if option.is_flag else list(raw) if option.repeatable else [raw]
        for text in raws:
            field, value = directives.parse_flag_value(option.flag, text)
            if field == "name":
                name = value
            elif option.repeatable:
                overrides.setdefault(field, {}).update(value)
            else:
                overrides[field] = value
    return name, overrides


@click.command(cls=SubmitCommand)
@click.argument("script", metavar="SCRIPT", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[-- ARGS]...")
@click.option("-m", "--module", metavar="MODULE",
              help="Run `python -m MODULE` from the project (like pkg.train) instead of a SCRIPT.")
@click.option("--force", is_flag=True,
              help="Snapshot the project even when it is larger than fray's limit (200 MB).")
@_spec_flags
@click.option("--sweep", "sweeps", multiple=True, metavar="NAME=VALUES",
              help="Submit one run per point instead, as one group: NAME=V1,V2,... or NAME=A..B (integers, both "
                   "included); several --sweep make every combination. Each run gets `--NAME VALUE` after the "
                   "script's own arguments, and FRAY_SWEEP_INDEX, FRAY_SWEEP_PARAMS (JSON) in its environment.")
@click.option("--max-parallel", type=int, metavar="K",
              help="With --sweep: at most K of its runs at once (on Slurm, the job array's %K).")
@click.option("--wait", is_flag=True, help="Wait until the run (every run of a sweep) ends, telling each change on "
                                           "stderr; exit 0 if it succeeded, 1 if not, 3 if it can never start here.")
@click.option("--follow", "-f", is_flag=True, help="Stream its output (all attempts) until it ends; implies --wait.")
@output.json_option("Print JSON (schemas/cli-submit.json; with --sweep schemas/cli-sweep.json).")
@click.pass_context
def submit(ctx: click.Context, script: str | None, args: tuple[str, ...], module: str | None, force: bool,
           sweeps: tuple[str, ...], max_parallel: int | None, wait: bool, follow: bool, as_json: bool,
           **flags: Any) -> None:
    """Submit SCRIPT as a run: fray snapshots its project, starts it, and keeps it making progress.

    How it runs comes from the script's `#FRAY` lines; these flags override them.
    Arguments for the script go after `--`:

        fray submit train.py --gpus 1 -- --lr 3e-4

    The project (the git work tree holding the script, else its folder; or
    --code DIR) is snapshotted: every attempt runs the code as submitted, from
    that copy, with its modules importable. It runs under the script's #!
    line, or --python/--venv/--conda, else the python3 on your PATH.

    A sweep is one run per point, in one group (`fray list` shows it as one
    row; `fray list --group NAME` its runs; `fray control stop --group NAME`):

        fray submit train.py --sweep lr=1e-3,3e-4 --sweep seed=0..4 --max-parallel 4
    """
    home = home_of(ctx)
    name, overrides = _overrides(ctx, flags)
    if module is not None and script is not None:
        args = (script, *args)  # with -m every word is the module's
    elif module is None and script is None:
        raise UsageError("give the script to run: fray submit SCRIPT [FLAGS] [-- ARGS] (or -m MODULE)")
    path = None if script is None or module is not None else Path(script)
    if sweeps or max_parallel is not None:
        _submit_sweep(ctx, home, path, args, sweeps, max_parallel, overrides, name, wait or follow, as_json,
                      module, force)
        return
    meta = submitting.submit(home, path, args, overrides, name, module, force)
    submitting.ensure_daemon(home, meta)
    prefix = fray_prefix(home)
    data = submitting.submitted_view(home, meta, prefix)
    wait_for: Callable[[], Meta | None] | None = None
    if follow:
        wait_for = lambda: _follow(home, meta.run_id, as_json)  # noqa: E731
    elif wait:
        wait_for = lambda: submit_wait.narrated_wait(home, meta.run_id)  # noqa: E731
    code = submit_wait.finish(home, meta, data, as_json, prefix, wait_for)
    if code:
        ctx.exit(code)


def _submit_sweep(ctx: click.Context, home: Home, script: Path | None, args: tuple[str, ...],
                  sweeps: tuple[str, ...], max_parallel: int | None, overrides: dict[str, Any], name: str | None,
                  wait: bool, as_json: bool, module: str | None, force: bool) -> None:
    if not sweeps:
        raise UsageError("--max-parallel limits the runs of a sweep; give the points with --sweep NAME=VALUES")
    from fray.core.sweeps import record as sweep_record
    from fray.ops import sweeps as sweeping

    record = sweeping.publish(home, script, sweeps, args, overrides, name, max_parallel, module, force)
    submitting.ensure_daemon(home, sweep_record.member_meta(record, 0))
    view = sweeping.sweep_view(home, record, fray_prefix(home))
    if not wait:
        output.emit(view, as_json, render_sweep)
        return
    # Waiting for every point: the sweep is told on stderr, stdout keeps one answer (schemas/cli-wait.json).
    for text in render_sweep(view):
        output.line(text, err=True)
    from fray.cli.wait_cmd import watch_and_report

    ctx.exit(watch_and_report(home, [run["run_id"] for run in view["runs"]], as_json,
                              {run["run_id"]: run["name"] for run in view["runs"]}))


def render_sweep(data: dict[str, Any], shown: int = 5) -> list[str]:
    limit = f", at most {data['max_parallel']} at once" if data["max_parallel"] else ""
    daemon = data["daemon"]
    lines = [f"submitted sweep {render.style(data['group'], bold=True)}: {human.plural(data['size'], 'run')} of "
             f"{data['script']} ({data['mode']} on {data['backend']}{limit})"]
    for run in data["runs"][:shown]:
        lines.append(f"  {run['index']:>4}  {run['run_id']}  {' '.join(run['args'][-2 * len(run['params']):])}")
    if len(data["runs"]) > shown:
        lines.append(f"  … and {len(data['runs']) - shown} more (--json lists them all)")
    lines.append(f"daemon: {render.style(daemon['state'] + ': ' + daemon['detail'], **render.DAEMON_COLOURS.get(daemon['state'], {}))}")
    lines.append("next:")
    lines.extend(f"  {hint}" for hint in data["next"])
    return lines


def _follow(home: Home, run_id: str, as_json: bool) -> Meta | None:
    from fray.ops import logs as runlogs, wait as waiting

    def on_attempt(number: int, node: str | None) -> None:
        if not as_json:
            output.line(render.separator(number, node))

    def on_line(item: runlogs.LogLine) -> None:
        if as_json:
            output.json_line(item.to_dict())
        elif item.stream == "stderr":
            output.line(render.style("stderr│ ", fg="red") + item.text)
        else:
            output.line(item.text)

    # Its output on stdout, what it does (pending: why, attempt 2 failed...) on stderr, in one loop.
    follower = runlogs.Follower(home, run_id, runlogs.STREAMS, start_attempt=1)
    watch = waiting.Watch(home, [run_id], lambda line: output.line(render.style(line, dim=True), err=True))
    while not follower.step(on_attempt, on_line):
        if watch.step() == EXIT_NEVER_STARTS:
            return None
        watch.keeper.tick()
        time.sleep(waiting.POLL_SEC)
    watch.step()  # its end, told like every change before it
    assert follower.meta is not None
    return follower.meta
