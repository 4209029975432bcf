"""Deterministic payload detection: libinjection and the injection signatures, per location.

Every request the rules leave open is inspected, with or without the model, before it
(``Pipeline.decide``). Each value a client controls is taken from where the
application will read it, decoded the way the application will, and handed to the
detectors on its own:

- **locations**: the path; every query parameter (value and name); form fields
  (``application/x-www-form-urlencoded``); JSON string values and keys, nested, named by
  their path (``json:$.a.b[0]``); multipart fields (values, field names and file names;
  uploaded file contents are not read); cookies (``name=value`` pairs, except the
  gateway's own pass cookie); and the headers listed in ``payload.headers`` (Referer,
  User-Agent, Origin, X-Forwarded-Host, X-Forwarded-For entries that are not
  addresses, …). A body whose ``Content-Type`` is missing is read as JSON when it starts
  with ``{`` or ``[`` and as a form when it has ``=``; other bodies (text, XML, files)
  are left to the rules and the model.
- **decodings**: the value as sent; percent-decoded once, and twice when once left
  ``%XX`` escapes (``+`` is a space in query strings and forms); HTML character
  references; JSON escapes (the JSON parser undoes them); base64 only where a value is
  base64 (strict alphabet, length a multiple of 4, at least 12 characters, and it
  decodes to at least 90% printable text).
- **detectors**: ``libinjection-sqli`` and ``libinjection-xss`` (libinjection, the C
  library ModSecurity uses, through the ``libinjection-python`` binding), and
  ``signatures``: every block rule whose only condition is ``inputs`` in
  ``rules.files`` and ``rules.fallback_files`` (``rules/injections.yaml`` in the
  shipped config), matched with RE2 against each value, lower-cased, as
  ``gateway.rules.inputs`` reads the whole request.

Free text is where SQL detection misfires: libinjection reads ``admin or 1 = 1`` as
SQL, and the same shape turns up in English (``we came at 2 or 3 = late``). SQL
injection is therefore only taken from libinjection when the value breaks out of a
string or a number context or reads as a statement (see :data:`SQLI_TEXT_FINGERPRINTS`);
the value shapes it rejects for free text are documented there.

Work per request is bounded: a value is inspected on its first ``max_value_bytes``,
at most ``max_values`` values per request, bodies on their first ``max_body_bytes``
(the proxy reads no further before deciding; a longer body is counted in
``clefgate_payload_body_truncated_total`` and streamed on), and a detector that
matched a value is not asked again about it.
"""

from __future__ import annotations

import base64
import binascii
import html
import ipaddress
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, unquote_plus

import libinjection
import re2

from gateway import metrics
from gateway.config import Config
from gateway.features import Features
from gateway.rules.inputs import PatternError, compile_inputs
from gateway.rules.loader import inputs_signatures
from gateway.verdict import PayloadHit

HITS = metrics.counter("clefgate_payload_hits_total", "Payload detector hits, by detector, kind and location type (path, query, form, json, multipart, cookie, header).",
                       ("detector", "kind", "location"))
TRUNCATED = metrics.counter("clefgate_payload_body_truncated_total",
                            "Request bodies longer than payload.max_body_bytes: inspected on their prefix only, the rest streamed on unread.")
CAPPED = metrics.counter("clefgate_payload_values_skipped_total", "Values not inspected because their request had more than payload.max_values.")
CLIPPED = metrics.counter("clefgate_payload_values_clipped_total", "Values longer than payload.max_value_bytes, inspected on their prefix only.")

FRAGMENT_CHARS = 80
MAX_HITS = 4          # hits collected per request (the first already decides it)
_NAME_CHARS = 64      # longest parameter, field, cookie or header name shown in a location
_JSON_DEPTH = 32
_KNOWN_CHARS = 256    # values up to this long have their answer kept ...
_KNOWN_VALUES = 8192  # ... this many at most (then forgotten at once): at most ~2 MiB
_UNKNOWN: Any = object()
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_HTML_REF = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
_B64 = re.compile(r"[A-Za-z0-9+/]{10,}={0,2}")
# a value made only of these cannot be SQL injection (no spaces, quotes, parentheses, operators or comments)
_INERT = re.compile(r"[\w.\-@:/~!]*")
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BOUNDARY = re.compile(r'boundary=(?:"([^"]{1,200})"|([^\s;,]{1,200}))', re.IGNORECASE)
_DISPOSITION = re.compile(r'\b(name|filename)="([^"]*)"|\b(name|filename)=([^\s;]+)', re.IGNORECASE)
_FOLD = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}

