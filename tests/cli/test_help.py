"""Help lists everything: `fray --help` names every command and global option, and every command's
`--help` (subcommands too) is click's, working without a host, a daemon or even a FRAY_HOME."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from fray.cli.main import COMMANDS, cli
from tests.conftest import run_fray


def command_paths() -> list[tuple[str, ...]]:
    """Every command path: `submit`, `control stop`, `remote trust`, ..."""
    found: list[tuple[str, ...]] = []

    def walk(path: tuple[str, ...], command: click.Command) -> None:
        found.append(path)
        if isinstance(command, click.Group):
            context = click.Context(command)
            for name in command.list_commands(context):
                walk((*path, name), command.get_command(context, name))

    context = click.Context(cli)
    for name in COMMANDS:
        walk((name,), cli.get_command(context, name))
    return found


def test_fray_help_lists_every_command_and_global_option(tmp_path: Path) -> None:
    proc = run_fray("--help", env={"FRAY_REMOTE": ""})
    assert proc.returncode == 0
    for name in (*COMMANDS, "wait", "sync", "remote"):
        assert f"\n  {name} " in proc.stdout, name
    for option in ("--home DIR", "--remote HOST", "--version", "--help"):
        assert option in proc.stdout, option


def test_every_commands_help_works_without_a_host_or_daemon(tmp_path: Path) -> None:
    home = tmp_path / "no home yet"
    paths = command_paths()
    assert ("sync",) in paths and ("remote", "trust") in paths and ("wait",) in paths and len(paths) > 20
    with ThreadPoolExecutor(2) as pool:  # two real `fray` processes at a time: each is a Python start, ~0.3 s
        procs = list(pool.map(lambda path: run_fray(*path, "--help", home=home, env={"FRAY_REMOTE": ""}), paths))
    for path, proc in zip(paths, procs):
        assert proc.returncode == 0, (path, proc.stderr)
        assert proc.stdout.startswith(f"Usage: fray {' '.join(path)} "), (path, proc.stdout[:200])
    assert not home.exists()  # no FRAY_HOME made, so no daemon started
