"""`fray sync` and `fray remote trust HOST`: their click commands, so `--help` is click's like every other.

Both run before click, in fray.remote.forward (`sync` needs the host that
`--remote HOST` names, which forward takes off the command line first);
`fray sync --help` and `fray remote --help` reach click instead and need no
host, no daemon and no network. `remote trust` runs here as well as there:
one implementation, forward's.
"""

from __future__ import annotations

import click

from fray.errors import UsageError


@click.command("sync")
@click.option("--force", is_flag=True, help="Send every file again, not only what changed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-sync.json).")
def sync(force: bool, as_json: bool) -> None:
    """Copy this project (the current folder) to the --remote HOST's login node, as `fray submit --remote`
    does before it submits: content-addressed, only what changed is sent.

        fray sync --remote login1
    """
    raise UsageError("`fray sync` needs a host: --remote HOST (or FRAY_REMOTE)")


@click.group("remote")
def remote() -> None:
    """Set up a cluster's login node for `--remote HOST` (SSH, with your ~/.ssh/config)."""


@remote.command("trust")
@click.argument("host")
@click.option("--replace", is_flag=True,
              help="Replace the keys recorded for HOST (a reinstalled host), showing the old and new fingerprints.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schemas/cli-remote-trust.json).")
def trust(host: str, replace: bool, as_json: bool) -> None:
    """Record HOST's SSH key in known_hosts after showing its fingerprint (once per host)."""
    from fray.remote import forward

    flags = [*(["--replace"] if replace else []), *(["--json"] if as_json else [])]
    raise click.exceptions.Exit(forward.main(None, ["remote", "trust", host, *flags]))
