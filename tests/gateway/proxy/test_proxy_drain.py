"""Graceful drain of the data plane: idle connections close at once, busy ones after their
response, and whatever outlives the deadline is cut and counted."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from pathlib import Path

import pytest

from tests.origin import OriginProcess
from tests.proxy_support import GatewayThread, RawClient, get, make_config, wait_for


def started(origin: OriginProcess, tmp: Path) -> GatewayThread:
    return GatewayThread(make_config([origin.url], tmp)).start()


def test_idle_connections_close_at_once(origin_a: OriginProcess, tmp_path: Path) -> None:
    gw = started(origin_a, tmp_path)
    try:
        clients = [RawClient(gw.port) for _ in range(3)]
        for c in clients:
            c.send(get("/bytes/1"))
            assert c.response().status == 200
        assert gw.call(lambda: gw.plane.open_connections) == 3
        assert gw.run(gw.plane.drain(5.0)) == 0
        for c in clients:
            assert c.closed(2)
            c.close()
        assert gw.call(lambda: gw.plane.open_connections) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", gw.port), timeout=1).recv(1)
    finally:
        gw.stop()


def drain_while_busy(gw: GatewayThread, busy: RawClient, requests: bytes) -> concurrent.futures.Future[int]:
    """Send ``requests`` on ``busy``, wait until the first is in flight upstream, then start a drain (10 s)."""
    busy.send(requests)
    wait_for(lambda: gw.call(lambda: sum(s.outstanding for s in gw.runtime.backends.servers())) == 1, what="request in flight")
    assert gw.loop is not None
    return asyncio.run_coroutine_threadsafe(gw.plane.drain(10.0), gw.loop)


def test_in_flight_request_finishes_then_its_connection_closes(origin_a: OriginProcess, tmp_path: Path) -> None:
    gw = started(origin_a, tmp_path)
    try:
        with RawClient(gw.port) as busy:
            drained = drain_while_busy(gw, busy, get("/delay/0.5"))
            resp = busy.response()
            assert resp.status == 200 and resp.json()["target"] == "/delay/0.5"
            assert resp.header("connection") == "close"
            assert busy.closed(5)
            assert drained.result(10) == 0
        line = gw.wait_log(lambda r: r["path"] == "/delay/0.5")
        assert line["status"] == 200
    finally:
        gw.stop()


def test_pipelined_requests_already_read_are_all_answered_before_the_connection_closes(origin_a: OriginProcess,
                                                                                       tmp_path: Path) -> None:
    gw = started(origin_a, tmp_path)
    try:
        with RawClient(gw.port) as busy:
            drained = drain_while_busy(gw, busy, get("/delay/0.3") + get("/bytes/2") + get("/delay/0.05"))
            answers = [busy.response() for _ in range(3)]
            assert [a.status for a in answers] == [200, 200, 200]
            assert [a.header("connection") for a in answers] == [None, None, "close"]
            assert busy.closed(5)
            assert drained.result(10) == 0
    finally:
        gw.stop()


def test_a_request_sent_after_the_drain_began_is_not_read(origin_a: OriginProcess, tmp_path: Path) -> None:
    """Only requests already read are answered: a client that keeps pipelining cannot hold a draining connection open."""
    gw = started(origin_a, tmp_path)
    try:
        with RawClient(gw.port) as busy:
            drained = drain_while_busy(gw, busy, get("/delay/0.3"))
            wait_for(lambda: gw.call(lambda: gw.plane.draining), what="draining")
            busy.send(get("/bytes/1"))
            resp = busy.response()
            assert resp.status == 200 and resp.header("connection") == "close"
            assert busy.closed(5) and b"HTTP/1.1" not in busy.buf
            assert drained.result(10) == 0
    finally:
        gw.stop()


def test_requests_outliving_the_deadline_are_cut_and_counted(origin_a: OriginProcess, tmp_path: Path) -> None:
    gw = started(origin_a, tmp_path)
    try:
        slow = [RawClient(gw.port) for _ in range(2)]
        for c in slow:
            c.send(get("/delay/5"))
        wait_for(lambda: gw.call(lambda: sum(s.outstanding for s in gw.runtime.backends.servers())) == 2,
                 what="requests in flight")
        assert gw.run(gw.plane.drain(0.3)) == 2
        for c in slow:
            assert c.closed(2)
            c.close()
        line = gw.wait_log(lambda r: r["path"] == "/delay/5")
        assert line["status"] == 499
    finally:
        gw.stop()


def test_serve_on_a_given_socket_and_with_reuse_port(origin_a: OriginProcess, tmp_path: Path) -> None:
    import uvloop

    from gateway import proxy
    from gateway.accesslog import AccessLog
    from gateway.backends import BackendSet
    from gateway.pipeline import Pipeline
    from gateway.proxy.pools import UpstreamPools
    from gateway.runtime import Runtime, RuntimeRef

    cfg = make_config([origin_a.url], tmp_path)

    async def scenario() -> tuple[int, int, bytes]:
        backends = BackendSet.build(cfg)
        runtime = Runtime(cfg, Pipeline(), backends, UpstreamPools(backends), AccessLog.from_config(cfg.logging), 1)
        ref = RuntimeRef(runtime)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        given = await proxy.serve(ref, "", 0, sock=sock)
        first = await proxy.serve(ref, "127.0.0.1", 0, reuse_port=True)
        second = await proxy.serve(ref, "127.0.0.1", first.port, reuse_port=True)  # a second worker's listener
        reader, writer = await asyncio.open_connection("127.0.0.1", given.port)
        writer.write(get("/identity"))
        head = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        for plane in (given, first, second):
            await plane.drain(1.0)
        await runtime.backends.close()
        runtime.pools.close()
        runtime.access_log.close()
        return given.port, second.port - first.port, head

    port, delta, head = uvloop.run(scenario())
    assert port > 0 and delta == 0
    assert head.startswith(b"HTTP/1.1 200 OK")
