"""Actors over real sockets on 127.0.0.1: registration files, pools, futures, failures, the handshake."""

from __future__ import annotations

import json
import logging
import os
import pickle
import socket
import stat
import threading
import time

import pytest

from conftest import schema_validate, wait_until
from fray import (ActorConnectionError, ActorContext, ActorServer, ClusterResolver, FixedResolver, LocalCluster,
                      WorkerPool)
from fray.actors import auth, client, wire
from fray.state import actor_secret


@pytest.fixture
def cluster():
    with LocalCluster(namespace="tests") as c:
        yield c


class Echo:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.calls = 0

    def whoami(self, ctx: ActorContext, suffix: str = "") -> str:
        self.calls += 1
        return self.tag + suffix

    def context(self, ctx: ActorContext) -> tuple[str, str | None]:
        return ctx.namespace, ctx.job_id

    def explode(self, ctx: ActorContext) -> None:
        if self.tag == "b":
            raise KeyError(f"actor {self.tag} has no such key")
        return None


@pytest.fixture
def three(cluster):
    servers = []
    for tag in "abc":
        server = ActorServer(cluster)
        server.register("echo", Echo(tag), {"tag": tag})
        server.serve_background()
        servers.append(server)
    yield servers
    for server in servers:
        server.shutdown(grace=0.5)


def test_register_writes_a_valid_private_endpoint_file_and_unregister_removes_it(cluster):
    server = ActorServer(cluster)
    actor_id = server.register("solo", Echo("x"), {"role": "test"})
    path = cluster.home.endpoint("tests", "solo", actor_id)
    record = json.loads(path.read_text())
    schema_validate("endpoint", record)
    assert record["port"] == server.port and record["metadata"] == {"role": "test"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    server.unregister("solo")
    assert not path.exists()
    server.shutdown(grace=0)


def test_calls_go_round_robin_and_broadcast_reaches_everyone(three, cluster):
    pool = ClusterResolver(cluster).lookup("echo")
    assert pool.wait_for_size(3, timeout=5) == 3
    answers = [pool.call().whoami("!") for _ in range(6)]
    assert sorted(answers) == ["a!", "a!", "b!", "b!", "c!", "c!"]
    futures = pool.broadcast().whoami()
    assert sorted(f.result(timeout=5) for f in futures) == ["a", "b", "c"]
    assert pool.call().context() == ("tests", None)


def test_a_failing_actor_reraises_with_the_remote_traceback_and_broadcast_includes_it(three, cluster):
    pool = ClusterResolver(cluster).lookup("echo")
    pool.wait_for_size(3, timeout=5)
    futures = pool.broadcast().explode()
    errors = [f.exception(timeout=5) for f in futures]
    assert sum(e is None for e in errors) == 2
    failure = next(e for e in errors if e is not None)
    assert isinstance(failure, KeyError) and "actor b has no such key" in str(failure)
    assert "in explode" in failure.remote_traceback and "in explode" in str(failure.__cause__)
    assert all(f.done() for f in futures)
    with pytest.raises(KeyError):
        for _ in range(3):
            pool.call().explode()


def test_wait_for_size_times_out_and_a_missing_method_is_an_attribute_error(three, cluster):
    pool = ClusterResolver(cluster).lookup("nobody")
    with pytest.raises(TimeoutError, match="0 of 1"):
        pool.wait_for_size(1, timeout=0.3)
    echo = ClusterResolver(cluster).lookup("echo")
    with pytest.raises(AttributeError, match="no method 'nope'"):
        echo.call().nope()


def test_a_dead_endpoint_is_skipped_and_calls_go_to_the_living(three, cluster):
    pool = ClusterResolver(cluster).lookup("echo")
    pool.wait_for_size(3, timeout=5)
    dead = three[0]
    for actor_id in list(dead._actors):  # die without unregistering: the endpoint file stays behind
        dead._actors.pop(actor_id)
    dead._closing.set()
    dead._sock.close()
    for conn in list(dead._connections):
        conn.close()
    answers = {pool.call(timeout=10).whoami() for _ in range(6)}
    assert answers <= {"b", "c"} and answers
    assert pool.size == 2


def test_fixed_resolver_finds_a_server_by_address(cluster, three):
    pool = FixedResolver({"echo": [three[1].address]}, cluster=cluster).lookup("echo")
    assert pool.size == 1 and pool.call().whoami() == "b"


def test_a_fixed_resolver_with_another_homes_secret_fails_clearly_and_soon(three, tmp_path, monkeypatch):
    """No cluster given and FRAY_HOME elsewhere: a secret the server never accepts is an error, not a hang."""
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "another home"))
    pool = FixedResolver({"echo": three[0].address}).lookup("echo")
    started = time.monotonic()
    with pytest.raises(ConnectionError) as raised:
        pool.call(timeout=None).whoami()
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert "refused this process 3 times" in message and "FRAY_HOME" in message
    assert not isinstance(raised.value, ActorConnectionError)  # not a connection problem that retrying fixes


