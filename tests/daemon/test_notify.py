"""Notifications, the pure part and the outbox: which changes are told, de-duplication, the rate limit, config errors."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from conftest import run_fray, wait_until
from fray.core.notify import Notifier, NotifySettings, RateLimit, Slack, parse_rate_limit, render, settings_from
from fray.daemon.outbox import Letter, Outbox

SETTINGS = NotifySettings(on=frozenset({"crash_loop", "failed"}), rate_limit=RateLimit(1, 600),
                          repeat_after_sec=3600, slack=Slack("http://127.0.0.1:9/hook"))


def test_only_a_change_into_a_chosen_status_is_told_and_first_sight_is_not_a_change():
    notifier = Notifier(SETTINGS)
    assert notifier.observe("r1", "train", "failed", "budget spent", 0) is None  # a restarted daemon's first look
    assert notifier.observe("r2", "eval", "healthy_running", "", 0) is None
    assert notifier.observe("r2", "eval", "restarting", "exit 3", 1) is None  # not chosen
    notice = notifier.observe("r2", "eval", "failed", "workload failed 4 times", 2)
    assert (notice.run_id, notice.previous, notice.status) == ("r2", "restarting", "failed")
    message = notifier.due(2)
    assert [n.run_id for n in message.notices] == ["r2"] and notifier.due(3) is None


def test_a_crash_loop_flapping_for_an_hour_is_one_message():
    notifier = Notifier(NotifySettings(on=frozenset({"crash_loop"}), rate_limit=RateLimit(100, 60),
                                       repeat_after_sec=3600, slack=Slack("http://x/")))
    notifier.observe("r1", "train", "restarting", "", 0)
    messages = []
    for t in range(1, 3600, 30):  # restarting <-> crash_loop every 15 s
        notifier.observe("r1", "train", "crash_loop", "3 fast failures", t)
        notifier.observe("r1", "train", "restarting", "backing off", t + 15)
        messages += filter(None, [notifier.due(t + 15)])
    assert len(messages) == 1
    notifier.observe("r1", "train", "crash_loop", "still", 3601)  # an hour on: told again, once
    assert len(notifier.due(3601).notices) == 1


def test_the_rate_limit_holds_notices_back_and_sends_them_together_when_it_allows():
    notifier = Notifier(SETTINGS)  # one message per 10 minutes
    for run in ("a", "b", "c"):
        notifier.observe(run, run, "healthy_running", "", 0)
    notifier.observe("a", "a", "failed", "x", 1)
    assert len(notifier.due(1).notices) == 1
    notifier.observe("b", "b", "crash_loop", "y", 2)
    notifier.observe("c", "c", "failed", "z", 300)
    assert notifier.due(300) is None and notifier.waiting == 2
    held = notifier.due(601)
    assert [(n.run_id, n.status) for n in held.notices] == [("b", "crash_loop"), ("c", "failed")]
    assert notifier.waiting == 0


def test_many_runs_failing_at_once_are_one_message_with_a_counted_tail():
    notifier = Notifier(SETTINGS)
    for index in range(30):
        notifier.observe(f"r{index}", f"job{index}", "healthy_running", "", 0)
        notifier.observe(f"r{index}", f"job{index}", "failed" if index % 3 else "crash_loop", "exit 1", 5)
    subject, text = render(notifier.due(5), "fray daemon on login1 for /home/me/.fray")
    assert subject == "fray: 30 runs changed status (20 failed, 10 crash_loop)"
    assert "r0 (job0): healthy_running -> crash_loop: exit 1" in text
    assert "... and 10 more" in text and "login1" in text


def test_one_notice_reads_as_a_sentence_with_the_command_to_look_closer():
    notifier = Notifier(SETTINGS)
    notifier.observe("20260101-train-ab12", "train", "restarting", "", 0)
    notifier.observe("20260101-train-ab12", "train", "failed", "workload failed 4 times (exit 3)", 1)
    subject, text = render(notifier.due(1), "fray daemon on login1 for /scratch/fray")
    assert subject == "fray: train is failed"
    assert "workload failed 4 times (exit 3)" in text and "fray status 20260101-train-ab12" in text


@pytest.mark.parametrize("section, words", [
    ({"slack": {"url": "http://h/"}, "rate_limit": "ten/1m"}, "notify.rate_limit 'ten/1m': expected MESSAGES/PERIOD"),
    ({"slack": {"url": "http://h/"}, "rate_limit": "1/10x"}, "like 1/10m"),
    ({"slack": {"url": "http://h/"}, "rate_limit": "1/0s"}, "longer than 0"),
    ({"email": {"smtp": "mail:99999", "from": "a@b", "to": ["c@d"]}}, "notify.email.smtp 'mail:99999'"),
    ({"email": {"smtp": "mail", "from": "a@b", "to": ["c@d"], "user": "me"}}, "`user` and `password_env`"),
    ({"rate_limit": "1/1m"}, "name at least one sink"),
])
def test_settings_that_cannot_work_are_refused_naming_the_key(section, words):
    with pytest.raises(ValueError) as caught:
        settings_from({"notify": section})
    assert words in str(caught.value)


def test_settings_defaults_and_smtp_ports():
    settings = settings_from({"notify": {"email": {"smtp": "mail.example.com", "starttls": True,
                                                   "from": "fray@x.org", "to": ["me@x.org"]}}})
    assert (settings.email.host, settings.email.port) == ("mail.example.com", 587)
    assert settings.rate_limit == parse_rate_limit("5/10m") == RateLimit(5, 600)
    assert settings.on == {"unresponsive", "crash_loop", "failed", "failed_config"} and settings.sinks == ("email",)
    assert settings_from({"notify": {"email": {"smtp": "[::1]:2525", "from": "a@b", "to": ["c@d"]}}}).email.port == 2525
    assert settings_from({}) is None


def test_a_bad_notify_section_is_an_error_every_command_reports_with_the_file_and_the_fix(home):
    home.root.mkdir(parents=True, exist_ok=True)
    home.config.write_text(json.dumps({"notify": {"slack": {"url": "http://h/"}, "rate_limit": "1 per minute"}}))
    done = run_fray("tpus", home=home.root)
    assert done.returncode == 2
    assert "notify.rate_limit '1 per minute'" in done.stderr and str(home.config) in done.stderr
    done = run_fray("tpus", "--json", home=home.root)
    assert "notify.rate_limit" in json.loads(done.stdout)["error"]["message"]
    home.config.write_text(json.dumps({"notify": {"slack": {"url": "ftp://h/"}}}))
    assert "notify.slack.url" in run_fray("tpus", home=home.root).stderr


def test_the_outbox_retries_a_failing_sink_with_backoff_and_logs_each_failure(caplog):
    tries: list[str] = []
    delivered = threading.Event()

    def send(letter: Letter) -> None:
        tries.append(letter.subject)
        if len(tries) < 3:
            raise ConnectionRefusedError("connection refused")
        delivered.set()

    caplog.set_level(logging.INFO, "fray.notify")
    outbox = Outbox("slack", send, retries=3, backoff_sec=0.01)
    try:
        assert outbox.post(Letter("fray: train is failed", "..."))
        wait_until(delivered.is_set, what="the third try")
    finally:
        outbox.close()
    assert tries == ["fray: train is failed"] * 3
    failures = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(failures) == 2 and "try 1 of 3" in failures[0] and "connection refused" in failures[0]


def test_the_outbox_gives_up_after_its_tries_and_goes_on_with_the_next_letter(caplog):
    sent: list[str] = []

    def send(letter: Letter) -> None:
        if letter.subject == "bad":
            raise OSError("sink down")
        sent.append(letter.subject)

    caplog.set_level(logging.INFO, "fray.notify")
    outbox = Outbox("email", send, retries=2, backoff_sec=0.01)
    try:
        outbox.post(Letter("bad", ""))
        outbox.post(Letter("good", ""))
        wait_until(lambda: sent == ["good"], what="the next letter")
    finally:
        outbox.close()
    assert any("gave up on 'bad' after 2 tries: sink down" in r.getMessage() for r in caplog.records)


def _smtp_with_login(inbox):
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    from notify_support import free_port

    def authenticator(server, session, envelope, mechanism, auth_data):
        return AuthResult(success=(auth_data.login, auth_data.password) == (b"fray", b"s3cret"))

    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), authenticator=authenticator,
                            auth_require_tls=False, auth_required=True)  # no mail without a login
    controller.start()
    return controller


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # a test server on 127.0.0.1
def test_email_logs_in_with_the_password_from_the_named_environment_variable(monkeypatch):
    from fray.core.notify import Email
    from fray.daemon.sinks import SinkError, send_email
    from notify_support import Inbox

    inbox = Inbox()
    controller = _smtp_with_login(inbox)
    try:
        email = Email("127.0.0.1", controller.port, "fray@x.org", ("me@x.org",), user="fray",
                      password_env="FRAY_TEST_SMTP_PASSWORD")
        monkeypatch.delenv("FRAY_TEST_SMTP_PASSWORD", raising=False)
        with pytest.raises(SinkError, match="no FRAY_TEST_SMTP_PASSWORD"):
            send_email(email, "subject", "text", timeout=5)
        monkeypatch.setenv("FRAY_TEST_SMTP_PASSWORD", "s3cret")
        send_email(email, "fray: train is failed", "r1 (train): restarting -> failed", timeout=5)
    finally:
        controller.stop()
    [message] = inbox.messages
    assert message["Subject"] == "fray: train is failed" and "restarting -> failed" in message.get_content()