# libinjection SQLi is taken as evidence when its fingerprint (the folded token shape it matched) starts by breaking
# out of a string or a number ("s&1c": 1' and 1=1--, "1UEvc": 1 union select @@version--) or is its own "X" (evil
# syntax), and the fingerprint is not "sos" (string, operator, string: "a" + "b" in code as often as ' = ' in SQL).
# On the project's benign corpora every other first token was code a person pasted: "n" (a name: const { a } =
# require('x');), "f" (a call: print(f"{x['y']}")), "T" (a keyword). A value with spaces whose fingerprint is only
# words, numbers and logic ("1&1": "we came at 2 or 3") is English, not evidence either. Those shapes are left to
# the signatures (UNION SELECT, tautologies ending the value or followed by a comment) and the model.
SQLI_STARTS = ("s", "1", "X")
SQLI_TEXT_FINGERPRINTS = re.compile(r"[n1v&ok]*")
# libinjection also reads a value as if it sat inside a quoted string, so "s" (a string closed) starts the fingerprint
# of any text with a quote in it. A breakout closes the string early: what precedes the first quote of an injection is
# a value (1', admin', an empty one), not a sentence ("the equivalent of calling 'field(name)'").
SQLI_BREAKOUT_WORDS = 3
SQLI_BREAKOUT_CHARS = 32
_QUOTE = re.compile(r"['\"`]")
# libinjection XSS flags any tag of its list (<iframe>, <svg>, <meta>), which people also search for by name; it is
# evidence together with something that runs or loads: an event handler, a script element, a script URL, a source or
# a call
_ACTIVE = re.compile(r"\bon[a-z]{3,}\s*=|(?:java|vb)script\s*:|<\s*script|\b(?:src|srcdoc|href|action|formaction|data)\s*=|"
                     r"\bdata:|expression\s*\(|[(`]", re.IGNORECASE)
# A value is prose when it holds a line break in a body field (a textarea) or at least PROSE_WORDS words: a post, a
# review, a pasted snippet. HTML, shell lines, file paths, URLs and code are ordinary there on a developer forum, so
# libinjection XSS and the signatures of these kinds are not asked about prose (SQL and XSS signatures still are).
PROSE_WORDS = 16
PROSE_SKIPPED = frozenset({"command-injection", "path-traversal", "crlf-injection", "ssrf", "code-injection"})
# javascript:void(0) is the inert link target of countless pages, searched for and pasted by people; read as
# "javascript:void" it still matches a signature when a call follows it (javascript:void(0);alert(1))
_VOID = re.compile(r"void\s*\(\s*0\s*\)")


@dataclass(frozen=True, slots=True)
class Signature:
    """One injection signature: a rule's ``inputs`` patterns as one RE2 regex."""

    name: str
    kind: str
    regex: Any  # re2._Regexp


def compile_signatures(named: Sequence[tuple[str, list[str]]]) -> tuple[Signature, ...]:
    """``(rule name, patterns)`` -> signatures (``kind`` is the name without ``block-``); raises PatternError."""
    return tuple(Signature(name, name.removeprefix("block-"), compile_inputs(patterns)) for name, patterns in named)


def signatures_for(cfg: Config) -> tuple[Signature, ...]:
    """The signatures the config's rule files hold (``gateway.rules.loader.inputs_signatures``).

    A rule whose patterns do not compile is left out here; the rule table reports it.
    """
    named = inputs_signatures([*cfg.rules.files, *cfg.rules.fallback_files], cfg.rules.disabled, cfg.rules.actions)
    out: list[Signature] = []
    for name, patterns in named:
        try:
            out += compile_signatures([(name, patterns)])
        except PatternError:
            continue
    return tuple(out)


