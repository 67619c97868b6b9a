"""Framing of messages on an authenticated actor connection.

A frame is a 4-byte big-endian length and that many bytes of cloudpickle (protocol 5).
Requests are `(call_id, actor, method, args, kwargs)`; replies are
`(call_id, ok, value)` where a failed call's value is `RemoteFailure`'s
fields. Frames are read through a buffer so that pipelined replies cost one
`recv` for many. Nothing here runs before `auth` has accepted the peer.

Large buffers travel beside the pickle, not in it (pickle protocol 5's out-of-band buffers): a
numpy array, a `pickle.PickleBuffer`, a memoryview, and bytes or a bytearray of OUT_OF_BAND_MIN
bytes or more in the message's first levels (an argument, the result, an item of a list, tuple or
dict of at most WALK_MAX items passed as one). Such a frame sets the length's top bit and goes on
with a 4-byte count of buffers and each one's 8-byte size, then the pickle, then the buffers:

    !I len(pickle) | OUT_OF_BAND   !I count   !Q size * count   pickle   buffer * count

It is sent with one `sendmsg` of all the pieces, the buffers' own memory (no copy into the pickle,
no concatenation), and each buffer is received with `recv_into` a bytearray of its size, which a
bytearray or an array unpickles onto without a copy (bytes, immutable, costs one). Small messages
are framed as before, in one piece. A connection that ends inside a frame raises `FrameError`
saying how much of it came.
"""

from __future__ import annotations

import io
import pickle
import socket
import struct
from typing import Any, Callable

HEADER = struct.Struct("!I")
COUNT = struct.Struct("!I")
SIZE = struct.Struct("!Q")
OUT_OF_BAND = 1 << 31  # the length's top bit: buffers follow the pickle
MAX_FRAME = OUT_OF_BAND - 1
MAX_BUFFERS = 1 << 16
MAX_BUFFER = 1 << 40
RECV_CHUNK = 1 << 16
OUT_OF_BAND_MIN = 1 << 16  # smaller buffers are copied into the pickle: cheaper than a piece of their own
WALK_MAX = 256  # a longer list, tuple or dict is pickled as it is, its bytes in-band (walking it costs more)
_IOV_MAX = 512  # pieces per sendmsg (Linux allows 1,024)

Piece = bytes | memoryview


class FrameError(ConnectionError):
    """The connection ended inside a frame, or a frame's header cannot be one fray sent."""


def dumps(message: Any) -> list[Piece]:
    """One frame, as the pieces to send in order (`send`): header and cloudpickle of `message` (closures and
    lambdas included), then its large buffers, each its own memory."""
    buffers: list[memoryview] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < OUT_OF_BAND_MIN:
            return True  # in-band
        buffers.append(raw)
        return False

    stream = io.BytesIO()
    _pickler()(stream, protocol=5, buffer_callback=out_of_band).dump(_lifted(message, 3))
    body = stream.getbuffer()
    if len(body) > MAX_FRAME:
        raise ValueError(f"a message of {len(body)} bytes is larger than the {MAX_FRAME}-byte frame limit")
    if not buffers:
        return [HEADER.pack(len(body)) + body] if len(body) <= RECV_CHUNK else [HEADER.pack(len(body)), body]
    if len(buffers) > MAX_BUFFERS:
        raise ValueError(f"a message of {len(buffers)} large buffers has more than the {MAX_BUFFERS} a frame holds")
    head = b"".join([HEADER.pack(len(body) | OUT_OF_BAND), COUNT.pack(len(buffers)),
                     *(SIZE.pack(raw.nbytes) for raw in buffers)])
    return [head, body, *buffers]


def send(sock: socket.socket, pieces: list[Piece]) -> None:
    """Send a frame's pieces: one `sendall` for a small frame, `sendmsg` of them all (resumed where the kernel
    stopped) for one with buffers."""
    if len(pieces) == 1:
        sock.sendall(pieces[0])
        return
    views = [memoryview(piece) for piece in pieces]
    while views:
        sent = sock.sendmsg(views[:_IOV_MAX])
        while sent:
            first = views[0].nbytes
            if sent < first:
                views[0] = views[0][sent:]
                break
            sent -= first
            views.pop(0)
        while views and not views[0].nbytes:
            views.pop(0)


