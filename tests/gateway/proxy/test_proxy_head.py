"""The request head, judged by the pure ``parse_head``: tables of heads the gateway serves and of every refusal.

Each head is written as bytes and tokenized by llhttp exactly as the client connection does (request line, fields in
wire order, the raw head when it arrived whole); what llhttp itself refuses never reaches ``parse_head`` and is answered
``400 malformed`` by the connection, so those rows say so. No socket, loop or runtime is involved.
"""

from __future__ import annotations

import re
from pathlib import Path

import httptools
import pytest

from gateway.proxy import head as headmod
from gateway.proxy.head import CHUNKED, LENGTH, NO_BODY, HeadError, HeadRules, RequestHead, line_only, parse_head

RULES = HeadRules(id_header="x-request-id", max_headers=12, max_header_bytes=400, max_body=10_000,
                  underscore_refuse=True, pass_cookie="clefgate_pass")
DROPPING = HeadRules(id_header="x-request-id", max_headers=12, max_header_bytes=400, max_body=10_000,
                     underscore_refuse=False, pass_cookie="clefgate_pass")


class _Recorder:
    """The parser callbacks the client connection uses, recording instead of acting."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.fields: list[tuple[bytes, bytes]] = []
        self.line: tuple[bytes, bytes, str] | None = None
        self.upgrading = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name, value))

    def on_headers_complete(self) -> None:
        self.line = (self.parser.get_method(), self.url, self.parser.get_http_version())
        self.upgrading = self.parser.should_upgrade()


def judge(data: bytes, rules: HeadRules = RULES, *, whole: bool = True, known_host: str = "") -> RequestHead | HeadError:
    """``data`` as the gateway judges it: llhttp's refusals as the connection answers them, else parse_head's answer.
    ``whole``: the head arrived in one piece (the forwarded block is cut from it) or in pieces (it is rebuilt)."""
    rec = _Recorder()
    try:
        rec.parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        pass  # CONNECT and Upgrade requests end at their head
    except httptools.HttpParserError as exc:
        return HeadError(400, "malformed", f"Malformed request: {exc}.")
    assert rec.line is not None, "the test head is incomplete"
    method_b, target, version = rec.line
    raw_head = data[: data.find(b"\r\n\r\n")] if whole else None
    return parse_head(rules, method_b, target, version, rec.fields, raw_head, rec.upgrading, known_host)


def head_of(line: str, *fields: str, body: bytes = b"") -> bytes:
    return (line + "\r\n" + "".join(f + "\r\n" for f in fields) + "\r\n").encode("latin-1") + body


def accepted(data: bytes, rules: HeadRules = RULES, **kw: object) -> RequestHead:
    got = judge(data, rules, **kw)  # type: ignore[arg-type]
    assert isinstance(got, RequestHead), got
    return got


# ---------------------------------------------------------------------------- heads the gateway serves

GOOD = [
    # (id, head, what the RequestHead says)
    ("browser GET", head_of("GET /shop/item?id=7&x=1 HTTP/1.1", "Host: shop.example", "User-Agent: UA/1",
                            "Accept: text/html", "Connection: keep-alive"),
     dict(method="GET", target=b"/shop/item?id=7&x=1", version="1.1", path="/shop/item", query="id=7&x=1",
          host="shop.example", body=NO_BODY, content_length=None, add_host=False, expect_continue=False, upgrade=False,
          fwd=b"\r\nHost: shop.example\r\nUser-Agent: UA/1\r\nAccept: text/html", client_id=None, kept=None)),
    ("POST with a length", head_of("POST /form HTTP/1.1", "Host: a.example", "Content-Length: 5", body=b"hello"),
     dict(body=LENGTH, content_length=5, fwd=b"\r\nHost: a.example")),
    ("an empty body is no body", head_of("POST /form HTTP/1.1", "Host: a.example", "Content-Length: 0"),
     dict(body=NO_BODY, content_length=0)),
    ("chunked", head_of("POST /up HTTP/1.1", "Host: a.example", "Transfer-Encoding: chunked"),
     dict(body=CHUNKED, content_length=None, fwd=b"\r\nHost: a.example")),
    ("chunked in any case", head_of("POST /up HTTP/1.1", "Host: a.example", "Transfer-Encoding: Chunked"),
     dict(body=CHUNKED)),
    ("Expect with a body", head_of("PUT /f HTTP/1.1", "Host: a.example", "Expect: 100-continue", "Content-Length: 3"),
     dict(expect_continue=True, body=LENGTH, fwd=b"\r\nHost: a.example")),
    ("Expect without a body waits for nothing", head_of("GET / HTTP/1.1", "Host: a.example", "Expect: 100-Continue"),
     dict(expect_continue=False)),
    ("Expect from HTTP/1.0 waits for nothing", head_of("POST / HTTP/1.0", "Host: a.example", "Expect: 100-continue",
                                                       "Content-Length: 3"),
     dict(expect_continue=False, version="1.0")),
    ("HTTP/1.0 without Host", head_of("GET /old HTTP/1.0", "User-Agent: lynx"),
     dict(version="1.0", host="", add_host=True, fwd=b"\r\nUser-Agent: lynx")),
    ("absolute form", head_of("GET http://b.example/x?y=1 HTTP/1.1", "Host: a.example", "Accept: */*"),
     dict(target=b"/x?y=1", host="b.example", path="/x", query="y=1", fwd=b"\r\nAccept: */*\r\nhost: b.example")),
    ("absolute form without a path", head_of("GET HTTPS://b.example:8443 HTTP/1.1"),
     dict(target=b"/", host="b.example:8443", path="/", query="", fwd=b"\r\nhost: b.example:8443")),
    ("absolute form, IPv6", head_of("GET http://[::1]:8080/v HTTP/1.1", "Host: a.example"),
     dict(target=b"/v", host="[::1]:8080")),
    ("OPTIONS *", head_of("OPTIONS * HTTP/1.1", "Host: a.example"), dict(target=b"*", path="*", query="", host="a.example")),
    ("WebSocket upgrade", head_of("GET /ws HTTP/1.1", "Host: a.example", "Connection: Upgrade", "Upgrade: websocket",
                                  "Sec-WebSocket-Key: k"),
     dict(upgrade=True, fwd=b"\r\nHost: a.example\r\nSec-WebSocket-Key: k")),
    ("h2c is served as plain HTTP", head_of("GET / HTTP/1.1", "Host: a.example", "Connection: Upgrade, HTTP2-Settings",
                                            "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA"),
     dict(upgrade=False, fwd=b"\r\nHost: a.example")),
    ("a client's request id", head_of("GET / HTTP/1.1", "Host: a.example", "X-Request-Id: abc-123"),
     dict(client_id="abc-123", fwd=b"\r\nHost: a.example")),
    ("hop-by-hop and rewritten fields are cut", head_of(
        "GET / HTTP/1.1", "Host: a.example", "Keep-Alive: 5", "TE: trailers", "Proxy-Authorization: Basic eA==",
        "X-Forwarded-For: 1.2.3.4", "Forwarded: for=1.2.3.4", "Via: 1.1 other", "X-Clefgate-Verdict: forward", "Accept: */*"),
     dict(fwd=b"\r\nHost: a.example\r\nVia: 1.1 other\r\nAccept: */*")),
    ("a field named in Connection is cut", head_of("GET / HTTP/1.1", "Host: a.example", "Connection: close, X-Secret",
                                                   "X-Secret: s", "Accept: */*"),
     dict(fwd=b"\r\nHost: a.example\r\nAccept: */*", kept=None)),
    ("Connection cannot remove Host, framing or what the gateway adds", head_of(
        "POST / HTTP/1.1", "Host: a.example", "Content-Length: 2", "X-Request-Id: r1", "X-Real-IP: 9.9.9.9",
        "Connection: Host, Content-Length, X-Request-Id, X-Forwarded-Host, X-Real-IP", body=b"ok"),
     dict(kept=frozenset({"host", "content-length", "x-request-id", "x-forwarded-host", "x-real-ip"}),
          fwd=b"\r\nHost: a.example\r\nX-Real-IP: 9.9.9.9", body=LENGTH)),
    ("the pass cookie stays at the gateway", head_of("GET / HTTP/1.1", "Host: a.example",
                                                     "Cookie: a=1; clefgate_pass=v.1; b=2"),
     dict(fwd=b"\r\nHost: a.example\r\nCookie: a=1; b=2", header_map={"host": "a.example",
                                                                      "cookie": "a=1; clefgate_pass=v.1; b=2"})),
    ("a cookie field with only the pass cookie is cut", head_of("GET / HTTP/1.1", "Host: a.example",
                                                                "Cookie: clefgate_pass=v.1"),
     dict(fwd=b"\r\nHost: a.example")),
    ("an underscore name that folds onto nothing guarded", head_of("GET / HTTP/1.1", "Host: a.example", "X_Custom: 1"),
     dict(fwd=b"\r\nHost: a.example\r\nX_Custom: 1", twins_dropped=False)),
    ("repeated fields are joined in the map", head_of("GET / HTTP/1.1", "Host: a.example", "Accept: a", "Cookie: x=1",
                                                      "accept: b", "Cookie: y=2"),
     dict(header_map={"host": "a.example", "accept": "a, b", "cookie": "x=1; y=2"},
          headers=(("Host", "a.example"), ("Accept", "a"), ("Cookie", "x=1"), ("accept", "b"), ("Cookie", "y=2")))),
    ("field values are latin-1 text", head_of("GET / HTTP/1.1", "Host: a.example").replace(b"\r\n\r\n", b"\r\nX: \xe9\xff\r\n\r\n"),
     dict(header_map={"host": "a.example", "x": "\xe9\xff"})),
    ("a Content-Length at the limit", head_of("POST / HTTP/1.1", "Host: a.example", "Content-Length: 10000"),
     dict(body=LENGTH, content_length=10_000)),
]


@pytest.mark.parametrize(("data", "want"), [row[1:] for row in GOOD], ids=[row[0] for row in GOOD])
def test_heads_the_gateway_serves(data: bytes, want: dict[str, object]) -> None:
    got = accepted(data)
    assert {name: getattr(got, name) for name in want} == want


@pytest.mark.parametrize("data", [row[1] for row in GOOD], ids=[row[0] for row in GOOD])
def test_a_head_in_pieces_is_judged_as_the_same_head_whole(data: bytes) -> None:
    """The forwarded block is cut from the raw head when it came whole and rebuilt field by field otherwise: the same
    head gives the same answer either way (these heads are written as ``Name: value``, which the rebuild produces)."""
    assert accepted(data, whole=False) == accepted(data)


def test_an_unchanged_host_is_not_checked_again() -> None:
    """``known_host`` is the Host this connection already found valid: only a different one is checked."""
    data = head_of("GET / HTTP/1.1", "Host: a.example")
    assert accepted(data, known_host="a.example").host == "a.example"
    bad = head_of("GET / HTTP/1.1", "Host: a b")
    assert judge(bad, known_host="a.example") == HeadError(400, "bad_host", "The Host header is not a valid authority.",
                                                           target=b"/")


def test_underscore_twins_are_dropped_when_so_configured() -> None:
    data = head_of("GET / HTTP/1.1", "Host: a.example", "Content_Length: 5", "X_Forwarded_For: 6.6.6.6", "X_Custom: 1")
    got = accepted(data, DROPPING)
    assert got.twins_dropped and got.fwd == b"\r\nHost: a.example\r\nX_Custom: 1"
    assert accepted(data, DROPPING, whole=False) == got


def test_a_refused_head_keeps_its_request_line() -> None:
    """``line_only`` is the head of a request refused before (or while) its fields were read."""
    got = line_only(b"HEAD", b"/x", "1.0")
    assert (got.method, got.method_b, got.target, got.version, got.body, got.fwd) == ("HEAD", b"HEAD", b"/x", "1.0", NO_BODY, b"")


# ---------------------------------------------------------------------------- refusals

H = "Host: a.example"
MANY = [f"X-F{i}: v" for i in range(12)]
REFUSED = [
    # (id, head, status, reason, rules) -- llhttp's refusals first
    ("CL and TE together", head_of("POST / HTTP/1.1", H, "Content-Length: 3", "Transfer-Encoding: chunked"), 400, "malformed"),
    ("TE and CL together", head_of("POST / HTTP/1.1", H, "Transfer-Encoding: chunked", "Content-Length: 3"), 400, "malformed"),
    ("two Content-Lengths", head_of("POST / HTTP/1.1", H, "Content-Length: 3", "Content-Length: 3"), 400, "malformed"),
    ("two different Content-Lengths", head_of("POST / HTTP/1.1", H, "Content-Length: 3", "Content-Length: 4"), 400, "malformed"),
    ("a Content-Length list", head_of("POST / HTTP/1.1", H, "Content-Length: 3, 3"), 400, "malformed"),
    ("a negative Content-Length", head_of("POST / HTTP/1.1", H, "Content-Length: -3"), 400, "malformed"),
    ("a Content-Length past 64 bits", head_of("POST / HTTP/1.1", H, "Content-Length: 99999999999999999999"), 400, "malformed"),
    ("a coding after chunked", head_of("POST / HTTP/1.1", H, "Transfer-Encoding: chunked, gzip"), 400, "malformed"),
    ("chunked twice", head_of("POST / HTTP/1.1", H, "Transfer-Encoding: chunked", "Transfer-Encoding: chunked"), 400, "malformed"),
    ("TE without chunked", head_of("POST / HTTP/1.1", H, "Transfer-Encoding: identity"), 400, "malformed"),
    ("obs-fold", head_of("GET / HTTP/1.1", H, "X-A: b", " c"), 400, "malformed"),
    ("whitespace before the colon", head_of("GET / HTTP/1.1", "Host : a.example"), 400, "malformed"),
    ("bare LF", b"GET / HTTP/1.1\nHost: a.example\n\n", 400, "malformed"),
    ("NUL in a value", head_of("GET / HTTP/1.1", H, "X: a\x00b"), 400, "malformed"),
    ("an empty field name", head_of("GET / HTTP/1.1", H, ": x"), 400, "malformed"),
    ("an unknown method", head_of("FOO / HTTP/1.1", H), 400, "malformed"),
    ("a lower-case method", head_of("get / HTTP/1.1", H), 400, "malformed"),
    ("a method that is not a token", head_of("G(T / HTTP/1.1", H), 400, "malformed"),
    ("a control character in the target", head_of("GET /a\x01 HTTP/1.1", H), 400, "malformed"),
    ("a target without a scheme or slash", head_of("GET example.com/x HTTP/1.1", H), 400, "malformed"),
    ("HTTP/1.2", head_of("GET / HTTP/1.2", H), 400, "malformed"),
    # parse_head's own
    ("too many fields", head_of("GET / HTTP/1.1", H, *MANY), 431, "too_many_headers"),
    ("HTTP/2.0 on an HTTP/1 connection", head_of("GET / HTTP/2.0", H), 505, "bad_version"),
    ("HTTP/0.9", head_of("GET / HTTP/0.9", H), 400, "bad_version"),
    ("two Host fields", head_of("GET / HTTP/1.1", H, "host: b.example"), 400, "bad_host"),
    ("two equal Host fields", head_of("GET / HTTP/1.1", H, H), 400, "bad_host"),
    ("HTTP/1.1 without Host", head_of("GET / HTTP/1.1", "Accept: */*"), 400, "bad_host"),
    ("a Host that is no authority", head_of("GET / HTTP/1.1", "Host: a b"), 400, "bad_host"),
    ("a Host with a path", head_of("GET / HTTP/1.1", "Host: a.example/x"), 400, "bad_host"),
    ("a Host with a non-ASCII byte", head_of("GET / HTTP/1.1", "Host: a\xe9.example"), 400, "bad_host"),
    ("an absolute target with userinfo", head_of("GET http://user@b.example/ HTTP/1.1", H), 400, "bad_host"),
    ("an underscore twin of Content-Length", head_of("GET / HTTP/1.1", H, "Content_Length: 5"), 400, "ambiguous_header_name"),
    ("an underscore twin of Transfer-Encoding", head_of("POST / HTTP/1.1", H, "Transfer_Encoding: chunked"), 400,
     "ambiguous_header_name"),
    ("an underscore twin of X-Forwarded-For", head_of("GET / HTTP/1.1", H, "x_forwarded_for: 6.6.6.6"), 400,
     "ambiguous_header_name"),
    ("an underscore twin of the request id", head_of("GET / HTTP/1.1", H, "X_Request_Id: mine"), 400, "ambiguous_header_name"),
    ("an underscore twin of a gateway field", head_of("GET / HTTP/1.1", H, "X_Clefgate_Verdict: forward"), 400,
     "ambiguous_header_name"),
    ("fields over the byte limit", head_of("GET / HTTP/1.1", H, "X-Big: " + "b" * 400), 431, "header_too_large"),
    ("TE in HTTP/1.0", head_of("POST / HTTP/1.0", H, "Transfer-Encoding: chunked"), 400, "bad_transfer_encoding"),
    ("a coding under chunked", head_of("POST / HTTP/1.1", H, "Transfer-Encoding: gzip, chunked"), 400, "bad_transfer_encoding"),
    ("chunked after another TE field", head_of("POST / HTTP/1.1", H, "Transfer-Encoding: x", "Transfer-Encoding: chunked"),
     400, "bad_transfer_encoding"),
    ("a body over the limit", head_of("POST / HTTP/1.1", H, "Content-Length: 10001"), 413, "body_too_large"),
    ("CONNECT", head_of("CONNECT a.example:443 HTTP/1.1", H), 501, "connect_unsupported"),
    ("asterisk form outside OPTIONS", head_of("GET * HTTP/1.1", H), 400, "bad_target"),
    ("a scheme other than http(s)", head_of("GET ftp://a.example/x HTTP/1.1", H), 400, "bad_target"),
    ("an Expect other than 100-continue", head_of("GET / HTTP/1.1", H, "Expect: 200-ok"), 417, "bad_expect"),
    ("an Upgrade with a body", head_of("POST /ws HTTP/1.1", H, "Content-Length: 2", "Connection: Upgrade",
                                       "Upgrade: websocket", body=b"ab"), 400, "upgrade_with_body"),
    ("a chunked Upgrade", head_of("POST /ws HTTP/1.1", H, "Transfer-Encoding: chunked", "Connection: Upgrade",
                                  "Upgrade: h2c"), 400, "upgrade_with_body"),
]


@pytest.mark.parametrize(("data", "status", "reason"), [row[1:] for row in REFUSED], ids=[row[0] for row in REFUSED])
@pytest.mark.parametrize("whole", [True, False], ids=["whole", "in-pieces"])
def test_every_refusal(data: bytes, status: int, reason: str, whole: bool) -> None:
    got = judge(data, whole=whole)
    assert isinstance(got, HeadError), got
    assert (got.status, got.reason) == (status, reason), got.detail
    assert got.detail.endswith(".") and "\n" not in got.detail


def test_every_reason_parse_head_gives_is_in_the_table() -> None:
    source = Path(headmod.__file__).read_text()
    given = set(re.findall(r'HeadError\(\d+, "(\w+)"', source))
    assert given and given <= {row[3] for row in REFUSED}, given - {row[3] for row in REFUSED}


def test_the_raw_head_limit_counts_the_request_line_as_slack() -> None:
    """Whole, the limit is on the raw head less its request line; in pieces, on the fields as ``name: value`` lines."""
    fields = 400 - len("\r\nHost: a.example") - len("\r\nX-Big: ")
    data = head_of("GET /" + "p" * 100 + " HTTP/1.1", H, "X-Big: " + "b" * fields)
    assert accepted(data).path == "/" + "p" * 100
    assert accepted(data, whole=False).fwd == accepted(data).fwd
    over = head_of("GET / HTTP/1.1", H, "X-Big: " + "b" * (fields + 40))
    assert judge(over) == judge(over, whole=False) == HeadError(
        431, "header_too_large", "The request header fields exceed limits.max_header_bytes.")


# ---------------------------------------------------------------------------- what a refusal carries

def test_a_refusal_names_the_clients_request_id_once_the_fields_were_read() -> None:
    early = judge(head_of("GET / HTTP/2.0", H, "X-Request-Id: r-1"))
    late = judge(head_of("GET / HTTP/1.1", "X-Request-Id: r-1"))
    assert isinstance(early, HeadError) and early.client_id is None  # refused on its request line
    assert isinstance(late, HeadError) and (late.reason, late.client_id) == ("bad_host", "r-1")


def test_a_refusal_still_reports_what_connection_tried_to_remove() -> None:
    got = judge(head_of("GET / HTTP/1.1", H, "Connection: Host", "Expect: nothing"))
    assert isinstance(got, HeadError) and got.reason == "bad_expect" and got.kept == frozenset({"host"})
    dropped = judge(head_of("GET / HTTP/1.1", H, "Content_Length: 1", "Expect: nothing"), DROPPING)
    assert isinstance(dropped, HeadError) and dropped.reason == "bad_expect" and dropped.twins_dropped


@pytest.mark.parametrize(("data", "target", "body"), [
    (head_of("GET http://b.example/x HTTP/1.1", "Expect: no"), b"/x", NO_BODY),
    (head_of("POST http://b.example/y HTTP/1.1", "Content-Length: 4", "Connection: Upgrade", "Upgrade: websocket"),
     b"/y", LENGTH),
    (head_of("POST /z HTTP/1.1", "Transfer-Encoding: chunked"), b"/z", CHUNKED),  # no Host
    (head_of("POST ftp://b.example/ HTTP/1.1", H, "Content-Length: 4"), None, LENGTH),  # refused on its target
    (head_of("POST / HTTP/1.1", H, "Transfer-Encoding: gzip, chunked"), None, NO_BODY),  # refused on its framing
], ids=["absolute, then Expect", "absolute, then upgrade with a body", "chunked, then Host", "bad target",
        "bad framing"])
def test_a_refusal_reports_its_target_and_framing_as_far_as_they_were_read(data: bytes, target: bytes | None,
                                                                            body: int) -> None:
    """The refused exchange logs the target as it would have been forwarded, and a body announced before the refusal
    keeps the connection's body deadline."""
    got = judge(data)
    assert isinstance(got, HeadError) and (got.target, got.body) == (target, body), got


@pytest.mark.parametrize("second", ["host: b.example", "Host: a.example", "HOST: a.example"])
def test_a_second_host_field_is_refused_as_such(second: str) -> None:
    """Two Host fields are refused before their joined value could be judged (or cached) as one authority."""
    got = judge(head_of("GET / HTTP/1.1", H, second, "X-Request-Id: r-2"), known_host="a.example, a.example")
    assert got == HeadError(400, "bad_host", "More than one Host header.")
