"""The actor wire (fray.actors.wire): large buffers go beside the pickle and come back whole and as what they were,
through real actors on 127.0.0.1; a frame cut short is a clear error."""

from __future__ import annotations

import os
import pickle
import socket
import threading

import numpy as np
import pytest

from fray import ActorServer, ClusterResolver, LocalCluster
from fray.actors import auth, client, wire

MB = 1 << 20


class Echo:
    def echo(self, ctx, value):
        return value

    def describe(self, ctx, value):
        return type(value).__name__, bytes(value) if not isinstance(value, np.ndarray) else value.tobytes()


@pytest.fixture
def echo():
    with LocalCluster(namespace="wire") as cluster:
        server = ActorServer(cluster)
        server.register("echo", Echo())
        server.serve_background()
        yield ClusterResolver(cluster).lookup("echo")
        server.shutdown(grace=0.5)


def test_large_bytes_a_bytearray_a_memoryview_and_an_array_come_back_whole_and_as_what_they_were(echo):
    data = os.urandom(MB)
    assert echo.call().echo(data) == data and type(echo.call().echo(data)) is bytes
    back = echo.call().echo(bytearray(data))
    assert type(back) is bytearray and back == data
    view = echo.call().echo(memoryview(bytearray(data)).cast("i"))
    assert type(view) is memoryview and (view.format, view.nbytes, view.readonly) == ("i", MB, False)
    assert view.tobytes() == data
    assert echo.call().echo(memoryview(data)).readonly  # a view of bytes stays read-only
    array = np.frombuffer(data, dtype=np.float32).reshape(512, 512).copy()
    returned = echo.call().echo(array)
    assert returned.dtype == np.float32 and returned.shape == (512, 512)
    assert np.array_equal(returned, array, equal_nan=True) and returned.flags.writeable
    strided = echo.call().echo(memoryview(bytearray(data))[::2])  # not contiguous: sent as its bytes
    assert strided.tobytes() == data[::2]


def test_buffers_inside_arguments_and_small_ones_travel_too(echo):
    data = os.urandom(MB)
    nested = {"chunks": [data, bytearray(data[:100])], "name": "x", "pair": (b"", data)}
    assert echo.call().echo(nested) == nested
    assert echo.call().describe(memoryview(b"small")) == ("memoryview", b"small")
    assert echo.call().describe(np.arange(3, dtype=np.int8)) == ("ndarray", b"\x00\x01\x02")
    deep = [[[data]]]  # deeper than the walk: in the pickle, still whole
    assert echo.call().echo(deep) == deep


def test_a_large_buffer_is_sent_from_its_own_memory_not_copied_into_the_pickle():
    data = os.urandom(MB)
    head, body, *buffers = wire.dumps((7, True, data))
    assert len(body) < 1024 and [piece.obj for piece in buffers] == [data]
    small = wire.dumps((7, True, b"tiny"))
    assert len(small) == 1 and pickle.loads(small[0][wire.HEADER.size:]) == (7, True, b"tiny")  # framed as before


def reader_of(pieces: list[bytes]) -> wire.FrameReader:
    """A reader of a peer that sends `pieces`, then hangs up (from a thread: more than a socket buffer holds)."""
    ours, theirs = socket.socketpair()

    def peer() -> None:
        theirs.sendall(b"".join(pieces))
        theirs.close()

    threading.Thread(target=peer, daemon=True).start()
    return wire.FrameReader(ours)


@pytest.mark.parametrize("cut", [2, 30, MB // 2])  # inside the header, the pickle, the buffer
def test_a_frame_cut_short_is_a_clear_error(cut: int):
    frame = b"".join(wire.dumps((1, True, os.urandom(MB))))
    with pytest.raises(wire.FrameError, match="closed inside a frame"):
        reader_of([frame[:cut]]).read()
    reader = reader_of([frame])
    assert len(reader.read()[2]) == MB
    with pytest.raises(ConnectionError, match="the connection was closed"):  # between frames: the peer left
        reader.read()


def test_a_reply_cut_short_fails_the_call_saying_so():
    with LocalCluster(namespace="wire") as cluster:
        listener = socket.create_server(("127.0.0.1", 0))

        def cutting_server() -> None:
            conn, _ = listener.accept()
            auth.server_handshake(conn, cluster.secret())
            call_id = wire.FrameReader(conn).read()[0]
            frame = b"".join(wire.dumps((call_id, True, os.urandom(MB))))
            conn.sendall(frame[: len(frame) // 2])
            conn.close()

        threading.Thread(target=cutting_server, daemon=True).start()
        connection = client.Connection(f"127.0.0.1:{listener.getsockname()[1]}", cluster.secret())
        future = connection.submit("echo", "echo", (b"x",), {})
        with pytest.raises(client.ActorConnectionError, match="closed inside a frame"):
            future.result(timeout=10)
        listener.close()
