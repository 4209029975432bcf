"""WebSocket (Connection: Upgrade) through the gateway: a byte tunnel after 101."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import websockets

from gateway import metrics
from tests.origin import OriginProcess
from tests.proxy_support import RawClient, gateway, get, make_config, wait_for


def test_websocket_echo_through_the_tunnel(origin_a: OriginProcess, tmp_path: Path) -> None:
    big = os.urandom(200_000)  # incompressible, so the byte counts below are meaningful

    async def talk(port: int) -> list[str | bytes]:
        out: list[str | bytes] = []
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws", max_size=None) as ws:
            for msg in ("hello", "wörld", b"\x00\x01binary", big):
                await ws.send(msg)
                out.append(await ws.recv())
        return out

    with gateway(make_config([origin_a.url], tmp_path)) as g:
        got = asyncio.run(talk(g.port))
        assert got == ["hello", "wörld", b"\x00\x01binary", big]
        line = g.wait_log(lambda r: r["path"] == "/ws")
        assert line["status"] == 101
        assert line["bytes_in"] > 200_000 and line["bytes_out"] > 200_000
        wait_for(lambda: g.call(lambda: metrics.OPEN_CONNECTIONS.get("tunnel")) == 0, what="tunnel closed")


def test_many_messages_and_concurrent_tunnels(origin_a: OriginProcess, tmp_path: Path) -> None:
    async def one(port: int, n: int) -> int:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as ws:
            for i in range(n):
                await ws.send(f"m{i}")
                assert await ws.recv() == f"m{i}"
        return n

    async def many(port: int) -> list[int]:
        return await asyncio.gather(*(one(port, 100) for _ in range(5)))

    with gateway(make_config([origin_a.url], tmp_path)) as g:
        assert asyncio.run(many(g.port)) == [100] * 5


def test_upgrade_refused_by_the_upstream_is_a_normal_response(origin_a: OriginProcess, tmp_path: Path) -> None:
    # /echo does not speak WebSocket: the upstream answers 200, and the connection closes after
    with gateway(make_config([origin_a.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(get("/echo", extra="Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"))
        resp = c.response()
        assert resp.status == 200
        seen = {k.lower(): v for k, v in resp.json()["headers"]}
        assert seen["upgrade"] == "websocket" and seen["connection"].lower() == "upgrade"
        assert c.closed(5)


def test_non_websocket_upgrade_is_served_as_plain_http(origin_a: OriginProcess, tmp_path: Path) -> None:
    # h2c upgrades are not tunnelled (they would bypass every later decision)
    with gateway(make_config([origin_a.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(get("/echo", extra="Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n")
               + get("/bytes/2"))
        resp = c.response()
        seen = {k.lower() for k, _ in resp.json()["headers"]}
        assert "upgrade" not in seen and "http2-settings" not in seen
        assert c.response().status == 200


def test_tunnel_idle_timeout(origin_a: OriginProcess, tmp_path: Path) -> None:
    async def idle(port: int) -> bool:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws", ping_interval=None) as ws:
            await ws.send("one")
            await ws.recv()
            try:
                await asyncio.wait_for(ws.recv(), 5)
            except websockets.ConnectionClosed:
                return True
            return False

    cfg = make_config([origin_a.url], tmp_path, timeouts={"tunnel_idle_s": 0.3})
    with gateway(cfg) as g:
        assert asyncio.run(idle(g.port))


def test_a_client_half_close_is_passed_through_the_tunnel(tmp_path: Path) -> None:
    """After 101 the gateway copies bytes; a client's end of sending (shutdown SHUT_WR) reaches the upstream, which
    can still answer, instead of the tunnel hanging until tunnel_idle_s."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def origin() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
            while data := conn.recv(65536):
                seen.append(data)
            conn.sendall(b"bye after your EOF")

    thread = threading.Thread(target=origin, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with gateway(make_config([url], tmp_path, timeouts={"tunnel_idle_s": 60})) as g:
            client = socket.create_connection(("127.0.0.1", g.port), timeout=10)
            client.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                got += client.recv(65536)
            assert got.startswith(b"HTTP/1.1 101")
            client.sendall(b"last words")
            client.shutdown(socket.SHUT_WR)
            while data := client.recv(65536):
                got += data
            client.close()
            assert got.endswith(b"bye after your EOF") and b"".join(seen) == b"last words"
    finally:
        thread.join(10)
        listener.close()
