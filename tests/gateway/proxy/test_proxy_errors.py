"""Limits, timeouts and upstream failures: each ends in one clear gateway error with a request id."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.origin import OriginProcess, pattern
from tests.proxy_support import (
    GatewayThread,
    RawClient,
    RawResponse,
    closed_port,
    gateway,
    get,
    make_config,
    request,
)


def assert_gateway_error(gw: GatewayThread, resp: RawResponse, status: int) -> dict:
    """The response is a gateway-made ``status`` whose id is in the header, the body and the log."""
    assert resp.status == status, resp.body
    rid = resp.header("x-request-id")
    assert rid, resp.headers
    assert f"request id: {rid}".encode() in resp.body
    line = gw.wait_log(lambda r: r["request_id"] == rid)
    assert line["status"] == status
    return line


# ---------------------------------------------------------------------------- limits


@pytest.fixture(scope="module")
def limited(origin_a: OriginProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = make_config([origin_a.url], tmp_path_factory.mktemp("limited"), limits={
        "max_request_line_bytes": 200, "max_header_bytes": 1000, "max_headers": 10, "max_body_bytes": 10_000})
    with gateway(cfg) as g:
        yield g


def test_request_line_too_long_is_431(limited: GatewayThread) -> None:
    resp = request(limited.port, get("/" + "a" * 300))
    assert_gateway_error(limited, resp, 431)


def test_header_block_too_large_is_431(limited: GatewayThread) -> None:
    resp = request(limited.port, get("/echo", extra="X-Big: " + "b" * 2000 + "\r\n"))
    assert_gateway_error(limited, resp, 431)


def test_header_too_large_even_when_it_arrives_in_pieces(limited: GatewayThread) -> None:
    with RawClient(limited.port) as c:
        c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: ")
        for _ in range(10):
            c.send(b"b" * 200)
            time.sleep(0.01)
        c.send(b"\r\n\r\n")
        assert_gateway_error(limited, c.response(), 431)


def test_endless_header_is_cut_at_the_limit(limited: GatewayThread) -> None:
    # a client that never ends its head is answered once it passes the limit, not buffered forever
    with RawClient(limited.port) as c:
        c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: ")
        with contextlib.suppress(OSError):  # the gateway may reset us once its lingering close ends
            for _ in range(200):
                c.send(b"b" * 1000)
        resp = c.response()
    assert resp.status == 431


def test_too_many_headers_is_431(limited: GatewayThread) -> None:
    extra = "".join(f"X-H{i}: v\r\n" for i in range(12))
    assert_gateway_error(limited, request(limited.port, get("/echo", extra=extra)), 431)


def test_body_over_limit_by_content_length_is_413(limited: GatewayThread) -> None:
    resp = request(limited.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
    assert_gateway_error(limited, resp, 413)


def test_chunked_body_over_limit_is_413(limited: GatewayThread) -> None:
    with RawClient(limited.port) as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        with contextlib.suppress(OSError):
            for _ in range(10):
                c.send(b"1000\r\n" + b"z" * 4096 + b"\r\n")
        resp = c.response()
        assert c.closed(5)
    assert_gateway_error(limited, resp, 413)


def test_body_within_limit_passes(limited: GatewayThread) -> None:
    resp = request(limited.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n" + b"y" * 9000)
    assert resp.status == 200 and resp.json()["body_len"] == 9000


# ---------------------------------------------------------------------------- client timeouts


@pytest.fixture(scope="module")
def impatient(origin_a: OriginProcess, raw_origin: OriginProcess,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = make_config({"app": [origin_a.url], "raw": [raw_origin.url]}, tmp_path_factory.mktemp("impatient"),
                      routes=[{"path_prefix": "/hang", "backend": "raw"}],
                      timeouts={"header_read_s": 0.4, "keepalive_s": 0.4, "client_body_s": 0.4,
                                "upstream_response_s": 0.5, "upstream_idle_s": 1.5})
    with gateway(cfg) as g:
        yield g


def test_slow_header_is_408(impatient: GatewayThread) -> None:
    with RawClient(impatient.port) as c:
        c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n")
        resp = c.response()
        assert c.closed(5)
    assert_gateway_error(impatient, resp, 408)


def test_a_slow_head_pipelined_behind_a_request_gets_the_head_timeout(origin_a: OriginProcess, tmp_path: Path) -> None:
    """The next head arriving (part of it in the same packet as the request before) is held to header_read_s with
    a 408, not to the far longer keep-alive limit: a slow-header client cannot hide behind one good request."""
    cfg = make_config([origin_a.url], tmp_path, timeouts={"header_read_s": 0.5, "keepalive_s": 30.0})
    # the socket gives up after 10 s, a third of keepalive_s: an answer at all means header_read_s held the head
    with gateway(cfg) as g, RawClient(g.port, 10.0) as c:
        c.send(get("/bytes/1") + b"GET /echo HTTP/1.1\r\nHost: x\r\n")
        assert c.response().status == 200
        c.send(b"X-Slow: 1\r\n")
        resp = c.response()
        assert resp.status == 408 and resp.header("x-request-id")
        assert c.closed(5)


def test_idle_keep_alive_connection_is_closed_silently(impatient: GatewayThread) -> None:
    with RawClient(impatient.port) as c:
        c.send(get("/bytes/1"))
        assert c.response().status == 200
        assert c.closed(5)
        assert c.buf == b""


def test_stalled_request_body_is_408(impatient: GatewayThread) -> None:
    with RawClient(impatient.port) as c:
        c.send(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial")
        resp = c.response()
    assert resp.status == 408


def test_a_stalled_body_pipelined_behind_a_request_in_flight_does_not_cut_its_answer(origin_a: OriginProcess,
                                                                                     tmp_path: Path) -> None:
    cfg = make_config([origin_a.url], tmp_path, timeouts={"client_body_s": 0.3, "upstream_response_s": 10.0})
    with gateway(cfg) as g, RawClient(g.port) as c:
        # the body stalls (0.3 s) while the first request is still answered (1 s)
        c.send(get("/delay/1.0") + b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial")
        first = c.response()
        assert first.status == 200 and first.json()["target"] == "/delay/1.0"
        second = c.response()
        assert second.status == 408 and second.header("connection") == "close"
        assert c.closed(5)


def test_upstream_timeout_is_504(impatient: GatewayThread) -> None:
    resp = request(impatient.port, get("/hang"), timeout=10.0)  # /hang never answers: a 504 at all is the gateway's timeout
    assert_gateway_error(impatient, resp, 504)


def test_slow_but_steady_upload_is_not_cut(impatient: GatewayThread) -> None:
    # the body is forwarded as it arrives (past the 2 KiB the decision reads), a piece every 0.15 s (under
    # client_body_s 0.4) for longer than upstream_response_s (0.5): that clock starts when the request is sent whole
    with RawClient(impatient.port) as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n" + b"a" * 2100)
        for _ in range(10):
            time.sleep(0.15)
            c.send(b"b" * 190)
        resp = c.response()
    assert resp.status == 200 and resp.json()["body"] == "a" * 2100 + "b" * 1900


def test_slow_but_steady_response_is_not_cut(impatient: GatewayThread) -> None:
    # each pause (0.2 s) is under upstream_idle_s (1.5 s), and the whole takes longer than the
    # time allowed to the first byte (0.5 s): only the head has to come within that
    resp = request(impatient.port, get("/slowbody/4000?pieces=4&delay=0.2"))
    assert resp.status == 200 and resp.body == pattern(4000)


def test_stalled_response_body_is_cut(raw_origin: OriginProcess, tmp_path: Path) -> None:
    cfg = make_config([raw_origin.url], tmp_path, timeouts={"upstream_idle_s": 0.3})
    with gateway(cfg) as g, RawClient(g.port) as c:
        c.send(get("/stall-body"))
        with pytest.raises(ConnectionError):
            c.response()
        line = g.wait_log(lambda r: r["path"] == "/stall-body")
    assert line["status"] == 200 and line["bytes_out"] == 5


# ---------------------------------------------------------------------------- upstream failures


def test_upstream_connect_failure_is_502(tmp_path: Path) -> None:
    with gateway(make_config([f"http://127.0.0.1:{closed_port()}"], tmp_path)) as g:
        resp = request(g.port, get("/echo"))
        line = assert_gateway_error(g, resp, 502)
    assert line["backend"] == "app"


@pytest.mark.parametrize("path", ["/cl-te", "/dup-cl", "/obs-fold", "/bare-lf", "/garbage", "/space-colon", "/reset",
                                  "/half-head", "/bogus-101", "/bad-chunk"])
def test_broken_upstream_response_is_502(raw_origin: OriginProcess, tmp_path: Path, path: str) -> None:
    with gateway(make_config([raw_origin.url], tmp_path, backends={"app": {"retries": 0}})) as g:
        resp = request(g.port, get(path))
        assert_gateway_error(g, resp, 502)


def test_upstream_closing_inside_the_body_cuts_the_client(raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(get("/truncated"))
        with pytest.raises(ConnectionError):
            c.response()
        line = g.wait_log(lambda r: r["path"] == "/truncated")
    assert line["status"] == 200  # the head had gone out; the connection end tells the client


def test_gateway_keeps_serving_after_upstream_errors(raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g, RawClient(g.port) as c:
        for path in ("/garbage", "/reset", "/early-hints"):
            c2 = RawClient(g.port)
            c2.send(get(path))
            c2.response()
            c2.close()
        c.send(get("/early-hints"))
        assert c.response().body == b"ok"


def test_a_client_that_pipelines_then_half_closes_gets_every_response(origin_a: OriginProcess, tmp_path: Path) -> None:
    """As `nc -N` and many scripts do: the requests already sent are all answered, the last with Connection: close."""
    with gateway(make_config([origin_a.url], tmp_path)) as g:
        sock = socket.create_connection(("127.0.0.1", g.port), timeout=5)
        sock.sendall(get("/delay/0.05") + get("/bytes/3") + get("/delay/0.05"))
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        sock.close()
    heads = [block.split(b"\r\n\r\n")[0] for block in data.split(b"HTTP/1.1 ")[1:]]
    assert [h[:3] for h in heads] == [b"200"] * 3, data
    assert [b"connection: close" in h.lower() for h in heads] == [False, False, True]


def test_a_refused_request_behind_one_in_flight_gets_its_error(origin_a: OriginProcess, tmp_path: Path) -> None:
    """The parser refuses the second request while the first is forwarded: the first is answered, then the
    second's 400 with its request id, then the connection closes."""
    with gateway(make_config([origin_a.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(get("/delay/0.1") + b"GET /bad HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
        assert c.response().status == 200
        refused = c.response()
        assert refused.status == 400 and refused.header("connection") == "close"
        rid = refused.header("x-request-id")
        assert rid and f"request id: {rid}".encode() in refused.body
        assert c.closed(5)
        assert g.wait_log(lambda r: r["request_id"] == rid)["status"] == 400


def test_a_long_pipeline_answered_by_the_gateway_itself_is_answered_whole(origin_a: OriginProcess, tmp_path: Path) -> None:
    """Hundreds of requests a rule blocks, pipelined behind one forwarded request: each is started from the event
    loop, not from the previous one's completion, so the chain cannot exhaust the stack and hang the connection."""
    from gateway.pipeline import Pipeline
    from gateway.verdict import Action, Source, Verdict

    class Rules:
        inspected: frozenset[str] = frozenset()

        def evaluate(self, features: Any) -> Verdict | None:
            return Verdict(Action.BLOCK, Source.RULE, "scanner path", rule="t") if features.path == "/.env" else None

    with gateway(make_config([origin_a.url], tmp_path), Pipeline(rules=Rules())) as g, RawClient(g.port, timeout=20) as c:
        c.send(get("/delay/0.2") + get("/.env") * 600)
        assert c.response().status == 200
        assert [c.response().status for _ in range(600)] == [403] * 600


def test_half_closed_client_still_gets_its_response(origin_a: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([origin_a.url], tmp_path)) as g:
        sock = socket.create_connection(("127.0.0.1", g.port), timeout=5)
        sock.sendall(get("/delay/0.1"))
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        sock.close()
    assert data.startswith(b"HTTP/1.1 200 OK")
