"""Printing a command's result: the JSON of its data dict, or the human rendering of it.

Every command builds one JSON-ready dict first and hands it here with its
renderer, so `--json` and the human output can never disagree. JSON is orjson,
one document per line (newline-terminated), so streams can be read line by line.

click is imported where text is printed, not at import: `fray list --json`
(fray.cli.entry) prints through `dumps` without loading click at all.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterable

import orjson

from fray.core.command_line import JSON_FLAG

Renderer = Callable[[dict[str, Any]], Iterable[str]]


def dumps(data: Any) -> str:
    return _encoded(data, 0).decode()


def json_bytes(data: Any) -> bytes:
    """`dumps`' JSON as one newline-terminated line of bytes, for stdout's buffer: a listing of 10,000 runs
    is megabytes, not worth turning into a str only to encode it again."""
    return _encoded(data, orjson.OPT_APPEND_NEWLINE)


def _encoded(data: Any, option: int) -> bytes:
    """orjson's JSON of `data`, keys that are not strings (a few commands' counts) written as strings.

    Most documents have string keys only, and orjson writes those a third faster without
    OPT_NON_STR_KEYS (which gives the same bytes for them): 10,000 runs of `fray list --json`
    cost 48 M instructions instead of 78 M. A document it refuses is written with the option.
    """
    try:
        return orjson.dumps(data, option=option)
    except orjson.JSONEncodeError:
        return orjson.dumps(data, option=option | orjson.OPT_NON_STR_KEYS)


def emit(data: dict[str, Any], as_json: bool, render: Renderer) -> None:
    """Print `data` as one JSON line, or as the lines `render(data)` gives."""
    if as_json:
        json_line(data)
        return
    import click

    lines = list(render(data))
    if lines:  # one write: echoing 10,000 lines of `fray list` one by one costs more than laying them out
        click.echo("\n".join(lines))


def json_line(data: Any) -> None:
    """One JSON document on one line, flushed (streams are read as they come)."""
    import click

    click.echo(dumps(data))
    _flush()


def line(text: str = "", err: bool = False) -> None:
    import click

    click.echo(text, err=err)
    if not err:
        _flush()


def note(text: str) -> None:
    """A message about the output rather than part of it: on stderr, so pipes stay clean."""
    import click

    click.echo(text, err=True)


def reader_gone() -> int:
    """A reader that went away (`fray ... | head`): exit quietly with 1, as click does for a closed pipe.

    stdout is pointed at /dev/null so the interpreter's own last flush cannot print a traceback.
    """
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 1


def _flush() -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def json_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The `--json` flag of a command (into its `as_json`), `help` naming the schema its output follows."""
    import click  # loaded already by every command module that decorates with it; `fray list --json` needs none

    return click.option(JSON_FLAG, "as_json", is_flag=True, help=help)
