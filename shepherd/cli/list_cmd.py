"""`fray list`: every run with its status, newest first, and the daemon's health.

Read-only: it never starts a daemon nor creates FRAY_HOME. A run whose files
cannot be read shows as error_unknown with the reason instead of failing the
whole listing (views.list_view). The text is fray.cli.list_render's.
"""

from __future__ import annotations

import click

from fray.cli import output
from fray.cli.list_render import render_list
from fray.cli.main import home_of
from fray.ops import views


@click.command("list")
@click.option("--active", is_flag=True, help="Only runs that have not ended.")
@click.option("--limit", type=click.IntRange(min=0), metavar="N", help="Show at most N runs (the newest).")
@click.option("--tree", is_flag=True, help="Show jobs launched through the cluster API under their parent, and runs "
              "started --after others under their upstream (⇠ names every upstream).")
@click.option("--group", metavar="GROUP", help="Only the runs of this group (a sweep), in index order. GROUP is "
              "a group id, a unique prefix of one, or the sweep's name.")
@output.json_option("Print JSON (schemas/cli-list.json).")
@click.pass_context
def list_runs(ctx: click.Context, active: bool, limit: int | None, tree: bool, group: str | None,
              as_json: bool) -> None:
    """Every run with its status, newest first, and the daemon's health.

    A sweep (`fray submit --sweep`) shows as one row counting its runs per
    status; `--group GROUP` lists its runs.
    """
    output.emit(views.list_view(home_of(ctx), include_ended=not active, limit=limit, tree=tree, group=group),
                as_json, render_list)
