"""HTTP/1.1 conformance of the data path: framing, keep-alive, pipelining, methods, statuses.

The gateway runs in-process (tests/proxy_support.GatewayThread) in front of the aiohttp
test origin (a subprocess); clients are httpx, curl and raw sockets.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.origin import OriginProcess, pattern
from tests.proxy_support import (
    GatewayThread,
    RawClient,
    gateway,
    get,
    make_config,
    request,
)


@pytest.fixture(scope="module")
def client(gw: GatewayThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        yield c


def echo(resp: httpx.Response) -> dict:
    assert resp.status_code == 200, resp.text
    return json.loads(resp.content)


def test_get_is_forwarded_with_its_raw_target(client: httpx.Client) -> None:
    # %2F must stay %2F; the query is forwarded byte for byte
    data = echo(client.get("/a%2Fb/c%20d?x=%2F&y=1+2"))
    assert data["method"] == "GET"
    assert data["target"] == "/a%2Fb/c%20d?x=%2F&y=1+2"


def test_keep_alive_reuses_both_connections(gw: GatewayThread, origin_a: OriginProcess) -> None:
    with RawClient(gw.port) as c:
        for _ in range(3):
            c.send(get("/identity"))
            resp = c.response()
            assert resp.status == 200 and resp.body == b"a"
            assert resp.header("connection") is None
    server = next(gw.runtime.backends.servers())
    pool = gw.call(lambda: gw.runtime.pools.by_server[server])
    assert gw.call(lambda: pool.open) >= 1
    # the pooled upstream connection was reused: fewer connections than requests
    before = httpx.get(f"{origin_a.url}/requests").json()["requests"]
    with httpx.Client(base_url=gw.url) as c:
        for _ in range(5):
            c.get("/identity")
    assert httpx.get(f"{origin_a.url}/requests").json()["requests"] - before == 6
    assert gw.call(lambda: pool.open) <= 2


def test_http10_client_gets_a_close_delimited_or_sized_response(gw: GatewayThread) -> None:
    resp = request(gw.port, b"GET /bytes/100 HTTP/1.0\r\n\r\n")
    assert resp.status == 200 and resp.body == pattern(100)
    assert resp.header("content-length") == "100"
    # a chunked upstream response is de-chunked and delimited by close for HTTP/1.0
    with RawClient(gw.port) as c:
        c.send(b"GET /chunked/5000?size=700 HTTP/1.0\r\nHost: x\r\n\r\n")
        raw = c.read_until_close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower()
    assert b"connection: close" in head.lower()
    assert body == pattern(5000)


def test_http10_keep_alive_is_honoured(gw: GatewayThread) -> None:
    with RawClient(gw.port) as c:
        for _ in range(2):
            c.send(b"GET /bytes/10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            resp = c.response()
            assert resp.status == 200 and resp.body == pattern(10)
            assert (resp.header("connection") or "").lower() == "keep-alive"


def test_pipelined_requests_are_answered_in_order(gw: GatewayThread) -> None:
    reqs = b"".join([
        get("/delay/0.2", extra="X-N: 1\r\n"),
        get("/bytes/3"),
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        get("/status/204"),
        get("/delay/0.05", extra="X-N: 5\r\n"),
    ])
    with RawClient(gw.port) as c:
        c.send(reqs)
        first = c.response()
        assert first.json()["target"] == "/delay/0.2"
        assert c.response().body == pattern(3)
        assert c.response().json()["body"] == "hello"
        assert c.response().status == 204
        assert c.response().json()["target"] == "/delay/0.05"


def test_deep_pipelines_pause_reading_and_still_answer_in_order(origin_a: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([origin_a.url], tmp_path, limits={"max_pipelined": 4})) as g, RawClient(g.port) as c:
        c.send(b"".join(get(f"/bytes/{n}") for n in range(1, 41)))
        for n in range(1, 41):
            assert c.response().body == pattern(n)


def test_upstream_answering_before_the_body_is_read(raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(b"POST /early-reply HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n" + b"u" * 65536)
        resp = c.response()
        assert (resp.status, resp.body) == (403, b"nope")
        # the rest of the body cannot be told from a next request: the connection ends
        assert resp.header("connection") == "close"
        assert c.closed(10)


def test_chunked_request_body_is_forwarded(client: httpx.Client) -> None:
    def gen() -> Iterator[bytes]:
        yield b"hello "
        yield b"chunked "
        yield b"world"
    data = echo(client.post("/echo", content=gen()))
    assert data["body"] == "hello chunked world"
    assert ["Transfer-Encoding", "chunked"] in [[k.title(), v] for k, v in data["headers"]]


def test_raw_chunked_request_with_extensions_and_trailer(gw: GatewayThread) -> None:
    body = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    resp = request(gw.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    assert resp.json()["body"] == "hello world"


def test_content_length_request_body(client: httpx.Client) -> None:
    data = echo(client.post("/echo", content=b"x" * 100_000))
    assert data["body_len"] == 100_000
    assert ["content-length", "100000"] in [[k.lower(), v] for k, v in data["headers"]]


def test_chunked_response_is_passed_through(client: httpx.Client) -> None:
    resp = client.get("/chunked/100000?size=3000")
    assert resp.status_code == 200
    assert resp.headers["transfer-encoding"] == "chunked"
    assert resp.content == pattern(100_000)


def test_large_sized_response(client: httpx.Client) -> None:
    resp = client.get("/bytes/3000000")
    assert resp.content == pattern(3_000_000)
    assert resp.headers["content-length"] == "3000000"


def test_head_has_headers_but_no_body(gw: GatewayThread) -> None:
    with RawClient(gw.port) as c:
        c.send(b"HEAD /bytes/5000 HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = c.response(head_request=True)
        assert resp.status == 200 and resp.header("content-length") == "5000"
        # the connection is still in sync: the next response is the next request's
        c.send(get("/bytes/7"))
        assert c.response().body == pattern(7)
    assert c.buf == b""


@pytest.mark.parametrize("code", [204, 304])
def test_no_body_statuses_keep_the_connection_in_sync(gw: GatewayThread, code: int) -> None:
    with RawClient(gw.port) as c:
        c.send(get(f"/status/{code}") + get("/bytes/4"))
        resp = c.response()
        assert resp.status == code and resp.body == b""
        assert c.response().body == pattern(4)


@pytest.mark.parametrize("code", [200, 201, 301, 404, 418, 500, 503])
def test_upstream_statuses_pass_through(client: httpx.Client, code: int) -> None:
    resp = client.get(f"/status/{code}", follow_redirects=False)
    assert resp.status_code == code
    assert resp.headers["x-origin"] == "a"


def test_expect_100_continue_gets_continue_then_the_response(gw: GatewayThread) -> None:
    with RawClient(gw.port) as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        c.sock.settimeout(5)
        while b"\r\n\r\n" not in c.buf:
            c._fill()
        assert c.buf.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        c.buf = c.buf[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        c.send(b"body")
        resp = c.response()
        data = resp.json()
        assert data["body"] == "body"
        # Expect is answered by the gateway, not forwarded
        assert "expect" not in [k.lower() for k, _ in data["headers"]]


def test_unknown_expectation_is_417(gw: GatewayThread) -> None:
    resp = request(gw.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nExpect: something\r\n\r\nx")
    assert resp.status == 417


def test_early_hints_are_relayed_and_100_is_not(gw: GatewayThread, raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(get("/early-hints"))
        resp = c.response()
        assert resp.interim == [103] and resp.body == b"ok"
        c.send(get("/continue"))
        resp = c.response()
        assert resp.interim == [] and resp.body == b"ok"


def test_close_delimited_upstream_body_is_rechunked_for_http11(raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(get("/eof"))
        resp = c.response()
        assert resp.header("transfer-encoding") == "chunked"
        assert resp.body == b"body until close"
        # and the client connection survives
        c.send(get("/http10"))
        resp = c.response()
        assert resp.body == b"old style"


def test_chunked_response_trailer_passes_through(raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g, RawClient(g.port) as c:
        c.send(get("/trailer"))
        resp = c.response()
        assert resp.body == b"hello world"


def test_options_star_and_absolute_form(gw: GatewayThread) -> None:
    # forwarded as asterisk-form (aiohttp's router has no route for "*": its own 404 comes back)
    resp = request(gw.port, b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
    assert resp.status == 404 and resp.header("via") == "1.1 clefgate"
    resp = request(gw.port, b"GET http://other.example/abs?q=1 HTTP/1.1\r\nHost: ignored\r\n\r\n")
    data = resp.json()
    assert data["target"] == "/abs?q=1"
    hosts = [v for k, v in data["headers"] if k.lower() == "host"]
    assert hosts == ["other.example"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_upload_and_download(gw: GatewayThread, tmp_path: Path) -> None:
    src = tmp_path / "upload.bin"
    src.write_bytes(pattern(2_000_000))
    out = subprocess.run(["curl", "-sS", "--fail", "-T", str(src), f"{gw.url}/sink"], capture_output=True, timeout=60,
                         check=True)
    assert json.loads(out.stdout)["received"] == 2_000_000
    out = subprocess.run(["curl", "-sS", "--fail", f"{gw.url}/source/3000000"], capture_output=True, timeout=60,
                         check=True)
    assert out.stdout == pattern(3_000_000)
    # curl -0 speaks HTTP/1.0
    out = subprocess.run(["curl", "-sS", "-0", "-i", f"{gw.url}/chunked/2000"], capture_output=True, timeout=60,
                         check=True)
    _, _, body = out.stdout.partition(b"\r\n\r\n")
    assert body == pattern(2000)
