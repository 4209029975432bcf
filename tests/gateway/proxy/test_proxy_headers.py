"""Headers on the way through: hop-by-hop, X-Forwarded-*, Via, request ids, trusted proxies, spoofing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.origin import OriginProcess
from tests.proxy_support import (
    GatewayThread,
    RawClient,
    gateway,
    get,
    make_config,
    request,
)


@pytest.fixture(scope="module")
def trusting(origin_a: OriginProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    """A gateway that trusts 127.0.0.1 as a proxy in front of it."""
    cfg = make_config([origin_a.url], tmp_path_factory.mktemp("trusting"), trusted_proxies=["127.0.0.0/8"])
    with gateway(cfg) as g:
        yield g


def upstream_headers(port: int, data: bytes) -> dict[str, list[str]]:
    """Send ``data`` through the gateway to the echo origin; the headers the origin saw."""
    resp = request(port, data)
    assert resp.status == 200, resp.body
    out: dict[str, list[str]] = {}
    for name, value in resp.json()["headers"]:
        out.setdefault(name.lower(), []).append(value)
    return out


def test_hop_by_hop_request_headers_are_dropped(gw: GatewayThread) -> None:
    seen = upstream_headers(gw.port, get("/echo", extra=(
        "Connection: keep-alive, X-Secret-Hop\r\nKeep-Alive: timeout=5\r\nX-Secret-Hop: 1\r\nTE: trailers\r\n"
        "Proxy-Connection: keep-alive\r\nTrailer: X-T\r\nUpgrade: h2c\r\nX-Kept: yes\r\n")))
    for name in ("keep-alive", "x-secret-hop", "te", "proxy-connection", "trailer", "upgrade"):
        assert name not in seen, name
    # Connection to the upstream is ours (keep-alive by HTTP/1.1 default), never the client's
    assert "connection" not in seen
    assert seen["x-kept"] == ["yes"]


def test_a_browser_head_keeps_its_fields_in_order_without_connection(gw: GatewayThread) -> None:
    resp = request(gw.port, b"GET /echo HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: Mozilla/5.0\r\n"
                            b"Accept: text/html\r\nConnection: keep-alive\r\nCookie: a=1\r\nX-Last: z\r\n\r\n")
    names = [k.lower() for k, _ in resp.json()["headers"]]
    assert "connection" not in names
    assert names[:5] == ["host", "user-agent", "accept", "cookie", "x-last"]


def test_hop_by_hop_response_headers_are_dropped(raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g:
        resp = request(g.port, get("/hop"))
    names = {k.lower() for k, _ in resp.headers}
    assert "x-hop" not in names and "keep-alive" not in names and "proxy-connection" not in names
    assert resp.header("x-end") == "kept" and resp.body == b"ok"


def test_forwarded_headers_for_an_untrusted_peer(gw: GatewayThread) -> None:
    seen = upstream_headers(gw.port, get("/echo", host="shop.example:8443", extra=(
        "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n"
        "Forwarded: for=6.6.6.6\r\nX-Real-Thing: 1\r\n")))
    # a client that is not a trusted proxy cannot speak for anyone else
    assert seen["x-forwarded-for"] == ["127.0.0.1"]
    assert seen["x-forwarded-proto"] == ["http"]
    assert seen["x-forwarded-host"] == ["shop.example:8443"]
    assert "forwarded" not in seen
    assert seen["host"] == ["shop.example:8443"]
    assert seen["via"] == ["1.1 clefgate"]


def test_forwarded_headers_from_a_trusted_proxy(trusting: GatewayThread) -> None:
    seen = upstream_headers(trusting.port, get("/echo", host="shop.example", extra=(
        "X-Forwarded-For: 203.0.113.9, 10.0.0.2\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: www.shop.example\r\n"
        "Via: 1.1 cdn\r\n")))
    assert seen["x-forwarded-for"] == ["203.0.113.9, 10.0.0.2, 127.0.0.1"]
    assert seen["x-forwarded-proto"] == ["https"]
    assert seen["x-forwarded-host"] == ["www.shop.example"]
    assert seen["via"] == ["1.1 cdn", "1.1 clefgate"]


def test_client_ip_walks_xff_from_the_right_past_trusted_hops(trusting: GatewayThread) -> None:
    # 127.0.0.0/8 is trusted: the right-most untrusted address is the client
    request(trusting.port, get("/echo", extra="X-Request-Id: walk-1\r\nX-Forwarded-For: 1.1.1.1, 198.51.100.4, 127.0.0.5\r\n"))
    line = trusting.wait_log(lambda r: r["request_id"] == "walk-1")
    assert line["client"] == "198.51.100.4"
    request(trusting.port, get("/echo", extra="X-Request-Id: walk-2\r\nForwarded: for=\"[2001:db8::7]:443\";proto=https\r\n"))
    assert trusting.wait_log(lambda r: r["request_id"] == "walk-2")["client"] == "2001:db8::7"


def test_client_ip_ignores_xff_from_untrusted_peers(gw: GatewayThread) -> None:
    request(gw.port, get("/echo", extra="X-Request-Id: spoof-1\r\nX-Forwarded-For: 1.2.3.4\r\n"))
    assert gw.wait_log(lambda r: r["request_id"] == "spoof-1")["client"] == "127.0.0.1"


def test_public_scheme_overrides(origin_a: OriginProcess, tmp_path: Path) -> None:
    cfg = make_config([origin_a.url], tmp_path, public_scheme="https", trusted_proxies=["127.0.0.0/8"])
    with gateway(cfg) as g:
        seen = upstream_headers(g.port, get("/echo", extra="X-Forwarded-Proto: http\r\n"))
    assert seen["x-forwarded-proto"] == ["https"]


def test_clefgate_headers_from_clients_are_stripped(gw: GatewayThread) -> None:
    seen = upstream_headers(gw.port, get("/echo", extra="X-Clefgate-Verdict: forward\r\nX-Clefgate-Score: 0.000\r\n"
                                                         "x-clefgate-rule: allow-admin\r\n"))
    assert seen["x-clefgate-verdict"] == ["forward"]
    assert seen["x-clefgate-source"] == ["default"]
    assert "x-clefgate-score" not in seen and "x-clefgate-rule" not in seen


def test_request_id_is_created_sent_upstream_and_returned(gw: GatewayThread) -> None:
    resp = request(gw.port, get("/echo"))
    rid = resp.header("x-request-id")
    assert rid
    seen = {k.lower(): v for k, v in resp.json()["headers"]}
    assert seen["x-request-id"] == rid
    assert gw.wait_log(lambda r: r["request_id"] == rid)["status"] == 200


def test_request_id_is_propagated_and_ids_are_unique(gw: GatewayThread) -> None:
    resp = request(gw.port, get("/echo", extra="X-Request-Id: abc-123\r\n"))
    assert resp.header("x-request-id") == "abc-123"
    assert {k.lower(): v for k, v in resp.json()["headers"]}["x-request-id"] == "abc-123"
    ids = set()
    with RawClient(gw.port) as c:
        for _ in range(50):
            c.send(get("/bytes/1"))
            ids.add(c.response().header("x-request-id"))
    assert len(ids) == 50


def test_unusable_request_id_is_replaced(gw: GatewayThread) -> None:
    resp = request(gw.port, get("/echo", extra="X-Request-Id: has space and \"quotes\"\r\n"))
    assert resp.header("x-request-id") not in (None, "has space and \"quotes\"")


def test_custom_request_id_header(origin_a: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([origin_a.url], tmp_path, request_id_header="X-Trace")) as g:
        resp = request(g.port, get("/echo", extra="X-Trace: t-1\r\n"))
    assert resp.header("x-trace") == "t-1"
    assert {k.lower(): v for k, v in resp.json()["headers"]}["x-trace"] == "t-1"


def test_request_id_on_every_response_kind(gw: GatewayThread) -> None:
    for data in (get("/status/404"), get("/status/204"), b"HEAD /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n"):
        resp = request(gw.port, data, head_request=data.startswith(b"HEAD"))
        assert resp.header("x-request-id"), data


def test_debug_headers(origin_a: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([origin_a.url], tmp_path, logging={"debug_headers": True})) as g:
        resp = request(g.port, get("/echo"))
    assert resp.header("x-clefgate-verdict") == "forward"
    assert resp.header("x-clefgate-source") == "default"
    assert resp.header("x-clefgate-reason")


def test_path_prefix_of_a_server_url(origin_a: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([origin_a.url + "/echo/base/"], tmp_path)) as g:
        data = json.loads(request(g.port, get("/x%2Fy?q")).body)
    assert data["target"] == "/echo/base/x%2Fy?q"
