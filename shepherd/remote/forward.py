"""`fray ... --remote HOST`: which host, and running the command there.

`--remote HOST` (or `--remote=HOST`) may stand anywhere before `--`; without
it FRAY_REMOTE, then `remote = "HOST"` in ~/.config/fray/config.toml, name a
default host (`--remote a,b`, `--remote all` and `remotes = [...]`: every cluster
in one view, fray.remote.clusters). An empty FRAY_REMOTE means "run here" (the remote side is given
one, so a config file there can never forward again).

The remote runs the same fray version (bootstrap makes sure). A command
whose answer is one JSON document runs there with `--json`, and the CLI renders
that document here with the renderer a local run uses (fray.cli.remote_output),
so human output is identical to local and fits this terminal; under `--json`,
and for streams and screens, what the remote prints is passed through byte for
byte. Either way its exit code becomes ours. FRAY_REMOTE_HOME names the remote FRAY_HOME (else `[remote_homes]` of the
user config, fray.remote.user_config; default: the remote's $FRAY_HOME, else
~/.fray there). `fray submit` first syncs the project
(the current folder) and runs the remote submit from the synced copy, SCRIPT named by
its absolute path inside it (fray.remote.submit_args), recording the copy's path and
content hash in the run (SYNCED_CODE_PATH, SYNCED_CODE_HASH).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fray.remote import user_config

if TYPE_CHECKING:
    from fray.remote.command import Result

SEPARATOR = "--"
ENV_REMOTE = "FRAY_REMOTE"
ENV_REMOTE_HOME = user_config.ENV_REMOTE_HOME  # the remote FRAY_HOME, when not the remote's own default
# What a remote submit records in the run's env: the synced copy it ran (fray status shows them).
SYNCED_CODE_PATH, SYNCED_CODE_HASH = "SYNCED_CODE_PATH", "SYNCED_CODE_HASH"


def default_host() -> str | None:
    if ENV_REMOTE in os.environ:
        return os.environ[ENV_REMOTE].strip() or None
    value = user_config.load().get("remote")
    return value if isinstance(value, str) and value else None


def split(argv: list[str]) -> tuple[str | None, list[str]]:
    """(the host to run on or None, argv without the --remote option)."""
    host, rest = given(argv)
    return (default_host() if host is None else host) or None, rest  # `--remote ''`: here, whatever the default


def given(argv: list[str]) -> tuple[str | None, list[str]]:
    """(what --remote said, or None, argv without the --remote option): no default applied."""
    cut = _cut(argv)
    words, tail = argv[:cut], argv[cut:]
    host: str | None = None
    rest: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--remote" and index + 1 < len(words):
            host = words[index + 1]
            index += 2
            continue
        if word.startswith("--remote="):
            host = word.split("=", 1)[1]
        else:
            rest.append(word)
        index += 1
    return host, rest + tail


def interactive(words: list[str], argv: list[str]) -> bool:
    """Commands that draw on a terminal or follow output until interrupted need a PTY."""
    if "--json" in argv and words[:1] != ["logs"]:
        return False
    command = words[:1]
    on_terminal = sys.stdout.isatty()
    return command == ["tui"] or (command in (["logs"], ["submit"]) and on_terminal and _streams(argv)) or (
        command == ["nodes"] and len(words) == 1 and on_terminal
    )


def _streams(argv: list[str]) -> bool:
    """Whether the command prints until something ends (a run, a follow) rather than answering at once."""
    return bool({"-f", "--follow", "--wait"} & set(argv[: _cut(argv)]))


def handles(host: str | None, argv: list[str]) -> bool:
    """Whether this module runs the command: any command with a host, `fray sync`, `fray remote`
    (their --help is click's: fray.cli.remote_cmds)."""
    if host is None and ({"--help", "-h"} & set(argv[: _cut(argv)]) or argv[:1] == ["remote"] and len(argv) != 3):
        return False  # click says what `fray remote` takes
    return host is not None or argv[:1] in (["sync"], ["remote"])


def main(host: str | None, argv: list[str]) -> int:
    """Run `fray *argv` on `host`, printing what it prints; its exit code.

    A failure to get there (unknown host, auth, network) is a FrayError for the
    caller to report, as text or, under --json, as JSON (fray.cli.failures).
    """
    from fray.errors import UsageError

    if argv[:1] == ["remote"]:
        return _remote_command(argv[1:])
    if host is None:
        raise UsageError("`fray sync` needs a host: --remote HOST (or FRAY_REMOTE)")
    return _forward(host, argv)


TRUST_USAGE = "usage: fray remote trust HOST [--replace] [--json]   (record HOST's key in known_hosts)"


def _remote_command(words: list[str]) -> int:
    """`fray remote trust HOST [--replace]`: record the host's key after showing its fingerprint.

    `--replace` first removes the keys recorded for the host (a reinstalled host), showing old and new.
    """
    options = {w for w in words if w.startswith("-")}
    names = [w for w in words if not w.startswith("-")]
    if len(names) != 2 or names[0] != "trust" or options - {"--replace", "--json"}:
        print(TRUST_USAGE, file=sys.stderr)
        return 2
    from fray.remote import hosts
    from fray.remote.ssh_config import resolve

    host = names[1]
    done = hosts.trust(resolve(host), replace="--replace" in options)
    if "--json" in options:
        print(json.dumps({"host": host, "known_hosts": done.known_hosts, "name": done.name,
                          "key_type": done.key_type, "fingerprint": done.fingerprint, "added": done.added,
                          "replaced": [{"key_type": kind, "fingerprint": fp} for kind, fp in done.replaced]}))
        return 0
    if done.replaced:
        print(f"replaced the key of {host} ({done.name}) in {done.known_hosts}")
        for kind, fp in done.replaced:
            print(f"  old: {kind} {fp}")
        print(f"  new: {done.key_type} {done.fingerprint}")
    else:
        state = "trusted" if done.added else "already trusted"
        print(f"{state} {host} ({done.name}): {done.key_type} {done.fingerprint} in {done.known_hosts}")
    return 0


def _cut(argv: list[str]) -> int:
    """Where the script's own arguments begin (after `--`), or the end."""
    return argv.index(SEPARATOR) if SEPARATOR in argv else len(argv)


def command_words(argv: list[str]) -> list[str]:
    """The words before `--` that are not options: the command's path and its arguments."""
    return [w for w in argv[: _cut(argv)] if not w.startswith("-")]


def with_json(argv: list[str]) -> list[str]:
    """`argv` asking for JSON: `--json` goes before `--`, where the script's own arguments begin."""
    cut = _cut(argv)
    return argv if "--json" in argv[:cut] else [*argv[:cut], "--json", *argv[cut:]]


def _forward(host: str, argv: list[str]) -> int:
    from fray.remote.run import sync_project

    words = command_words(argv)
    if words[:1] == ["sync"]:
        copied = sync_project(host, Path.cwd(), home=_remote_home(host), force="--force" in argv)
        if "--json" in argv:
            print(json.dumps({"host": host, "local_path": str(Path.cwd()), "remote_path": copied.remote_path,
                              "sent": list(copied.sent), "removed": list(copied.removed),
                              "bytes_sent": copied.bytes_sent, "tree_hash": copied.tree_hash}))
        else:
            print(f"synced {Path.cwd()} to {host}:{copied.remote_path} ({len(copied.sent)} sent, "
                  f"{len(copied.removed)} removed, tree {copied.tree_hash[:12]})")
        return 0
    if interactive(words, argv) or _streams(argv):
        return _attached(host, argv, pty=interactive(words, argv))
    result = answer(host, argv)
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(result.stderr)
    sys.stderr.flush()
    return result.exit_code


def answer(host: str, argv: list[str], timeout: float | None = None) -> Result:
    """What `fray *argv` prints on `host`, and its exit code (`timeout`: the command's, not a submit's sync).

    `fray submit` first syncs the project (the current folder) and runs inside the synced copy; the run
    records which code it ran (in its spec's env, shown by `fray status`; the workload sees it too).
    """
    from fray.remote.run import DEFAULT_TIMEOUT, run_fray

    if command_words(argv)[:1] != ["submit"]:
        return run_fray(host, argv, home=_remote_home(host), json=False, timeout=timeout or DEFAULT_TIMEOUT)
    argv, cwd = _synced_submit(host, argv)
    return run_fray(host, argv, home=_remote_home(host), json=False, cwd=cwd)


def _attached(host: str, argv: list[str], pty: bool) -> int:
    """Run a screen (on a PTY) or a stream (output relayed as it comes, no deadline); its exit code."""
    from fray.remote import bootstrap, command, master
    from fray.remote.connection import connect

    cwd = None
    if command_words(argv)[:1] == ["submit"]:
        argv, cwd = _synced_submit(host, argv)
    conn = connect(host)
    remote = bootstrap.ensure(conn, _remote_home(host))
    argv = master.in_folder([remote.executable, *argv], cwd)
    env = {"FRAY_HOME": remote.home, ENV_REMOTE: ""}
    if pty:
        from fray.remote import pty as terminal

        return terminal.interactive(conn, argv, env)
    return command.stream(conn, argv, env=env, out=sys.stdout.buffer, err=sys.stderr.buffer)


def _synced_submit(host: str, argv: list[str]) -> tuple[list[str], str]:
    """Sync the project (the current folder; a SCRIPT outside it is refused first) and return the submit's
    argv for the remote, with SCRIPT named inside the synced copy and the run recording which code it ran
    (the copy's path and hash), and the copy's folder to run it in."""
    from fray.remote.run import sync_project
    from fray.remote.submit_args import in_copy, locate

    located = locate(argv, Path.cwd(), Path.cwd())
    copied = sync_project(host, Path.cwd(), home=_remote_home(host), force="--force" in argv)
    argv = in_copy(argv, located, copied.remote_path)
    cut = _cut(argv)
    recorded = ["--env", f"{SYNCED_CODE_PATH}={copied.remote_path}", "--env", f"{SYNCED_CODE_HASH}={copied.tree_hash}"]
    return [*argv[:cut], *recorded, *argv[cut:]], copied.remote_path


def _remote_home(host: str) -> str | None:
    return user_config.remote_home(host)
