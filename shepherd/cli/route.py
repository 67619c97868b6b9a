"""Where a command runs: on this machine, on the `--remote` HOST, or over several clusters.

The `fray` group asks `resolve` when it resolves a subcommand
(fray.cli.main.LazyGroup), with its own `--home` and `--remote` as click parsed
them and the command's words, so the command line is never read again here:

- `--help` is this machine's: the same fray runs there, and help needs no host;
- `--remote a,b`, `--remote all`, or the user config's `remotes` with no
  `--remote`: `list` and `usage` show every cluster, and `status`, `logs`,
  `control` run on the one cluster that holds their run, and the dashboard runs
  here told which clusters to show (fray.cli.clusters_view);
- `fray sync` and `fray remote` run here (sync reads the host itself);
- a host (`--remote HOST`, else FRAY_REMOTE, else `remote` in the user config,
  fray.remote.forward): the command runs there (fray.cli.remote_output), its
  output rendered here as a local run's.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import click

from fray.cli import clusters_view
from fray.core.command_line import own_words
from fray.remote import clusters, forward

HELP = frozenset({"--help", "-h"})
HERE = frozenset({"sync", "remote"})


def resolve(home: str | None, given: str | None, args: list[str]) -> tuple[click.Command | None, list[str]]:
    """(the command that runs `args` away from here, []), or (None, the args its own command runs here with).

    `args` is the subcommand's name, then its words; `home` and `given` are what `--home` and `--remote`
    said (None: not given)."""
    name = args[0]
    if HELP & set(own_words(args)):
        return None, args
    if name in clusters_view.DASHBOARD and any(w == "--clusters" or w.startswith("--clusters=") for w in args):
        return None, args  # `fray web`'s own dashboard process: already told
    names = clusters_view.spanned(given, name)
    if names is not None:
        if name in clusters_view.FANNED:
            return _command(name, partial(clusters_view.show, names, args)), []
        if name in clusters_view.DASHBOARD:  # here, told the clusters: it asks the hosts itself
            return None, [*args, "--clusters", ",".join(names)]
        found = clusters_view.locate(names, args)
        host = None if found == clusters.LOCAL else found
    elif name in HERE:
        return None, args
    else:
        host = forward.target(given)
    if host is None:
        return None, args
    from fray.cli import remote_output

    forwarded = [*(["--home", home] if home is not None else []), *args]
    return _command(name, partial(remote_output.run, host, forwarded)), []


def _command(name: str, work: Callable[[], int]) -> click.Command:
    return click.Command(name, callback=work, add_help_option=False)
