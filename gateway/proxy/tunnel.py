"""A byte tunnel between a client and an upstream after ``101 Switching Protocols``.

After a WebSocket upgrade the gateway no longer parses anything: bytes are
copied both ways with backpressure (a side whose send buffer is full pauses
reading on the other side), and the tunnel closes when either side closes or
nothing moved for ``timeouts.tunnel_idle_s``. The exchange that opened it is
accounted (access log, metrics) when the tunnel ends, with the bytes it carried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway import metrics

if TYPE_CHECKING:
    from gateway.proxy.downstream import ClientConnection
    from gateway.proxy.reply import Reply
    from gateway.proxy.upstream import UpstreamConnection

_OPEN = metrics.OPEN_CONNECTIONS


class Tunnel:
    """Copies bytes between one client and one upstream connection."""

    __slots__ = ("client", "closed", "deadline", "exchange", "idle_s", "upstream")

    def __init__(self, client: ClientConnection, upstream: UpstreamConnection, exchange: Reply, idle_s: float) -> None:
        self.client = client
        self.upstream = upstream
        self.exchange = exchange
        self.idle_s = idle_s
        self.closed = False
        self.deadline = client.plane.now + idle_s
        upstream.tunnel = self
        upstream.exchange = None
        _OPEN.inc("tunnel")

    def from_client(self, data: bytes) -> None:
        """Bytes the client sent: to the upstream."""
        self.exchange.bytes_in += len(data)
        self.deadline = self.client.plane.now + self.idle_s
        transport = self.upstream.transport
        if transport is not None:
            transport.write(data)

    def from_upstream(self, data: bytes) -> None:
        """Bytes the upstream sent: to the client."""
        self.exchange.bytes_out += len(data)
        self.deadline = self.client.plane.now + self.idle_s
        transport = self.client.transport
        if transport is not None:
            transport.write(data)

    # backpressure: the side that cannot send pauses the side that produces
    def pause_client(self) -> None:
        """The upstream's send buffer is full: stop reading the client."""
        if self.client.transport is not None:
            self.client.transport.pause_reading()

    def resume_client(self) -> None:
        """The upstream drained its send buffer: read the client again."""
        if self.client.transport is not None and not self.closed:
            self.client.transport.resume_reading()

    def pause_upstream(self) -> None:
        """The client's send buffer is full: stop reading the upstream."""
        self.upstream.pause_reading()

    def resume_upstream(self) -> None:
        """The client drained its send buffer: read the upstream again."""
        if not self.closed:
            self.upstream.resume_reading()

    def client_eof(self) -> bool:
        """The client half-closed: pass that on, and keep the client open for what the upstream still sends."""
        transport = self.upstream.transport
        if not self.closed and transport is not None and not transport.is_closing() and transport.can_write_eof():
            transport.write_eof()
            return True
        self._close()
        return False

    def client_closed(self) -> None:
        """The client went away: close the upstream after what it still has to send."""
        self._close()

    def upstream_closed(self) -> None:
        """The upstream went away: close the client after the bytes already queued."""
        self._close()

    def idle_timeout(self) -> None:
        """Nothing moved for ``tunnel_idle_s``."""
        self._close()

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        _OPEN.dec("tunnel")
        for transport in (self.upstream.transport, self.client.transport):
            if transport is not None and not transport.is_closing():
                transport.close()
