"""What an ``inputs`` rule condition searches: every value a client controls, decoded once.

Injection signatures must see a payload the way the application behind the gateway
will: raw bytes of the request line and headers read as UTF-8 (as escapes are), then
percent-decoded (twice, since scanners double-encode to slip past one
decoding), ``+`` as space in queries and form bodies, JSON string escapes undone,
HTML character references resolved, and empty SQL comments (``/**/``) read as the
whitespace they stand for. Full-width forms (``＇``, ``＜``, ``．``: U+FF01 to U+FF5E) are
read both as sent and folded to the ASCII they stand for, as an application that
normalises Unicode (NFKC) reads them: when the text has any, a folded copy is appended,
so a signature matches ``＇ ｏｒ １＝１`` and a rule can still see that full-width forms
were sent. The raw path is used, before dot segments are resolved, so
``/../../etc/passwd`` is still visible. Everything is lower-cased, so patterns are
written in lower case and need no ``(?i)`` (an ignore-case regex is several times
slower in Python's engine).

Header values are included except those whose grammar is fixed and carries no
application data (``Accept``, fetch metadata, client hints, ``Content-Length`` …):
``Accept: */*`` would otherwise look like a SQL comment opener. Cookies are included:
their values reach the application like any parameter.

The text is built at most once per request, and only when a rule with an ``inputs``
condition is reached. Patterns are RE2 regexes (google-re2): matching takes time linear
in the input whatever the pattern, so attacker-chosen text cannot make a signature
backtrack for seconds (the ReDoS that backtracking WAF engines suffer); RE2 has no
lookaround or backreferences. Every ``inputs`` pattern of a table is also joined into
one regex tried first (:class:`InputsScan`): a request that matches none of them
(nearly all traffic) costs one linear scan, not one per rule.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from urllib.parse import unquote, unquote_plus

import re2

from gateway.features import Features

# headers whose values are protocol grammar, not application data
STRUCTURAL_HEADERS = frozenset({
    "host", "connection", "keep-alive", "content-length", "transfer-encoding", "te", "upgrade", "accept", "accept-encoding",
    "accept-charset", "cache-control", "pragma", "if-none-match", "if-match", "if-modified-since", "if-unmodified-since",
    "if-range", "range", "sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "sec-fetch-user", "sec-ch-ua",
    "sec-ch-ua-mobile", "sec-ch-ua-platform", "sec-ch-ua-platform-version", "sec-ch-ua-full-version-list", "sec-ch-ua-arch",
    "sec-ch-ua-bitness", "sec-ch-ua-model", "sec-ch-ua-wow64", "sec-gpc", "dnt", "upgrade-insecure-requests", "priority",
    "content-type", "authorization", "proxy-authorization", "x-request-id", "traceparent", "tracestate",
})
_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([nrtbf\"/\\]))")
_HALF = re.compile("[\ud800-\udfff]")
_JSON_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "/": "/", "\\": "\\"}
_SEPARATOR = "\n"
_FULL_WIDTH = re.compile("[\uff01-\uff5e]")
_FOLD = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}


def _unjson(m: re.Match[str]) -> str:
    return chr(int(m.group(1), 16)) if m.group(1) else _JSON_SIMPLE[m.group(2)]


def whole_characters(text: str) -> str:
    """``text`` with each pair of UTF-16 halves (a JSON escape pair, ``"\\ud83d\\ude4c"``) as its one character and each
    lone half (``"\\ud800"``) as U+FFFD, as UTF-8 decoders mark a broken sequence: a half is no character, and nothing
    that reads or writes UTF-8 (RE2, libinjection, the decision log) can take it."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace") if _HALF.search(text) else text


def _wire_utf8(text: str) -> str:
    """Raw bytes of the request line or a header (read as Latin-1 off the wire) decoded as UTF-8, as escapes are.

    A header value may carry ``．．／`` as raw UTF-8 (HTTP allows such bytes there; the proxy answers a raw
    non-ASCII request target with 400, but replayed logs and evaluated records can hold one). Text that already
    holds characters above U+00FF (a test fixture) is left as it is; the body is decoded as UTF-8 where it is read.
    """
    if text.isascii():
        return text
    try:
        return text.encode("latin-1").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text


