"""The command line, read once: the global options in any position, `fray nodes --json list` = `fray nodes list --json`.

`--home DIR` and `--remote HOST` belong to the `fray` group and `--json` to
every command; people put them wherever they think of them. This is the one
reading of the raw command line, before click (and before the `fray list
--json` fast path, fray.cli.entry): `--home` and `--remote` are moved to the
front, where click parses them as the group's options, and `--json` to the end
of the command's own words, never past a `--` (what follows it is the
workload's, untouched). The last of a repeated option wins, as in click. Pure,
but for `fray_prefix`: how a hint spells the command for this FRAY_HOME.
"""

from __future__ import annotations

from typing import NamedTuple

from fray.state.layout import Home

from fray.core.command_line import JSON_FLAG, separator_index
GLOBAL_OPTIONS = ("--home", "--remote")


class Invocation(NamedTuple):
    args: list[str]  # what click parses: the global options first, then `command`
    as_json: bool  # --json was given anywhere: errors are JSON too
    command: list[str]  # the command's own words (`--json` at their end), then `--` and the workload's
    home: str | None = None  # --home, when given
    remote: str | None = None  # --remote, when given ('' means here, whatever the default)


def normalize(argv: list[str]) -> Invocation:
    """`argv` with the global options where click expects them, and what they said."""
    cut = separator_index(argv)
    words, tail = argv[:cut], argv[cut:]
    given: dict[str, str] = {}
    front: list[str] = []
    rest: list[str] = []
    as_json = False
    index = 0
    while index < len(words):
        word = words[index]
        name, equals, value = word.partition("=")
        if word in GLOBAL_OPTIONS:
            if index + 1 == len(words):  # no value: click says so ("Option '--remote' requires an argument")
                return Invocation([*front, word], as_json or JSON_FLAG in words, [])
            given[word] = words[index + 1]
            front += [word, words[index + 1]]
            index += 2
            continue
        if equals and name in GLOBAL_OPTIONS:
            given[name] = value
            front.append(word)
        elif word == JSON_FLAG:
            as_json = True
        else:
            rest.append(word)
        index += 1
    command = [*rest, JSON_FLAG] if as_json and _has_subcommand(rest) else rest  # a bare `fray --json`: no command
    return Invocation([*front, *command, *tail], as_json, [*command, *tail], given.get("--home"), given.get("--remote"))


def _has_subcommand(words: list[str]) -> bool:
    return any(not word.startswith("-") for word in words)


def fray_prefix(home: Home) -> str:
    """`fray`, plus `--home DIR` when `home` is not the one a bare `fray` would use (for hints)."""
    if Home.resolve(None).root == home.root:
        return "fray"
    import shlex

    return f"fray --home {shlex.quote(str(home.root))}"
