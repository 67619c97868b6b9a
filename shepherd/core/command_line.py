"""The words every fray command line shares, spelled once: the `--` after which the workload's own arguments
begin, and `--json`. The CLI parses with them (fray.cli.arguments, its `json_option`), and `--remote` carries
a command line to another host with them (fray.remote.forward, fray.remote.submit_args).

Pure: lists of words in, lists of words out.
"""

from __future__ import annotations

SEPARATOR = "--"  # what follows is the workload's: never read as fray's options
JSON_FLAG = "--json"


def separator_index(argv: list[str]) -> int:
    """Where the workload's own arguments begin (the `--`), or the end."""
    return argv.index(SEPARATOR) if SEPARATOR in argv else len(argv)


def own_words(argv: list[str]) -> list[str]:
    """The words before `--`: fray's own, the command and its options."""
    return argv[: separator_index(argv)]


def asks_json(argv: list[str]) -> bool:
    """`--json` among fray's own words (after `--` it is the workload's)."""
    return JSON_FLAG in own_words(argv)


def with_json(argv: list[str]) -> list[str]:
    """`argv` asking for JSON: `--json` goes before `--`, where the script's own arguments begin."""
    cut = separator_index(argv)
    return argv if JSON_FLAG in argv[:cut] else [*argv[:cut], JSON_FLAG, *argv[cut:]]
