"""Runtime commands to a run's workload: tune, pause --in-process, resume, terminate.

The command is written under runs/<id>/commands/ (fray.state.runtime_commands),
read by the workload with `report.commands()` and acknowledged by it; this
says, in the same words for every front end, what happens to it next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fray.core.model import Meta
from fray.state import runs, runtime_commands
from fray.state.layout import Home


def parse_settings(pairs: list[str]) -> tuple[dict[str, Any], list[str]]:
    """`fray control tune --set KEY=VALUE` pairs as the command's payload, and the problems found in them
    (fray.state.runtime_commands reads them as the workload will)."""
    return runtime_commands.parse_settings(pairs)


@dataclass(frozen=True)
class Sent:
    """A command written (or found already written with the same id), and what happens to it next."""

    run_id: str
    meta: Meta
    command: dict[str, Any]
    created: bool
    effect: str


def send(home: Home, run_id: str, op: str, payload: dict[str, Any], command_id: str | None = None,
         found: list[str] | None = None) -> Sent:
    """Write command `op` with `payload` for the run's workload; the same id twice writes nothing new."""
    envelope, created = runtime_commands.issue(home, run_id, op, payload, command_id, found=found)
    meta = runs.read_meta(home, run_id)
    if not created:
        what = f"command {envelope['id']} was sent already (same id, same command): nothing new written"
    elif meta.in_flight is not None:
        what = (f"command {envelope['id']} written; attempt {meta.in_flight.number}'s workload reads it with "
                "report.commands() and acknowledges it")
    else:
        what = f"command {envelope['id']} written; no attempt runs now, the next one reads it"
    return Sent(run_id, meta, envelope, created, what)
