"""The console script `fray`: the command through click, or a JSON fast path; then a quick exit.

`fray list --json` and `fray status RUN --json` are what scripts, shell prompts
and status bars run every second or two, with budgets of 100-200 ms with
10,000 runs. Importing click and building its context costs 30 ms of that, so
an argument list of exactly one of those commands (with `--home`; for list
`--active`, `--limit N`, `--tree`) builds the same data without click, and
prints it or its error as click's path would. Anything else, a typo or `--help`
included, goes to click (fray.cli.main), so usage errors and help text have one
source.

The process then ends without tearing down every module and object, which
changes nothing a user can see and costs a listing of 1,000 runs about 20 ms.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import Callable, NamedTuple

from fray.cli.arguments import normalize


class ListArgs(NamedTuple):
    home: str | None
    active: bool
    limit: int | None
    tree: bool


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    from fray.remote import forward  # no paramiko until a host is really used

    host, local_args = forward.split(args)
    if not forward.handles(host, local_args) and not _spans_clusters():
        words = normalize(args).args
        listing, status = parse_list_json(words), parse_status_json(words)
        if listing is not None:
            _exit_now(_fast_json(lambda: _list_data(listing)))
        if status is not None:
            _exit_now(_fast_json(lambda: _status_data(*status)))
    from fray.cli.main import run  # also forwards to a --remote host, reporting a failure as text or JSON

    _exit_now(run(args))


def _spans_clusters() -> bool:
    """Whether the user config names `remotes`: `list` is then every cluster's and `status` the run's own
    cluster's (fray.cli.clusters_view), which click's path decides (and a config it cannot read, it reports)."""
    from fray.remote import forward, user_config

    if forward.ENV_REMOTE in os.environ:
        return False  # a remote session: one host, this one
    try:
        return bool(user_config.load().get("remotes"))
    except Exception:
        return True


def _command(args: list[str], name: str) -> tuple[str | None, list[str]] | None:
    """(--home, the words after `name`) of `[--home DIR] name ...`, else None."""
    home: str | None = None
    position = 0
    while position < len(args) and args[position] != name:
        token = args[position]
        if token == "--home" and position + 1 < len(args):
            home = args[position + 1]
            position += 2
        elif token.startswith("--home="):
            home = token.removeprefix("--home=")
            position += 1
        else:
            return None
    return None if position == len(args) else (home, args[position + 1:])


def parse_status_json(args: list[str]) -> tuple[str | None, str] | None:
    """(--home, RUN) of `[--home DIR] status RUN --json` (as fray.cli.arguments.normalize leaves it), else None."""
    found = _command(args, "status")
    if found is None or len(found[1]) != 2 or found[1][1] != "--json" or found[1][0].startswith("-"):
        return None
    return found[0], found[1][0]


def parse_list_json(args: list[str]) -> ListArgs | None:
    """`[--home DIR] list --json [--active] [--limit N] [--tree]` in click's syntax, else None."""
    found = _command(args, "list")
    if found is None:
        return None
    home, rest = found
    active = tree = as_json = False
    limit: int | None = None
    index = 0
    while index < len(rest):
        token = rest[index]
        if token == "--json":
            as_json = True
        elif token == "--active":
            active = True
        elif token == "--tree":
            tree = True
        elif token == "--limit" or token.startswith("--limit="):
            if token == "--limit":
                index += 1
                value = rest[index] if index < len(rest) else ""
            else:
                value = token.removeprefix("--limit=")
            if not (value.isascii() and value.isdigit()):
                return None  # click explains what N must be
            limit = int(value)
        else:
            return None  # click says what is wrong with it
        index += 1
    return ListArgs(home, active, limit, tree) if as_json else None


def _list_data(args: ListArgs) -> dict:
    from fray.ops import views
    from fray.state.layout import Home

    return views.list_view(Home.resolve(args.home), include_ended=not args.active, limit=args.limit, tree=args.tree)


def _status_data(home: str | None, run: str) -> dict:
    from fray.cli.status_data import status_data
    from fray.state.layout import Home

    return status_data(Home.resolve(home), run)


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
    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
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
