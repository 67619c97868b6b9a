"""What a key means on the dashboard, and the line it notifies after acting through fray.ops.

The actions themselves are fray.ops (control, nodes, settings, submit), the
same functions `fray control`, `fray nodes` and `fray submit` call; this
module only maps keys to them (`r` starts an ended run again, `p` toggles
pause), words the confirmation question, and turns their result into the
notification. The caller then makes sure a daemon serves FRAY_HOME
(app.intent_written, in a thread), as the CLI does.

No Textual import: the screens call these, tests call them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fray.core.model import Phase
from fray.ops import control as requests, lookup, nodes, settings as live_settings, submit as submitting
from fray.state.layout import Home

DEFAULT_TTL = nodes.DEFAULT_TTL
DESTRUCTIVE = frozenset({"stop", "restart", "pause", "start"})


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


def describe(op: str, row: dict[str, Any]) -> str:
    """The question a confirmation asks (of a run, or of a sweep's row: every run of it)."""
    if row.get("kind") == "group":
        return _GROUP_QUESTIONS[op].format(name=row["name"], size=row["size"])
    what = {
        "stop": "Stop {name}? Its attempt is asked to stop and the run ends as stopped_manual.",
        "restart": "Restart {name}? Its attempt is stopped and a new one starts.",
        "pause": "Pause {name}? Its attempt is asked to stop (it should checkpoint) and none starts until unpause.",
        "start": "Start {name} again? It becomes active with fresh retry budgets.",
        "unpause": "Unpause {name}?",
    }[op]
    return what.format(name=f"{row['name']} ({row['run_id']})")


_GROUP_QUESTIONS = {
    "stop": "Stop the sweep {name}? Each of its {size} runs still going is asked to stop and ends as stopped_manual.",
    "restart": "Restart the sweep {name}? Each of its {size} runs still going has its attempt stopped and a new one "
               "started.",
    "pause": "Pause the sweep {name}? Its runs' attempts are asked to stop (they should checkpoint) and none starts "
             "until unpause.",
    "start": "Start the sweep {name} again? Its ended runs become active with fresh retry budgets.",
    "unpause": "Unpause the sweep {name}?",
}


def control(home: Home, run_id: str, op: str) -> Outcome:
    """`fray control OP RUN`."""
    asked = requests.request(home, run_id, op)
    return Outcome(f"requested {op} for {asked.meta.name}: {asked.effect}", run_id)


def control_group(home: Home, group: str, name: str, op: str) -> Outcome:
    """`fray control OP --group GROUP`: every run of the sweep it applies to; the others are counted, not failed."""
    asked = requests.request_group(home, group, op)
    message = f"requested {op} for {len(asked.requested)} runs of {name}"
    if asked.skipped:
        message += f" ({len(asked.skipped)} skipped: {asked.skipped[0][2]})"
    return Outcome(message)


def node_of(home: Home, run_id: str) -> str | None:
    """The node the run's latest attempt that had one ran on (what the ban dialog offers)."""
    return requests.node_of(lookup.read_meta(home, run_id))


def ban_run_node(home: Home, run_id: str, node: str, ttl: str, reason: str) -> Outcome:
    """`fray control blacklist-add RUN --node NODE`: ban it, and move the run off it if it is there now."""
    change = requests.ban_run_node(home, run_id, node, nodes.parse_ttl(ttl), reason)
    return Outcome(f"{change.meta.name}: {change.effect}", run_id)


def ban(home: Home, node: str, ttl: str, reason: str) -> Outcome:
    """`fray nodes ban NODE --ttl TTL --reason REASON`."""
    entry = nodes.ban(home, node, nodes.parse_ttl(ttl), reason)
    until = "until unbanned" if entry.expires_at is None else f"for {ttl or DEFAULT_TTL}"
    return Outcome(f"banned {node.strip()} {until} ({entry.strikes} strikes)")


def unban(home: Home, node: str) -> Outcome:
    """`fray nodes unban NODE`."""
    nodes.unban(home, node)
    return Outcome(f"unbanned {node}: runs may use it again")


def set_config(home: Home, run_id: str, settings: dict[str, Any]) -> Outcome:
    """`fray control config-set RUN KEY=VALUE...` (the whole spec is checked again)."""
    if not settings:
        return Outcome("nothing changed", run_id)
    _, effect = live_settings.change(home, run_id, settings)
    return Outcome(effect, run_id)


def submit(home: Home, script: Path, args: str = "", name: str | None = None) -> Outcome:
    """`fray submit SCRIPT -- ARGS` (the caller then starts the daemon)."""
    meta = submitting.submit(home, script, submitting.script_args(args), name=name)
    return Outcome(f"submitted {meta.name} as {meta.run_id}", meta.run_id)
