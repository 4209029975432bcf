"""A request head, judged from the head alone: a pure function of what llhttp parsed.

:func:`parse_head` takes the request line and the header fields as llhttp handed
them to the client connection (and the raw head when it arrived in one piece)
and returns either a :class:`RequestHead` (what the exchange needs: target,
host, the header block forwarded upstream, the body framing, Expect and
WebSocket upgrade) or a :class:`HeadError` (the status and reason the request
is refused with). It does no I/O and reads no runtime: the per-config inputs are
one :class:`HeadRules`, the connection's state one argument (the Host value it
already validated). Who sent the request (trusted proxies, client address), the
request id, routing and metrics stay with the connection.

llhttp refuses before this is called: Content-Length together with
Transfer-Encoding, repeated or malformed Content-Length, a coding after
``chunked``, obs-fold, bare CR or LF, whitespace before a colon, control
characters, a method that is not a known token. What it lets through and we
refuse here: too many or too large fields, HTTP versions other than 1.0 and 1.1,
more than one Host, an invalid Host, a Transfer-Encoding other than exactly
``chunked`` (or any in HTTP/1.0), a body over ``max_body``, targets that are not
origin or absolute form (``OPTIONS *`` aside), CONNECT, an Expect other than
``100-continue``, an Upgrade request with a body, and (when so configured)
underscore spellings of the fields the origin relies on.

:class:`RequestHead` is a slotted dataclass that is not frozen: one is made per
request, and a frozen dataclass's ``__init__`` (``object.__setattr__`` per field)
costs about five times as much; a named tuple is cheap to make but slow to read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.features import make_header_map
from gateway.proxy.http1 import (
    CONNECTION_OPTIONS,
    REQUEST_HOP_BY_HOP,
    check_host,
    check_transfer_encoding,
    header_stripper,
    protected_from_connection,
    underscore_twin,
    without_cookie,
)

# body kinds of the request
NO_BODY, LENGTH, CHUNKED = 0, 1, 2

# headers the proxy rewrites itself; the client's copies are not forwarded as received
_REWRITTEN = frozenset({"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "forwarded"})
_HOST_FIELD = header_stripper({"host"})
_ONLY_CONNECTION = frozenset({"connection"})
_EMPTY_MAP: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class HeadRules:
    """The per-config inputs of :func:`parse_head` (compiled once per reload, by ``ProxySettings``)."""

    id_header: str  # lower-case name of the request-id field
    max_headers: int
    max_header_bytes: int
    max_body: int
    underscore_refuse: bool  # refuse (400) an underscore twin of a guarded field; else drop it
    pass_cookie: str  # the challenge's pass cookie: never forwarded upstream
    # derived: every field the proxy rewrites or drops (Host is forwarded as the client sent it, so it stays)
    forward_drop: frozenset[str] = field(init=False)
    request_strip: re.Pattern[bytes] = field(init=False)  # removes those from a raw header block in one pass
    pass_cookie_b: bytes = field(init=False)

    def __post_init__(self) -> None:
        drop = (REQUEST_HOP_BY_HOP | _REWRITTEN | {self.id_header}) - {"host"}
        object.__setattr__(self, "forward_drop", drop)
        object.__setattr__(self, "request_strip", header_stripper(drop, ("x-clefgate-",)))
        object.__setattr__(self, "pass_cookie_b", self.pass_cookie.encode("latin-1"))


@dataclass(slots=True)
class RequestHead:
    """A request head the gateway serves, as the exchange uses it (a value: nothing writes to it once made)."""

    method_b: bytes
    method: str
    target: bytes  # sent upstream: an absolute-form target is cut to its origin form
    version: str  # "1.1" or "1.0"
    path: str
    query: str
    host: str  # the absolute-form target's authority, else Host ("" for an HTTP/1.0 request without one)
    headers: tuple[tuple[str, str], ...]  # every field in wire order, latin-1 text
    header_map: Mapping[str, str]  # lower-case name -> value, repeated fields joined
    client_id: str | None  # the request-id field as sent (the caller accepts it or makes a new id)
    fwd: bytes  # the header block forwarded upstream, every field behind CRLF (hop-by-hop and rewritten ones cut)
    body: int  # NO_BODY, LENGTH or CHUNKED
    content_length: int | None
    add_host: bool  # HTTP/1.0 without Host: the upstream gets the server's authority
    expect_continue: bool  # the client waits for 100 Continue before sending the body
    upgrade: bool  # a WebSocket upgrade the gateway may tunnel
    kept: frozenset[str] | None  # fields the origin relies on that Connection named (kept, for the abuse counter)
    twins_dropped: bool  # underscore twins of guarded fields were dropped (underscore_refuse off)


@dataclass(frozen=True, slots=True)
class HeadError:
    """A refused head: the status and reason of the gateway's answer, and what the head said before it was refused."""

    status: int
    reason: str
    detail: str
    client_id: str | None = None  # the request-id field, when the fields were read that far (the answer echoes it)
    kept: frozenset[str] | None = None  # as RequestHead.kept: counted even when the head is refused later
    twins_dropped: bool = False
    target: bytes | None = None  # an absolute-form target already cut to origin form (None: the target as received)
    body: int = NO_BODY  # the body framing read before the refusal (the connection keeps the body's deadline then)


