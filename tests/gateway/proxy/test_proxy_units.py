"""Unit tests of the data path's building blocks: response heads, chunked framing, header
stripping, trusted proxies, request ids, error pages and the fast Features constructor."""

from __future__ import annotations

import os

import pytest

from gateway.features import Features, make_header_map
from gateway.proxy.clientaddr import TrustedProxies, parse_forwarded_for, parse_xff
from gateway.proxy.errors import render_error
from gateway.proxy.http1 import (
    ChunkedReader,
    ProtocolError,
    ResponseScan,
    check_host,
    check_transfer_encoding,
    header_stripper,
    parse_response_head,
)
from gateway.proxy.requestid import RequestIds
from gateway.proxy.wirefeatures import WIRE_FIELDS, new_features

# ---------------------------------------------------------------------------- response heads

SCAN = ResponseScan("X-Request-Id")


def parse(raw: bytes):  # type: ignore[no-untyped-def]
    return parse_response_head(raw, SCAN)


def test_response_head_fields() -> None:
    head = parse(b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 12\r\nConnection: keep-alive\r\n"
                 b"Keep-Alive: timeout=5\r\nX-Request-Id: upstream-id\r\nX-Kept: 1\r\n\r\n")
    assert (head.status, head.status_text, head.version) == (200, b"200 OK", b"HTTP/1.1")
    assert (head.content_length, head.chunked, head.close, head.connection) == (12, False, False, frozenset())
    # hop-by-hop fields and the id field the gateway sets itself are cut; the rest is kept as sent
    assert head.block == b"\r\nServer: x\r\nContent-Length: 12\r\nX-Kept: 1"
    assert head.raw_block.startswith(b"\r\nServer: x\r\nContent-Length: 12\r\nConnection: keep-alive")


@pytest.mark.parametrize(("raw", "expect"), [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", ("chunked", False)),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", (1, True)),
    (b"HTTP/1.0 200 OK\r\n\r\n", (-1, True)),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n", (3, False)),
    (b"HTTP/1.1 204 No Content\r\n\r\n", (-1, False)),
    (b"HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n", (-1, True)),
    (b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", (0, False)),
])
def test_response_framing(raw: bytes, expect: tuple[object, bool]) -> None:
    head = parse(raw)
    assert ("chunked" if head.chunked else head.content_length, head.close) == expect


