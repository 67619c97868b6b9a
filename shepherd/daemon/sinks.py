"""Sending one message to one sink: a Slack-compatible webhook (HTTP POST JSON) or e-mail (SMTP).

Each call is bounded by `timeout` on every network operation and raises on any
failure (an HTTP status other than 2xx included); retrying and logging are the
outbox's (fray.daemon.outbox). Standard library only: nothing to install for
either sink. urllib, smtplib and ssl are imported by the first message sent, not
with the daemon (a tenth of its start).
"""

from __future__ import annotations

import os

import orjson

from fray.core.notify import Email, Slack


class SinkError(Exception):
    """A sink's configuration cannot work in this daemon (a missing password variable)."""


def post_slack(slack: Slack, subject: str, text: str, timeout: float) -> None:
    """POST {"text": ...} to the webhook; urllib raises HTTPError for a status that is not 2xx."""
    import urllib.request

    body = orjson.dumps({"text": f"*{subject}*\n{text}"})
    request = urllib.request.Request(slack.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "fray"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        response.read(65536)


def send_email(email: Email, subject: str, text: str, timeout: float) -> None:
    import smtplib
    import ssl
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = email.sender
    message["To"] = ", ".join(email.to)
    message.set_content(text)
    password = None
    if email.user is not None and email.password_env is not None:
        password = os.environ.get(email.password_env)
        if password is None:
            raise SinkError(f"the daemon's environment has no {email.password_env} (notify.email.password_env); "
                            "set it and restart the daemon")
    with smtplib.SMTP(email.host, email.port, timeout=timeout) as smtp:
        if email.starttls:
            smtp.starttls(context=ssl.create_default_context())
        if email.user is not None and password is not None:
            smtp.login(email.user, password)
        smtp.send_message(message)
