"""ActorPool: every actor registered under one name, called round robin or all at once.

    pool = resolver.lookup("inference")
    pool.wait_for_size(4, timeout=60)          # TimeoutError if fewer register in time
    text = pool.call().generate("hello")       # one actor, round robin; blocks for the result
    future = pool.call_async().generate("hi")  # an ActorFuture (pipelining)
    futures = pool.broadcast().reload(path)    # one ActorFuture per actor, failures included

Endpoints are re-read from the resolver at most every `REFRESH_SEC` (and at
once after a failure). A call whose connection fails before the answer arrives
is retried on another actor, after re-resolving, until `timeout`: so when an
actor's job dies and restarts, callers see a delay, not an error. Such a call
may run twice (at least once); a method that raises is never retried. An actor
that failed is skipped for `DEAD_SEC` while its endpoint is still listed.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Callable

from fray.actors import client
from fray.actors.auth import AuthError
from fray.actors.client import ActorConnectionError, ActorFuture
from fray.actors.target import Target

REFRESH_SEC = 1.0
DEAD_SEC = 10.0
DEFAULT_TIMEOUT_SEC = 120.0
RETRY_PAUSE_SEC = 0.05
AUTH_ATTEMPTS = 3  # refusals of our secret before a call gives up (a restarting server may refuse once)
AUTH_RETRY_PAUSE_SEC = 0.2


class ActorPool:
    def __init__(self, resolver: Any, name: str) -> None:
        self.resolver = resolver
        self.name = name
        self._secret: bytes | None = None
        self._targets: list[Target] = []
        self._refreshed_at = float("-inf")
        self._dead: dict[str, float] = {}  # str(target) -> until
        self._turn = itertools.count()
        self._lock = threading.Lock()

    # -- what is there ---------------------------------------------------------------

    def _refresh(self, force: bool = False) -> list[Target]:
        now = time.monotonic()
        if force or now - self._refreshed_at > REFRESH_SEC:
            targets = self.resolver.resolve(self.name)
            with self._lock:
                self._targets = targets
                self._refreshed_at = now
                self._dead = {k: v for k, v in self._dead.items() if v > now}
        return self._targets

    def alive_targets(self, force: bool = False) -> list[Target]:
        """The actors registered under the name, less those marked dead lately; `force` reads the registry now."""
        targets = self._refresh(force)
        now = time.monotonic()
        return [t for t in targets if self._dead.get(str(t), 0.0) <= now]

    @property
    def size(self) -> int:
        """How many actors are registered under the name now (dead ones excluded)."""
        return len(self.alive_targets(force=True))

    @property
    def endpoints(self) -> list[str]:
        """Their addresses, as `actor@host:port`."""
        return [str(t) for t in self.alive_targets(force=True)]

    def wait_for_size(self, n: int, timeout: float | None = None) -> int:
        """Wait until at least `n` actors are registered; their number. TimeoutError at the deadline."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while True:
            count = len(self.alive_targets(force=True))
            if count >= n:
                return count
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"only {count} of {n} actors named {self.name!r} registered within {timeout}s")
            time.sleep(pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(0.25, pause * 1.5)

    def mark_dead(self, target: Target) -> None:
        """Skip `target` for a while (it did not answer) and read the registry afresh on the next call."""
        client.forget(target.address)
        with self._lock:
            self._dead[str(target)] = time.monotonic() + DEAD_SEC
        self._refreshed_at = float("-inf")

    def _secret_bytes(self) -> bytes:
        if self._secret is None:
            self._secret = self.resolver.secret()
        return self._secret

    # -- calling ---------------------------------------------------------------------

    def call(self, timeout: float | None = DEFAULT_TIMEOUT_SEC) -> "_Proxy":
        """`pool.call().method(*args)`: one actor, round robin; returns its result (retried on connection loss)."""
        return _Proxy(lambda method, args, kwargs: self._call(method, args, kwargs, timeout))

    def call_async(self, timeout: float | None = DEFAULT_TIMEOUT_SEC) -> "_Proxy":
        """`pool.call_async().method(*args)`: like call() but returns an ActorFuture at once."""
        return _Proxy(lambda method, args, kwargs: self._submit(method, args, kwargs, timeout))

    def broadcast(self) -> "_Proxy":
        """`pool.broadcast().method(*args)`: every actor; a list of ActorFuture, one per actor."""
        return _Proxy(self._broadcast)

    def _pick(self, deadline: float | None) -> Target:
        pause = 0.01
        while True:
            alive = self.alive_targets()
            if not alive:
                alive = self.alive_targets(force=True)
            if alive:
                return alive[next(self._turn) % len(alive)]
            if deadline is not None and time.monotonic() >= deadline:
                raise ActorConnectionError(f"no actor named {self.name!r} is registered (waited until the timeout)")
            time.sleep(pause)
            pause = min(0.25, pause * 1.5)

    def _call(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Exception | None = None
        rejected = 0
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                raise ActorConnectionError(f"calling {self.name}.{method} failed until the timeout; last: {last}")
            target = self._pick(deadline)
            try:
                future = client.connect(target.address, self._secret_bytes()).submit(target.actor, method, args, kwargs)
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                return future.result(remaining)
            except AuthError as exc:
                # A server restarting may briefly hold another secret; one that keeps refusing
                # will never accept: no amount of retrying helps, so say what to check.
                rejected += 1
                if rejected >= AUTH_ATTEMPTS:
                    raise AuthError(f"the actor {self.name!r} at {target.address} refused this process {rejected} "
                                    f"times: {exc}. Both sides must read the same FRAY_HOME secret: run this with "
                                    "the server's FRAY_HOME, or give FixedResolver(cluster=...) or (home=...)") from None
                client.forget(target.address)
                time.sleep(AUTH_RETRY_PAUSE_SEC * rejected)
            except (ActorConnectionError, client.ActorNotFound) as exc:
                if client.is_remote(exc) and not isinstance(exc, client.ActorNotFound):
                    raise  # the actor itself raised it (e.g. calling another actor): not ours to retry
                last = exc  # connection lost, or unregistered at that server meanwhile: resolve again
                self.mark_dead(target)
                time.sleep(RETRY_PAUSE_SEC)

    def _submit(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> ActorFuture:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            target = self._pick(deadline)
            try:
                return client.connect(target.address, self._secret_bytes()).submit(target.actor, method, args, kwargs)
            except ActorConnectionError:
                self.mark_dead(target)
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def _broadcast(self, method: str, args: tuple, kwargs: dict) -> list[ActorFuture]:
        futures = []
        for target in self.alive_targets(force=True):
            try:
                futures.append(client.connect(target.address, self._secret_bytes()).submit(target.actor, method, args,
                                                                                           kwargs))
            except ActorConnectionError as exc:
                self.mark_dead(target)
                failed = ActorFuture(str(target))
                failed.set_exception(exc)
                futures.append(failed)
        return futures

    def __repr__(self) -> str:
        return f"ActorPool({self.name!r}, size={len(self._targets)})"


class _Proxy:
    """`proxy.method(*args, **kwargs)` sends `method` through the pool's chosen way of calling."""

    __slots__ = ("_send",)

    def __init__(self, send: Callable[[str, tuple, dict], Any]) -> None:
        self._send = send

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)
        send = self._send
        return lambda *args, **kwargs: send(method, args, kwargs)
