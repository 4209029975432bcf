"""HTTP/1.1 framing rules shared by both sides of the proxy.

Requests are parsed by llhttp (``httptools``), which already rejects most framing
tricks: CL together with TE, repeated or malformed Content-Length, whitespace
before a colon, bare CR or LF, obs-fold, bad chunk sizes. What it lets through and
we refuse here is listed in :func:`check_transfer_encoding` and
:func:`check_host`.

Responses are parsed here, not by llhttp: a response to HEAD carries framing
headers but no body, and httptools cannot be told so. The parser is strict in the
same ways (no obs-fold, no bare LF/CR, token header names, one consistent
Content-Length, TE only with ``chunked`` last) because a confused response parser
is how response splitting and desync start.
"""

from __future__ import annotations

import re
from http import HTTPStatus

import httptools

# ---------------------------------------------------------------------------- header names

# Request headers that describe this hop only; never forwarded as received: RFC 9110's connection-specific
# fields (7.6.1), Proxy-Connection, and the credentials and challenges meant for a proxy (Proxy-Authorization,
# Proxy-Authenticate). Content-Length and Transfer-Encoding are re-derived from the framing we send; Expect
# and Host are handled by the proxy.
REQUEST_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade",
    "trailer", "expect", "content-length", "host", "proxy-authorization", "proxy-authenticate",
})

# Response headers that describe the upstream hop only.
RESPONSE_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "trailer",
    "proxy-authenticate", "proxy-authorization",
})

# Fields a client's Connection header cannot remove: the end-to-end ones the origin relies on (Host, the framing
# the proxy sends) and those the gateway or a trusted front adds (any X-Forwarded-*, plus the request id field).
CONNECTION_PROTECTED = frozenset({
    "host", "content-length", "transfer-encoding", "forwarded", "via", "x-real-ip", "x-request-id",
})

# Header names whose underscore twin (Content_Length, X_Forwarded_For) a CGI/WSGI origin folds onto the real one
# (with any X-Forwarded-* and the X-Clefgate-* fields the gateway sends its verdict in).
UNDERSCORE_GUARDED = frozenset({
    "content-length", "transfer-encoding", "host", "forwarded", "x-real-ip", "via", "x-request-id",
    "connection", "upgrade", "te",
})


def protected_from_connection(name: str, id_header: str) -> bool:
    """Whether a (lower-case) field named in a client's Connection header must still be forwarded."""
    return name in CONNECTION_PROTECTED or name == id_header or name.startswith("x-forwarded-")


def underscore_twin(name: str, id_header: str) -> bool:
    """Whether a (lower-case) field name with ``_`` folds onto a framing, host, forwarding or gateway field."""
    if "_" not in name:
        return False
    folded = name.replace("_", "-")
    return folded in UNDERSCORE_GUARDED or folded == id_header or folded.startswith(("x-forwarded-", "x-clefgate-"))


def without_cookie(value: bytes, name: bytes) -> bytes:
    """A Cookie field value with every ``name=...`` pair removed, the other pairs byte for byte (b"" if none stays)."""
    kept = [part for part in value.split(b";") if part.lstrip(b" \t").split(b"=", 1)[0].rstrip(b" \t") != name]
    return b";".join(kept).strip(b" \t")

# Connection options that are not header names (never strip a header because of them).
CONNECTION_OPTIONS = frozenset({"close", "keep-alive", "upgrade"})

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})

_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
# reg-name / IPv4 / [IPv6] with an optional port; percent-encoding and sub-delims allowed
_HOST = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=%-]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?")

REASONS: dict[int, bytes] = {s.value: s.phrase.encode("ascii") for s in HTTPStatus}


class ProtocolError(Exception):
    """A peer broke HTTP/1.1 framing; the connection cannot be trusted any more."""


def status_line(status: int) -> bytes:
    """``HTTP/1.1 404 Not Found`` (without CRLF)."""
    return b"HTTP/1.1 %d %s" % (status, REASONS.get(status, b"Unknown"))


def check_transfer_encoding(value: str, http_version: str) -> str | None:
    """Why a request Transfer-Encoding is refused, or None when it is plain ``chunked``.

    llhttp accepts any coding list ending in ``chunked`` (``gzip, chunked``,
    ``identity, chunked``); we accept exactly one ``chunked`` so that no
    upstream can read a different body length than we did. HTTP/1.0 has no
    chunked coding at all (RFC 9112 6.1: treat it as faulty framing).
    """
    if http_version == "1.0":
        return "Transfer-Encoding in an HTTP/1.0 request"
    if value.strip(" \t").lower() != "chunked":
        return f"unsupported or obfuscated Transfer-Encoding {value[:40]!r}"
    return None


def check_host(value: str) -> bool:
    """True when a Host value is a syntactically valid authority (host[:port])."""
    return _HOST.fullmatch(value) is not None


# ---------------------------------------------------------------------------- responses


