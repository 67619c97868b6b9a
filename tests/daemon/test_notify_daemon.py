"""Notifications from a real daemon to a local webhook server and a local SMTP server (aiosmtpd).

What a user sees: one message per change worth telling, a crash loop told once,
a rate limit that holds the rest back and sends it together later (also when
config.json is edited live), and a sink that fails being retried and logged
while the daemon and the other sink carry on.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterator

import pytest
from aiosmtpd.controller import Controller

from conftest import start_daemon, stop_daemon, wait_until
from fray.state import runs, store
from notify_support import Inbox, Silent, Webhook, free_port, start_webhook


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = start_webhook()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler = Inbox()
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield handler, controller.port
    controller.stop()


def configure(home: Any, config: dict[str, Any]) -> None:
    store.ensure_home(home)
    store.write_json(home.config, config, "config")


def submit(home: Any, tmp_path: Any, name: str, body: str) -> str:
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/bash\n{body}\n")
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={})).run_id


def events(home: Any, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [line.record for line in store.read_jsonl(home.run(run_id).events, "event")
            if line.record and line.record["kind"] == kind]


def ended(home: Any, run_id: str) -> bool:
    raw = store.read_json(home.meta_file(run_id), "meta")
    return bool(raw) and raw["phase"] == "ended"


def cycles(home: Any) -> int:
    return json.loads(home.daemon_lease.read_text())["cycles"]


def settle(home: Any) -> None:
    """Let the daemon finish two more cycles: whatever it was going to decide about what it has seen, it has."""
    seen = cycles(home)
    wait_until(lambda: cycles(home) >= seen + 2, what="two more daemon cycles")


def test_a_failed_run_is_told_once_on_the_webhook_and_by_email(home, tmp_path, webhook, inbox):
    mailbox, port = inbox
    configure(home, {"notify": {"on": ["failed"], "slack": {"url": webhook.url},
                                "email": {"smtp": f"127.0.0.1:{port}", "from": "fray@lab.example",
                                          "to": ["me@lab.example", "oncall@lab.example"]}}})
    daemon = start_daemon(home)
    try:
        run_id = submit(home, tmp_path, "train", "#FRAY --max-retries 1\n#FRAY --backoff-base 0.1\nexit 3")
        wait_until(lambda: webhook.received and mailbox.messages, what="the webhook post and the e-mail")
        [text] = webhook.texts
        assert "fray: train is failed" in text and run_id in text and f"fray status {run_id}" in text
        [mail] = mailbox.messages
        assert mail["Subject"] == "fray: train is failed" and mail["From"] == "fray@lab.example"
        assert mailbox.envelopes == [("fray@lab.example", ["me@lab.example", "oncall@lab.example"])]
        assert run_id in mail.get_content() and str(home.root) in mail.get_content()
        assert [e["reason"] for e in events(home, run_id, "notify")] == ["failed: notifying slack, email"]
        settle(home)
        assert len(webhook.received) == 1 and len(mailbox.messages) == 1
    finally:
        stop_daemon(daemon)


def test_a_crash_loop_sends_one_message_not_one_per_flap(home, tmp_path, webhook):
    hook_log = tmp_path / "hook.jsonl"
    hook = tmp_path / "hook.py"
    hook.write_text(f"import sys\nopen({str(hook_log)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    # The generic hook with no coalescing counts every change into crash_loop; notify must tell it once.
    configure(home, {"alerts": [{"command": [sys.executable, str(hook)], "on": ["crash_loop"], "min_interval_sec": 0}],
                     "notify": {"on": ["crash_loop"], "rate_limit": "100/1m", "slack": {"url": webhook.url}}})
    daemon = start_daemon(home)
    try:
        # Each attempt runs a second (healthy_running) and fails; from the third on, the run is crash_loop between them.
        run_id = submit(home, tmp_path, "flaky", "#FRAY --max-retries 6\n#FRAY --backoff-base 0.2\n"
                                                 "#FRAY --backoff-max 0.4\nsleep 1\nexit 3")
        wait_until(lambda: ended(home, run_id), timeout=60, what="the crash-looping run to spend its retries")
        settle(home)
        flaps = len(hook_log.read_text().splitlines())
        assert flaps >= 2, "the run must have turned crash_loop more than once for this test to mean anything"
        assert len(webhook.received) == 1 and "flaky is crash_loop" in webhook.texts[0]
    finally:
        stop_daemon(daemon)


def test_the_rate_limit_holds_messages_back_and_a_live_config_edit_lets_them_go_together(home, tmp_path, webhook):
    config = {"notify": {"on": ["failed"], "rate_limit": "1/1h", "slack": {"url": webhook.url}}}
    configure(home, config)
    daemon = start_daemon(home)
    try:
        first = submit(home, tmp_path, "first", "#FRAY --max-retries 0\nexit 3")
        wait_until(lambda: webhook.received, what="the first message")
        later = [submit(home, tmp_path, f"later{i}", "#FRAY --max-retries 0\nexit 3") for i in range(3)]
        wait_until(lambda: all(ended(home, r) for r in later), what="three more failed runs")
        settle(home)
        assert len(webhook.received) == 1 and first in webhook.texts[0]  # the limit holds the other three back
        configure(home, {"notify": {**config["notify"], "rate_limit": "5/1h"}})  # the daemon reloads config.json
        wait_until(lambda: len(webhook.received) == 2, what="the held notices")
        held = webhook.texts[1]
        assert "3 runs changed status (3 failed)" in held and all(r in held for r in later)
        settle(home)
        assert len(webhook.received) == 2
    finally:
        stop_daemon(daemon)


def test_a_failing_sink_is_retried_and_logged_and_a_hanging_one_blocks_neither_the_daemon_nor_email(
        home, tmp_path, webhook, inbox):
    mailbox, port = inbox
    silent = Silent()
    webhook.statuses = [500]  # the webhook fails its first request
    try:
        configure(home, {"notify": {"on": ["failed", "completed_success"], "rate_limit": "10/1m", "timeout_sec": 1,
                                    "retries": 2, "slack": {"url": webhook.url}}})
        daemon = start_daemon(home)
        try:
            submit(home, tmp_path, "broken", "#FRAY --max-retries 0\nexit 3")
            wait_until(lambda: webhook.received, what="the retried webhook post")
            # The daemon logs the send once the post has been answered: a moment after the webhook saw it.
            log = wait_until(lambda: "notify slack: sent 'fray: broken is failed'" in (text := home.daemon_log.read_text())
                             and text, what="the send in daemon.log")
            assert "notify slack: try 1 of 2 for 'fray: broken is failed' failed (HTTP Error 500" in log
            # Now the webhook hangs (accepts, never answers); e-mail must still go out and runs still finish.
            configure(home, {"notify": {"on": ["failed", "completed_success"], "rate_limit": "10/1m",
                                        "timeout_sec": 1, "retries": 2,
                                        "slack": {"url": f"http://127.0.0.1:{silent.port}/hook"},
                                        "email": {"smtp": f"127.0.0.1:{port}", "from": "f@x.org", "to": ["me@x.org"]}}})
            settle(home)
            done = [submit(home, tmp_path, f"ok{i}", "echo fine") for i in range(2)]
            wait_until(lambda: len(mailbox.messages) >= 1 and all(ended(home, r) for r in done), timeout=30,
                       what="the e-mail while the webhook hangs")
            wait_until(lambda: "notify slack: gave up on" in home.daemon_log.read_text(), timeout=30,
                       what="the hanging webhook given up and logged")
            assert "timed out" in home.daemon_log.read_text()
        finally:
            stop_daemon(daemon)
    finally:
        silent.close()
