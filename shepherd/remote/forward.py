"""`fray ... --remote HOST`: which host, and running the command there.

`--remote HOST` (or `--remote=HOST`) may stand anywhere before `--`; without
it FRAY_REMOTE, then `remote = "HOST"` in ~/.config/fray/config.toml, name a
default host. An empty FRAY_REMOTE means "run here" (the remote side is given
one, so a config file there can never forward again).

The remote runs the same fray version (bootstrap makes sure), so its output,
human or `--json`, is what a local run prints; it is passed through byte for
byte, and its exit code becomes ours. `fray submit` first syncs the project
(the current folder) and runs the remote submit inside the synced copy.
"""

from __future__ import annotations

import os
import posixpath
import sys
from pathlib import Path

SEPARATOR = "--"
ENV_REMOTE = "FRAY_REMOTE"


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fray" / "config.toml"


def default_host() -> str | None:
    if ENV_REMOTE in os.environ:
        return os.environ[ENV_REMOTE].strip() or None
    path = user_config_path()
    if not path.is_file():
        return None
    try:
        import tomllib
    except ImportError:  # Python 3.10: the one line this needs
        for line in path.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "remote":
                return value.strip().strip("\"'") or None
        return None
    value = tomllib.loads(path.read_text()).get("remote")
    return value if isinstance(value, str) and value else None


def split(argv: list[str]) -> tuple[str | None, list[str]]:
    """(the host to run on or None, argv without the --remote option)."""
    cut = argv.index(SEPARATOR) if SEPARATOR in argv else len(argv)
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
    if host is None:
        host = default_host()
    return (host or None), rest + tail


def code_folder(remote_home: str, project: Path) -> str:
    """Where the project's synced copy lives on the remote: one folder per project name."""
    return posixpath.join(remote_home, "code", project.resolve().name or "project")


def main(host: str, argv: list[str]) -> int:
    """Run `fray *argv` on `host`, printing what it prints; its exit code (255: it could not run)."""
    from fray.errors import failure_message
    from fray.remote.errors import RemoteError

    try:
        return _forward(host, argv)
    except RemoteError as exc:
        message, code = failure_message(exc) or (str(exc), 255)
        print(message, file=sys.stderr)
        return code


def _forward(host: str, argv: list[str]) -> int:
    from fray.remote import bootstrap, command, sync
    from fray.remote.connection import connect
    from fray.remote.run import run_fray

    words = [w for w in argv[: argv.index(SEPARATOR) if SEPARATOR in argv else len(argv)] if not w.startswith("-")]
    if words[:1] == ["submit"] or words[:1] == ["sync"]:
        conn = connect(host)
        remote = bootstrap.ensure(conn)
        project = Path.cwd()
        force = "--force" in argv
        copied = sync.sync(conn, project, code_folder(remote.home, project), force=force)
        if words[:1] == ["sync"]:
            print(f"synced {project} to {host}:{copied.remote_path} ({len(copied.sent)} sent, "
                  f"{len(copied.removed)} removed, tree {copied.tree_hash[:12]})")
            return 0
        env = {"FRAY_HOME": remote.home, ENV_REMOTE: "", "FRAY_CODE_PATH": copied.remote_path,
               "FRAY_CODE_HASH": copied.tree_hash}
        script = 'cd "$1" && shift && exec "$@"'
        result = command.run(conn, ["sh", "-c", script, "sh", copied.remote_path, remote.executable, *argv], env=env)
    else:
        result = run_fray(host, argv, json=False)
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(result.stderr)
    sys.stderr.flush()
    return result.exit_code