class ResponseHead:
    """A parsed upstream response head.

    ``block`` is the header section as received (validated), each field preceded by
    CRLF, with the hop-by-hop fields (and the request-id field the gateway sets
    itself) already cut out, so forwarding never re-encodes a value. ``raw_block``
    keeps every field (101 responses keep Connection and Upgrade). ``connection``
    holds the field names the upstream listed in its Connection header: hop-by-hop
    too, and rare, so the exchange strips them itself.
    """

    __slots__ = ("block", "chunked", "close", "connection", "content_length", "raw_block", "status", "status_text",
                 "step_up", "version")

    def __init__(self, status: int, status_text: bytes, version: bytes, block: bytes, raw_block: bytes) -> None:
        self.status = status
        self.status_text = status_text  # b"200 OK"
        self.version = version
        self.block = block
        self.raw_block = raw_block
        self.content_length = -1
        self.chunked = False
        self.close = False
        self.connection: frozenset[bytes] = frozenset()
        self.step_up: bytes | None = None  # the value of the step-up field (ResponseScan), cut from ``block``


class ResponseScan:
    """The response fields the proxy must see or drop, for one config (the id field is configurable).

    One pass over the lower-cased head finds the framing fields and the spans of the
    fields that are not forwarded.
    """

    def __init__(self, id_header: str, step_up: str = "") -> None:
        # the step-up field (challenge.step_up_header) is read, and never forwarded
        self.step_up = step_up.lower().encode("latin-1")
        drop = set(RESPONSE_HOP_BY_HOP) | {id_header.lower()} | ({step_up.lower()} if step_up else set())
        names = sorted(drop | {"content-length"}, key=len, reverse=True)
        self.pattern = re.compile(rb"\r\n(" + "|".join(re.escape(n) for n in names).encode("latin-1") + rb"):([^\r\n]*)")
        self.drop = frozenset(n.encode("latin-1") for n in drop)
        # the hop-by-hop fields other than Connection are rare: one search rules them out
        rare = sorted(drop - {"connection"}, key=len, reverse=True)
        self.rare = re.compile(rb"\r\n(?:" + "|".join(re.escape(n) for n in rare).encode("latin-1") + rb"):")


class _HeadOnly:
    """A parser protocol without callbacks: llhttp validates, Python is not called per field."""


_HEAD_ONLY = _HeadOnly()
_HttpResponseParser = httptools.HttpResponseParser
_HttpParserUpgrade = httptools.HttpParserUpgrade
_HttpParserError = httptools.HttpParserError


def parse_response_head(head: bytes, scan: ResponseScan) -> ResponseHead:
    """Parse and validate a response head (status line and fields, ending with the blank line).

    llhttp validates the syntax (bare CR/LF, NUL and control characters,
    obs-fold, whitespace before a colon, Content-Length syntax and duplicates,
    CL together with TE); the checks it leaves to us are here. Raises
    ProtocolError on anything ambiguous.
    """
    parser = _HttpResponseParser(_HEAD_ONLY)
    try:
        parser.feed_data(head)
    except _HttpParserUpgrade:
        pass  # a 101: the bytes after the head belong to the new protocol
    except _HttpParserError as exc:
        raise ProtocolError(f"malformed response head: {exc}") from None
    status = parser.get_status_code()
    version = head[:8]
    if (version != b"HTTP/1.1" and version != b"HTTP/1.0") or not 100 <= status <= 599:
        raise ProtocolError(f"unsupported response line {head[:40]!r}")
    eol = head.find(b"\r\n")
    low = head.lower()
    # the common head: Content-Length, at most one Connection, no other hop-by-hop field
    conn = low.find(b"\r\nconnection:", eol)
    conn_end = low.find(b"\r\n", conn + 13) if conn >= 0 else -1
    if scan.rare.search(low, eol) is None and (conn < 0 or low.find(b"\r\nconnection:", conn_end) < 0):
        cl_at = low.find(b"\r\ncontent-length:", eol)
        if conn >= 0:
            block = head[eol:conn] + head[conn_end:-4]
            tokens = low[conn + 13 : conn_end].strip(b" \t")
        else:
            block = head[eol:-4]
            tokens = None
        resp = ResponseHead(status, head[9:eol], version, block, head[eol:-4])
        if cl_at >= 0:
            resp.content_length = int(low[cl_at + 17 : low.find(b"\r\n", cl_at + 17)])  # llhttp checked it
        if tokens is None or tokens == b"keep-alive":
            resp.close = version == b"HTTP/1.0" and tokens is None
        elif tokens == b"close":
            resp.close = True
        else:
            _connection_options(resp, tokens, version)
        return resp
    return _parse_fields(head, low, eol, status, version, scan)


def _connection_options(resp: ResponseHead, tokens: bytes, version: bytes) -> None:
    options = frozenset(t.strip(b" \t") for t in tokens.split(b","))
    resp.close = b"close" in options or (version == b"HTTP/1.0" and b"keep-alive" not in options)
    if options - _CONNECTION_OPTIONS:
        resp.connection = options - _CONNECTION_OPTIONS