def line_only(method_b: bytes, target: bytes, version: str) -> RequestHead:
    """A head known by its request line alone: a request refused before (or while) its fields were read."""
    return RequestHead(method_b, method_b.decode("ascii"), target, version, "", "", "", (), _EMPTY_MAP, None, b"",
                       NO_BODY, None, False, False, False, None, False)


def parse_head(rules: HeadRules, method_b: bytes, target: bytes, version: str, fields: list[tuple[bytes, bytes]],
               raw_head: bytes | None, upgrading: bool, known_host: str = "") -> RequestHead | HeadError:
    """Judge a complete request head.

    ``method_b``, ``target`` and ``version`` are llhttp's request line, ``fields``
    the header fields in wire order, ``raw_head`` the head's bytes up to (not
    including) the blank line when they arrived in one piece (the forwarded block
    is then cut from them, not rebuilt), ``upgrading`` llhttp's
    ``should_upgrade()``, ``known_host`` a Host value already found valid on this
    connection (checked again only when it changes).
    """
    if len(fields) > rules.max_headers:
        return HeadError(431, "too_many_headers", "The request has more header fields than limits.max_headers.")
    if version != "1.1" and version != "1.0":
        return HeadError(505 if version[0] == "2" else 400, "bad_version", f"HTTP/{version} is not served here.")
    # ---- the fields as Features wants them: wire order and a lower-case map
    headers = tuple([(n.decode("latin-1"), v.decode("latin-1")) for n, v in fields])
    hmap = {n.lower(): v for n, v in headers}
    if len(hmap) != len(headers):
        hmap = make_header_map(headers)
        if sum(1 for n, _ in fields if n.lower() == b"host") > 1:
            return HeadError(400, "bad_host", "More than one Host header.")
    get = hmap.get
    client_id = get(rules.id_header)
    # ---- the header block forwarded upstream (every field behind CRLF)
    conn_hdr = get("connection")
    listed = None
    kept = None
    if conn_hdr is not None and conn_hdr.lower() not in CONNECTION_OPTIONS:
        listed = {t.strip(" \t").lower() for t in conn_hdr.split(",")} - CONNECTION_OPTIONS
        protected = {n for n in listed if protected_from_connection(n, rules.id_header)}
        if protected:
            # Connection may remove hop-by-hop fields, not Host, the framing or what the gateway adds
            listed -= protected
            kept = frozenset(protected)
    twins_dropped = False
    if "_" in "".join(hmap):  # a field name with "_" (every name is a key of the map; one join beats a generator)
        twins = {t for t in (n.lower() for n, _ in headers if "_" in n) if underscore_twin(t, rules.id_header)}
        if twins:
            if rules.underscore_refuse:
                name = sorted(twins)[0][:64]
                return HeadError(400, "ambiguous_header_name",
                                 f"The header field {name!r} reads as {name.replace('_', '-')!r} to origins that fold "
                                 f"'_' and '-'.", client_id, kept)
            twins_dropped = True
            listed = (listed or set()) | twins
    cookie = get("cookie")
    pass_cookie = cookie is not None and rules.pass_cookie in cookie
    if raw_head is not None and not listed and not pass_cookie:
        if len(raw_head) > rules.max_header_bytes + len(target) + 16:
            return HeadError(431, "header_too_large", "The request header fields exceed limits.max_header_bytes.",
                             client_id, kept, twins_dropped)
        eol = raw_head.find(b"\r\n")
        block = raw_head[eol:] if eol > 0 else b""
        present = rules.forward_drop.intersection(hmap)
        if b"\r\nx-clefgate-" in block.lower():
            fwd = rules.request_strip.sub(b"", block)
        elif not present:
            fwd = block  # nothing to drop (the field names were checked via the header map)
        elif present == _ONLY_CONNECTION and len(hmap) == len(headers):
            # the usual browser head: cut the one Connection line
            start = block.lower().find(b"\r\nconnection:")
            end = block.find(b"\r\n", start + 13)
            fwd = block[:start] + block[end:] if end > 0 else block[:start]
        else:
            fwd = rules.request_strip.sub(b"", block)
    else:
        # the head arrived in pieces (or names more hop-by-hop fields): build the block
        if sum(len(n) + len(v) + 4 for n, v in fields) > rules.max_header_bytes:
            return HeadError(431, "header_too_large", "The request header fields exceed limits.max_header_bytes.",
                             client_id, kept, twins_dropped)
        drop = rules.forward_drop | listed if listed else rules.forward_drop
        pieces: list[bytes] = []
        for (name_b, value), (text, _) in zip(fields, headers, strict=True):
            key = text.lower()
            if key not in drop and not key.startswith("x-clefgate-"):
                if pass_cookie and key == "cookie":
                    # the visitor's pass cookie is the gateway's: the origin gets the other cookies
                    value = without_cookie(value, rules.pass_cookie_b)
                    if not value:
                        continue
                pieces += (b"\r\n", name_b, b": ", value)
        fwd = b"".join(pieces)
    # ---- framing
    body = NO_BODY
    content_length = None
    te = get("transfer-encoding")
    if te is not None:
        why = check_transfer_encoding(te, version)
        if why:
            return HeadError(400, "bad_transfer_encoding", why[0].upper() + why[1:] + ".", client_id, kept, twins_dropped)
        body = CHUNKED
    else:
        cl = get("content-length")
        if cl is not None:
            content_length = int(cl)  # llhttp checked the digits and duplicates
            if content_length > rules.max_body:
                return HeadError(413, "body_too_large", "The request body is larger than limits.max_body_bytes.",
                                 client_id, kept, twins_dropped)
            if content_length:
                body = LENGTH
    # ---- target and host
    host: str | None
    if target[:1] == b"/":  # origin-form, the common case
        path, _, query = target.decode("latin-1").partition("?")
        host = get("host")
    else:
        if method_b == b"CONNECT":
            return HeadError(501, "connect_unsupported", "CONNECT is not supported by this reverse proxy.",
                             client_id, kept, twins_dropped, None, body)
        if target[:7].lower() == b"http://" or target[:8].lower() == b"https://":
            # absolute-form: the authority in the target wins over Host (RFC 9112 3.2.2)
            rest = target.decode("latin-1").split("://", 1)[1]
            slash = rest.find("/")
            host, origin = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
            path, _, query = origin.partition("?")
            target = origin.encode("latin-1")
            fwd = _HOST_FIELD.sub(b"", fwd) + b"\r\nhost: " + host.encode("latin-1")
        elif target == b"*" and method_b == b"OPTIONS":
            path, query, host = "*", "", get("host")
        else:
            return HeadError(400, "bad_target", "The request target is not in origin or absolute form.",
                             client_id, kept, twins_dropped, None, body)
    add_host = False
    if host is None:
        if version == "1.1":
            return HeadError(400, "bad_host", "HTTP/1.1 requests need a Host header.",
                             client_id, kept, twins_dropped, target, body)
        host = ""
        add_host = True  # HTTP/1.0 without Host: the upstream gets the server's authority
    elif host != known_host and not check_host(host):
        return HeadError(400, "bad_host", "The Host header is not a valid authority.",
                         client_id, kept, twins_dropped, target, body)
    # ---- expectations and upgrades
    expect_continue = False
    expect = get("expect")
    if expect is not None:
        if expect.strip(" \t").lower() != "100-continue":
            return HeadError(417, "bad_expect", "Only Expect: 100-continue is supported.",
                             client_id, kept, twins_dropped, target, body)
        expect_continue = version == "1.1" and body != NO_BODY
    if body != NO_BODY and upgrading:
        # llhttp ends an Upgrade request at its head and hands back what follows as the new protocol's bytes:
        # a body here would be forwarded as nothing and then parsed as the next request (a desync)
        return HeadError(400, "upgrade_with_body", "A request that asks to upgrade the connection cannot carry a body.",
                         client_id, kept, twins_dropped, target, body)
    upgrade = get("upgrade")
    websocket = upgrade is not None and method_b == b"GET" and "websocket" in upgrade.lower() and upgrading
    return RequestHead(method_b, method_b.decode("ascii"), target, version, path, query, host, headers, hmap, client_id,
                       fwd, body, content_length, add_host, expect_continue, websocket, kept, twins_dropped)
