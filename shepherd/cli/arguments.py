"""Global options in any position: `fray nodes --json list` means `fray nodes list --json`.

`--home DIR` belongs to the `fray` group and `--json` to every command; people
put them wherever they think of them. Before click parses anything, `--home`
is moved to the front and `--json` to the end of the command's own words,
never past a `--` (what follows it is the workload's, untouched). Pure, but for
`fray_prefix`: how a hint spells the command for this FRAY_HOME.
"""

from __future__ import annotations

from typing import NamedTuple

from fray.state.layout import Home

SEPARATOR = "--"


class Invocation(NamedTuple):
    args: list[str]  # what click parses
    as_json: bool  # --json was given anywhere: errors are JSON too


def normalize(argv: list[str]) -> Invocation:
    """`argv` with the global options where click expects them, and whether --json was asked for."""
    cut = argv.index(SEPARATOR) if SEPARATOR in argv else len(argv)
    words, tail = argv[:cut], argv[cut:]
    front: list[str] = []
    rest: list[str] = []
    as_json = False
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--home" and index + 1 < len(words):
            front += [word, words[index + 1]]
            index += 2
            continue
        if word.startswith("--home="):
            front.append(word)
        elif word == "--json":
            as_json = True
        else:
            rest.append(word)
        index += 1
    command = [*front, *rest]
    if as_json and _has_subcommand(rest):
        command.append("--json")  # a bare `fray --json` has no command to give it to
    return Invocation(command + tail, as_json)


def _has_subcommand(words: list[str]) -> bool:
    return any(not word.startswith("-") for word in words)


def fray_prefix(home: Home) -> str:
    """`fray`, plus `--home DIR` when `home` is not the one a bare `fray` would use (for hints)."""
    if Home.resolve(None).root == home.root:
        return "fray"
    import shlex

    return f"fray --home {shlex.quote(str(home.root))}"
