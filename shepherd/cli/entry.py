"""The console script `fray`: the command through click, or a fast path; then a quick exit.

`fray list --json` and `fray status RUN --json` are what scripts, shell prompts
and status bars run every second or two, with budgets of 100-200 ms with
10,000 runs (`fray list`, the table, 250 ms). Importing click and building its
context costs 30 ms of that, so an argument list of exactly one of those
commands (with `--home`; for list `--active`, `--limit N`, `--tree`, with or
without `--json`) builds the same data without click, and prints it (the table
through fray.cli.list_render) or its error as click's path would, unless a host or a many-cluster
view is asked for or is the default (fray.remote.forward.runs_here). The command
line is read once (fray.cli.arguments), here, and handed to click as read.
Anything else, a typo or `--help` included, goes to click (fray.cli.main), so
usage errors and help text have one source. `fray submit SCRIPT` with no flag
but `--wait` and `--json` (and no argument for the script) takes the same path
(fray.cli.submit_wait): its time to the run's first heartbeat, and to the end
of a short run, is mostly this process's start (tests/bench/bench_scale.py).
So does `fray actors list --json` (with or without `--namespace NS`).

The process then ends without tearing down every module and object, which
changes nothing a user can see and costs a listing of 1,000 runs about 20 ms.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from typing import Callable, NamedTuple

from fray.cli.arguments import Invocation, fray_prefix, normalize
from fray.core.command_line import JSON_FLAG


class SubmitArgs(NamedTuple):
    home: str | None
    script: str
    wait: bool
    as_json: bool


class ListArgs(NamedTuple):
    home: str | None
    active: bool
    limit: int | None
    tree: bool


def main(argv: list[str] | None = None) -> None:
    invocation = normalize(sys.argv[1:] if argv is None else argv)  # the one reading of the command line
    listing, status, table = list_json(invocation), status_json(invocation), list_table(invocation)
    submitted, actors = submit_plain(invocation), actors_json(invocation)
    if (listing is not None or status is not None or table is not None or submitted is not None
            or actors is not None) and _runs_here(invocation.remote):
        if listing is not None:
            _exit_now(_fast_json(lambda: _list_data(listing)))
        if status is not None:
            _exit_now(_fast_json(lambda: _status_data(*status)))
        if table is not None:
            _exit_now(_fast_table(table))
        if submitted is not None:
            _exit_now(_fast_submit(submitted))
        if actors is not None:
            _exit_now(_fast_json(lambda: _actors_data(*actors)))
    from fray.cli.main import run_parsed  # also forwards to a --remote host, reporting a failure as text or JSON

    _exit_now(run_parsed(invocation))


def _runs_here(given: str | None) -> bool:
    """Whether the command runs on this machine alone: no host, no many-cluster view (`list` is then every
    cluster's and `status` the run's own cluster's, fray.cli.route); a user config it cannot read, click's
    path reports."""
    from fray.remote import forward  # the user config only: no paramiko until a host is really used

    try:
        return forward.runs_here(given)
    except Exception:
        return False


def parse_status_json(args: list[str]) -> tuple[str | None, str] | None:
    """(--home, RUN) of `[--home DIR] status RUN --json` in click's syntax, else None."""
    return status_json(normalize(args))


def status_json(invocation: Invocation) -> tuple[str | None, str] | None:
    """(--home, RUN) of the fast path's `status RUN --json`, from the command line as read once, else None."""
    words = invocation.command
    if len(words) != 3 or words[0] != "status" or words[2] != JSON_FLAG or words[1].startswith("-"):
        return None
    return invocation.home, words[1]


def submit_plain(invocation: Invocation) -> SubmitArgs | None:
    """The fast path's `submit SCRIPT [--wait] [--json]` (the flags in any order, once each, no other flag nor
    argument for the script), else None."""
    words = invocation.command
    if words[:1] != ["submit"]:
        return None
    flags = words[1:-1] if invocation.as_json else words[1:]
    scripts = [word for word in flags if not word.startswith("-")]
    if len(scripts) != 1 or len(flags) > 2 or (len(flags) == 2 and "--wait" not in flags):
        return None
    return SubmitArgs(invocation.home, scripts[0], "--wait" in flags, invocation.as_json)


def actors_json(invocation: Invocation) -> tuple[str | None, str | None] | None:
    """(--home, --namespace or None) of the fast path's `actors list [--namespace NS | -n NS] --json`, else None
    (another form goes to click, which reads it the same way or says what is wrong)."""
    words = invocation.command
    if words[:2] != ["actors", "list"] or words[-1:] != [JSON_FLAG]:
        return None
    options = words[2:-1]
    if not options:
        return invocation.home, None
    if len(options) == 2 and options[0] in ("--namespace", "-n") and options[1] and not options[1].startswith("-"):
        return invocation.home, options[1]
    return None


def parse_list_json(args: list[str]) -> ListArgs | None:
    """`[--home DIR] list --json [--active] [--limit N] [--tree]` in click's syntax, else None."""
    return list_json(normalize(args))


def list_json(invocation: Invocation) -> ListArgs | None:
    """The fast path's `list --json ...`, from the command line as read once, else None (click says what is
    wrong)."""
    return _list_args(invocation.command, invocation.home) if invocation.as_json else None


def list_table(invocation: Invocation) -> ListArgs | None:
    """The fast path's `list ...` as a table (the same options, no --json), else None."""
    return None if invocation.as_json else _list_args(invocation.command, invocation.home)


def _list_args(words: list[str], home: str | None) -> ListArgs | None:
    if words[:1] != ["list"]:
        return None
    active = tree = False
    limit: int | None = None
    index = 1
    while index < len(words):
        token = words[index]
        if token == "--active":
            active = True
        elif token == "--tree":
            tree = True
        elif token == "--limit" or token.startswith("--limit="):
            if token == "--limit":
                index += 1
                value = words[index] if index < len(words) else ""
            else:
                value = token.removeprefix("--limit=")
            if not (value.isascii() and value.isdigit()):
                return None  # click explains what N must be
            limit = int(value)
        elif token != JSON_FLAG:
            return None  # click says what is wrong with it
        index += 1
    return ListArgs(home, active, limit, tree)


def _fast_table(args: ListArgs) -> int:
    """Print `fray list`'s table (fray.cli.list_render), or its error, as click's path would."""
    gc.disable()  # as in _fast_json
    try:
        from fray.cli.list_render import render_list

        lines = render_list(_list_data(args))
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 1  # as click does for a reader that went away
    except Exception as exc:
        from fray.cli import failures

        exit_code = failures.report(exc)
        if exit_code is None:
            raise
        return exit_code
    return 0


def _list_data(args: ListArgs) -> dict:
    from fray.ops import views
    from fray.state.layout import Home

    return views.list_view(Home.resolve(args.home), include_ended=not args.active, limit=args.limit, tree=args.tree)


def _status_data(home: str | None, run: str) -> dict:
    from fray.cli.status_data import status_data
    from fray.state.layout import Home

    return status_data(Home.resolve(home), run)


def _actors_data(home: str | None, namespace: str | None) -> dict:
    from fray.ops.actors import actors_view
    from fray.state.layout import Home

    return actors_view(Home.resolve(home), namespace)


def _fast_submit(args: SubmitArgs) -> int:
    """`fray submit SCRIPT [--wait] [--json]` as the click command does it (fray.cli.submit): the same run,
    output, errors and exit code; what printing and waiting need is loaded once the run is written."""
    gc.disable()  # as in _fast_json
    from pathlib import Path

    from fray.cli import failures
    from fray.ops import submit as submitting
    from fray.state.layout import Home

    failures.json_errors.set(args.as_json)
    try:
        home = Home.resolve(args.home)
        meta = submitting.submit(home, Path(args.script))
        submitting.ensure_daemon(home, meta)
        prefix = fray_prefix(home)
        data = submitting.submitted_view(home, meta, prefix)
        if args.as_json and not args.wait:  # the one document, printed as _fast_json does: no click
            from fray.cli.output import json_bytes

            sys.stdout.buffer.write(json_bytes(data))
            sys.stdout.flush()
            return 0
        from fray.cli import submit_wait

        wait = None
        if args.wait:
            gc.enable()  # a wait may last days
            wait = lambda: submit_wait.narrated_wait(home, meta.run_id)  # noqa: E731
        return submit_wait.finish(home, meta, data, args.as_json, prefix, wait)
    except BrokenPipeError:
        return 1  # as click does for a reader that went away
    except KeyboardInterrupt:  # before any wait (which tells how it stopped itself), as click's path says it
        sys.stderr.write("\nAborted!\n")
        return 1
    except Exception as exc:
        exit_code = failures.report(exc)
        if exit_code is None:
            raise
        return exit_code


def _fast_json(build: Callable[[], dict]) -> int:
    """Print what `build` returns as JSON, or the error it raises as JSON, as click's path would."""
    # A process that allocates tens of thousands of objects and exits right after
    # printing them: collecting cycles along the way would only cost time (~3%).
    gc.disable()
    from fray.cli.output import json_bytes

    try:
        sys.stdout.buffer.write(json_bytes(build()))
        sys.stdout.flush()
    except BrokenPipeError:
        return 1  # as click does for a reader that went away
    except Exception as exc:
        from fray.cli import failures

        failures.json_errors.set(True)
        exit_code = failures.report(exc)
        if exit_code is None:
            raise
        return exit_code
    return 0


def _exit_now(code: int | str | None) -> None:
    """End the process as a normal exit would, minus tearing down every module and object.

    atexit handlers still run and the standard streams are flushed; while another
    non-daemon thread is alive, the normal exit (which waits for it) is used instead.
    """
    threading = sys.modules.get("threading")  # not loaded: no thread was started through it
    if threading is not None and any(t is not threading.main_thread() and not t.daemon
                                     for t in threading.enumerate()):
        raise SystemExit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away (`fray list | head`), or a closed stream
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
