"""Values of the directives that read what a job already does: its printed progress, its TensorBoard
folder, the arguments it resumes by. Pure.

    --progress-pattern REGEX        parse_progress_pattern  (repeatable: {text: text})
    --progress-tensorboard DIR      parse_folder
    --retry-args ARGS               parse_retry_args        (shell words)
    --retry-args-if-exists PATH     parse_relative_path

A pattern is compiled here, at submit, so a mistake is refused with its position before anything is
written; the wrapper (fray.wrapper.logscan) compiles the same text on the node. Its named groups say
what each match reports: `step` (a whole number), `loss`, `samples_per_sec`, `checkpoint_version`,
and any other name as a metric of that name.
"""

from __future__ import annotations

import re
import shlex

# The groups report.progress knows by name; any other named group is a metric of its own.
KNOWN_GROUPS = ("step", "loss", "samples_per_sec", "checkpoint_version")
_EXAMPLE = "'iter (?P<step>\\d+): loss (?P<loss>[0-9.]+)'"


def parse_progress_pattern(text: str) -> dict[str, str]:
    """A regular expression with at least one named group that cannot match an empty line."""
    try:
        compiled = re.compile(text)
    except re.error as exc:
        position = exc.pos if exc.pos is not None else len(text)
        raise ValueError(f"not a valid regular expression: {exc.msg} at position {position} "
                         f"(after {text[:position]!r}); check its brackets and escapes") from None
    if not compiled.groupindex:
        raise ValueError(f"it names no group, so a match reports nothing; name what it captures, like {_EXAMPLE}")
    if compiled.search("") is not None:
        raise ValueError("it matches an empty line, so every line of output would count as progress; "
                         f"anchor it on the text the job prints, like {_EXAMPLE}")
    return {text: text}


def parse_folder(text: str) -> str:
    """A folder, relative to the job's working directory or absolute."""
    if not text.strip():
        raise ValueError("expected a folder, like runs/ (relative to the job's working directory)")
    if "\0" in text or "\n" in text:
        raise ValueError("expected a folder on one line")
    return text


def parse_relative_path(text: str) -> str:
    """A file, relative to the job's working directory or absolute."""
    if not text.strip():
        raise ValueError("expected a file, like out/ckpt.pt (relative to the job's working directory)")
    if "\0" in text or "\n" in text:
        raise ValueError("expected a file on one line")
    return text


def parse_retry_args(text: str) -> list[str]:
    """The script's extra arguments as a shell would split them: `--init_from=resume`, `--resume --ckpt last`."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot split it into arguments: {exc} (check the quotes)") from None
    if not words:
        raise ValueError("expected the arguments to add, like '--init_from=resume'")
    return words
