"""`fray tui` and `fray web`: the dashboard in this terminal, or served to a browser.

These click commands belong to the dashboard, not to the CLI: the top-level
group (fray.cli.main) lists them in its table of lazy subcommands as
"fray.tui.entry:tui" and "fray.tui.entry:web", a name it resolves only
when the command runs. So neither front end imports the other: the CLI knows
the dashboard by name, as a shell knows a program, and `fray nodes` on a
terminal opens it by invoking the `tui` command it finds in that table.

Both import textual (and textual-serve) only when they run, never at import
time: listing commands and `fray --help` stay light.
"""

from __future__ import annotations

import click

from fray.state.layout import Home

THEMES = click.Choice(["dark", "light", "ansi"])
# Set by fray.cli.clusters_view from `--remote a,b`, `--remote all` or the user config's `remotes`
# (`local` first); hidden: people name the hosts with --remote.
CLUSTERS = click.option("--clusters", hidden=True, default=None, metavar="LOCAL,HOST,...",
                        help="Show the runs of these clusters too.")
THEME_HELP = "Colours: dark or light (256 colours), or ansi (the terminal's own 8/16). Default: ansi on an " \
             "8-colour terminal, else dark; $FRAY_TUI_THEME sets it too."


@click.command("tui")
@click.argument("run", required=False)
@click.option("--screen", type=click.Choice(["runs", "queue", "nodes"]), default="runs", show_default=True,
              help="The screen to open on.")
@click.option("--theme", type=THEMES, help=THEME_HELP)
@CLUSTERS
@click.pass_context
def tui(ctx: click.Context, run: str | None, screen: str, theme: str | None, clusters: str | None) -> None:
    """A live dashboard of every run: status, details, logs, nodes, queue; act on runs from it.

    RUN opens that run's details first (an id, a unique prefix of one, or a name).
    Press ? inside for the keys. With `--remote a,b`, `--remote all` or the user config's
    `remotes`, it shows every cluster's runs with a CLUSTER column, and acts on each
    run on its own cluster.
    """
    from fray.ops import lookup
    from fray import tui as dashboard

    home = _home(ctx)
    run_id = lookup.resolve(home, run) if run else None
    dashboard.run(home, start=screen, run_id=run_id, theme=theme, clusters=_clusters(clusters))


@click.command("web")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="The port to serve on.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to bind. Keep the default and reach it through an SSH tunnel.")
@click.option("--token", metavar="TOKEN", help="The access token (default: a new random one, printed at start).")
@click.option("--theme", type=THEMES, help=THEME_HELP)
@CLUSTERS
@click.pass_context
def web(ctx: click.Context, port: int, host: str, token: str | None, theme: str | None,
        clusters: str | None) -> None:
    """Serve the dashboard to a browser (textual-serve), protected by a token.

    It binds 127.0.0.1 by default: from your laptop, tunnel to it with
    `ssh -N -L 8000:127.0.0.1:8000 LOGIN_NODE`, then open the URL it prints.
    """
    from fray.tui import web as serving

    serving.serve(_home(ctx), host=host, port=port, token=token, theme=theme, clusters=_clusters(clusters))


def _home(ctx: click.Context) -> Home:
    """FRAY_HOME as the top-level `fray --home` resolved it (its context object carries `home`)."""
    return ctx.find_root().obj.home  # type: ignore[no-any-return]


def _clusters(text: str | None) -> list[str] | None:
    return [name for name in text.split(",") if name] if text else None
