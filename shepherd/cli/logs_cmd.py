"""`fray logs RUN`: print an attempt's stdout or stderr, or follow them as they grow.

Without -f: the chosen attempt (default the latest), whole or its last N lines;
to a pipe or file the workload's bytes unchanged (binary output, no added
newline), decoded as UTF-8 for a terminal only.
With -f: new lines as they are written, moving on to each new attempt with a
separator line, until the run ends; `--json` then prints one object per line.
A multi-node attempt shows every task, each line marked `[task i]`, unless
`--task N` picks one.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from fray.cli import output, render
from fray.cli.main import fray_prefix, home_of
from fray.errors import UsageError
from fray.ops import logs as runlogs, lookup


@click.command("logs")
@click.argument("run")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines, across attempts, until the run ends.")
@click.option("--stderr", "use_stderr", is_flag=True, help="The workload's stderr instead of its stdout.")
@click.option("--attempt", type=click.IntRange(min=1), metavar="N", help="Attempt N (default: the latest).")
@click.option("--lines", "-n", "last", type=click.IntRange(min=0), metavar="N", help="Only the last N lines.")
@click.option("--task", type=click.IntRange(min=0), metavar="N",
              help="Only task N of a multi-node attempt (default: every task, each line marked with its task).")
@click.option("--stacks", "stacks", is_flag=True,
              help="The Python stacks taken before a hang or a stall ended an attempt: every attempt's, or --attempt N's.")
@output.json_option("Print JSON (schemas/cli-logs.json; with -f one schemas/cli-logs-line.json object per line).")
@click.pass_context
def logs(ctx: click.Context, run: str, follow: bool, use_stderr: bool, attempt: int | None, last: int | None,
         task: int | None, stacks: bool, as_json: bool) -> None:
    """Print the output of RUN's latest attempt (or --attempt N).

    RUN is a run id, a unique prefix of one, or a run name.
    """
    home = home_of(ctx)
    run_id = lookup.resolve(home, run)
    meta = lookup.read_meta(home, run_id)
    stream = "stderr" if use_stderr else "stdout"
    count = len(meta.attempts)
    if attempt is not None and attempt > count and not follow:
        have = f"it has attempts 1 to {count}" if count > 1 else "it has attempt 1" if count else "it has none yet"
        raise UsageError(f"run {run_id} has no attempt {attempt}: {have}")
    if stacks:
        clash = [flag for flag, given in (("--follow", follow), ("--stderr", use_stderr), ("--task", task is not None),
                                          ("--lines", last is not None)) if given]
        if clash:
            raise UsageError(f"--stacks prints the stacks files whole; it does not go with {', '.join(clash)}")
        _stacks(home, run_id, [attempt] if attempt else [a.number for a in meta.attempts], attempt, as_json)
        return
    if follow:
        _follow(home, run_id, stream, attempt, last, task, as_json, waiting=count == 0)
        return
    number = attempt or (meta.current.number if meta.current else None)
    tasks = runlogs.read_tasks(home, run_id, number, stream, task, last) if number else []
    if task is not None and number and not tasks[0].path.parent.is_dir():
        raise UsageError(f"attempt {number} of run {run_id} has no task {task}")
    data = {"run_id": run_id, "attempt": number, "stream": stream, "task": task,
            "path": str(tasks[0].path) if tasks else None, "lines": runlogs.merged_lines(tasks) if tasks else [],
            "tasks": [{"task": log.task, "path": str(log.path)} for log in tasks]}
    note = _no_output(home, run_id, meta, number)
    if note is not None:
        data["note"] = note
        if not as_json:
            output.note(note)
    if len(tasks) == 1 and not as_json and render.terminal_width() is None:
        sys.stdout.buffer.write(runlogs.read_bytes(tasks[0].path, last))  # the workload's bytes, not our reading
        sys.stdout.flush()
        return
    output.emit(data, as_json, render_logs)


def _no_output(home: Any, run_id: str, meta: Any, number: int | None) -> str | None:
    """Why there is no output to show, when none can be: no attempt yet, or one that never started."""
    prefix = fray_prefix(home)
    if number is None:
        if meta.end is not None:
            return f"run {run_id} has no attempt: it ended before one ({meta.end.status}: {meta.end.reason})"
        return (f"run {run_id} has no attempt yet ({meta.wait_reason or meta.phase}); "
                f"`{prefix} logs {run_id} -f` waits for its output")
    attempt = meta.attempts[number - 1]
    if attempt.started_at is None and attempt.cause is not None:
        return (f"attempt {number} of run {run_id} never started, so it has no output ({attempt.cause}: "
                f"{attempt.detail or 'no detail'}); `{prefix} status {run_id}` says what became of each attempt")
    return None


def render_logs(data: dict[str, Any]) -> list[str]:
    return list(data["lines"])


def _stacks(home: Any, run_id: str, numbers: list[int], attempt: int | None, as_json: bool) -> None:
    """`--stacks`: the stacks.txt of each attempt asked for that has one (fray.wrapper.stacks)."""
    lines, paths = runlogs.stacks_lines(home, run_id, numbers)
    if not paths and not as_json:
        which = f"attempt {attempt} of run {run_id}" if attempt else f"run {run_id}"
        output.note(f"no stacks were taken for {which}: the wrapper takes them when it ends a hung workload, "
                    "and just before a progress stall ends one")
    data = {"run_id": run_id, "attempt": attempt, "stream": "stacks", "task": None,
            "path": str(paths[-1]) if paths else None, "lines": lines,
            "tasks": [{"task": 0, "path": str(path)} for path in paths]}
    output.emit(data, as_json, render_logs)


def _follow(home: Any, run_id: str, stream: str, attempt: int | None, last: int | None, task: int | None,
            as_json: bool, waiting: bool) -> None:
    if waiting and not as_json:
        output.note(f"waiting for the first attempt of {run_id} to start (Ctrl-C to stop watching)")

    def on_attempt(number: int, node: str | None) -> None:
        if not as_json:
            output.line(render.separator(number, node))

    def on_line(item: runlogs.LogLine) -> None:
        if as_json:
            output.json_line(item.to_dict())
        else:
            output.line(item.text)

    try:
        runlogs.Follower(home, run_id, (stream,), start_attempt=attempt, last=last, task=task).run(on_attempt, on_line)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None
