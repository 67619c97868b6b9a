"""A MkDocs hook: the CLI reference (docs/reference/cli.md), written from the click commands at build time.

Each command gets a heading (`fray control stop`, anchor `#fray-control-stop`), its help, its usage
line, its subcommands and a table of its options whose Default column is what `fray COMMAND --help`
shows with defaults on (click's own `get_help_extra`): a real value, or nothing where the option has
none (most of `fray submit`'s come from the script's `#FRAY` lines or config.json, as their help says).
It replaces mkdocs-click, whose table printed click 8.2+'s "no default" sentinel as `Sentinel.UNSET`.
The page marks where the commands go with MARKER.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import click

MARKER = "<!-- the commands: docs/hooks/cli_reference.py -->"
PAGE = "reference/cli.md"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its marker {MARKER}: the hook has nowhere to write the commands")
    from fray.cli.main import cli  # here, not at the top: only this page needs fray's commands

    ctx = cli.make_context("fray", [], resilient_parsing=True, show_default=True)
    return markdown.replace(MARKER, "\n".join(command_docs(ctx, level=2)))


def command_docs(ctx: click.Context, level: int) -> Iterator[str]:
    """One command's section, then its subcommands' one level down."""
    command = ctx.command
    yield f"{'#' * level} {ctx.command_path}"
    yield ""
    yield description(command.help or command.short_help or "")
    yield ""
    yield "```text"
    yield " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    yield "```"
    yield ""
    options = [p for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    if options:
        yield "| Option | Type | Description | Default |"
        yield "| --- | --- | --- | --- |"
        yield from (option_row(option, ctx) for option in options)
        yield ""
    subcommands = []
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                subcommands.append(sub.make_context(name, [], parent=ctx, resilient_parsing=True, show_default=True))
    if subcommands:
        yield "Commands:"
        yield ""
        for sub in subcommands:
            anchor = sub.command_path.replace(" ", "-")
            yield f"- [`{sub.info_name}`](#{anchor}): {cell(sub.command.get_short_help_str(limit=200))}"
        yield ""
    for sub in subcommands:
        yield from command_docs(sub, level + 1)


def description(help_text: str) -> str:
    """A command's help as click prints it: up to a `\\f`, without click's `\\b` (keep-this-paragraph) lines."""
    text = inspect.cleandoc(help_text.split("\f", 1)[0])
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b")


def option_row(option: click.Option, ctx: click.Context) -> str:
    names = ", ".join(f"`{name}`" for name in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{name}`" for name in option.secondary_opts)
    extra = option.get_help_extra(ctx)  # what --help prints in brackets: the default, a number's range
    shown = f"`{extra['default']}`" if extra.get("default") else ""
    return f"| {names} | {option_type(option, extra.get('range'))} | {cell(option.help or '')} | {shown} |"


def option_type(option: click.Option, bounds: str | None) -> str:
    if option.is_flag:
        return "flag"
    if isinstance(option.type, click.Choice):
        kind = " &#124; ".join(f"`{choice}`" for choice in option.type.choices)
    elif bounds:
        kind = f"{option.type.name.removesuffix(' range')}, `{bounds}`"
    else:
        kind = option.type.name
    return f"{kind}, repeatable" if option.multiple else kind


def cell(text: str) -> str:
    """Text for a table cell: one line, its pipes escaped."""
    return " ".join(inspect.cleandoc(text).split()).replace("|", "&#124;")
