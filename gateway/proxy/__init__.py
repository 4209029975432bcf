"""The data path: a lean HTTP/1.1 reverse proxy on asyncio protocols (uvloop + llhttp).

``serve(ref, host, port)`` binds the data listener and returns a :class:`DataPlane`.
Each client connection is a :class:`~gateway.proxy.downstream.ClientConnection`;
each request an :class:`~gateway.proxy.exchange.Exchange`; upstream connections
are pooled per server (:mod:`gateway.proxy.upstream`), the pools of each runtime
kept in its :class:`~gateway.proxy.pools.UpstreamPools`. Deadlines (head read,
keep-alive, body stalls, upstream response, tunnels, lingering close) are kept
as plain numbers on the connections and checked by one sweeper task per data
plane, so no request pays for a timer of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from typing import TYPE_CHECKING

from gateway.proxy.downstream import ClientConnection
from gateway.proxy.settings import ProxySettings

if TYPE_CHECKING:
    from gateway.runtime import Runtime, RuntimeRef

__all__ = ["DataPlane", "serve"]

log = logging.getLogger("clefgate.proxy")

_PRUNE_EVERY_S = 1.0


class DataPlane:
    """One bound data listener and the client connections it accepted."""

    def __init__(self, ref: RuntimeRef, loop: asyncio.AbstractEventLoop) -> None:
        self.ref = ref
        self.loop = loop
        self.connections: set[ClientConnection] = set()
        self.server: asyncio.Server | None = None
        self.draining = False
        # the loop's clock, refreshed by the sweeper: deadlines are coarse on purpose
        self.now = loop.time()
        self._runtime: Runtime | None = None
        self._settings: ProxySettings | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._emptied: asyncio.Event | None = None  # set when the last connection closes during a drain
        self._port = 0

    def connection_closed(self, conn: ClientConnection) -> None:
        """A client connection is gone (called from its connection_lost)."""
        self.connections.discard(conn)
        if not self.connections and self._emptied is not None:
            self._emptied.set()

    def settings(self) -> ProxySettings:
        """The compiled settings of the current Runtime (rebuilt only after a reload)."""
        runtime = self.ref.current
        if runtime is not self._runtime:
            self._settings = ProxySettings(runtime)
            self._runtime = runtime
        return self._settings  # type: ignore[return-value]

    @property
    def port(self) -> int:
        """The bound TCP port (still known after the listener closed)."""
        return self._port

    @property
    def open_connections(self) -> int:
        """Client connections open right now."""
        return len(self.connections)

    def _protocol(self) -> ClientConnection:
        return ClientConnection(self)

    def start(self) -> None:
        """Start the deadline sweeper (``serve`` does this)."""
        self._sweeper = self.loop.create_task(self._sweep(), name="clefgate-proxy-sweeper")

    async def _sweep(self) -> None:
        last_prune = 0.0
        while True:
            st = self.settings()
            await asyncio.sleep(st.tick_s)
            now = self.now = self.loop.time()
            for conn in list(self.connections):
                try:
                    conn.check_deadlines(now)
                except Exception:
                    log.exception("deadline handling failed; closing the connection")
                    conn.abort()
            if now - last_prune >= _PRUNE_EVERY_S:
                last_prune = now
                st.runtime.pools.prune(time.monotonic(), st.upstream_keepalive_s)

    def stop_accepting(self) -> None:
        """Close the listening socket; open connections carry on."""
        self.draining = True
        if self.server is not None:
            self.server.close()

    async def drain(self, deadline_s: float) -> int:
        """Graceful stop: no new connections; idle ones close now, busy ones after
        their current response; whatever is still open after ``deadline_s`` is cut.
        Returns how many connections were cut off."""
        self.stop_accepting()
        self._emptied = asyncio.Event()
        for conn in list(self.connections):
            conn.start_drain()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._emptied.wait(), deadline_s)
        cut = 0
        for conn in list(self.connections):
            cut += 1
            conn.abort()
        if cut:
            log.warning("drain deadline of %.1fs passed: %d connection(s) cut off", deadline_s, cut)
            await asyncio.sleep(0)  # let connection_lost run
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        return cut


async def serve(ref: RuntimeRef, host: str, port: int, *, reuse_port: bool = False,
                sock: socket.socket | None = None) -> DataPlane:
    """Bind the data listener (or use ``sock``) and start serving requests."""
    loop = asyncio.get_running_loop()
    plane = DataPlane(ref, loop)
    plane.settings()  # compile now: a broken Runtime fails here, not on the first request
    if sock is not None:
        server = await loop.create_server(plane._protocol, sock=sock, backlog=1024)
    else:
        server = await loop.create_server(plane._protocol, host=host, port=port, reuse_port=reuse_port or None,
                                          backlog=1024)
    plane.server = server
    plane._port = int(server.sockets[0].getsockname()[1]) if server.sockets else 0
    plane.start()
    log.info("data listener on %s", ", ".join(str(s.getsockname()) for s in server.sockets))
    return plane
