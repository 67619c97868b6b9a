"""Notifications to people: which status changes to tell, when, and in what words (pure).

config.json `notify` (schemas/config.json) names the sinks and the limits:

    "notify": {"on": ["unresponsive", "crash_loop", "failed", "failed_config"],
               "rate_limit": "5/10m", "repeat_after_sec": 21600,
               "slack": {"url": "https://hooks.slack.com/services/..."},
               "email": {"smtp": "smtp.example.com:587", "starttls": true,
                         "from": "fray@example.com", "to": ["me@example.com"],
                         "user": "fray", "password_env": "FRAY_SMTP_PASSWORD"}}

The schema checks the shape; `settings_from` checks the rest (the rate
limit's form, the port, user and password_env together) and raises ValueError
naming the key, so a bad config.json is refused when it is read.

`Notifier` decides. A run's status *changing* into one of `on` is a notice;
the status a run has when the daemon first sees it is not (a restarted daemon
does not re-announce everything). A notice for the same run and status within
`repeat_after_sec` of the last one is dropped: a crash loop flapping between
restarting and crash_loop is told once. Notices wait in one queue and leave
together as one message, at most `rate_limit` messages per period across all
runs: a hundred runs failing in one cycle are one message, and what the limit
holds back goes out, all together, as soon as it allows. The daemon sends
(fray.daemon.notifications); `render` gives a message's subject and text.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fray.core.values import parse_duration

DEFAULT_ON = ("unresponsive", "crash_loop", "failed", "failed_config")
DEFAULT_RATE_LIMIT = "5/10m"
DEFAULT_REPEAT_AFTER_SEC = 6 * 3600.0
DEFAULT_TIMEOUT_SEC = 10.0
DEFAULT_RETRIES = 3
MAX_LINES = 20  # notices listed in one message; the rest are counted


@dataclass(frozen=True)
class RateLimit:
    count: int
    period_sec: float

    def __str__(self) -> str:
        return f"{self.count} per {self.period_sec:g}s"


@dataclass(frozen=True)
class Slack:
    url: str


@dataclass(frozen=True)
class Email:
    host: str
    port: int
    sender: str
    to: tuple[str, ...]
    starttls: bool = False
    user: str | None = None
    password_env: str | None = None  # the daemon's environment variable holding the SMTP password


@dataclass(frozen=True)
class NotifySettings:
    on: frozenset[str]
    rate_limit: RateLimit
    repeat_after_sec: float = DEFAULT_REPEAT_AFTER_SEC
    slack: Slack | None = None
    email: Email | None = None
    timeout_sec: float = DEFAULT_TIMEOUT_SEC  # of every network call
    retries: int = DEFAULT_RETRIES  # tries per message and sink

    @property
    def sinks(self) -> tuple[str, ...]:
        return tuple(name for name in ("slack", "email") if getattr(self, name) is not None)


def settings_from(config: dict[str, Any]) -> NotifySettings | None:
    """The `notify` section of a schema-valid config.json, or None when it has none.

    ValueError names the key and the form that would be valid.
    """
    section = config.get("notify")
    if section is None:
        return None
    slack = Slack(section["slack"]["url"]) if "slack" in section else None
    email = _email(section["email"]) if "email" in section else None
    if slack is None and email is None:
        raise ValueError("notify: name at least one sink, `slack` (a webhook url) or `email` (an SMTP server)")
    return NotifySettings(
        on=frozenset(section.get("on", DEFAULT_ON)),
        rate_limit=parse_rate_limit(section.get("rate_limit", DEFAULT_RATE_LIMIT)),
        repeat_after_sec=float(section.get("repeat_after_sec", DEFAULT_REPEAT_AFTER_SEC)),
        slack=slack, email=email,
        timeout_sec=float(section.get("timeout_sec", DEFAULT_TIMEOUT_SEC)),
        retries=int(section.get("retries", DEFAULT_RETRIES)))


def parse_rate_limit(text: str) -> RateLimit:
    """`5/10m`: at most 5 messages in any 10 minutes."""
    form = f"notify.rate_limit {text!r}: expected MESSAGES/PERIOD like 1/10m, 5/1h or 20/1d"
    count, slash, period = text.strip().partition("/")
    if not slash or not count.isdigit() or int(count) < 1:
        raise ValueError(form)
    try:
        seconds = parse_duration(period)
    except ValueError:
        raise ValueError(form) from None
    if seconds <= 0:
        raise ValueError(f"{form}; the period must be longer than 0")
    return RateLimit(int(count), seconds)


def _email(section: dict[str, Any]) -> Email:
    smtp = section["smtp"].strip()
    host, colon, port_text = smtp.rpartition(":")
    if not colon:
        host, port_text = smtp, "587" if section.get("starttls") else "25"
    host = host.strip("[]")  # [::1]:25
    if not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"notify.email.smtp {smtp!r}: expected HOST or HOST:PORT like smtp.example.com:587")
    if ("user" in section) != ("password_env" in section):
        raise ValueError("notify.email: `user` and `password_env` (the environment variable holding the SMTP "
                         "password) go together; give both, or neither to send without logging in")
    return Email(host, int(port_text), section["from"], tuple(section["to"]), bool(section.get("starttls", False)),
                 section.get("user"), section.get("password_env"))


@dataclass(frozen=True)
class Notice:
    """One run's status changed into one people asked to hear about."""

    run_id: str
    name: str
    status: str
    previous: str
    reason: str
    at: float


