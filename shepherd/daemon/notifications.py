"""The daemon's notifications: what fray.core.notify decides, sent through one outbox per sink.

The loop calls `observe` for each run it reconciles and `flush` once a cycle;
neither waits for the network (fray.daemon.outbox sends in its own thread).
A new config.json (`configure`) keeps what the notifier remembers (each run's
last status, what was told, the rate window), so an edit does not re-announce
anything, and rebuilds a sink's outbox only when that sink's settings changed.
"""

from __future__ import annotations

from typing import Any, Callable

from fray.core import notify
from fray.core.notify import Message, Notice, Notifier, NotifySettings
from fray.daemon import sinks
from fray.daemon.outbox import Letter, Outbox


class Notifications:
    def __init__(self, config: dict[str, Any], origin: str, backoff_sec: float = 1.0) -> None:
        self._origin = origin  # which daemon and FRAY_HOME a message comes from
        self._backoff_sec = backoff_sec
        self._settings: NotifySettings | None = None
        self._notifier: Notifier | None = None
        self._outboxes: dict[str, Outbox] = {}
        self.configure(config)

    @property
    def enabled(self) -> bool:
        return self._notifier is not None

    @property
    def sinks(self) -> tuple[str, ...]:
        return tuple(self._outboxes)

    def configure(self, config: dict[str, Any]) -> None:
        settings = notify.settings_from(config)  # valid: config.json was checked when it was read
        before, self._settings = self._settings, settings
        if settings is None:
            self._notifier = None
        elif self._notifier is None:
            self._notifier = Notifier(settings)
        else:
            self._notifier.settings = settings
        for name in ("slack", "email"):
            if before is not None and settings is not None and _sink_settings(before, name) == _sink_settings(
                    settings, name) and name in self._outboxes:
                continue
            old = self._outboxes.pop(name, None)
            if old is not None:
                old.close()
            if settings is not None and getattr(settings, name) is not None:
                self._outboxes[name] = Outbox(name, _sender(settings, name), settings.retries, self._backoff_sec)

    def observe(self, run_id: str, name: str, status: str, reason: str, now: float) -> Notice | None:
        if self._notifier is None:
            return None
        return self._notifier.observe(run_id, name, status, reason, now)

    def flush(self, now: float) -> Message | None:
        """Post the message the notifier lets go now (if any) to every sink; it is sent in the background."""
        message = self._notifier.due(now) if self._notifier is not None else None
        if message is None:
            return None
        subject, text = notify.render(message, self._origin)
        for outbox in self._outboxes.values():
            outbox.post(Letter(subject, text))
        return message

    def close(self, wait_sec: float = 2.0) -> None:
        """At the daemon's stop: a message being sent gets `wait_sec` to arrive (each sink's call is bounded anyway)."""
        for outbox in self._outboxes.values():
            outbox.close(wait_sec)
        self._outboxes.clear()


def _sink_settings(settings: NotifySettings, name: str) -> tuple[Any, ...]:
    return getattr(settings, name), settings.timeout_sec, settings.retries


def _sender(settings: NotifySettings, name: str) -> Callable[[Letter], None]:
    sink, timeout = getattr(settings, name), settings.timeout_sec
    send: Callable[[Any, str, str, float], None] = sinks.post_slack if name == "slack" else sinks.send_email
    return lambda letter: send(sink, letter.subject, letter.text, timeout)
