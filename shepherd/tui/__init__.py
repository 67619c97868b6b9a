"""The Textual dashboard: `fray tui` in a terminal, `fray web` in a browser, `fray nodes` on a terminal.

    app.py        FrayApp: screens, global keys, live refresh (watchfiles + timer)
    data.py       RunsModel (rows of every run, re-reading only what changed), EventFeed, Watcher
    actions.py    writing intent exactly as the CLI does (control, blacklist, config, submit)
    theme.py      256-colour dark/light themes and the 8-colour fallback
    web.py        `fray web`: textual-serve behind a token, bound to 127.0.0.1
    screens/      dashboard, detail, logs, nodes, queue, new_run, config, dialogs
    widgets/      run_table (virtual table), log_view, status_bar, script_view

It reads state files and writes intent; it never calls a backend. Only this
package imports textual, and only `fray tui`, `fray web` and `fray nodes` on a
terminal import this package, so every other command starts without it.
"""

from __future__ import annotations

from fray.state.layout import Home


def run(home: Home, start: str = "runs", run_id: str | None = None, theme: str | None = None) -> None:
    """Run the dashboard in this terminal until the user quits."""
    from fray.tui.app import FrayApp

    FrayApp(home, start=start, run_id=run_id, theme_name=theme).run()