class FrameReader:
    """Reads whole frames from a socket, buffering what arrives ahead."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    def read(self) -> Any:
        """The next message; ConnectionError when the peer has gone (FrameError: inside a frame)."""
        (word,) = HEADER.unpack(self._take(HEADER.size, at_start=True))
        size = word & MAX_FRAME
        if not word & OUT_OF_BAND:
            return pickle.loads(self._take(size))
        (count,) = COUNT.unpack(self._take(COUNT.size))
        if count > MAX_BUFFERS:
            raise FrameError(f"a frame says it carries {count} buffers, more than the {MAX_BUFFERS} one can")
        sizes = struct.unpack(f"!{count}Q", self._take(SIZE.size * count))
        if any(n > MAX_BUFFER for n in sizes):
            raise FrameError(f"a frame says it carries a buffer of {max(sizes)} bytes, more than one can")
        body = self._take(size)
        buffers = [self._take(n, copy=True) for n in sizes]
        return pickle.loads(body, buffers=buffers)

    def _take(self, n: int, at_start: bool = False, copy: bool = False) -> bytes | bytearray:
        """The next `n` bytes: from what was read ahead, then the socket (straight into a bytearray of their own
        when they are many, or when `copy` asks for one: a buffer the message keeps)."""
        buffer = self._buffer
        if n > RECV_CHUNK or (copy and n > len(buffer)):
            return self._exact(n)
        while len(buffer) < n:
            self._fill(n, at_start and not buffer)
        if copy:
            taken: bytes | bytearray = buffer[:n]
        else:
            taken = bytes(buffer[:n])
        del buffer[:n]
        return taken

    def _exact(self, n: int) -> bytearray:
        out = bytearray(n)
        have = min(n, len(self._buffer))
        out[:have] = self._buffer[:have]
        del self._buffer[:have]
        view = memoryview(out)
        while have < n:
            got = self._sock.recv_into(view[have:], n - have)
            if not got:
                raise FrameError(f"the connection closed inside a frame: {have} of a piece's {n} bytes came")
            have += got
        view.release()
        return out

    def _fill(self, wanted: int, at_start: bool) -> None:
        chunk = self._sock.recv(RECV_CHUNK)
        if not chunk:
            if at_start:
                raise ConnectionError("the connection was closed")
            raise FrameError(f"the connection closed inside a frame: {len(self._buffer)} of a piece's {wanted} "
                             "bytes came")
        self._buffer += chunk


# -- what goes out of band ---------------------------------------------------------------


class _OutOfBand:
    """Large bytes or a bytearray, pickled as a buffer beside the pickle and rebuilt as what it was."""

    __slots__ = ("value",)

    def __init__(self, value: bytes | bytearray) -> None:
        self.value = value

    def __reduce_ex__(self, protocol: Any) -> tuple[Callable[[Any], Any], tuple[Any, ...]]:
        rebuild = _bytes_of if type(self.value) is bytes else _bytearray_of
        return rebuild, (pickle.PickleBuffer(self.value),)


def _bytes_of(buffer: Any) -> bytes:
    return bytes(buffer)


def _bytearray_of(buffer: Any) -> bytearray:
    return buffer if type(buffer) is bytearray else bytearray(buffer)  # the one received into: no copy


def _memoryview_of(buffer: Any, fmt: str, shape: tuple[int, ...], readonly: bool) -> memoryview:
    view = memoryview(buffer).cast("B")
    if fmt != "B" or len(shape) != 1:
        try:
            view = view.cast(fmt, shape)
        except (TypeError, ValueError):
            pass  # a format cast cannot make (not native): its bytes, as a flat view
    return view.toreadonly() if readonly else view


_WALKED = frozenset((bytes, bytearray, tuple, list, dict))


def _lifted(value: Any, depth: int) -> Any:
    """`value` with its large bytes and bytearrays, down to `depth` levels of lists, tuples and dicts, wrapped to
    go out of band; the same object where there is none."""
    kind = type(value)
    if kind is bytes or kind is bytearray:
        return _OutOfBand(value) if len(value) >= OUT_OF_BAND_MIN else value
    if not depth or kind not in _WALKED or len(value) > WALK_MAX:
        return value
    items = value.values() if kind is dict else value
    lifted: list[Any] | None = None  # made only when an item changes: a small message costs a loop
    for index, item in enumerate(items):
        if type(item) in _WALKED and item:
            new = _lifted(item, depth - 1)
            if new is not item:
                if lifted is None:
                    lifted = list(items)
                lifted[index] = new
    if lifted is None:
        return value
    return dict(zip(value, lifted)) if kind is dict else kind(lifted)


_pickler_class: type | None = None


def _pickler() -> type:
    """cloudpickle's Pickler, which also pickles a memoryview (as its buffer, out of band when large)."""
    global _pickler_class
    if _pickler_class is None:
        import cloudpickle  # here: `fray list` never loads it

        class Pickler(cloudpickle.Pickler):
            def reducer_override(self, obj: Any) -> Any:
                if type(obj) is memoryview:
                    data = pickle.PickleBuffer(obj) if obj.c_contiguous else obj.tobytes()
                    return _memoryview_of, (data, obj.format, obj.shape, obj.readonly)
                return super().reducer_override(obj)

        _pickler_class = Pickler
    return _pickler_class
