"""`fray web`: the same dashboard in a browser, through textual-serve, behind a token.

textual-serve runs one `fray tui` process per browser tab and relays its
terminal over a websocket. This wraps its server so that:

- it binds 127.0.0.1 unless told otherwise (reach it through an SSH tunnel);
- every page and websocket needs the token printed at start: the page as
  `/?token=T` (answered 403 without it), the websocket as `/ws/T`, so nothing
  reaches the app's process without it (compared in constant time);
- the page's websocket URL is built from the address the browser used, so a
  tunnel on another local port works;
- the app runs as `python -m fray.cli.main --home HOME tui`, the same
  program as in a terminal, reading the same FRAY_HOME (and asking the same
  clusters, `--clusters`, when `fray web` spans several).
"""

from __future__ import annotations

import hmac
import secrets
import shlex
import sys
from typing import Any

from fray.state.layout import Home

TOKEN_BYTES = 24


def app_command(home: Home, theme: str | None = None, clusters: list[str] | None = None) -> str:
    """The shell command textual-serve starts for each browser session."""
    argv = [sys.executable, "-m", "fray", "--home", str(home.root), "tui"]  # the fray command (fray.__main__)
    if theme:
        argv += ["--theme", theme]
    if clusters:
        argv += ["--clusters", ",".join(clusters)]
    return shlex.join(argv)


def urls(host: str, port: int, token: str) -> tuple[str, str]:
    """(the URL to open, the ssh tunnel command that reaches it from a laptop)."""
    shown = f"[{host}]" if ":" in host else host
    return (f"http://{shown}:{port}/?token={token}",
            f"ssh -N -L {port}:127.0.0.1:{port} <this login node>")


def make_server(home: Home, host: str, port: int, token: str, theme: str | None = None,
                clusters: list[str] | None = None) -> Any:
    """A textual-serve Server for the dashboard that demands `token` (tests start it in a thread)."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web
    from textual_serve.server import Server

    class TokenServer(Server):
        async def _make_app(self) -> web.Application:
            app = web.Application()
            aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
            app.add_routes([
                web.get("/", self.handle_index, name="index"),
                web.get("/ws/{token}", self.guarded_websocket, name="websocket"),
                web.static("/static", self.statics_path, name="static"),
            ])
            app.on_startup.append(self.on_startup)
            app.on_shutdown.append(self.on_shutdown)
            return app

        async def on_startup(self, app: web.Application) -> None:
            return None  # fray web prints its own banner

        def initialize_logging(self) -> None:
            import logging

            logging.basicConfig(level=logging.WARNING, format="fray web: %(message)s")

        @staticmethod
        def _allowed(given: str | None) -> bool:
            return given is not None and hmac.compare_digest(given.encode(), token.encode())

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            if not self._allowed(request.query.get("token")):
                return web.Response(status=403, text="fray web: open the URL printed at start; it carries the token.\n")
            scheme = "wss" if request.secure else "ws"
            context = {
                "font_size": 16,
                "app_websocket_url": f"{scheme}://{request.host}/ws/{token}",
                "config": {"static": {"url": "/static/"}},
                "application": {"name": f"fray: {home.root}"},
            }
            response = aiohttp_jinja2.render_template("app_index.html", request, context)
            response.headers["Cache-Control"] = "no-store"
            response.headers["Referrer-Policy"] = "no-referrer"
            return response

        async def guarded_websocket(self, request: web.Request) -> web.StreamResponse:
            if not self._allowed(request.match_info.get("token")):
                return web.Response(status=403, text="fray web: bad token\n")
            return await self.handle_websocket(request)

    return TokenServer(app_command(home, theme, clusters), host=host, port=port, title="fray")


def serve(home: Home, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          theme: str | None = None, clusters: list[str] | None = None) -> None:
    """Print where to connect, then serve until Ctrl-C."""
    import click

    token = token or secrets.token_urlsafe(TOKEN_BYTES)
    url, tunnel = urls(host, port, token)
    click.echo(f"fray web: serving the dashboard of {home.root}")
    click.echo(f"  open:   {url}")
    if host in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"  from your laptop, first: {tunnel}")
    else:
        click.echo(f"  warning: bound to {host}, not 127.0.0.1: anyone who can reach it and has the token "
                   "can act on your runs", err=True)
    click.echo("  the token is the password: do not share the URL. Ctrl-C stops the server.")
    sys.stdout.flush()
    make_server(home, host, port, token, theme, clusters).serve()