def _parse_fields(head: bytes, low: bytes, eol: int, status: int, version: bytes, scan: ResponseScan) -> ResponseHead:
    """The general case: chunked framing, repeated Connection fields, other hop-by-hop fields."""
    cl: bytes | None = None
    te: bytes | None = None
    tokens: bytes | None = None
    step_up: bytes | None = None
    cuts: list[tuple[int, int]] = []
    drop = scan.drop
    for m in scan.pattern.finditer(low, eol):
        name, value = m.groups()
        if name == b"content-length":
            cl = value
            continue
        if name == b"connection":
            tokens = value if tokens is None else tokens + b"," + value
        elif name == b"transfer-encoding":
            te = value if te is None else te + b"," + value
        elif name == scan.step_up:
            step_up = value.strip(b" \t")
        if name in drop:
            cuts.append(m.span())
    raw_block = head[eol:-4]
    if cuts:
        pieces = []
        pos = eol
        for start, end in cuts:
            pieces.append(head[pos:start])
            pos = end
        pieces.append(head[pos:-4])
        block = b"".join(pieces)
    else:
        block = raw_block
    resp = ResponseHead(status, head[9:eol], version, block, raw_block)
    resp.step_up = step_up
    if te is not None:
        if [c.strip(b" \t") for c in te.split(b",")] != [b"chunked"]:
            # a transfer coding under the chunks (gzip, chunked) could not be re-framed
            # for an HTTP/1.0 client; real servers use Content-Encoding for that
            raise ProtocolError(f"unsupported response Transfer-Encoding {te[:40]!r}")
        if version == b"HTTP/1.0":
            raise ProtocolError("Transfer-Encoding in an HTTP/1.0 response")
        resp.chunked = True
    elif cl is not None:
        resp.content_length = int(cl)  # llhttp checked the digits and refused duplicates
    # (llhttp's should_keep_alive describes the *next* message once this one completed, as
    # a 204 or a Content-Length: 0 head does, so persistence is read from the fields here)
    if tokens is None:
        resp.close = version == b"HTTP/1.0"
    else:
        _connection_options(resp, tokens, version)
    return resp


_CONNECTION_OPTIONS = frozenset({b"close", b"keep-alive", b""})


def header_stripper(names: frozenset[str] | set[str], prefixes: tuple[str, ...] = ()) -> re.Pattern[bytes]:
    """A pattern that removes every ``CRLF name: value`` field with one of ``names``
    (or a name starting with one of ``prefixes``) from a header block."""
    alts = sorted(re.escape(n) for n in names) + [re.escape(p) + r"[^:\r\n]*" for p in prefixes]
    return re.compile(rb"\r\n(?:" + "|".join(alts).encode("latin-1") + rb"):[^\r\n]*", re.I)


# ---------------------------------------------------------------------------- chunked bodies

_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)
_MAX_LINE = 4096


class ChunkedReader:
    """Incremental reader of a chunked body.

    ``feed(data, payload)`` validates the framing and returns how many bytes of
    ``data`` belong to this message (less than ``len(data)`` only at the end).
    When ``payload`` is a list the chunk contents are appended to it (decoding);
    when it is None the caller forwards the raw bytes (pass-through), so large
    chunks cost an index update, not a copy.
    """

    __slots__ = ("done", "line", "remaining", "state", "trailer_bytes")

    def __init__(self) -> None:
        self.state = _SIZE
        self.remaining = 0
        self.line = b""
        self.trailer_bytes = 0
        self.done = False

    def feed(self, data: bytes, payload: list[bytes] | None) -> int:
        """Consume ``data``; return how many of its bytes belong to this body (see the class doc)."""
        i, n = 0, len(data)
        while i < n:
            state = self.state
            if state == _DATA:
                take = min(self.remaining, n - i)
                if payload is not None:
                    payload.append(data[i : i + take] if take != n or i else data)
                i += take
                self.remaining -= take
                if not self.remaining:
                    self.state = _DATA_END
                continue
            # the other states read a CRLF-terminated line
            j = data.find(b"\n", i)
            if j < 0:
                self.line += data[i:]
                if len(self.line) > _MAX_LINE:
                    raise ProtocolError("chunk line too long")
                return n
            line = self.line + data[i : j + 1]
            self.line = b""
            i = j + 1
            if len(line) > _MAX_LINE or not line.endswith(b"\r\n") or b"\r" in line[:-2]:
                raise ProtocolError("chunk line without CRLF or too long")
            line = line[:-2]
            if state == _SIZE:
                size, _, _ext = line.partition(b";")
                if _HEX.fullmatch(size) is None:
                    raise ProtocolError(f"invalid chunk size {line[:20]!r}")
                self.remaining = int(size, 16)
                self.state = _DATA if self.remaining else _TRAILER
            elif state == _DATA_END:
                if line:
                    raise ProtocolError("chunk data longer than its size")
                self.state = _SIZE
            else:  # _TRAILER
                if not line:
                    self.state = _DONE
                    self.done = True
                    return i
                self.trailer_bytes += len(line)
                if self.trailer_bytes > _MAX_LINE * 4 or b":" not in line:
                    raise ProtocolError("invalid or oversized trailer")
        return n


def chunk(data: bytes) -> list[bytes]:
    """One chunk of the chunked coding, as pieces for ``writelines``."""
    return [b"%x\r\n" % len(data), data, b"\r\n"]


LAST_CHUNK = b"0\r\n\r\n"
