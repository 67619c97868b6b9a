"""Every cluster in one view: which hosts, and asking all of them at once.

The clusters are this machine (`local`) and the hosts named by `--remote a,b`,
`--remote all` (every host of the user config's `remotes`), or, with no
`--remote`, the user config's `remotes` (fray.remote.user_config), with
`remote_timeout` seconds (default 20) for each to answer.

Each entry must be a Host of the ssh config (FRAY_SSH_CONFIG, else
~/.ssh/config): a name that is not is refused (UsageError, exit 2) before
anything is asked. A remote session (FRAY_REMOTE set, even empty) never fans
out again. `ask_all` runs one command on every cluster in parallel threads,
each bounded by the per-host timeout: a host that is down, refuses, or does
not answer in time is one `Answer` saying so, and never holds up the others.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from fray.core.command_line import with_json
from fray.errors import UsageError
from fray.remote import forward, ssh_config, user_config

LOCAL = "local"
ALL = "all"
DEFAULT_TIMEOUT_SEC = 20.0


@dataclass(frozen=True)
class Answer:
    """One cluster's answer: its JSON document, or why there is none."""

    cluster: str
    document: Any = None  # the parsed --json output (a dict), when there is one
    exit_code: int | None = None
    error: str | None = None  # the host is down, refused, timed out, or printed no JSON
    seconds: float = 0.0


def chosen(host: str | None) -> list[str] | None:
    """The clusters of a many-cluster view (`local` first), or None for the one-host commands.

    `host` is what `--remote` said (None: not given)."""
    if forward.ENV_REMOTE in os.environ:  # a remote session, or FRAY_REMOTE set by hand: one host
        return None
    config = user_config.load()
    remotes = config.get("remotes")
    if remotes is not None and (not isinstance(remotes, list) or not all(isinstance(r, str) and r for r in remotes)):
        raise UsageError(f"{user_config.path()}: remotes must be a list of ssh host names, like "
                         "remotes = [\"gpu-login\", \"tpu-admin\"]")
    if host is None:
        names = list(remotes or [])
        if not names:
            return None
    elif host == ALL:
        if not remotes:
            raise UsageError(f"--remote all uses the hosts of `remotes` in {user_config.path()}, and it "
                             "lists none; add remotes = [\"gpu-login\", ...] or name them: --remote a,b")
        names = list(remotes)
    elif "," in host:
        names = [name.strip() for name in host.split(",") if name.strip()]
    else:
        return None
    names = [n for n in dict.fromkeys(names) if n != LOCAL]
    _check_known(names)
    return [LOCAL, *names]


def _check_known(names: list[str]) -> None:
    """Refuse hosts the ssh config does not name (a typo would otherwise be a slow DNS failure)."""
    path = ssh_config.config_path()
    patterns: set[str] = set()
    if path.is_file():
        import paramiko  # lazy: only a many-cluster command pays for it

        patterns = paramiko.SSHConfig.from_path(str(path)).get_hostnames() - {"*"}  # `Host *` names no host
    unknown = [n for n in names if not any(fnmatch.fnmatchcase(ssh_config.split_target(n)[1], p) for p in patterns)]
    if unknown:
        raise UsageError(f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a Host in {path}: add "
                         f"a Host entry for each (`ssh NAME` must work), or fix the name in --remote or remotes")


def timeout_sec() -> float:
    value = user_config.load().get("remote_timeout", DEFAULT_TIMEOUT_SEC)
    if not isinstance(value, (int, float)) or value <= 0:
        raise UsageError(f"{user_config.path()}: remote_timeout must be a positive number of seconds")
    return float(value)


def ask_all(clusters: list[str], argv: list[str], timeout: float,
            ask: Callable[[str, list[str], float], Answer] | None = None) -> list[Answer]:
    """`fray *argv --json` on every cluster at once, in `clusters` order; none waits past `timeout`."""
    ask = ask or ask_one
    answers: dict[str, Answer] = {}
    started = time.monotonic()

    def work(cluster: str) -> None:
        answers[cluster] = ask(cluster, argv, timeout)

    threads = [threading.Thread(target=work, args=(c,), name=f"fray-ask-{c}", daemon=True) for c in clusters]
    for thread in threads:
        thread.start()
    for thread in threads:  # one deadline for all: a host that hangs is left behind (a daemon thread)
        thread.join(max(0.0, timeout - (time.monotonic() - started)))
    return [answers.get(c) or Answer(c, error=f"no answer within {timeout:g}s (remote_timeout)", seconds=timeout)
            for c in clusters]


def ask_one(cluster: str, argv: list[str], timeout: float) -> Answer:
    """One cluster's answer: this machine's in a subprocess, a host's over SSH."""
    import orjson

    started = time.monotonic()
    args = with_json(argv)
    try:
        if cluster == LOCAL:
            proc = subprocess.run([sys.executable, "-m", "fray", *args], capture_output=True,  # the fray command
                                  timeout=timeout, env={**os.environ, forward.ENV_REMOTE: ""})
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        else:
            result = forward.answer(cluster, args, timeout=timeout)
            code, out, err = result.exit_code, result.stdout, result.stderr
    except subprocess.TimeoutExpired:
        return Answer(cluster, error=f"no answer within {timeout:g}s", seconds=time.monotonic() - started)
    except Exception as exc:  # the host is down, refuses, or the link broke: its row says so
        return Answer(cluster, error=_why(exc, cluster), seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    try:
        document = orjson.loads(out)
    except orjson.JSONDecodeError:
        text = (err or out).decode(errors="replace").strip().splitlines()
        return Answer(cluster, exit_code=code, error=text[-1] if text else f"exit {code}, no output", seconds=seconds)
    return Answer(cluster, document, code, seconds=seconds)


def _why(exc: BaseException, host: str) -> str:
    from fray.remote.errors import from_transport

    failure = from_transport(exc, host)
    text = str(failure or exc) or type(exc).__name__
    return text.splitlines()[0]
