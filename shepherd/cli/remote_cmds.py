"""`fray sync` and `fray remote trust HOST`: the commands that set up and feed a login node, run here.

`fray sync` copies the project to the host that `--remote HOST` (or its
default) names; `fray remote trust HOST` records the host's key. Both need a
host only when they run: their `--help` needs no host, no daemon and no network.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from fray.cli import output
from fray.errors import UsageError


@click.command("sync")
@click.option("--force", is_flag=True, help="Send every file again, not only what changed.")
@output.json_option("Print JSON (schemas/cli-sync.json).")
@click.pass_context
def sync(ctx: click.Context, force: bool, as_json: bool) -> None:
    """Copy this project (the current folder) to the --remote HOST's login node, as `fray submit --remote`
    does before it submits: content-addressed, only what changed is sent.

        fray sync --remote login1
    """
    from fray.cli.main import remote_of
    from fray.remote import forward

    host = forward.target(remote_of(ctx))
    if host is None:
        raise UsageError("`fray sync` needs a host: --remote HOST (or FRAY_REMOTE)")
    here = Path.cwd()
    copied = forward.sync(host, here, force=force)
    if as_json:
        click.echo(json.dumps({"host": host, "local_path": str(here), "remote_path": copied.remote_path,
                               "sent": list(copied.sent), "removed": list(copied.removed),
                               "bytes_sent": copied.bytes_sent, "tree_hash": copied.tree_hash}))
    else:
        click.echo(f"synced {here} to {host}:{copied.remote_path} ({len(copied.sent)} sent, "
                   f"{len(copied.removed)} removed, tree {copied.tree_hash[:12]})")


@click.group("remote")
def remote() -> None:
    """Set up a cluster's login node for `--remote HOST` (SSH, with your ~/.ssh/config)."""


@remote.command("trust")
@click.argument("host")
@click.option("--replace", is_flag=True,
              help="Replace the keys recorded for HOST (a reinstalled host), showing the old and new fingerprints.")
@output.json_option("Print JSON (schemas/cli-remote-trust.json).")
def trust(host: str, replace: bool, as_json: bool) -> None:
    """Record HOST's SSH key in known_hosts after showing its fingerprint (once per host)."""
    from fray.remote import host_keys
    from fray.remote.ssh_config import resolve

    done = host_keys.trust(resolve(host), replace=replace)
    if as_json:
        click.echo(json.dumps({"host": host, "known_hosts": done.known_hosts, "name": done.name,
                               "key_type": done.key_type, "fingerprint": done.fingerprint, "added": done.added,
                               "replaced": [{"key_type": kind, "fingerprint": fp} for kind, fp in done.replaced]}))
    elif done.replaced:
        click.echo(f"replaced the key of {host} ({done.name}) in {done.known_hosts}")
        for kind, fp in done.replaced:
            click.echo(f"  old: {kind} {fp}")
        click.echo(f"  new: {done.key_type} {done.fingerprint}")
    else:
        state = "trusted" if done.added else "already trusted"
        click.echo(f"{state} {host} ({done.name}): {done.key_type} {done.fingerprint} in {done.known_hosts}")
