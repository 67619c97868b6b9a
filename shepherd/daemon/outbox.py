"""One sink's sender: a bounded queue and a thread that sends, retries with backoff, and logs.

The reconcile loop only posts (never waits: a full queue drops the letter and
logs it). The thread tries each letter up to `retries` times, waiting
`backoff_sec`, then twice as long, between tries, and logs every failed try
and the letter it gives up on to the daemon's log (daemon.log). A sink that
hangs costs its own thread the call's timeout, never the loop or another sink.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger("fray.notify")

CAPACITY = 100  # letters waiting per sink; the rate limit keeps far fewer in flight


@dataclass(frozen=True)
class Letter:
    subject: str
    text: str


class Outbox:
    def __init__(self, name: str, send: Callable[[Letter], None], retries: int, backoff_sec: float = 1.0) -> None:
        self.name = name
        self._send = send
        self._retries = retries
        self._backoff_sec = backoff_sec
        self._letters: queue.Queue[Letter | None] = queue.Queue(CAPACITY)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._work, name=f"fray-notify-{name}", daemon=True)
        self._thread.start()

    def post(self, letter: Letter) -> bool:
        """Queue `letter` for sending; False (logged) when the queue is full."""
        try:
            self._letters.put_nowait(letter)
        except queue.Full:
            log.error("notify %s: %d messages already waiting, dropped %r", self.name, CAPACITY, letter.subject)
            return False
        return True

    def close(self, wait_sec: float = 0.0) -> None:
        """Stop after the try in progress (a backoff wait ends at once); what still waits is logged as dropped.

        Waits at most `wait_sec` for the thread: 0 when a config edit replaces the sink (the loop never
        waits on a sink), a little at the daemon's stop so a message in flight can still arrive.
        """
        self._closed.set()
        try:
            self._letters.put_nowait(None)
        except queue.Full:
            pass  # the thread is busy with a letter and sees `_closed` when it is done
        if wait_sec > 0:
            self._thread.join(wait_sec)

    def _work(self) -> None:
        while True:
            letter = self._letters.get()
            if letter is None or self._closed.is_set():
                break
            self._deliver(letter)
        left = [letter]
        while not self._letters.empty():
            left.append(self._letters.get_nowait())
        subjects = [repr(item.subject) for item in left if item is not None]
        if subjects:
            log.warning("notify %s: stopped with %d messages not sent: %s", self.name, len(subjects),
                        "; ".join(subjects))

    def _deliver(self, letter: Letter) -> None:
        for attempt in range(1, self._retries + 1):
            try:
                self._send(letter)
            except Exception as exc:  # any failure of a sink is logged, never raised into the daemon
                if attempt == self._retries or self._closed.is_set():
                    log.error("notify %s: gave up on %r after %d tries: %s", self.name, letter.subject, attempt, exc)
                    return
                wait = self._backoff_sec * 2 ** (attempt - 1)
                log.warning("notify %s: try %d of %d for %r failed (%s); retrying in %.0fs", self.name, attempt,
                            self._retries, letter.subject, exc, wait)
                if self._closed.wait(wait):
                    log.error("notify %s: gave up on %r: the daemon is stopping", self.name, letter.subject)
                    return
            else:
                log.info("notify %s: sent %r", self.name, letter.subject)
                return
