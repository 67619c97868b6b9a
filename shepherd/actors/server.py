"""ActorServer: serve Python objects to authenticated clients, registered by name.

    server = ActorServer(cluster)               # binds at once; port 0 picks a free port
    actor_id = server.register("curriculum", Curriculum(), {"role": "coordinator"})
    server.serve_background()                   # or server.serve() to block
    ...
    server.shutdown(grace=5.0)

`register` writes the endpoint file (namespaces/<ns>/actors/<name>/<id>.json)
that resolvers find; `unregister` and `shutdown` remove it, and the daemon
removes what a dead job left behind. Every method call receives an
`ActorContext` as its first argument. Calls to one actor run one at a time
(`max_concurrency=1`, the default) so its state needs no locks; give a higher
`max_concurrency` to an actor whose methods block waiting for each other (a
barrier). A connection is served only after `auth.server_handshake`: nothing a
peer sends is unpickled before it has proved it can read FRAY_HOME.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fray.actors import auth, wire
from fray.state import endpoints
from fray.actors.client import ActorNotFound
from fray.state.endpoints import Endpoint

if TYPE_CHECKING:
    from fray.actors.resolver import ClusterResolver

log = logging.getLogger("fray.actors")

PING = "__fray_ping__"


@dataclass
class ActorContext:
    """What an actor method gets as its first argument: where it runs and how to find other actors."""

    cluster: Any
    resolver: "ClusterResolver"
    job_id: str | None
    namespace: str

    @classmethod
    def from_environment(cls) -> "ActorContext":
        """The context of the job this process runs in (current_cluster())."""
        from fray.actors.resolver import ClusterResolver
        from fray.cluster import current_cluster

        cluster = current_cluster()
        return cls(cluster=cluster, resolver=ClusterResolver(cluster), job_id=cluster.job_id,
                   namespace=cluster.namespace)


@dataclass
class _Actor:
    actor_id: str
    name: str
    obj: Any
    metadata: dict[str, Any]
    lock: threading.Lock = field(default_factory=threading.Lock)
    pool: ThreadPoolExecutor | None = None


class ActorServer:
    def __init__(self, cluster: Any = None, host: str | None = None, port: int = 0) -> None:
        if cluster is None:
            from fray.cluster import current_cluster

            cluster = current_cluster()
        self.cluster = cluster
        self.namespace: str = cluster.namespace
        self._secret = cluster.secret()
        bind = host if host is not None else cluster.actor_bind_host()
        self._sock = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((bind, port))
        self._sock.listen(512)
        self.port: int = self._sock.getsockname()[1]
        self.host = bind if bind not in ("0.0.0.0", "::", "") else _node_address()
        self._actors: dict[str, _Actor] = {}
        self._by_name: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._inflight = 0
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._context: ActorContext | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- registration ----------------------------------------------------------------

    def register(self, name: str, obj: Any, metadata: dict[str, Any] | None = None, max_concurrency: int = 1) -> str:
        """Serve `obj` under `name` in this job's namespace; its actor id. The endpoint file is written now."""
        endpoints.check_name(name, "actor name")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        actor_id = secrets.token_hex(8)
        actor = _Actor(actor_id, name, obj, dict(metadata or {}),
                       pool=ThreadPoolExecutor(max_concurrency, thread_name_prefix=f"actor-{name}")
                       if max_concurrency > 1 else None)
        with self._lock:
            self._actors[actor_id] = actor
            self._by_name.setdefault(name, actor_id)
        job = self.cluster.job_info_for_endpoint()
        endpoints.write(self.cluster.home, Endpoint(
            actor_id=actor_id, name=name, namespace=self.namespace, host=self.host, port=self.port,
            pid=os.getpid(), node=socket.gethostname(), run_id=job[0], attempt=job[1],
            registered_at=time.time(), metadata=actor.metadata))
        log.info("actor %s (%s) registered at %s in namespace %s", name, actor_id, self.address, self.namespace)
        return actor_id

    def unregister(self, name_or_id: str) -> None:
        """Stop serving an actor (by id, or every actor of a name) and remove its endpoint file."""
        with self._lock:
            ids = [name_or_id] if name_or_id in self._actors else \
                  [a.actor_id for a in self._actors.values() if a.name == name_or_id]
            removed = [self._actors.pop(i) for i in ids]
            for actor in removed:
                if self._by_name.get(actor.name) == actor.actor_id:
                    del self._by_name[actor.name]
                    rest = [a.actor_id for a in self._actors.values() if a.name == actor.name]
                    if rest:
                        self._by_name[actor.name] = rest[0]
        for actor in removed:
            endpoints.remove(self.cluster.home, self.namespace, actor.name, actor.actor_id)
            if actor.pool is not None:
                actor.pool.shutdown(wait=False)

    # -- serving ---------------------------------------------------------------------

    def serve(self) -> None:
        """Accept connections until `shutdown` (blocks)."""
        self._sock.settimeout(0.2)
        while not self._closing.is_set():
            try:
                conn, peer = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._closing.is_set():
                    break
                raise
            conn.settimeout(None)
            threading.Thread(target=self._serve_connection, args=(conn, peer), daemon=True,
                             name=f"fray-actor-conn-{peer[1]}").start()

    def serve_background(self) -> threading.Thread:
        """Serve from a daemon thread; returns it."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve, name=f"fray-actor-server-{self.port}", daemon=True)
            self._thread.start()
        return self._thread

    def shutdown(self, grace: float = 5.0) -> None:
        """Unregister every actor, stop accepting, let calls in flight finish for `grace` seconds, close."""
        for actor_id in list(self._actors):
            self.unregister(actor_id)
        self._closing.set()
        deadline = time.monotonic() + grace
        with self._idle:
            while self._inflight and time.monotonic() < deadline:
                self._idle.wait(max(0.0, deadline - time.monotonic()))
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            _close(conn)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def __enter__(self) -> "ActorServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- one connection ----------------------------------------------------------------

    def _serve_connection(self, conn: socket.socket, peer: Any) -> None:
        try:
            auth.server_handshake(conn, self._secret)
        except (auth.AuthError, OSError) as exc:
            log.warning("actor server %s: dropped a connection from %s:%s that failed authentication: %s",
                        self.address, peer[0], peer[1], exc)
            _close(conn)
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._connections.add(conn)
        send_lock = threading.Lock()
        reader = wire.FrameReader(conn)
        try:
            while not self._closing.is_set():
                try:
                    request = reader.read()
                except (ConnectionError, OSError):
                    return
                self._handle(conn, send_lock, request)
        finally:
            with self._lock:
                self._connections.discard(conn)
            _close(conn)

    def _handle(self, conn: socket.socket, send_lock: threading.Lock, request: Any) -> None:
        call_id, target, method, args, kwargs = request
        with self._lock:
            actor = self._actors.get(target) or self._actors.get(self._by_name.get(target, ""))
        if actor is None:
            self._reply(conn, send_lock, call_id, False, _failure(ActorNotFound(
                f"no actor {target!r} on {self.address} (it was unregistered or never registered here)")))
            return
        with self._idle:
            self._inflight += 1
        if actor.pool is not None:
            try:
                actor.pool.submit(self._run_and_reply, conn, send_lock, call_id, actor, method, args, kwargs, False)
            except RuntimeError:  # unregistered meanwhile: its pool takes no more calls
                with self._idle:
                    self._inflight -= 1
                self._reply(conn, send_lock, call_id, False, _failure(ActorNotFound(
                    f"actor {actor.name!r} was unregistered from {self.address}")))
        else:
            self._run_and_reply(conn, send_lock, call_id, actor, method, args, kwargs, True)

    def _run_and_reply(self, conn: socket.socket, send_lock: threading.Lock, call_id: int, actor: _Actor,
                       method: str, args: tuple, kwargs: dict, serial: bool) -> None:
        try:
            if serial:
                with actor.lock:
                    ok, value = self._invoke(actor, method, args, kwargs)
            else:
                ok, value = self._invoke(actor, method, args, kwargs)
            self._reply(conn, send_lock, call_id, ok, value)
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def _invoke(self, actor: _Actor, method: str, args: tuple, kwargs: dict) -> tuple[bool, Any]:
        if method == PING:
            return True, actor.actor_id
        if method.startswith("_"):
            return False, _failure(AttributeError(f"actor {actor.name!r} does not expose private method {method!r}"))
        try:
            bound = getattr(actor.obj, method)
        except AttributeError:
            return False, _failure(AttributeError(f"actor {actor.name!r} ({type(actor.obj).__name__}) has no method "
                                                  f"{method!r}"))
        try:
            return True, bound(self.context, *args, **kwargs)
        except BaseException as exc:  # the caller gets it, with the traceback text
            return False, _failure(exc)

    @property
    def context(self) -> ActorContext:
        if self._context is None:
            from fray.actors.resolver import ClusterResolver

            self._context = ActorContext(cluster=self.cluster, resolver=ClusterResolver(self.cluster),
                                         job_id=self.cluster.job_id, namespace=self.namespace)
        return self._context

    def _reply(self, conn: socket.socket, send_lock: threading.Lock, call_id: int, ok: bool, value: Any) -> None:
        try:
            frame = wire.dumps((call_id, ok, value))
        except Exception as exc:  # an unpicklable return value is the method's failure, not the server's
            frame = wire.dumps((call_id, False, _failure(TypeError(f"the result could not be serialized: {exc}"))))
        try:
            with send_lock:
                wire.send(conn, frame)
        except OSError:
            pass  # the client went away; its pool retries elsewhere


def _failure(exc: BaseException) -> tuple[bytes | None, str, str, str]:
    """(pickled exception or None, type name, message, traceback text): what a failed call sends back."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        import cloudpickle

        pickled: bytes | None = cloudpickle.dumps(exc)
    except Exception:
        pickled = None
    return pickled, f"{type(exc).__module__}.{type(exc).__qualname__}", str(exc), text


def _close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        conn.close()
    except OSError:
        pass


def _node_address() -> str:
    """An address other nodes can reach this one at."""
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name