@dataclass(frozen=True)
class Message:
    notices: tuple[Notice, ...]


@dataclass
class Notifier:
    settings: NotifySettings
    _last_status: dict[str, str] = field(default_factory=dict)
    _told_at: dict[tuple[str, str], float] = field(default_factory=dict)  # (run, status) -> when it was last queued
    _sent_at: list[float] = field(default_factory=list)  # messages inside the current rate period
    _queue: list[Notice] = field(default_factory=list)

    def observe(self, run_id: str, name: str, status: str, reason: str, now: float) -> Notice | None:
        """Record `status` for `run_id`; the notice it queued, if its change is one to tell."""
        previous = self._last_status.get(run_id)
        self._last_status[run_id] = status
        if previous is None or previous == status or status not in self.settings.on:
            return None
        told = self._told_at.get((run_id, status))
        if told is not None and now - told < self.settings.repeat_after_sec:
            return None
        self._told_at[(run_id, status)] = now
        notice = Notice(run_id, name, status, previous, reason, now)
        self._queue.append(notice)
        return notice

    def due(self, now: float) -> Message | None:
        """Every queued notice as one message, when the rate limit lets one go now; else None."""
        limit = self.settings.rate_limit
        self._sent_at = [at for at in self._sent_at if now - at < limit.period_sec]
        if not self._queue or len(self._sent_at) >= limit.count:
            return None
        self._sent_at.append(now)
        message, self._queue = Message(tuple(self._queue)), []
        # Forget what can no longer be a repeat, so a daemon running for months stays small.
        self._told_at = {key: at for key, at in self._told_at.items() if now - at < self.settings.repeat_after_sec}
        return message

    @property
    def waiting(self) -> int:
        return len(self._queue)


def render(message: Message, origin: str) -> tuple[str, str]:
    """(subject, text) of a message; `origin` says which daemon and FRAY_HOME it comes from."""
    notices = message.notices
    if len(notices) == 1:
        only = notices[0]
        subject = f"fray: {only.name} is {only.status}"
    else:
        counts = Counter(n.status for n in notices)
        subject = f"fray: {len(notices)} runs changed status (" + ", ".join(
            f"{count} {status}" for status, count in counts.most_common()) + ")"
    lines = [f"{n.run_id} ({n.name}): {n.previous} -> {n.status}: {n.reason}" for n in notices[:MAX_LINES]]
    if len(notices) > MAX_LINES:
        lines.append(f"... and {len(notices) - MAX_LINES} more (fray list shows them all)")
    hint = f"fray status {notices[0].run_id}" if len(notices) == 1 else "fray list"
    return subject, "\n".join([*lines, "", f"{origin}. Details: {hint}"])