def test_pipelined_calls_on_one_connection_keep_their_order_of_answers(three, cluster):
    pool = FixedResolver({"echo": three[2].address}, cluster=cluster).lookup("echo")
    futures = [pool.call_async().whoami(str(i)) for i in range(200)]
    assert [f.result(timeout=10) for f in futures] == [f"c{i}" for i in range(200)]


class CreatesFile:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_client_without_the_secret_never_gets_a_byte_unpickled(cluster, tmp_path, caplog):
    server = ActorServer(cluster)
    server.register("target", Echo("t"))
    server.serve_background()
    marker = tmp_path / ("pwned-" + "x" * 60)
    frame = wire.HEADER.pack(0) + pickle.dumps(CreatesFile(str(marker)))
    assert len(frame) > auth.NONCE_BYTES + auth.MAC_BYTES  # enough bytes to be read as a (wrong) proof
    pickle.loads(frame[wire.HEADER.size:]).close()  # the payload really would create the file...
    marker.unlink()
    with caplog.at_level(logging.WARNING, logger="fray.actors"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            hello = auth.recv_exact(sock, len(auth.MAGIC) + auth.NONCE_BYTES)
            assert hello.startswith(auth.MAGIC)
            sock.sendall(frame + frame)
            assert sock.recv(1024) == b""  # ...but the server hangs up instead
        wait_until(lambda: "failed authentication" in caplog.text, what="the server's log line")
    assert not marker.exists()
    # A client with another secret is refused the same way, and says why.
    with pytest.raises(ConnectionError):
        client.Connection(server.address, b"0" * 64)
    server.shutdown(grace=0)


def test_a_server_that_does_not_know_the_secret_is_not_believed(cluster):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def impostor() -> None:
        conn, _ = listener.accept()
        conn.sendall(auth.MAGIC + os.urandom(auth.NONCE_BYTES))
        auth.recv_exact(conn, auth.NONCE_BYTES + auth.MAC_BYTES)
        conn.sendall(os.urandom(auth.MAC_BYTES) + b"".join(wire.dumps((1, True, "a pickle the client must not read"))))
        try:
            conn.recv(1)  # until the client hangs up
        except OSError:
            pass
        conn.close()

    threading.Thread(target=impostor, daemon=True).start()
    with pytest.raises(auth.AuthError, match="does not know"):
        client.Connection(f"127.0.0.1:{listener.getsockname()[1]}", cluster.secret())
    listener.close()


def test_a_server_too_slow_to_shake_hands_is_a_connection_error_not_an_auth_failure(cluster):
    listener = socket.socket()  # accepts (the kernel's backlog) but never says hello
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        with pytest.raises(ActorConnectionError, match="handshake in time") as raised:
            client.Connection(f"127.0.0.1:{listener.getsockname()[1]}", cluster.secret(), timeout=0.3)
        assert not isinstance(raised.value, auth.AuthError)  # an ActorPool retries it; a wrong secret it does not
    finally:
        listener.close()


def test_the_secret_is_private_and_a_readable_one_is_refused(tmp_path):
    path = tmp_path / "home" / "secret"
    first = actor_secret.load_secret(path)
    assert actor_secret.load_secret(path) == first and stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    with pytest.raises(Exception, match="private"):
        actor_secret.load_secret(path)


def test_a_worker_pool_runs_tasks_on_worker_jobs(cluster):
    with WorkerPool(cluster, num_workers=3, name="squares") as pool:
        assert pool.wait_for_workers(timeout=10) == 3
        assert list(pool.map(lambda x: x * x, range(20))) == [x * x for x in range(20)]
        future = pool.submit(divmod, 7, 0)
        with pytest.raises(ZeroDivisionError):
            future.result(timeout=10)
        assert pool.size == 3
    assert ClusterResolver(cluster).lookup(pool.actor_name).size == 0  # the workers unregistered


def test_no_actor_anywhere_is_a_connection_error_after_the_timeout(cluster):
    with pytest.raises(ActorConnectionError, match="no actor named 'ghost'"):
        ClusterResolver(cluster).lookup("ghost").call(timeout=0.2).anything()


class Relay:
    def relay(self, ctx: ActorContext) -> str:
        return ctx.resolver.lookup("missing").call(timeout=0.2).anything()


def test_a_connection_error_raised_inside_an_actor_is_its_failure_not_a_reason_to_retry(cluster):
    server = ActorServer(cluster)
    server.register("relay", Relay())
    server.serve_background()
    pool = ClusterResolver(cluster).lookup("relay")
    with pytest.raises(ActorConnectionError, match="no actor named 'missing'") as caught:
        pool.call(timeout=10).relay()
    assert caught.value.remote_traceback and pool.size == 1  # the relay was not marked dead
    server.shutdown(grace=0)
