"""Deterministic payload detection: libinjection and the injection signatures, per location.

Every request the rules leave open, challenge, or let through on a claim anyone can make (an
``allow`` or ``route`` rule with ``inspect: true``) is inspected, with or without the model, before it
(``Pipeline.decide``). Each value a client controls is taken from where the
application will read it, decoded the way the application will, and handed to the
detectors on its own:

- **locations**: the path; every query parameter (value and name); form fields
  (``application/x-www-form-urlencoded``); JSON string values and keys, nested, named by
  their path (``json:$.a.b[0]``); multipart fields (values, field names and file names;
  uploaded file contents are not read); cookies (``name=value`` pairs, except the
  gateway's own pass cookie); and the headers listed in ``payload.headers`` (Referer,
  User-Agent, Origin, X-Forwarded-Host, X-Forwarded-For entries that are not
  addresses, …, and the Content-Type a framework parses). A body whose ``Content-Type`` is missing is read as JSON
  when it starts with ``{`` or ``[`` and as a form when it has ``=``. An XML or YAML body is read whole, for what its
  parser or deserialiser acts on only (``gateway.payload.documents``); other bodies (text, files) are left to the rules
  and the model.
  A name or key made of word characters and dots is read when it walks the application's object graph
  (``__proto__``, ``constructor.prototype``, ``class.module.classLoader``: ``locations.GRAPH_NAME``), and a JSON key
  that starts with ``$`` is read as a query operator is written, after the key it applies to
  (``"password": {"$ne":``).
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
the value shapes it rejects for free text are documented there. Likewise a name that a
signature knows (``document.cookie``, ``information_schema``, an ``<iframe>`` with no
attribute) mentioned among words with no code around it is a question about the thing,
not its use (:func:`_mentioned`), and so is a tag with bare attributes only (``what does
<script defer> mean``, :func:`_tag_mentioned`); libinjection XSS needs what runs or loads to
come with the markup, not before it.

The fallback rules (``rules.fallback_files``) read their signatures the same way: the
pipeline compiles their table with :meth:`PayloadInspector.matched` of an inspector made
``fallback=True``, so a request the model cannot answer is judged value by value with
these allowances, not as one text in which a mention in a search box or a line of shell
in a post blocks. That inspector reads every value the whole-request text holds: uploaded
file contents, every header with application data and a body no parser reads as well.

Work per request is bounded: a value is inspected on its first ``max_value_bytes``,
at most ``max_values`` values per request, bodies on their first ``max_body_bytes``
(the proxy reads no further before deciding; a longer body is counted in
``clefgate_payload_body_truncated_total`` and streamed on), and a detector that
matched a value is not asked again about it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import libinjection
import re2

from gateway import metrics
from gateway.config import Config
from gateway.features import Features
from gateway.payload import documents
from gateway.payload.decoding import FRAGMENT_CHARS, fragment, variants
from gateway.payload.locations import INERT, Value, body_values, is_address, name_of, pairs
from gateway.rules.inputs import STRUCTURAL_HEADERS, PatternError, compile_inputs, re2_options
from gateway.rules.loader import inputs_signatures
from gateway.verdict import PayloadHit

HITS = metrics.counter("clefgate_payload_hits_total", "Payload detector hits, by detector, kind and location type (path, query, form, json, multipart, cookie, header).",
                       ("detector", "kind", "location"))
TRUNCATED = metrics.counter("clefgate_payload_body_truncated_total",
                            "Request bodies longer than payload.max_body_bytes: inspected on their prefix only, the rest streamed on unread.")
CAPPED = metrics.counter("clefgate_payload_values_skipped_total", "Values not inspected because their request had more than payload.max_values.")
CLIPPED = metrics.counter("clefgate_payload_values_clipped_total", "Values longer than payload.max_value_bytes, inspected on their prefix only.")

MAX_HITS = 4          # hits collected per request (the first already decides it)
_KNOWN_CHARS = 256    # values up to this long have their answer kept ...
_KNOWN_VALUES = 8192  # ... this many at most (then forgotten at once): at most ~2 MiB
_UNKNOWN: Any = object()
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
# of any text with a quote in it. A breakout closes a string the value did not open (admin'--, an empty one); what
# precedes its first quote is a value, not a sentence ("the equivalent of calling 'field(name)'"). A string opened
# and closed inside the value is a quoted phrase, as query languages and searches write one (text ~ "pro jacket" AND
# type = Bug, "quick fox" AND lang = en), when only logic, comparisons, names, numbers and more strings follow it
# (SQLI_PHRASE_FINGERPRINTS); a function, a keyword, a comment or a statement after it ('' rlike sleep(5)--, 'x' into
# outfile '/tmp/x'--, '';select 1--) is SQL where the value sits unquoted, and stays evidence.
SQLI_PHRASE_FINGERPRINTS = re.compile(r"s[&o1nvs]*")
SQLI_BREAKOUT_WORDS = 3
SQLI_BREAKOUT_CHARS = 32
_QUOTE = re.compile(r"['\"`]")
# libinjection XSS flags any tag of its list (<iframe>, <svg>, <meta>), which people also search for by name; it is
# evidence together with something that runs or loads: an event handler, a script element, a script URL, a source
# (datasrc too) or a call (a parenthesis, or a template literal whose opening backquote is glued to what it calls:
# alert`1`, :func:`_tagged_template`). A backquote opening after a space or at the start is Markdown's inline code,
# as people quote a tag (I put `<link rel="preconnect">` first).
_ACTIVE = re.compile(r"\bon[a-z]{3,}\s*=|(?:java|vb)script\s*:|<\s*script|\b(?:src|srcdoc|datasrc|href|action|formaction|data)\s*=|"
                     r"\bdata:|expression\s*\(|\(", re.IGNORECASE)
_CALLABLE_END = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$)]")
_ATTRIBUTE_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:"
# A value is prose when it holds a line break in a body field (a textarea) or at least PROSE_WORDS words: a post, a
# review, a pasted snippet. HTML, shell lines, file paths, URLs and code are ordinary there on a developer forum, so
# libinjection XSS and the signatures of these kinds are not asked about prose (SQL and XSS signatures still are).
PROSE_WORDS = 16
PROSE_SKIPPED = frozenset({"command-injection", "path-traversal", "crlf-injection", "ssrf", "code-injection", "nosql-injection"})
# A signature that matched only a name (document.cookie, information_schema, <iframe> with no attribute) in a value of
# words mentions the thing, as a question or a tutorial does ("what is document.cookie"); using it needs syntax around
# the name, which another signature or libinjection then finds. A name on its own, or inside code, stays evidence.
_BARE_NAME = re.compile(r"<?\s*[a-z_][a-z0-9_.]*")
_WORD = re.compile(r"[^\W\d_]{2,}")
_GLUED_BEFORE = re.compile(r"[\w.:/]+\Z")
_GLUED_AFTER = re.compile(r"\A[\w.:/]+")
_TOKEN_REST = re.compile(r"\A\S+")
MENTION_WORDS = 1
# libinjection XSS reads <script defer> and <svg viewBox> as markup, which people ask about by name ("what does <script
# defer> mean"); a tag with bare attributes only (no value: nothing loads or runs from it) and no other markup in the
# value is such a mention (:func:`_tag_mentioned`)
_BARE_TAG = re.compile(r"<\s*([a-z][a-z0-9]*)(?:\s+[a-z][a-z0-9-]*)*\s*>", re.IGNORECASE)
_RUNS_CONTENT = frozenset({"script", "style"})  # elements whose text content is code, not words
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


def signatures_for(cfg: Config, files: Sequence[str] | None = None) -> tuple[Signature, ...]:
    """The signatures the config's rule files hold (``gateway.rules.loader.inputs_signatures``): those of ``files``,
    by default of ``rules.files`` and ``rules.fallback_files``.

    A rule whose patterns do not compile is left out here; the rule table reports it.
    """
    files = [*cfg.rules.files, *cfg.rules.fallback_files] if files is None else files
    named = inputs_signatures(files, cfg.rules.disabled, cfg.rules.actions)
    out: list[Signature] = []
    for name, patterns in named:
        try:
            out += compile_signatures([(name, patterns)])
        except PatternError:
            continue
    return tuple(out)


class PayloadInspector:
    """Finds attack payloads in a request's locations (see the module docstring).

    ``inspect(features)`` returns the hits, at most MAX_HITS, empty for a clean request. ``matched(features)`` names
    the signatures that some value of a request matches, each value judged as ``inspect`` judges it.

    With ``fallback``, the inspector reads for the fallback rules (``rules.fallback_files``, where the pipeline hands
    :meth:`matched` to their table): the signatures only, whatever ``payload`` enables, on every value the whole-request
    reading (``gateway.rules.inputs``) covers: the locations above, every header that carries application data (not
    the structural ones), and a body none of the parsers reads (text, XML) as one value; no value is skipped or clipped
    (the body prefix the proxy read bounds them).
    """

    def __init__(self, cfg: Config, signatures: Sequence[Signature], *, fallback: bool = False) -> None:
        p = cfg.payload
        self.enabled = p.enabled
        self.max_body = p.max_body_bytes if not fallback else sys.maxsize
        self.max_value = p.max_value_bytes if not fallback else sys.maxsize
        self.max_values = p.max_values if not fallback else sys.maxsize
        self.sqli = "libinjection-sqli" in p.detectors and not fallback
        self.xss = "libinjection-xss" in p.detectors and not fallback
        self.signatures = tuple(signatures) if "signatures" in p.detectors or fallback else ()
        self._kinds = frozenset(sig.kind for sig in self.signatures)  # the kinds whose rules are enabled (documents read by them)
        self._joined = (re2.compile("|".join(f"(?:{s.regex.pattern})" for s in self.signatures), re2_options())
                        if self.signatures else None)
        self.pass_cookie = cfg.challenge.cookie_name
        self.header_names = frozenset(h for h in p.headers if not h.endswith("*"))
        self.header_prefixes = tuple(h[:-1] for h in p.headers if h.endswith("*"))
        self.every_header = self.whole_body = fallback
        # short values repeat from request to request (user agents, referers, paths, cookies): their answer is kept
        self._known: dict[tuple[str, bool, bool, str, bool], tuple[str, str, str, str] | None] = {}

    # ------------------------------------------------------------------ values

    def values(self, f: Features) -> Iterator[Value]:
        """``(location, value, plus, body, base decoding)`` for every location of a request (see the module docstring)."""
        if f.path and f.path != "/":
            yield "path", f.path, False, False, "raw"
        if f.query:
            yield from pairs(f.query, "query", True)
        body = f.body_prefix
        if body and self.max_body:
            if len(body) > self.max_body or (f.content_length or 0) > self.max_body or (f.chunked and len(body) >= self.max_body):
                TRUNCATED.inc()
            ctype = f.header_map.get("content-type", "")
            read = body[:self.max_body] if len(body) > self.max_body else body
            yield from body_values(ctype, read, whole=self.whole_body)
            document = documents.kind_of(ctype, read) if not self.whole_body else None
            if document is not None:
                # what an XML or YAML parser acts on: entity declarations, XInclude, the objects a deserialiser builds
                yield document[0], document[1], False, True, "raw"
        cookie = f.header_map.get("cookie")
        if cookie:
            for part in cookie.split(";"):
                name, eq, value = part.strip().partition("=")
                if not eq or name == self.pass_cookie:
                    continue
                yield f"cookie:{name_of(name)}", value, False, False, "raw"
        names, prefixes, every = self.header_names, self.header_prefixes, self.every_header
        for name, value in f.headers:
            key = name.lower()
            if key in names or (prefixes and key.startswith(prefixes)) or (every and key not in STRUCTURAL_HEADERS and key != "cookie"):
                if key == "x-forwarded-for":
                    for entry in value.split(","):
                        entry = entry.strip()
                        if entry and not is_address(entry):
                            yield f"header:{key}", entry, False, False, "raw"
                elif value:
                    yield f"header:{name_of(key)}", value, False, False, "raw"

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
            if location in documents.DOCUMENTS:
                # a document is read whole (to payload.max_body_bytes), by the document signatures alone: its answer is
                # never kept for a value of the same text, which the value detectors read otherwise
                hit = self._document(location, value)
            else:
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

    def matched(self, f: Features) -> frozenset[str]:
        """The names of the signatures that some value of the request matches, each value read as :meth:`inspect`
        reads it (its decodings, and a signature's match a mention or, in prose, of a kind prose is not asked about,
        passed over)."""
        if self._joined is None:
            return frozenset()
        names: set[str] = set()
        for seen, (location, value, plus, body, base) in enumerate(self.values(f), 1):
            if seen > self.max_values:
                break
            for text, _ in self._decodings(location, value[:self.max_value], plus, base):
                names.update(sig.name for sig, _, _, _ in self._signed(text, body, _prose(text, body)))
            if len(names) == len(self.signatures):
                break
        return frozenset(names)

    def _known_value(self, location: str, value: str, plus: bool, body: bool, base: str) -> PayloadHit | None:
        """``_value`` for a short value, answered from the values seen before when it is one of them."""
        key = (value, plus, body, base, location == "path")  # the path is read as sent too (_decodings)
        known = self._known.get(key, _UNKNOWN)
        if known is _UNKNOWN:
            hit = self._value(location, value, plus, body, base)
            if len(self._known) >= _KNOWN_VALUES:
                self._known.clear()
            self._known[key] = known = None if hit is None else (hit.detector, hit.kind, hit.fragment, hit.decoding)
            return hit
        return None if known is None else PayloadHit(known[0], known[1], location, known[2], known[3])

    def _value(self, location: str, value: str, plus: bool, body: bool, base: str) -> PayloadHit | None:
        """The first hit in one value, trying each decoding in turn."""
        for text, decoding in self._decodings(location, value, plus, base):
            hit = self._text(location, text, decoding, body)
            if hit is not None:
                return hit
        return None

    @staticmethod
    def _decodings(location: str, value: str, plus: bool, base: str) -> list[tuple[str, str]]:
        """The distinct decodings of one value the detectors read (:func:`variants`).

        The application reads a parameter, field or cookie decoded, so its percent-encoded form is not inspected
        as text (an encoded line break in a form is a line break, not "%0d%0a"); the path is, as servers differ.
        """
        decoded = variants(value, plus=plus, base=base)
        if len(decoded) > 1 and location != "path" and decoded[1][1] in ("percent", "percent2", "plus"):
            decoded = decoded[1:]
        distinct: dict[str, str] = {}
        for text, decoding in decoded:
            distinct.setdefault(text, decoding)
        return list(distinct.items())

    def _text(self, location: str, text: str, decoding: str, body: bool) -> PayloadHit | None:
        if self.sqli and not INERT.fullmatch(text):
            found = libinjection.is_sql_injection(text)
            if found["is_sqli"] and _sqli_evidence(text, found):
                return PayloadHit("libinjection", "sqli", location, fragment(text), decoding)
        prose = _prose(text, body)
        # markup written as character references is displayed, not run: libinjection XSS reads the value as sent and
        # percent-decoded, never HTML-decoded (the signatures still read that)
        if self.xss and not prose and "html" not in decoding and ("<" in text or "=" in text):
            # what runs or loads must come with the markup or the attribute, not before it ("SUBSTRING() with <iframe>")
            start = min(i for i in (text.find("<"), text.find("=")) if i >= 0)
            if text[start] == "=":
                start = len(text[:start].rstrip().rstrip(_ATTRIBUTE_CHARS))  # from the attribute's name (onerror=)
            if (_ACTIVE.search(text, start) or _tagged_template(text, start)) and not _tag_mentioned(text) \
                    and libinjection.is_xss(text)["is_xss"]:
                return PayloadHit("libinjection", "xss", location, fragment(text, start, start + 48), decoding)
        if self._joined is not None:
            for sig, low, start, end in self._signed(text, body, prose):
                # show the text as sent when lower-casing kept its length (it nearly always does)
                shown = text if len(text) == len(low) else low
                return PayloadHit("signatures", sig.kind, location, fragment(shown, start, end), decoding)
        return None

    def _document(self, location: str, text: str) -> PayloadHit | None:
        """An XML or YAML body read whole for what its parser or deserialiser acts on (``gateway.payload.documents``), by
        the kinds whose rules are enabled."""
        found = documents.search(location, text, self._kinds)
        if found is None:
            return None
        kind, reading, start, end, decoding = found
        return PayloadHit("signatures", kind, location, fragment(reading, start, end), decoding)

    def _signed(self, text: str, body: bool, prose: bool) -> Iterator[tuple[Signature, str, int, int]]:
        """Each signature that matches ``text`` as the signatures read it, in order, with that reading and the match's
        span; a match that is a mention (:func:`_mentioned`), or in prose of a kind prose is not asked about, is not one."""
        assert self._joined is not None
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
        if self._joined.search(low) is None:
            return
        for sig in self.signatures:
            if prose and sig.kind in PROSE_SKIPPED:
                continue
            m = sig.regex.search(low)
            if m is not None and not _mentioned(low, m.start(), m.end()):
                yield sig, low, m.start(), m.end()


def _prose(text: str, body: bool) -> bool:
    """A post, a review or a pasted snippet: a line break in a body field, or at least PROSE_WORDS words."""
    return (body and "\n" in text) or (text.count(" ") >= PROSE_WORDS - 1 and len(text.split()) >= PROSE_WORDS)


def _mentioned(low: str, start: int, end: int) -> bool:
    """The match is a bare name (an identifier, or a tag closed right after its name) among at least MENTION_WORDS other
    words, and nothing around it reads as code: no quote, ``=``, ``;``, ``+``, backquote, brace, angle bracket or
    parenthesis in the value (an empty ``()``, as in "SUBSTRING()", is a name too)."""
    if _BARE_NAME.fullmatch(low, start, end) is None:
        return False
    before, after = low[:start], low[end:]
    if low[start] == "<":
        # the tag closes right after its name (<iframe>) or the value ends there; content may not follow at once
        close = after.find(">")
        if after[:close if close >= 0 else len(after)].strip() or (close >= 0 and after[close + 1:close + 2].strip()):
            return False
        after = after[close + 1:] if close >= 0 else ""
    if any(c in part.replace("()", " ") for part in (before, after) for c in "'\"()=;+`<>{}"):
        return False
    return _among_words(before, after)


def _among_words(before: str, after: str) -> bool:
    """At least MENTION_WORDS words around a mention, before it and after it together, each set apart from it: what
    name and URL characters (letters, digits, ``_ . : /``) join to the name is part of it (the rest of an identifier,
    as in smarty_internal_filter), and so is the whole URL a host sits in (http://metadata.google.internal/a-b/c),
    while a word after a space or a hyphen (a slug: /xp_cmdshell-ping) is around it."""
    head = _GLUED_BEFORE.search(before)
    if head is not None:
        before = before[:head.start()]
    after = (_TOKEN_REST if head is not None and "://" in head.group() else _GLUED_AFTER).sub("", after, 1)
    return len(_WORD.findall(before)) + len(_WORD.findall(after)) >= MENTION_WORDS


def _tag_mentioned(text: str) -> bool:
    """The value's only markup is one tag named with bare attributes and closed at once (``<script defer>``,
    ``<svg viewBox>``), among at least MENTION_WORDS words: no attribute value, no second tag, and nothing after it
    that a script or style element would run (a call, a template, a string, a statement, a block, an import or a
    property)."""
    m = _BARE_TAG.search(text)
    if m is None or "<" in text[m.end():] or "<" in text[:m.start()] or "=" in text:
        return False
    after = text[m.end():]
    if m.group(1).lower() in _RUNS_CONTENT and any(c in after for c in "()`'\";{}+@:"):
        return False
    return _among_words(text[:m.start()], after)


def _sqli_evidence(text: str, found: dict[str, Any]) -> bool:
    """Whether libinjection's SQL injection in ``text`` (its answer ``found``) is evidence: a fingerprint that breaks out
    of a string or a number or is evil syntax (SQLI_STARTS), not "sos", not words and logic alone in a value with
    spaces; from a string context, a breakout after at most a few words, and no quoted phrase of a query language."""
    shape = found["fingerprint"]
    if not shape.startswith(SQLI_STARTS) or shape == "sos" or (" " in text.strip() and SQLI_TEXT_FINGERPRINTS.fullmatch(shape)):
        return False
    if shape[0] != "s":
        return True
    return _breaks_out(text) and not (found["token_vector"][0]["str_open"] and SQLI_PHRASE_FINGERPRINTS.fullmatch(shape))


def _tagged_template(text: str, start: int) -> bool:
    """A template literal called at or after ``start``: an opening backquote (the first, third, ... of the value) right
    after a name or a closing bracket (alert`1`, x.y`z`, f()`a`), not after a space or a tag as inline code opens."""
    at = text.find("`")
    opening = True
    while at >= 0:
        if opening and at >= start and at > 0 and text[at - 1] in _CALLABLE_END:
            return True
        opening = not opening
        at = text.find("`", at + 1)
    return False


def _breaks_out(text: str) -> bool:
    """The text before the first quote is a value (at most a few words), as in a string breakout."""
    m = _QUOTE.search(text)
    if m is None:
        return True  # a string context libinjection assumed: the whole value is the string (1 or 1=1)
    before = text[:m.start()]
    return len(before) <= SQLI_BREAKOUT_CHARS and len(before.split()) <= SQLI_BREAKOUT_WORDS



__all__ = ["CAPPED", "CLIPPED", "FRAGMENT_CHARS", "HITS", "TRUNCATED", "PayloadInspector", "Signature", "compile_signatures", "fragment",
           "signatures_for", "variants"]
