"""The shared secret and the handshake that proves a connection may read FRAY_HOME.

Actor payloads are cloudpickle, and unpickling runs code, so a server must not
unpickle a single byte from a peer that could not already run code as this
user. The proof is the secret `$FRAY_HOME/secret` (32 random bytes, hex, 0600,
created on first use: fray.state.actor_secret): whoever can read it can read FRAY_HOME.

Handshake (mutual, fixed-size, no pickle):

    server -> client   MAGIC (8 bytes) + server nonce (32)
    client -> server   client nonce (32) + HMAC-SHA256(secret, "client" + server nonce + client nonce)
    server -> client   HMAC-SHA256(secret, "server" + client nonce + server nonce)

The server checks the client's MAC with `hmac.compare_digest` and drops the
connection (logging who it was) when it is wrong, late or short. The client
checks the server's MAC too, so a process that took over a dead actor's port
cannot feed it a pickle either. Stdlib only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket

from fray.errors import FrayError

MAGIC = b"FRAYACT1"
NONCE_BYTES = 32
MAC_BYTES = 32
HANDSHAKE_TIMEOUT_SEC = 10.0


class AuthError(FrayError, ConnectionError):
    """The peer could not prove it shares the secret (or spoke something else)."""


def _mac(secret: bytes, label: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(secret, label + first + second, hashlib.sha256).digest()


def recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("the peer closed the connection during the handshake")
        chunks += chunk
    return bytes(chunks)


def server_handshake(sock: socket.socket, secret: bytes) -> None:
    """Authenticate a client that just connected; AuthError (or OSError) when it cannot."""
    previous = sock.gettimeout()
    sock.settimeout(HANDSHAKE_TIMEOUT_SEC)
    try:
        server_nonce = secrets.token_bytes(NONCE_BYTES)
        sock.sendall(MAGIC + server_nonce)
        answer = recv_exact(sock, NONCE_BYTES + MAC_BYTES)
        client_nonce, mac = answer[:NONCE_BYTES], answer[NONCE_BYTES:]
        if not hmac.compare_digest(mac, _mac(secret, b"client", server_nonce, client_nonce)):
            raise AuthError("the client's proof does not match the secret in FRAY_HOME")
        sock.sendall(_mac(secret, b"server", client_nonce, server_nonce))
    except socket.timeout:
        raise AuthError("the client did not complete the handshake in time") from None
    finally:
        sock.settimeout(previous)


def client_handshake(sock: socket.socket, secret: bytes, timeout: float = HANDSHAKE_TIMEOUT_SEC) -> None:
    """Prove the secret to a server and check that it knows it too."""
    previous = sock.gettimeout()
    sock.settimeout(timeout)
    try:
        hello = recv_exact(sock, len(MAGIC) + NONCE_BYTES)
        if hello[: len(MAGIC)] != MAGIC:
            raise AuthError("the peer is not a fray actor server")
        server_nonce = hello[len(MAGIC):]
        client_nonce = secrets.token_bytes(NONCE_BYTES)
        sock.sendall(client_nonce + _mac(secret, b"client", server_nonce, client_nonce))
        try:
            proof = recv_exact(sock, MAC_BYTES)
        except ConnectionError:
            # The server drops a client whose proof is wrong, right after reading it.
            raise AuthError("the server rejected this process's proof: it does not share this FRAY_HOME's "
                            "secret") from None
        if not hmac.compare_digest(proof, _mac(secret, b"server", client_nonce, server_nonce)):
            raise AuthError("the server does not know this FRAY_HOME's secret")
    except socket.timeout:
        # A slow server, not a wrong one: a connection error, which callers retry.
        raise TimeoutError("the server did not complete the handshake in time") from None
    finally:
        sock.settimeout(previous)
