"""Resolvers map an actor name to its endpoints; `lookup` wraps them in an ActorPool.

    ClusterResolver(cluster)      the endpoint files of the cluster's namespace (every job that
                                  registered the name); what jobs normally use
    FixedResolver({"name": "host:port" | ["host:port", ...]})
                                  fixed addresses, e.g. a server started by hand; the secret
                                  still comes from FRAY_HOME (or the cluster given)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from fray.state import endpoints
from fray.actors.pool import ActorPool
from fray.actors.target import Target


class ClusterResolver:
    def __init__(self, cluster: Any = None, namespace: str | None = None) -> None:
        if cluster is None:
            from fray.cluster import current_cluster

            cluster = current_cluster()
        self.cluster = cluster
        self.namespace = namespace or cluster.namespace
        self._directory = endpoints.Directory(cluster.home)
        self._targets: dict[str, tuple[tuple[endpoints.Endpoint, ...], list[Target]]] = {}

    def secret(self) -> bytes:
        return self.cluster.secret()

    def resolve(self, name: str) -> list[Target]:
        records = self._directory.lookup(self.namespace, name)
        cached = self._targets.get(name)
        if cached is not None and cached[0] is records:
            return list(cached[1])
        targets = [Target(e.address, e.actor_id, e.actor_id, e.run_id, e.metadata) for e in records]
        self._targets[name] = (records, targets)
        return list(targets)

    def lookup(self, name: str) -> ActorPool:
        endpoints.check_name(name, "actor name")
        return ActorPool(self, name)


class FixedResolver:
    def __init__(self, addresses: Mapping[str, str | Sequence[str]], cluster: Any = None,
                 home: Any = None) -> None:
        self._addresses = {name: [value] if isinstance(value, str) else list(value)
                           for name, value in addresses.items()}
        self._cluster = cluster
        self._home = home

    def secret(self) -> bytes:
        if self._cluster is not None:
            return self._cluster.secret()
        from fray.state import actor_secret
        from fray.state.layout import Home

        return actor_secret.load_secret(Home.resolve(self._home).secret)

    def resolve(self, name: str) -> list[Target]:
        return [Target(address, name) for address in self._addresses.get(name, [])]

    def lookup(self, name: str) -> ActorPool:
        return ActorPool(self, name)
