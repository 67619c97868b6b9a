"""Where a command runs: on this machine, on the `--remote` HOST, or over several clusters.

The `fray` group asks `elsewhere` when it resolves a subcommand
(fray.cli.main.LazyGroup), with its own `--home` and `--remote` as click parsed
them and the command's words, so the command line is never read again here:

- `--help` is this machine's: the same fray runs there, and help needs no host;
- `--remote a,b`, `--remote all`, or the user config's `remotes` with no
  `--remote`: `list` and `usage` show every cluster, and `status`, `logs`,
  `control` run on the one cluster that holds their run (fray.cli.clusters_view);
- `fray sync` and `fray remote` run here (sync reads the host itself);
- a host (`--remote HOST`, else FRAY_REMOTE, else `remote` in the user config,
  fray.remote.forward): the command runs there (fray.cli.remote_output), its
  output rendered here as a local run's.

A failure of the link itself (down, refused, dropped) is a RemoteError with
what to do, exit 255; a reader that went away ends the command quietly.
"""

from __future__ import annotations

from typing import Callable

import click

from fray.cli import clusters_view
from fray.remote import clusters, forward

HELP = frozenset({"--help", "-h"})
HERE = frozenset({"sync", "remote"})


def elsewhere(home: str | None, given: str | None, args: list[str]) -> click.Command | None:
    """The command that runs `args` (the command's words) away from here, or None: its own command runs here.

    `home` and `given` are what `--home` and `--remote` said (None: not given)."""
    if HELP & set(forward.command_words(args)) or args[0] in HELP:
        return None
    names = clusters_view.spanned(given, args)
    if names is not None:
        if clusters_view.fanned(args):
            return _command(args[0], lambda: clusters_view.show(names, args))
        found = clusters_view.locate(names, args)
        host = None if found == clusters.LOCAL else found
    elif args[0] in HERE:
        return None
    else:
        host = forward.target(given)
    if host is None:
        return None
    forwarded = [*(["--home", home] if home is not None else []), *args]
    return _command(args[0], lambda: _there(host, forwarded))


def _command(name: str, work: Callable[[], int]) -> click.Command:
    return click.Command(name, callback=work, add_help_option=False)


def _there(host: str, argv: list[str]) -> int:
    from fray.cli import remote_output

    try:
        return remote_output.run(host, argv)
    except BrokenPipeError:  # `fray status --remote H RUN | head`: as quiet as the local command
        from fray.cli import output

        return output.reader_gone()
    except Exception as exc:  # a failure of the link itself: exit 255 with what to do, never a traceback
        from fray.remote.errors import from_transport

        failure = from_transport(exc, host)
        if failure is None:
            raise
        raise failure from None

