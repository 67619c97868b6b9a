"""`fray`: the command group, its global options `--home` and `--remote`, and error handling.

Subcommands load lazily: `fray --help` imports none of them, and `fray list`
imports only list_cmd and what it needs, never textual, paramiko, cloudpickle,
the daemon or the backends. Each subcommand is named here as "module:attribute"
with its one-line help, so listing them costs no import. `tui` and `web` are the
dashboard's own commands (fray.tui.entry): named here, never imported by the
CLI's modules, so the two front ends stay apart.

Errors: a `FrayError` prints `fray: error: <message>` on stderr and exits with
its `exit_code` (2); click's usage errors exit 2 with a "Did you mean" for a
mistyped subcommand; a run waited for that does not succeed exits 1. Under
--json each is one JSON object on stdout instead (fray.cli.failures).

`--home`, `--remote` and `--json` may stand anywhere before `--`: the command
line is read once (fray.cli.arguments, by the console script fray.cli.entry or
by `run`) and then parsed by click. Where a subcommand runs (here, on the
--remote HOST, over several clusters) is decided as click resolves it
(fray.cli.route), from the group's options as click parsed them.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any

import click

from fray.version import __version__
from fray.cli import arguments, failures
from fray.cli.arguments import fray_prefix  # noqa: F401 - the commands' hints import it from here
from fray.errors import FrayError
from fray.state.layout import Home

# name -> ("module:attribute", one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "submit": ("fray.cli.submit:submit", "Submit a script as a run; fray keeps it making progress."),
    "list": ("fray.cli.list_cmd:list_runs", "Every run with its status, newest first."),
    "status": ("fray.cli.status_cmd:status", "One run in full: status, attempts, failures, events."),
    "logs": ("fray.cli.logs_cmd:logs", "Print (or follow) a run's output."),
    "wait": ("fray.cli.wait_cmd:wait_cmd", "Wait for runs or a group to end, telling each change."),
    "control": ("fray.cli.control_cmd:control", "Stop, restart, pause a run; tune, pause or terminate its workload."),
    "daemon": ("fray.cli.daemon_cmd:daemon", "Start, stop or inspect the daemon that serves FRAY_HOME."),
    "doctor": ("fray.cli.doctor_cmd:doctor", "Check the cluster as fray needs it: file system, locks, daemon, nodes, clocks."),
    "nodes": ("fray.cli.nodes_cmd:nodes", "The nodes runs can use; ban and unban them."),
    "actors": ("fray.cli.actors_cmd:actors", "The actors jobs registered, by namespace and name."),
    "partitions": ("fray.cli.partitions_cmd:partitions_cmd", "The Slurm partitions and their GPUs, as fray chooses them."),
    "tpus": ("fray.cli.tpus_cmd:tpus_cmd", "The TPU accelerator types and zones configured, with hosts and chips."),
    "audit": ("fray.cli.audit_cmd:audit_group", "Verify or show the log of every control action."),
    "usage": ("fray.cli.usage_cmd:usage_cmd", "CPU-, GPU- and TPU chip-hours, time lost by cause, and goodput."),
    "plot": ("fray.cli.plot_cmd:plot", "A run's loss (or any metric) by step and by wall time, across attempts."),
    "tui": ("fray.tui.entry:tui", "A live dashboard of runs in the terminal (Textual)."),
    "web": ("fray.tui.entry:web", "Serve the dashboard to a browser, behind a token."),
    "sync": ("fray.cli.remote_cmds:sync", "Copy this project to the --remote HOST (as submit --remote does)."),
    "remote": ("fray.cli.remote_cmds:remote", "Set up a login node for --remote HOST: `remote trust HOST`."),
}


@dataclass(frozen=True)
class State:
    """What every subcommand receives as click's `obj`."""

    home: Home
    remote: str | None = None  # what --remote said (None: not given; fray.remote.forward.target applies the default)


def home_of(ctx: click.Context) -> Home:
    return ctx.find_object(State).home  # type: ignore[union-attr]


def remote_of(ctx: click.Context) -> str | None:
    """What --remote said (None: not given)."""
    return ctx.find_object(State).remote  # type: ignore[union-attr]


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when used."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.lazy) + sorted(set(self.commands) - set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        if name not in self.lazy:
            return None
        module_name, attribute = self.lazy[name][0].split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        self.commands[name] = command
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """The subcommand to run: its own, or the one that runs it elsewhere (fray.cli.route)."""
        name = args[0]
        known = name in self.lazy or name in self.commands  # no import: a forwarded command never loads here
        if not known and not name.startswith("-") and not ctx.resilient_parsing:
            import difflib

            guesses = difflib.get_close_matches(name, self.list_commands(ctx), n=2, cutoff=0.7)
            hint = f" Did you mean {' or '.join(repr(g) for g in guesses)}?" if guesses else ""
            raise click.UsageError(f"No such command {name!r}.{hint}", ctx)
        if known and not ctx.resilient_parsing:
            from fray.cli import route

            there, args = route.resolve(ctx.params.get("home"), ctx.params.get("remote"), args)
            if there is not None:
                return name, there, []
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy[name][1]) for name in self.lazy]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (FrayError, OSError) as exc:
            exit_code = failures.report(exc)
            if exit_code is None:
                raise  # click handles a closed pipe (`fray list | head`)
            raise click.exceptions.Exit(exit_code) from None


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Start with `fray submit train.py`, then `fray list`. Every command takes --json, and "
                    "--remote HOST to run on a cluster's login node over SSH (`fray remote trust HOST` once; "
                    "`fray sync --remote HOST` copies the project).")
@click.option("--home", metavar="DIR", help="The state directory (default: $FRAY_HOME, else ~/.fray).")
@click.option("--remote", metavar="HOST",
              help="Run the command on HOST's login node over SSH (default: $FRAY_REMOTE, else `remote` in "
                   "~/.config/fray/config.toml; '' for this machine). `a,b` or `all` (the config's `remotes`): "
                   "list and usage over every cluster, status, logs and control on the run's own.")
@click.version_option(__version__, "-V", "--version", prog_name="fray")
@click.pass_context
def cli(ctx: click.Context, home: str | None, remote: str | None) -> None:
    """fray keeps ML jobs making progress: it submits them, watches their
    heartbeats and restarts what has stopped, elsewhere when the node is at fault.

    --home, --remote and --json may stand anywhere before `--`.
    """
    ctx.obj = State(Home.resolve(home), remote)


def run(argv: list[str]) -> int:
    """Run `fray` with `argv` (global options in any position); its exit code."""
    return run_parsed(arguments.normalize(argv))


def run_parsed(invocation: arguments.Invocation) -> int:
    """Run `fray` on the command line as fray.cli.arguments read it; its exit code.

    Every failure is reported here or in `LazyGroup.invoke`: as text on stderr,
    or, when --json was given anywhere, as one JSON object on stdout.
    """
    failures.json_errors.set(invocation.as_json)
    try:
        result = cli.main(args=invocation.args, prog_name="fray", standalone_mode=False)
    except click.ClickException as exc:
        return failures.report_usage(exc)
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    return result if isinstance(result, int) else 0


def main(argv: list[str] | None = None) -> None:
    """`fray` through click, then exit (the console script is `fray.cli.entry:main`)."""
    raise SystemExit(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    # `python -m fray.cli.main` runs this file as a second module, __main__, but the
    # subcommands share the importable fray.cli.main (its State, its group): run that one.
    from fray.cli import main as _shared

    _shared.main()
