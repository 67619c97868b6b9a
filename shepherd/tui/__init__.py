"""The Textual dashboard: `fray tui` in a terminal, `fray web` in a browser, `fray nodes` on a terminal.

    app.py        FrayApp: screens, global keys, live refresh (watchfiles + timer)
    entry.py      the `fray tui` and `fray web` click commands (named in fray.cli.main's table)
    actions.py    what a key means, acting through fray.ops as the CLI does, and the notification
    theme.py      256-colour dark/light themes and the 8-colour fallback
    web.py        `fray web`: textual-serve behind a token, bound to 127.0.0.1
    screens/      dashboard, detail, logs, nodes, queue, new_run, settings, dialogs, sweep (a sweep's curves),
                  remote_run (a run of another cluster)
    widgets/      run_table (virtual table), log_view, status_bar, script_view

What it shows and does comes from fray.ops (live rows: fray.ops.live; run
detail, nodes, queue, logs; control, ban, settings, submit): it only lays out
and takes keys, and never calls a backend. Only this package imports textual,
and only `fray tui`, `fray web` and `fray nodes` on a terminal import this
package, so every other command starts without it.
"""

from __future__ import annotations

from fray.state.layout import Home


def run(home: Home, start: str = "runs", run_id: str | None = None, theme: str | None = None,
        clusters: list[str] | None = None) -> None:
    """Run the dashboard in this terminal until the user quits (`clusters`: this machine and these hosts)."""
    from fray.tui.app import FrayApp

    FrayApp(home, start=start, run_id=run_id, theme_name=theme, clusters=clusters).run()
