"""A person's intent from the dashboard, written exactly as the CLI writes it.

Each function here is what one `fray` command does, minus the printing:
`control` is `fray control stop|start|restart|pause|unpause` (runs.request),
`ban_run_node` is `fray control blacklist-add`, `ban`/`unban` are `fray nodes
ban|unban`, `set_config` is `fray control config-set` (runs.set_overrides),
`submit` is `fray submit` (runs.create_run). They raise FrayError with the
CLI's message when the request cannot be made. The caller then makes sure a
daemon serves FRAY_HOME (lease.ensure_running), as those commands do. Nothing
here talks to a backend.

No Textual import: the screens call these, tests call them too.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fray.state import blacklist, runs

from fray.core import directives
from fray.errors import UsageError
from fray.state.layout import Home
from fray.core.model import Phase
from fray.core.policy import SAFE_OVERRIDES

DEFAULT_TTL = "1d"


@dataclass(frozen=True)
class Outcome:
    """What was done, in words for the notification line."""

    message: str
    run_id: str | None = None


def op_for(key: str, row: dict[str, Any]) -> str:
    """The control operation a dashboard key means for this run: `r` starts an ended run again, `p` toggles."""
    ended = row.get("phase") == Phase.ENDED.value
    if key == "r":
        return "start" if ended else "restart"
    if key == "p":
        return "unpause" if row.get("paused") else "pause"
    return "stop"


DESTRUCTIVE = frozenset({"stop", "restart", "pause", "start"})


def describe(op: str, row: dict[str, Any]) -> str:
    """The question a confirmation asks."""
    what = {
        "stop": "Stop {name}? Its attempt is asked to stop and the run ends as stopped_manual.",
        "restart": "Restart {name}? Its attempt is stopped and a new one starts.",
        "pause": "Pause {name}? Its attempt is asked to stop (it should checkpoint) and none starts until unpause.",
        "start": "Start {name} again? It becomes active with fresh retry budgets.",
        "unpause": "Unpause {name}?",
    }[op]
    return what.format(name=f"{row['name']} ({row['run_id']})")


def control(home: Home, run_id: str, op: str) -> Outcome:
    """`fray control OP RUN`."""
    from fray.cli.control_cmd import effect

    runs.request(home, run_id, op)
    meta = runs.read_meta(home, run_id)
    return Outcome(f"requested {op} for {meta.name}: {effect(op, meta)}", run_id)


def node_of(home: Home, run_id: str) -> str | None:
    """The node the run's latest attempt that had one ran on."""
    meta = runs.read_meta(home, run_id)
    return next((a.node for a in reversed(meta.attempts) if a.node), None)


def parse_ttl(text: str) -> float | None:
    from fray.cli.nodes_cmd import parse_ttl as cli_parse_ttl

    return cli_parse_ttl(text or DEFAULT_TTL)


def ban_run_node(home: Home, run_id: str, node: str, ttl: str, reason: str) -> Outcome:
    """`fray control blacklist-add RUN --node NODE`: ban it, and move the run off it if it is there now."""
    node = node.strip()
    if not node:
        raise UsageError("name the node to ban")
    seconds = parse_ttl(ttl)
    meta = runs.read_meta(home, run_id)
    blacklist.ban(home, node, reason.strip() or f"bad for run {run_id}", seconds, source_run=run_id)
    attempt = meta.in_flight
    if attempt is not None and attempt.node == node:
        runs.request(home, run_id, "restart")
        return Outcome(f"banned {node}; attempt {attempt.number} of {meta.name} restarts elsewhere", run_id)
    return Outcome(f"banned {node}; new attempts avoid it", run_id)


def ban(home: Home, node: str, ttl: str, reason: str) -> Outcome:
    """`fray nodes ban NODE --ttl TTL --reason REASON`."""
    node = node.strip()
    if not node:
        raise UsageError("name the node to ban")
    entry = blacklist.ban(home, node, reason.strip() or "banned by hand", parse_ttl(ttl))
    until = "until unbanned" if entry.expires_at is None else f"for {ttl or DEFAULT_TTL}"
    return Outcome(f"banned {node} {until} ({entry.strikes} strikes)")