def _twice(text: str, decode: Callable[[str], str]) -> str:
    """Percent-decoded twice (the second time only when the first left escapes)."""
    if "%" not in text and ("+" not in text or decode is unquote):
        return text
    once = decode(text)
    return decode(once) if "%" in once else once


def inputs_text(f: Features) -> str:
    """The lower-cased, decoded text of the path, query, body prefix and data-carrying header values."""
    parts = [_twice(_wire_utf8(f.path), unquote)]
    if f.query:
        parts.append(_twice(_wire_utf8(f.query), unquote_plus))
    if f.body_prefix:
        body = f.body_prefix.decode("utf-8", "replace")
        ctype = f.header_map.get("content-type", "")
        if "json" in ctype:
            # an escape pair is one character, a lone half of one none (whole_characters)
            body = _twice(whole_characters(_JSON_ESCAPE.sub(_unjson, body)) if "\\" in body else body, unquote)
        elif "x-www-form-urlencoded" in ctype:
            body = _twice(body, unquote_plus)
        else:
            body = _twice(body, unquote)
        # line breaks are normal in a body (a person's multi-line post) and an attack in a URL or
        # a header value (a smuggled %0a / %0d%0a): body line breaks become form feeds, which
        # patterns still read as whitespace (\s) but never as a command separator or CRLF
        parts.append(body.replace("\r\n", "\f").replace("\n", "\f") if "\n" in body else body)
    for name, value in f.headers:
        if name.lower() not in STRUCTURAL_HEADERS:
            parts.append(_twice(_wire_utf8(value), unquote))
    text = _SEPARATOR.join(parts)
    if "&#" in text or "&lt" in text or "&gt" in text:
        text = html.unescape(text)
    if not text.isascii() and _FULL_WIDTH.search(text):
        text += _SEPARATOR + text.translate(_FOLD)
    if "/**/" in text:
        text = text.replace("/**/", " ")
    return text.lower()


class PatternError(ValueError):
    """An ``inputs`` pattern RE2 cannot compile (the message says why)."""


def re2_options() -> re2.Options:
    """How every signature is compiled: no logging, no capture groups (spans only), a bounded automaton."""
    opts = re2.Options()
    opts.log_errors = False
    opts.never_capture = True
    opts.max_mem = 64 << 20
    return opts


def compile_inputs(patterns: list[str]) -> re2._Regexp:
    """One RE2 regex searching for any of ``patterns`` (each checked alone first, so errors name it)."""
    for p in patterns:
        if not p.isascii() and not _is_unicode(p):
            raise PatternError(f"bad regex {p!r}: it holds a lone UTF-16 surrogate (RE2 reads valid Unicode only)")
        try:
            re2.compile(p, re2_options())
        except re2.error as exc:
            msg = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise PatternError(f"bad regex {p!r}: {msg} (inputs patterns are RE2: no lookaround or backreferences)") from None
    return _joined(patterns)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _joined(patterns: list[str]) -> re2._Regexp:
    """One RE2 regex for any of ``patterns``, already checked one by one."""
    return re2.compile("|".join(f"(?:{p})" for p in patterns), re2_options())


class InputsScan:
    """Every ``inputs`` pattern of a rule table in one regex, compiled once the table is built."""

    def __init__(self) -> None:
        self.patterns: list[str] = []
        self._rx: re2._Regexp | None = None

    def add(self, patterns: list[str]) -> None:
        self.patterns += patterns

    def compile(self) -> None:
        # every pattern was checked alone when its rule compiled (compile_inputs): only the join is new
        self._rx = _joined(self.patterns) if self.patterns else None

    def hit(self, text: str) -> bool:
        """True when some ``inputs`` pattern matches ``text`` (each rule then checks its own)."""
        assert self._rx is not None, "InputsScan.compile() was not called"
        return self._rx.search(text) is not None
