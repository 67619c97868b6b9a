"""A MkDocs hook: the site builds with the `mkdocs` console script as with `python -m mkdocs`.

A console script runs with its own folder first on sys.path. pip puts the `fray` console script in
that folder too: a file named `fray`, which griffe (the API reference's loader, through mkdocstrings)
takes for a namespace package `fray` and then finds none of fray's modules in ("fray.errors could not
be found"). Without it griffe finds no `fray` on disk (the editable install maps `fray` to the folder
shepherd/, which it cannot follow), imports fray and reads the files the import names. So this hook
takes the script's own folder off sys.path at startup, before mkdocstrings makes its loader; nothing
the build imports lives there (`python -m mkdocs` has the current folder there instead, kept).
"""

from __future__ import annotations

import os
import sys


def on_startup(command: str, dirty: bool) -> None:
    scripts = os.path.dirname(os.path.realpath(sys.argv[0]))
    if sys.path and sys.path[0] and os.path.realpath(sys.path[0]) == scripts:
        del sys.path[0]