def test_connection_named_fields_are_reported() -> None:
    head = parse(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nConnection: X-Other\r\n"
                               b"Content-Length: 0\r\n\r\n")
    assert head.connection == {b"x-hop", b"x-other"}


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: a\x00\r\n\r\n",
    b"HTTP/2.0 200 OK\r\n\r\n",
    b"HTTP/1.1 099 Low\r\n\r\n",
    b"HTTP/1.1 1000 X\r\n\r\n",
    b"SPDY/3 200 OK\r\n\r\n",
])
def test_ambiguous_response_heads_are_refused(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(raw)


def test_header_stripper_is_case_insensitive_and_exact() -> None:
    strip = header_stripper({"connection", "keep-alive"}, ("x-clefgate-",))
    block = b"\r\nCONNECTION: close\r\nKeep-Alive: 5\r\nX-Connection-Id: 7\r\nX-Clefgate-Score: 1\r\nX-Kept: 1"
    assert strip.sub(b"", block) == b"\r\nX-Connection-Id: 7\r\nX-Kept: 1"


# ---------------------------------------------------------------------------- chunked bodies


BODY = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"


@pytest.mark.parametrize("step", [1, 2, 3, 7, len(BODY)])
def test_chunked_reader_in_any_pieces(step: int) -> None:
    reader = ChunkedReader()
    payload: list[bytes] = []
    consumed = 0
    for i in range(0, len(BODY), step):
        piece = BODY[i : i + step]
        consumed += reader.feed(piece, payload)
    assert reader.done and consumed == len(BODY)
    assert b"".join(payload) == b"hello world"


def test_chunked_reader_stops_at_the_end_of_the_message() -> None:
    reader = ChunkedReader()
    assert reader.feed(b"3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK", None) == 13
    assert reader.done


@pytest.mark.parametrize("raw", [b"zz\r\n", b"-1\r\n", b"0x1\r\n", b"1 \r\nx\r\n", b"1\nx\n", b"1\r\nxy\r\n",
                                 b"F" * 16 + b"\r\n", b"1\r\nx\r\n0\r\nno-colon\r\n\r\n"])
def test_chunked_reader_refuses_bad_framing(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        ChunkedReader().feed(raw, [])


# ---------------------------------------------------------------------------- request checks


@pytest.mark.parametrize(("te", "version", "ok"), [
    ("chunked", "1.1", True), ("Chunked", "1.1", True), (" chunked\t", "1.1", True),
    ("chunked", "1.0", False), ("gzip, chunked", "1.1", False), ("identity", "1.1", False),
    ("chunked, chunked", "1.1", False),
])
def test_transfer_encoding_check(te: str, version: str, ok: bool) -> None:
    assert (check_transfer_encoding(te, version) is None) == ok


@pytest.mark.parametrize(("host", "ok"), [
    ("example.com", True), ("example.com:8080", True), ("[::1]:443", True), ("127.0.0.1", True), ("", True),
    ("a b", False), ("a/b", False), ("a@b", False), ("[::1", False), ("host:port", False),
])
def test_host_check(host: str, ok: bool) -> None:
    assert check_host(host) == ok


# ---------------------------------------------------------------------------- client address


def test_trusted_proxies() -> None:
    trusted = TrustedProxies(["10.0.0.0/8", "2001:db8::/32"])
    assert "10.1.2.3" in trusted and "::ffff:10.1.2.3" in trusted and "2001:db8::5" in trusted
    assert "11.0.0.1" not in trusted and "garbage" not in trusted
    # from an untrusted peer nothing is believed
    assert trusted.client_ip("11.0.0.1", "1.2.3.4", None) == "11.0.0.1"
    # walk right to left past trusted hops
    assert trusted.client_ip("10.0.0.1", "6.6.6.6, 1.2.3.4, 10.9.9.9", None) == "1.2.3.4"
    # all trusted: the left-most
    assert trusted.client_ip("10.0.0.1", "10.0.0.7, 10.0.0.8", None) == "10.0.0.7"
    # (2001:db8:cafe::17 is inside the trusted 2001:db8::/32, so the walk goes past it)
    assert trusted.client_ip("10.0.0.1", None, 'for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"') == "192.0.2.60"
    assert trusted.client_ip("10.0.0.1", None, 'for="[2001:db9::17]:4711"') == "2001:db9::17"
    assert not TrustedProxies([])


def test_xff_and_forwarded_parsing() -> None:
    assert parse_xff("1.2.3.4, garbage , [::1]:80, 5.6.7.8:9") == ["1.2.3.4", "::1", "5.6.7.8"]
    assert parse_forwarded_for('for=_hidden, for="198.51.100.17:80";by=x') == ["198.51.100.17"]


# ---------------------------------------------------------------------------- ids and errors


def test_request_ids_are_unique_and_reseeded_after_fork() -> None:
    ids = RequestIds()
    made = {ids.new() for _ in range(1000)}
    assert len(made) == 1000
    assert ids.accept("abc-123") == "abc-123"
    assert ids.accept("no spaces") != "no spaces"
    assert ids.accept("x" * 200) != "x" * 200
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: its ids must not repeat the parent's prefix
        os.write(write_fd, ids.new().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child_id = os.read(read_fd, 100).decode()
    os.close(read_fd)
    os.close(write_fd)
    assert child_id.split("-")[0] != ids.new().split("-")[0]


def test_error_response_names_the_request_id() -> None:
    data = render_error(502, "req-9", "Connecting to the upstream failed.", id_header=b"X-Request-Id", close=True)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 502 Bad Gateway\r\n")
    assert b"\r\nX-Request-Id: req-9" in head and b"\r\nconnection: close" in head
    assert b"request id: req-9" in body and b"Connecting to the upstream failed." in body
    assert f"content-length: {len(body)}".encode() in head
    head_only = render_error(404, "r", "", id_header=b"X-Request-Id", close=False, head_only=True)
    assert head_only.endswith(b"\r\n\r\n")


# ---------------------------------------------------------------------------- fast Features


def test_new_features_equals_the_dataclass_constructor() -> None:
    headers = (("Host", "h"), ("Cookie", "a=1"), ("Cookie", "b=2"))
    values = dict(method="GET", path="/p", query="q=1", http_version="1.1", headers=headers,
                  header_map=make_header_map(headers), client_ip="1.2.3.4", peer_ip="5.6.7.8", host="h",
                  user_agent="ua", content_length=None, chunked=False, scheme="https", request_id="r-1",
                  received_at=123.5, client_key="4:1.2.3.4#0123456789abcdef")
    fast = new_features(*(values[name] for name in WIRE_FIELDS))
    slow = Features(**values)  # type: ignore[arg-type]
    assert fast == slow
    assert type(fast) is Features
    with pytest.raises(AttributeError):
        fast.path = "/other"  # type: ignore[misc]


def test_local_response_header_lines_are_kept_per_field_set() -> None:
    from gateway.proxy import reply

    fields = (("Cache-Control", "no-store"), ("X-Bad", "a\r\nb"), ("X-Clefgate-Challenge", "pow; difficulty=16"))
    first = b"".join(reply._local_header_lines("text/html; charset=utf-8", fields, 8179))
    assert first == (b"\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: 8179\r\n"
                     b"Cache-Control: no-store\r\nX-Clefgate-Challenge: pow; difficulty=16\r\n")  # the CR/LF field is never written
    again = b"".join(reply._local_header_lines("text/html; charset=utf-8", tuple(fields), 12))
    assert again == first.replace(b"8179", b"12")
    for i in range(600):  # per-client fields (cookies) never grow the kept set without bound
        reply._local_header_lines("text/plain", (("Set-Cookie", f"p={i}"),), 0)
    assert len(reply._LOCAL_HEADERS) <= 512


def _reference_clean(addr: str) -> str:
    import ipaddress

    addr = addr.strip().strip('"')
    if addr.startswith("["):
        addr = addr[1 : addr.find("]")] if "]" in addr else ""
    elif addr.count(":") == 1:
        addr = addr.partition(":")[0]
    try:
        return str(ipaddress.ip_address(addr))
    except ValueError:
        return ""


def test_ipv4_fast_path_agrees_with_ipaddress() -> None:
    """Dotted quads skip ipaddress; every address must come out (and be trusted) exactly as ipaddress would have it."""
    import ipaddress
    import random

    from gateway.proxy.clientaddr import _clean

    rng = random.Random(5)
    odd = ["1.2.3.4", "0.0.0.0", "255.255.255.255", "01.2.3.4", "1.2.3.04", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4 ",
           " 1.2.3.4", "0x1.2.3.4", "1.2.3.-4", "1..3.4", "١.2.3.4", "1.2.3.4\x00", "1.2.3.4:80", "[1.2.3.4]", "::ffff:10.1.2.3",
           "10.1.2.3%eth0", "2001:db8::1", "", "garbage", "+1.2.3.4", "1.2.3.4/32"]
    made = [".".join(str(rng.choice([rng.randrange(256), rng.randrange(1000), 0])) for _ in range(rng.choice([3, 4, 4, 5])))
            for _ in range(3000)]
    trusted = TrustedProxies(["10.0.0.0/8", "192.168.4.0/22", "198.51.100.7/32", "2001:db8::/32", "::ffff:172.16.0.0/108"])
    networks = [ipaddress.ip_network(c) for c in ("10.0.0.0/8", "192.168.4.0/22", "198.51.100.7/32", "2001:db8::/32", "::ffff:172.16.0.0/108")]
    for text in odd + made + [f"10.{a}.{b}.{c}" for a, b, c in ((0, 0, 0), (255, 255, 255), (1, 2, 3))] + ["192.168.7.255", "192.168.8.0"]:
        assert _clean(text) == _reference_clean(text), text
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            expected = False
        else:
            if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
                addr = addr.ipv4_mapped
            expected = any(addr in net for net in networks)
        assert (text in trusted) is expected, text