def fragment(text: str, start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` widened by a little context, at most FRAGMENT_CHARS, control characters escaped."""
    end = len(text) if end is None else end
    lo = max(0, start - 16)
    piece = text[lo:max(end + 16, lo + 1)][:FRAGMENT_CHARS]
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in piece)


def _decode_percent(text: str, plus: bool) -> str:
    return unquote_plus(text, errors="replace") if plus else unquote(text, errors="replace")


def _base64(text: str) -> str | None:
    """The decoded text of a value that is base64 (strict alphabet, padded length, mostly printable), else None."""
    if len(text) % 4 or not _B64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    printable = sum(1 for b in raw if 0x20 <= b < 0x7F or b in (9, 10, 13))
    if not raw or printable < 0.9 * len(raw):
        return None
    return raw.decode("utf-8", "replace")


def variants(raw: str, *, plus: bool, base: str = "raw") -> list[tuple[str, str]]:
    """``(text, decoding)`` for each distinct decoding of a value, the value as sent first."""
    out = [(raw, base)]
    text, label = raw, base
    if _PCT.search(raw) or (plus and "+" in raw):
        once = _decode_percent(raw, plus)
        label = "percent" if _PCT.search(raw) else "plus"
        text = once
        if _PCT.search(once):
            text, label = _decode_percent(once, False), "percent2"
        out.append((text, label))
    if "&" in text and _HTML_REF.search(text):
        unescaped = html.unescape(text)
        if unescaped != text:
            out.append((unescaped, "html" if label == "raw" else f"{label}, html"))
    for candidate in {raw, text}:
        decoded = _base64(candidate)
        if decoded is not None:
            out.append((decoded, "base64"))
    return out


def _name(text: str) -> str:
    return fragment(text[:_NAME_CHARS])


class PayloadInspector:
    """Finds attack payloads in a request's locations (see the module docstring).

    ``inspect(features)`` returns the hits, at most MAX_HITS, empty for a clean request.
    """

    def __init__(self, cfg: Config, signatures: Sequence[Signature]) -> None:
        p = cfg.payload
        self.enabled = p.enabled
        self.max_body = p.max_body_bytes
        self.max_value = p.max_value_bytes
        self.max_values = p.max_values
        self.sqli = "libinjection-sqli" in p.detectors
        self.xss = "libinjection-xss" in p.detectors
        self.signatures = tuple(signatures) if "signatures" in p.detectors else ()
        self._joined = (re2.compile("|".join(f"(?:{s.regex.pattern})" for s in self.signatures), _options())
                        if self.signatures else None)
        self.pass_cookie = cfg.challenge.cookie_name
        self.header_names = frozenset(h for h in p.headers if not h.endswith("*"))
        self.header_prefixes = tuple(h[:-1] for h in p.headers if h.endswith("*"))
        # short values repeat from request to request (user agents, referers, paths, cookies): their answer is kept
        self._known: dict[tuple[str, bool, bool, str], tuple[str, str, str, str] | None] = {}

    # ------------------------------------------------------------------ values

    def values(self, f: Features) -> Iterator[tuple[str, str, bool, bool, str]]:
        """``(location, value, plus, body, base decoding)`` for every location of a request (see the module docstring)."""
        if f.path and f.path != "/":
            yield "path", f.path, False, False, "raw"
        if f.query:
            yield from _pairs(f.query, "query", True)
        body = f.body_prefix
        if body and self.max_body:
            if len(body) > self.max_body or (f.content_length or 0) > self.max_body or (f.chunked and len(body) >= self.max_body):
                TRUNCATED.inc()
            yield from self._body(f, body[:self.max_body])
        cookie = f.header_map.get("cookie")
        if cookie:
            for part in cookie.split(";"):
                name, eq, value = part.strip().partition("=")
                if not eq or name == self.pass_cookie:
                    continue
                yield f"cookie:{_name(name)}", value, False, False, "raw"
        names, prefixes = self.header_names, self.header_prefixes
        for name, value in f.headers:
            key = name.lower()
            if key in names or (prefixes and key.startswith(prefixes)):
                if key == "x-forwarded-for":
                    for entry in value.split(","):
                        entry = entry.strip()
                        if entry and not _is_address(entry):
                            yield f"header:{key}", entry, False, False, "raw"
                elif value:
                    yield f"header:{_name(key)}", value, False, False, "raw"

    def _body(self, f: Features, body: bytes) -> Iterator[tuple[str, str, bool, bool, str]]:
        ctype = f.header_map.get("content-type", "").lower()
        if not ctype:
            head = body.lstrip()[:1]
            ctype = "application/json" if head in (b"{", b"[") else "application/x-www-form-urlencoded" if b"=" in body else ""
        if "x-www-form-urlencoded" in ctype:
            for location, value, plus, _, base in _pairs(body.decode("latin-1"), "form", True):
                yield location, value, plus, True, base
        elif "json" in ctype:
            yield from _json_values(body)
        elif "multipart/form-data" in ctype:
            m = _BOUNDARY.search(f.header_map.get("content-type", ""))
            if m:
                yield from _multipart(body, (m.group(1) or m.group(2)).encode("latin-1"))

    # ------------------------------------------------------------------ detection

    def inspect(self, f: Features) -> tuple[PayloadHit, ...]:
        """Every hit in the request's locations, at most MAX_HITS (empty when none, or when disabled)."""
        if not self.enabled:
            return ()
        hits: list[PayloadHit] = []
        seen = 0
        for location, value, plus, body, base in self.values(f):
            seen += 1
            if seen > self.max_values:
                CAPPED.inc()
                continue
            if len(value) > self.max_value:
                CLIPPED.inc()
                value = value[:self.max_value]
            hit = self._known_value(location, value, plus, body, base) if len(value) <= _KNOWN_CHARS else self._value(location, value, plus, body, base)
            if hit is not None:
                hits.append(hit)
                HITS.inc(hit.detector, hit.kind, location.partition(":")[0])
                if len(hits) >= MAX_HITS:
                    break
        return tuple(hits)

    def _known_value(self, location: str, value: str, plus: bool, body: bool, base: str) -> PayloadHit | None:
        """``_value`` for a short value, answered from the values seen before when it is one of them."""
        key = (value, plus, body, base)
        known = self._known.get(key, _UNKNOWN)
        if known is _UNKNOWN:
            hit = self._value(location, value, plus, body, base)
            if len(self._known) >= _KNOWN_VALUES:
                self._known.clear()
            self._known[key] = known = None if hit is None else (hit.detector, hit.kind, hit.fragment, hit.decoding)
            return hit
        return None if known is None else PayloadHit(known[0], known[1], location, known[2], known[3])

    def _value(self, location: str, value: str, plus: bool, body: bool, base: str) -> PayloadHit | None:
        """The first hit in one value, trying each decoding in turn.

        The application reads a parameter, field or cookie decoded, so its percent-encoded form is not inspected
        as text (an encoded line break in a form is a line break, not "%0d%0a"); the path is, as servers differ.
        """
        decoded = variants(value, plus=plus, base=base)
        if len(decoded) > 1 and location != "path" and decoded[1][1] in ("percent", "percent2", "plus"):
            decoded = decoded[1:]
        tried: set[str] = set()
        for text, decoding in decoded:
            if text in tried:
                continue
            tried.add(text)
            hit = self._text(location, text, decoding, body)
            if hit is not None:
                return hit
        return None

    def _text(self, location: str, text: str, decoding: str, body: bool) -> PayloadHit | None:
        if self.sqli and not _INERT.fullmatch(text):
            found = libinjection.is_sql_injection(text)
            if found["is_sqli"]:
                shape = found["fingerprint"]
                if shape.startswith(SQLI_STARTS) and shape != "sos" and not (" " in text.strip() and SQLI_TEXT_FINGERPRINTS.fullmatch(shape)) \
                        and (shape[0] != "s" or _breaks_out(text)):
                    return PayloadHit("libinjection", "sqli", location, fragment(text), decoding)
        prose = (body and "\n" in text) or (text.count(" ") >= PROSE_WORDS - 1 and len(text.split()) >= PROSE_WORDS)
        # markup written as character references is displayed, not run: libinjection XSS reads the value as sent and
        # percent-decoded, never HTML-decoded (the signatures still read that)
        if self.xss and not prose and "html" not in decoding and ("<" in text or "=" in text) and _ACTIVE.search(text) \
                and libinjection.is_xss(text)["is_xss"]:
            start = min((i for i in (text.find("<"), text.find("=")) if i >= 0), default=0)
            return PayloadHit("libinjection", "xss", location, fragment(text, start, start + 48), decoding)
        if self._joined is not None:
            low = text.lower()
            if not low.isascii():
                low += "\n" + low.translate(_FOLD)
            if "/**/" in low:
                low = low.replace("/**/", " ")
            if "void" in low:
                low = _VOID.sub("void", low)
            if body and "\n" in low:
                # a line break inside a body field is text, never a command separator or a smuggled CRLF
                low = low.replace("\r\n", "\f").replace("\n", "\f")
            if self._joined.search(low) is not None:
                for sig in self.signatures:
                    if prose and sig.kind in PROSE_SKIPPED:
                        continue
                    m = sig.regex.search(low)
                    if m is not None:
                        # show the text as sent when lower-casing kept its length (it nearly always does)
                        shown = text if len(text) == len(low) else low
                        return PayloadHit("signatures", sig.kind, location, fragment(shown, m.start(), m.end()), decoding)
        return None


def _breaks_out(text: str) -> bool:
    """The text before the first quote is a value (at most a few words), as in a string breakout."""
    m = _QUOTE.search(text)
    if m is None:
        return True  # a string context libinjection assumed: the whole value is the string (1 or 1=1)
    before = text[:m.start()]
    return len(before) <= SQLI_BREAKOUT_CHARS and len(before.split()) <= SQLI_BREAKOUT_WORDS


def _options() -> re2.Options:
    opts = re2.Options()
    opts.log_errors = False
    opts.never_capture = True
    opts.max_mem = 64 << 20
    return opts


def _is_address(entry: str) -> bool:
    """An X-Forwarded-For entry that is an address (``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80``, ``::1``, ``unknown``)."""
    if entry.lower() == "unknown":
        return True
    text = entry
    if text.startswith("["):
        text = text[1:text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _pairs(text: str, kind: str, plus: bool) -> Iterator[tuple[str, str, bool, bool, str]]:
    """Query-string or form pairs: the value under ``kind:NAME``, a name that needs looking at under ``kind:NAME (name)``."""
    for pair in text.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        shown = _name(_decode_percent(name, plus) if "%" in name or "+" in name else name)
        if value:
            yield f"{kind}:{shown}", value, plus, False, "raw"
        if not _INERT.fullmatch(name):
            yield f"{kind}:{shown} (name)", name, plus, False, "raw"


def _json_values(body: bytes) -> Iterator[tuple[str, str, bool, bool, str]]:
    """JSON string values and keys with their ``$.a.b[0]`` path; a body cut short yields its string literals (``json:#n``)."""
    text = body.decode("utf-8", "replace")
    base = "json" if "\\" in text else "raw"
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        for i, m in enumerate(_JSON_STRING.finditer(text)):
            try:
                value = json.loads(m.group(0))
            except ValueError:
                continue
            if isinstance(value, str) and value:
                yield f"json:#{i}", value, False, True, base
        return
    stack: list[tuple[str, Any, int]] = [("$", doc, 0)]
    while stack:
        path, node, depth = stack.pop()
        if isinstance(node, str):
            if node:
                yield f"json:{path}", node, False, True, base
        elif depth >= _JSON_DEPTH:
            continue
        elif isinstance(node, dict):
            for key, value in reversed(node.items()):
                key_path = f"{path}.{_name(key)}" if _INERT.fullmatch(key) else f"{path}[{_name(json.dumps(key))}]"
                if not _INERT.fullmatch(key):
                    yield f"json:{key_path} (key)", key, False, True, base
                stack.append((key_path, value, depth + 1))
        elif isinstance(node, list):
            for i in range(len(node) - 1, -1, -1):
                stack.append((f"{path}[{i}]", node[i], depth + 1))


def _multipart(body: bytes, boundary: bytes) -> Iterator[tuple[str, str, bool, bool, str]]:
    """Multipart field values, field names and file names (file contents are not read)."""
    for part in body.split(b"--" + boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, sep, content = part.partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = part.partition(b"\n\n")
        params: dict[str, str] = {}
        for line in head.decode("latin-1").splitlines():
            if line.lower().startswith("content-disposition:"):
                for m in _DISPOSITION.finditer(line):
                    params.setdefault((m.group(1) or m.group(3)).lower(), m.group(2) if m.group(1) else m.group(4))
        name = params.get("name", "")
        shown = _name(name)
        if name and not _INERT.fullmatch(name):
            yield f"multipart:{shown} (name)", name, False, True, "raw"
        if "filename" in params:
            if params["filename"]:
                yield f"multipart:{shown} (filename)", params["filename"], False, True, "raw"
            continue
        if sep:
            value = content[:-2] if content.endswith(b"\r\n") else content.rstrip(b"\n")
            if value:
                yield f"multipart:{shown}", value.decode("utf-8", "replace"), False, True, "raw"
