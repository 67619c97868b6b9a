"""Local sinks for the notification tests: an HTTP server standing in for a Slack webhook, and a real SMTP server."""

from __future__ import annotations

import email
import email.policy
import http.server
import json
import socket
import threading
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any


@dataclass
class Webhook:
    """A Slack-compatible webhook on 127.0.0.1: records every POSTed JSON body, answers with the statuses queued."""

    server: http.server.ThreadingHTTPServer
    received: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answers for the next requests; then 200

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/services/T000/B000/xyz"

    @property
    def texts(self) -> list[str]:
        return [body["text"] for body in self.received]


def start_webhook() -> Webhook:
    hook: Webhook

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            status = hook.statuses.pop(0) if hook.statuses else 200
            if status == 200:
                hook.received.append(json.loads(body))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"ok" if status == 200 else b"invalid_payload")

        def log_message(self, *args: Any) -> None:
            pass

    hook = Webhook(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler))
    threading.Thread(target=hook.server.serve_forever, daemon=True).start()
    return hook


class Inbox:
    """aiosmtpd's handler: every message the SMTP server accepted, parsed."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Silent:
    """A TCP port that accepts connections and never answers: a sink that hangs."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.port = self.socket.getsockname()[1]

    def close(self) -> None:
        self.socket.close()
