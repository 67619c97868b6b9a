"""`fray ... --remote HOST`: which host, and running the command there.

`--remote HOST` is an option of the `fray` group (read from the command line
once, by fray.cli.arguments); without it FRAY_REMOTE, then `remote = "HOST"` in
~/.config/fray/config.toml, name a default host (`--remote a,b`, `--remote all`
and `remotes = [...]`: every cluster in one view, fray.remote.clusters). An
empty FRAY_REMOTE means "run here" (the remote side is given one, so a config
file there can never forward again).

The remote runs the same fray version (bootstrap makes sure), over the one SSH
session of fray.remote.session. A command whose answer is one JSON document
runs there with `--json`, and the CLI renders that document here with the
renderer a local run uses (fray.cli.remote_output), so human output is
identical to local and fits this terminal; under `--json`, and for streams and
screens, what the remote prints is passed through byte for byte. Either way its
exit code becomes ours. FRAY_REMOTE_HOME names the remote FRAY_HOME (else
`[remote_homes]` of the user config, fray.remote.user_config; default: the
remote's $FRAY_HOME, else ~/.fray there). `fray submit` first syncs the project
(the current folder) and runs the remote submit from the synced copy, SCRIPT
named by its absolute path inside it (fray.remote.submit_args), recording the
copy's path and content hash in the run (SYNCED_CODE_PATH, SYNCED_CODE_HASH).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fray.core.command_line import JSON_FLAG, separator_index
from fray.remote import user_config

if TYPE_CHECKING:
    from fray.remote.command import Result
    from fray.remote.sync import SyncResult

ENV_REMOTE = "FRAY_REMOTE"
ENV_REMOTE_HOME = user_config.ENV_REMOTE_HOME  # the remote FRAY_HOME, when not the remote's own default
# What a remote submit records in the run's env: the synced copy it ran (fray status shows them).
SYNCED_CODE_PATH, SYNCED_CODE_HASH = "SYNCED_CODE_PATH", "SYNCED_CODE_HASH"


def default_host() -> str | None:
    if ENV_REMOTE in os.environ:
        return os.environ[ENV_REMOTE].strip() or None
    value = user_config.load().get("remote")
    return value if isinstance(value, str) and value else None


def target(given: str | None) -> str | None:
    """The host a command runs on: what `--remote` said (None: not given), else the default; None: here.

    `--remote ''` (and an empty FRAY_REMOTE) is here, whatever the default."""
    return (default_host() if given is None else given) or None


def runs_here(given: str | None) -> bool:
    """Whether `fray list` runs on this machine alone: no host named or defaulted, and no `remotes` list of
    the user config to span (fray.remote.clusters; a remote session never spans)."""
    if given is not None or ENV_REMOTE in os.environ:
        return target(given) is None
    config = user_config.load()  # read once: this is the `fray list --json` fast path
    return not config.get("remote") and not config.get("remotes")


def interactive(words: list[str], argv: list[str]) -> bool:
    """Commands that draw on a terminal or follow output until interrupted need a PTY."""
    if JSON_FLAG in argv and words[:1] != ["logs"]:
        return False
    command = words[:1]
    on_terminal = sys.stdout.isatty()
    return command == ["tui"] or (command in (["logs"], ["submit"]) and on_terminal and _streams(argv)) or (
        command == ["nodes"] and len(words) == 1 and on_terminal
    )


def _streams(argv: list[str]) -> bool:
    """Whether the command prints until something ends (a run, a follow) rather than answering at once."""
    return bool({"-f", "--follow", "--wait"} & set(argv[: separator_index(argv)]))


def run(host: str, argv: list[str]) -> int:
    """Run `fray *argv` on `host`, printing what it prints there, byte for byte; its exit code.

    A failure to get there (unknown host, auth, network) is a FrayError for the
    caller to report, as text or, under --json, as JSON (fray.cli.failures).
    """
    words = command_words(argv)
    if interactive(words, argv) or _streams(argv):
        return _attached(host, argv, pty=interactive(words, argv))
    result = answer(host, argv)
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(result.stderr)
    sys.stderr.flush()
    return result.exit_code


def sync(host: str, project: Path, force: bool = False) -> SyncResult:
    """`project` copied to its code folder on `host` (`fray sync`; a remote submit does it first)."""
    from fray.remote import session

    return session.sync_project(host, project, home=_remote_home(host), force=force)


def command_words(argv: list[str]) -> list[str]:
    """The words before `--` that are not options: the command's path and its arguments."""
    return [w for w in argv[: separator_index(argv)] if not w.startswith("-")]


def answer(host: str, argv: list[str], timeout: float | None = None) -> Result:
    """What `fray *argv` prints on `host`, and its exit code (`timeout`: the command's, not a submit's sync).

    `fray submit` first syncs the project (the current folder) and runs inside the synced copy; the run
    records which code it ran (in its spec's env, shown by `fray status`; the workload sees it too).
    """
    from fray.remote.session import DEFAULT_TIMEOUT, run_fray

    if command_words(argv)[:1] != ["submit"]:
        return run_fray(host, argv, home=_remote_home(host), json=False, timeout=timeout or DEFAULT_TIMEOUT)
    argv, cwd = _synced_submit(host, argv)
    return run_fray(host, argv, home=_remote_home(host), json=False, cwd=cwd)


def _attached(host: str, argv: list[str], pty: bool) -> int:
    """Run a screen (on a PTY) or a stream (output relayed as it comes, no deadline); its exit code.

    Always over this process's own session: a master answers only whole results."""
    from fray.remote import session

    cwd = None
    if command_words(argv)[:1] == ["submit"]:
        argv, cwd = _synced_submit(host, argv)
    held = session.connect(host, _remote_home(host))
    return held.terminal(argv, cwd=cwd) if pty else held.stream(argv, cwd=cwd)


def _synced_submit(host: str, argv: list[str]) -> tuple[list[str], str]:
    """Sync the project (the current folder; a SCRIPT outside it is refused first) and return the submit's
    argv for the remote, with SCRIPT named inside the synced copy and the run recording which code it ran
    (the copy's path and hash), and the copy's folder to run it in."""
    from fray.remote.submit_args import in_copy, locate

    located = locate(argv, Path.cwd(), Path.cwd())
    copied = sync(host, Path.cwd(), force="--force" in argv)
    argv = in_copy(argv, located, copied.remote_path)
    cut = separator_index(argv)
    recorded = ["--env", f"{SYNCED_CODE_PATH}={copied.remote_path}", "--env", f"{SYNCED_CODE_HASH}={copied.tree_hash}"]
    return [*argv[:cut], *recorded, *argv[cut:]], copied.remote_path


def _remote_home(host: str) -> str | None:
    return user_config.remote_home(host)
