"""Framing of messages on an authenticated actor connection.

A frame is a 4-byte big-endian length and that many bytes of cloudpickle.
Requests are `(call_id, actor, method, args, kwargs)`; replies are
`(call_id, ok, value)` where a failed call's value is `RemoteFailure`'s
fields. Frames are read through a buffer so that pipelined replies cost one
`recv` for many. Nothing here runs before `auth` has accepted the peer.
"""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

HEADER = struct.Struct("!I")
MAX_FRAME = 2**31 - 1
RECV_CHUNK = 1 << 16


def dumps(message: Any) -> bytes:
    """One frame: header and cloudpickle of `message` (closures and lambdas included)."""
    import cloudpickle

    body = cloudpickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(body) > MAX_FRAME:
        raise ValueError(f"a message of {len(body)} bytes is larger than the {MAX_FRAME}-byte frame limit")
    return HEADER.pack(len(body)) + body


class FrameReader:
    """Reads whole frames from a socket, buffering what arrives ahead."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    def read(self) -> Any:
        """The next message; ConnectionError when the peer has gone."""
        buffer = self._buffer
        while len(buffer) < HEADER.size:
            self._fill()
        (size,) = HEADER.unpack_from(buffer)
        end = HEADER.size + size
        while len(buffer) < end:
            self._fill()
        body = bytes(buffer[HEADER.size:end])
        del buffer[:end]
        return pickle.loads(body)

    def _fill(self) -> None:
        chunk = self._sock.recv(RECV_CHUNK)
        if not chunk:
            raise ConnectionError("the connection was closed")
        self._buffer += chunk