def unban(home: Home, node: str) -> Outcome:
    """`fray nodes unban NODE`."""
    blacklist.unban(home, node)
    return Outcome(f"unbanned {node}: runs may use it again")


@dataclass(frozen=True)
class Setting:
    """One field of the edit-config form: a safe #FRAY option, its current value as text, and its help."""

    field: str
    flag: str
    text: str
    help: str
    is_flag: bool


def config_fields(home: Home, run_id: str) -> list[Setting]:
    """The settings a live run may change (policy.SAFE_OVERRIDES), with the values in force now."""
    meta = runs.read_meta(home, run_id)
    overrides = runs.read_control(home, run_id).overrides
    spec = {**meta.spec.to_dict(), **overrides}
    fields = []
    for option in directives.OPTIONS:
        if option.field not in SAFE_OVERRIDES:
            continue
        fields.append(Setting(option.field, option.flag, format_value(option, spec.get(option.field)), option.help,
                              option.is_flag))
    return fields


def format_value(option: directives.DirectiveOption, value: Any) -> str:
    if value is None:
        return ""
    if option.is_flag or isinstance(value, bool):
        return "true" if value else "false"
    if option.metavar == "DURATION":
        return directives.format_duration(float(value))
    return str(value)


def parse_config(fields: list[Setting], texts: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(settings that changed, errors by field) from what was typed; parsed as the directives are."""
    settings: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for setting in fields:
        text = texts.get(setting.field, setting.text).strip()
        if text == setting.text.strip():
            continue
        if not text:
            errors[setting.field] = f"{setting.flag}: give a value (it was {setting.text or 'unset'})"
            continue
        try:
            field, value = directives.parse_flag_value(setting.flag, text)
        except UsageError as exc:
            errors[setting.field] = str(exc)
            continue
        settings[field] = value
    return settings, errors


def set_config(home: Home, run_id: str, settings: dict[str, Any]) -> Outcome:
    """`fray control config-set RUN KEY=VALUE...` (the whole spec is checked again)."""
    if not settings:
        return Outcome("nothing changed", run_id)
    runs.set_overrides(home, run_id, settings)
    shown = ", ".join(f"{key}={value}" for key, value in settings.items())
    return Outcome(f"the daemon applies {shown} now; new attempts use them", run_id)


def preview(script: Path, args: str = "") -> tuple[str, str | None]:
    """What submitting `script` would do, without writing anything: (summary, error)."""
    from fray.cli import render

    try:
        data = runs._read_script(script)  # the same errors as fray submit
        text = data.decode("utf-8")
    except UsageError as exc:
        return "", str(exc)
    except UnicodeDecodeError:
        return "", f"{script} is not UTF-8 text; submit a script (Python, bash, ...)"
    try:
        parsed = directives.parse_script(text, str(script))
        spec = directives.build_spec(parsed, {}, workdir=str(Path.cwd()), args=shlex.split(args))
    except (UsageError, ValueError) as exc:
        return "", str(exc)
    name = parsed.name or script.stem
    mode = spec.mode + (f", keep alive {directives.format_duration(spec.keep_alive_sec)}" if spec.keep_alive_sec else "")
    lines = [f"name: {name}", f"mode: {mode}", f"on: {spec.backend}, {render.resources(spec.to_dict())}"]
    if spec.sbatch:
        lines.append(f"#SBATCH lines: {len(spec.sbatch)}")
    return "\n".join(lines), None


def submit(home: Home, script: Path, args: str = "", name: str | None = None) -> Outcome:
    """`fray submit SCRIPT -- ARGS` (the caller then starts the daemon)."""
    try:
        argv = tuple(shlex.split(args))
    except ValueError as exc:
        raise UsageError(f"arguments: {exc}") from None
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=name or None, args=argv))
    return Outcome(f"submitted {meta.name} as {meta.run_id}", meta.run_id)
