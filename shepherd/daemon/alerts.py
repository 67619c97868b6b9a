"""Alert hooks: a command run when a run's status changes to one you care about.

Configured in config.json (schemas/config.json `alerts`):

    "alerts": [{"command": ["notify-me", "--channel", "ml"],
                "on": ["unresponsive", "crash_loop", "failed", "completed_success"],
                "timeout_sec": 10, "min_interval_sec": 300}]

The command gets the run's status JSON on stdin (schemas/alert.json). `Alerter`
is the pure part: it remembers each run's last status and decides which rules
fire, coalescing a flapping run (at most one alert per run and rule per
`min_interval_sec`; the next one says how many were held back). A run's status
when the daemon first sees it is not a transition, so a restarted daemon does
not re-announce everything. `fire` runs the command in a thread, time-bounded,
logging failures: the reconcile loop never waits for it.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

log = logging.getLogger("fray.alerts")


@dataclass(frozen=True)
class Rule:
    command: tuple[str, ...]
    on: frozenset[str]
    timeout_sec: float = 10.0
    min_interval_sec: float = 300.0

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> "Rule":
        return cls(tuple(data["command"]), frozenset(data["on"]), float(data.get("timeout_sec", 10.0)),
                   float(data.get("min_interval_sec", 300.0)))


@dataclass(frozen=True)
class Firing:
    rule: Rule
    run_id: str
    status: str
    previous: str
    held_back: int  # alerts suppressed for this run and rule since the last one sent


@dataclass
class Alerter:
    rules: list[Rule]
    _last_status: dict[str, str] = field(default_factory=dict)
    _last_sent: dict[tuple[int, str], float] = field(default_factory=dict)
    _held: dict[tuple[int, str], int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Alerter":
        return cls([Rule.from_config(item) for item in config.get("alerts", [])])

    def observe(self, run_id: str, status: str, now: float) -> list[Firing]:
        """Record `status` for `run_id`; the alerts its change (if any) should send now."""
        previous = self._last_status.get(run_id)
        self._last_status[run_id] = status
        if previous is None or previous == status:
            return []
        firings = []
        for index, rule in enumerate(self.rules):
            if status not in rule.on:
                continue
            key = (index, run_id)
            sent = self._last_sent.get(key)
            if sent is not None and now - sent < rule.min_interval_sec:
                self._held[key] = self._held.get(key, 0) + 1
                continue
            self._last_sent[key] = now
            firings.append(Firing(rule, run_id, status, previous, self._held.pop(key, 0)))
        return firings


def payload(firing: Firing, row: dict[str, Any], now: float) -> bytes:
    return orjson.dumps({"run_id": firing.run_id, "status": firing.status, "previous_status": firing.previous,
                         "held_back": firing.held_back, "at": now, "run": row})


def fire(firing: Firing, document: bytes) -> threading.Thread:
    """Run the rule's command with `document` on stdin, in the background."""

    def run() -> None:
        try:
            done = subprocess.run(firing.rule.command, input=document, capture_output=True,
                                  timeout=firing.rule.timeout_sec, check=False)
        except subprocess.TimeoutExpired:
            log.warning("alert %s for %s timed out after %.0fs", firing.rule.command[0], firing.run_id,
                        firing.rule.timeout_sec)
        except OSError as exc:
            log.warning("alert %s for %s could not run: %s", firing.rule.command[0], firing.run_id, exc)
        else:
            if done.returncode != 0:
                log.warning("alert %s for %s exited %d: %s", firing.rule.command[0], firing.run_id, done.returncode,
                            done.stderr.decode(errors="replace").strip()[-300:])

    thread = threading.Thread(target=run, name=f"fray-alert-{firing.run_id}", daemon=True)
    thread.start()
    return thread
