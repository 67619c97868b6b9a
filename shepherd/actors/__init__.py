"""Actors: objects served over TCP that jobs find by name (private; `shepherd` exports the API).

    wire        framing of messages on a socket
    auth        the shared secret in FRAY_HOME and the HMAC handshake (nothing is unpickled before it)
    endpoints   the endpoint files under namespaces/<ns>/actors/<name>/
    server      ActorServer, ActorContext
    client      one authenticated connection with pipelined calls
    resolver    ClusterResolver, FixedResolver
    pool        ActorPool, ActorFuture
"""
