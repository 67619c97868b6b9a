"""One authenticated connection to an actor server, with pipelined calls.

`Connection.submit` sends a request and returns an `ActorFuture` at once; a
reader thread matches replies to futures by call id, so many calls can be in
flight on one socket. When the connection breaks, every pending future fails
with `ActorConnectionError` and the pool decides whether to retry.
Connections are shared per process (`connect`), keyed by address and secret.
"""

from __future__ import annotations

import hashlib
import itertools
import pickle
import socket
import threading
from typing import Any, Callable

from fray.actors import auth, wire
from fray.errors import FrayError, RemoteTraceback

CONNECT_TIMEOUT_SEC = 5.0


class ActorConnectionError(FrayError, ConnectionError):
    """The actor could not be reached, or the connection broke before it answered."""


class ActorNotFound(FrayError, LookupError):
    """The server at that address no longer serves the actor asked for (unregistered meanwhile)."""



class RemoteActorError(FrayError):
    """An actor raised an exception that could not be sent back as itself."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


def is_remote(exc: BaseException) -> bool:
    """Whether `exc` was raised inside an actor (rather than by the connection to it)."""
    return getattr(exc, "remote_traceback", None) is not None


def rebuild_exception(failure: tuple[bytes | None, str, str, str]) -> BaseException:
    """The remote exception (or a RemoteActorError), with the remote traceback text as its cause."""
    pickled, type_name, message, text = failure
    exc: BaseException | None = None
    if pickled is not None:
        try:
            exc = pickle.loads(pickled)
        except Exception:
            exc = None
    if not isinstance(exc, BaseException):
        exc = RemoteActorError(type_name, message)
    exc.__cause__ = RemoteTraceback(text)
    exc.remote_traceback = text  # type: ignore[attr-defined]
    return exc


class ActorFuture:
    """The eventual result of one actor call."""

    __slots__ = ("_event", "_ok", "_value", "_callbacks", "_lock", "actor")

    def __init__(self, actor: str = "") -> None:
        self._event = threading.Event()
        self._ok = False
        self._value: Any = None
        self._callbacks: list[Callable[["ActorFuture"], None]] = []
        self._lock = threading.Lock()
        self.actor = actor  # which actor (address and id) it went to, for messages

    def done(self) -> bool:
        return self._event.is_set()

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value; re-raises the actor's exception (remote traceback as its cause)."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"the call to {self.actor or 'the actor'} did not finish within {timeout}s")
        if self._ok:
            return self._value
        raise self._value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._event.wait(timeout):
            raise TimeoutError(f"the call to {self.actor or 'the actor'} did not finish within {timeout}s")
        return None if self._ok else self._value

    def add_done_callback(self, callback: Callable[["ActorFuture"], None]) -> None:
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def set_result(self, value: Any) -> None:
        self._settle(True, value)

    def set_exception(self, exc: BaseException) -> None:
        self._settle(False, exc)

    def _settle(self, ok: bool, value: Any) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._ok, self._value = ok, value
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


class Connection:
    def __init__(self, address: str, secret: bytes, timeout: float = CONNECT_TIMEOUT_SEC) -> None:
        self.address = address
        host, _, port = address.rpartition(":")
        try:
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        except (OSError, ValueError) as exc:
            raise ActorConnectionError(f"cannot connect to the actor at {address}: {exc}") from None
        try:
            auth.client_handshake(sock, secret, timeout)
        except auth.AuthError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            raise ActorConnectionError(f"the actor at {address} dropped the handshake: {exc}") from None
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._ids = itertools.count(1)
        self._pending: dict[int, ActorFuture] = {}
        self._send_lock = threading.Lock()
        self.closed = False
        self._reader = threading.Thread(target=self._read_loop, name=f"fray-actor-client-{address}", daemon=True)
        self._reader.start()

    def submit(self, target: str, method: str, args: tuple, kwargs: dict) -> ActorFuture:
        future = ActorFuture(f"{target} at {self.address}")
        call_id = next(self._ids)
        frame = wire.dumps((call_id, target, method, args, kwargs))  # may raise: nothing was sent
        with self._send_lock:
            if self.closed:
                raise ActorConnectionError(f"the connection to {self.address} is closed")
            self._pending[call_id] = future
            try:
                wire.send(self._sock, frame)
            except OSError as exc:
                self._pending.pop(call_id, None)
                self._fail_all(f"sending to {self.address} failed: {exc}")
                raise ActorConnectionError(f"sending to the actor at {self.address} failed: {exc}") from None
        return future

    def _read_loop(self) -> None:
        reader = wire.FrameReader(self._sock)
        try:
            while True:
                call_id, ok, value = reader.read()
                future = self._pending.pop(call_id, None)
                if future is None:
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(rebuild_exception(value))
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self._fail_all(f"the connection to {self.address} broke: {exc}")

    def _fail_all(self, why: str) -> None:
        self.closed = True
        try:
            self._sock.close()
        except OSError:
            pass
        pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(ActorConnectionError(why))

    def close(self) -> None:
        self._fail_all(f"the connection to {self.address} was closed")


_connections: dict[tuple[str, str], Connection] = {}
_connections_lock = threading.Lock()


def connect(address: str, secret: bytes) -> Connection:
    """A shared, open connection to `address` (made, and authenticated, when needed)."""
    key = (address, hashlib.sha256(secret).hexdigest())
    with _connections_lock:
        existing = _connections.get(key)
        if existing is not None and not existing.closed:
            return existing
    fresh = Connection(address, secret)
    with _connections_lock:
        existing = _connections.get(key)
        if existing is not None and not existing.closed:
            fresh.close()
            return existing
        _connections[key] = fresh
    return fresh


def forget(address: str) -> None:
    """Drop the shared connections to `address` (after it failed)."""
    with _connections_lock:
        for key in [k for k in _connections if k[0] == address]:
            _connections.pop(key).close()
