"""The proxy's upstream connection pools: one :class:`~gateway.proxy.upstream.ConnectionPool` per configured server.

Backends choose a server (:mod:`gateway.backends`); which connection carries the request is the proxy's business.
Each runtime gets an :class:`UpstreamPools` built beside its ``BackendSet``: ``by_server`` maps every server the
set can choose to its pool, so the exchange finds the pool of the server it was given with one dict lookup.

Across a reload a pool belongs to the server's identity (backend name and URL, the identity under which
``BackendSet.build(cfg, previous)`` adopts a server): the new runtime takes over the pool, its idle connections
and its count of open ones, with the backend's new limits applied, so a reload drops no warm connection. A pool
is held by every runtime that maps it and closes when the last of them is closed (``close``), so the requests an
older runtime still carries keep their server's pool until that runtime is retired, and a removed server's pool
does not outlive the runtimes that could still send to it.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gateway import metrics
from gateway.proxy.upstream import ConnectionPool

if TYPE_CHECKING:
    from gateway.backends import BackendSet, Server

__all__ = ["UpstreamPools"]


class UpstreamPools:
    """The connection pool of each server of one ``BackendSet``, taken over from the runtime before it."""

    __slots__ = ("__weakref__", "by_server", "closed")

    def __init__(self, backends: BackendSet, previous: UpstreamPools | None = None) -> None:
        old: dict[tuple[str, str], ConnectionPool] = {}
        if previous is not None:
            old = {(s.backend, s.url): pool for s, pool in previous.by_server.items() if not pool.closed}
        self.by_server: dict[Server, ConnectionPool] = {}
        self.closed = False
        for backend in backends.backends.values():
            cfg = backend.cfg
            for server in backend.servers:
                pool = old.get((server.backend, server.url))
                if pool is None:
                    pool = ConnectionPool(server.host, server.port, tls=server.tls, max_idle=cfg.max_idle_connections,
                                          max_connections=cfg.max_connections)
                else:
                    pool.configure(cfg.max_idle_connections, cfg.max_connections)
                pool.holders += 1
                self.by_server[server] = pool
        _LIVE.add(self)

    def prune(self, now: float, keepalive_s: float) -> None:
        """Close idle connections unused for ``keepalive_s`` (``now`` from time.monotonic)."""
        for pool in self.by_server.values():
            pool.prune(now, keepalive_s)

    def close(self) -> None:
        """This runtime is retired: close the pools no other runtime holds (busy connections close when released)."""
        if self.closed:
            return
        self.closed = True
        _LIVE.discard(self)
        for pool in self.by_server.values():
            pool.holders -= 1
            if pool.holders <= 0:
                pool.close()


# ---------------------------------------------------------------------------- metrics

_LIVE: weakref.WeakSet[UpstreamPools] = weakref.WeakSet()


def _idle() -> Iterator[tuple[tuple[str, ...], float]]:
    # a pool held by several runtimes (a reload that kept its server) is counted once
    pools: dict[int, tuple[tuple[str, str], ConnectionPool]] = {}
    for live in list(_LIVE):
        for server, pool in live.by_server.items():
            pools[id(pool)] = ((server.backend, server.url), pool)
    counts: dict[tuple[str, ...], float] = {}
    for labels, pool in pools.values():
        counts[labels] = counts.get(labels, 0.0) + len(pool.idle)
    yield from counts.items()


IDLE_CONNECTIONS = metrics.gauge("clefgate_upstream_idle_connections", "Idle keep-alive connections pooled per server.",
                                 ("backend", "server"), callback=_idle)
