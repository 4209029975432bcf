"""The syntax an attack kind cannot do without: what a block on P(attack) alone needs to find.

The model says how likely a request is an attack and of which kind (``attack_kind``:
sqli, xss, traversal, cmdi, probe, other), not where. A person's request that the model
finds suspicious — a JSON value in a shape it never saw, a password like ``Password1!``, a
review in plain words — holds no injection syntax at all: an injection has to break out of
where its value is put (a quote, a comment, a tag, a separator, a template, a scheme), and
a value without any of that cannot. :func:`syntax_witness` looks for that syntax, kind by
kind, in every value the client chose, decoded as the application decodes it; the policy
blocks on the model alone only when the kind the model names finds its syntax somewhere
(``policy.block_needs_syntax``), and challenges otherwise. It is a second witness, weaker
than a detector (which needs the attack itself) and independent of the model: it reads
only characters and a few keywords, never the client's look.

What each kind needs (lower-cased, per value, in any of its decodings):

* ``sqli``: a quote, ``;``, a comment (``--``, ``#``, ``/*``), a call or a subquery, a comparison,
  ``@@``, ``||``, a hex literal, or the keyword shapes that need none (``order by 3``,
  ``union select``, ``waitfor delay``);
* ``xss``: markup (``<`` before a name, ``!``, ``/``, ``?``), a script URL, ``data:`` with a
  type, an event handler (``onload=``), a quote closing into code, ``{{``, ``expression(``,
  JavaScript or HTML escapes;
* ``traversal`` (with file inclusion): ``..``, an encoded dot, a system path (``/etc/``,
  ``/proc/``, ``c:\\``), a UNC path, a NUL byte, a stream wrapper (``php://``, ``file:``),
  a known system file;
* ``cmdi``: a shell separator or substitution (``;``, ``|``, ``&``, backquote, a line
  break, ``$(``, ``${``, ``$VAR``), a redirection to a path;
* ``other`` (template, expression-language, JNDI, deserialization, XXE, CRLF, SSI, NoSQL,
  LDAP, XPath, request forgery, open redirects): a template or entity opener, a scheme, a
  protocol-relative or UNC start (``//evil.example``; a URL's user part rides on its scheme),
  Mongo operators, an LDAP filter, a line break,
  serialized-object markers, ``__proto__``, an address literal or ``localhost``;
* ``probe``: any of the above (a scanner's request carries whatever it tries).

Where values come from: the path; query and form pairs (value and name); JSON string values
and keys; multipart fields and file names; any other body as one text; cookies that are
more than a token, read as the script that wrote them reads them (:func:`cookie_values`);
and header values that ``gateway.carriers`` counts as carriers (not the
ones that only describe the client: a browser's User-Agent holds ``(`` and ``;``, and a
Referer holds ``://``, and neither is a payload). The search stops at the first witness and
runs only for requests the model already puts at or above the block threshold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

from gateway.carriers import DESCRIPTIVE, is_token, suspicious
from gateway.features import Features
from gateway.payload.decoding import fragment, variants
from gateway.payload.locations import body_values, json_values, pairs

# encodings no client writes for its own values: overlong UTF-8, %u escapes, doubled or nested percent signs, hex
# spelt-out dots and slashes, a NUL byte; every kind hides its syntax behind them
_EVASION = r"""%c[01]|%e0%80|%f[08]%80|%u[0-9a-f]{4}|%%[0-9a-f]|%25[0-9a-f]{2}|\b0x(?:2e|2f|5c)|\x00|%00|\\x00"""
# a call: a name, or what closes an index, right before an opening parenthesis or a backquote (``alert(1)``, ``system`id` ``)
_CALL = r"""[\w$\]]\(|[\w$]`"""
# SQL: a quote, a statement separator, a comment, a comparison between operands (not base64's padding), a call or a
# subquery (not a parenthesis in words, "GMT+0100 (Central European Time)"), and the keyword shapes that need none
_SQLI = (r"""['"`;#]|--|/\*|@@|\|\||\b0x[0-9a-f]{2,}|[\w'")\]]\s*(?:<>|!=|<=|>=|=|<|>)\s*[\w'"(@-]|\(\s*select\b|"""
         r"""\)\s*(?:or|and|union|;|--|#)|\border\s+by\s+\d|\bunion\s+(?:all\s+|distinct\s+)?select\b|\bwaitfor\s+delay\b|"""
         + _CALL + "|" + _EVASION)
_XSS = (r"""<\s*[a-z!/?]|(?:java|vb|live)script\s*:|\bdata\s*:\s*[a-z]+/[a-z0-9+.-]+\s*[;,]|\bon[a-z]{3,}\s*=|['"`]\s*[;)}+,]|"""
        r"""\{\{|\bexpression\s*\(|\\u00[0-9a-f]{2}|\\x[0-9a-f]{2}|&#|"""
        r"""&(?:lt|gt|quot|apos|lpar|rpar|grave|colon|sol|bsol|excl|lsqb|rsqb|lcub|rcub|semi|equals|period|comma|plus|num);|"""
        + _CALL + "|" + _EVASION)
_TRAVERSAL = (r"""\.\.|%2e|(?:^|[^\w.-])/?(?:etc|proc)/|/(?:var|opt|usr|root|tmp|srv|windows|winnt|inetpub)/|\b[a-z]:[\\/]|"""
              r"""^\s*\\\\|\b(?:file|php|zip|phar|expect|jar|glob|data)://|\bfile:|\b(?:web|meta)-inf\b|"""
              r"""\.(?:ini|log|conf|cnf|history|passwd|htpasswd|htaccess)\b|/(?:passwd|shadow|issue|hosts|environ)\b|~/|""" + _EVASION)
# a shell separator or substitution; or a command with the argument it needs run as the whole value (``ping 127.0.0.1``,
# ``cat /etc/passwd``, ``uname -a``), a diagnostic command alone, or a call that runs one
_CMDI = (r"""[;|&`\n\r]|\$\(|\$\{|\$[a-z_]|[<>]\s*[/&]|<!--\s*#|"""
         r"""(?:^|[\s(`'"])(?:uname|ping|curl|wget|cat|type|dir|ls|nc|ncat|netcat|bash|sh|zsh|powershell|cmd|nslookup|dig|sleep|echo|"""
         r"""rm|chmod|python[0-9.]*|perl|php|ruby|telnet|tftp|certutil|bitsadmin)\s+(?:-{1,2}\w|[/\\~]|[a-z]:[\\/]|\d{1,3}\.\d|https?:|\$)|"""
         r"""^\s*(?:whoami|id|ifconfig|ipconfig|systeminfo|hostname|uname|pwd|ver)\s*$|\bnet\s+(?:user|localgroup|view|share|use)\b|"""
         r"""\b(?:system|exec|eval|passthru|shell_exec|popen|proc_open|spawn|execsync|getruntime)\s*\(|""" + _EVASION)
# template and expression languages, JNDI, deserialization, XXE, CRLF, SSI, NoSQL, LDAP, XPath, request forgery and
# redirects: an opener, a scheme, two slashes anywhere (a protocol-relative URL), code (a call, braces, a statement
# separator, JavaScript logic), Mongo operators, an LDAP filter, a line break, serialized-object markers, an address
_OTHER = (r"""\{\{|\{%|\$\{|#\{|\*\{|<%|<!|<\?|://|[/\\]{2}|[{};]|&&|\|\||\[\$|\$(?:ne|gt|gte|lt|lte|eq|regex|where|exists|in|nin|"""
          r"""or|and|not|expr|function)\b|\*\)|\)\(|\(\s*[|&!]|[\r\n]|%0[ad]|\bro0|\bo:\d+:|aced0005|!!python|__proto__|"""
          r"""\bconstructor\b|__class__|\b\d{1,3}(?:\.\d{1,3}){3}\b|\b0x[0-9a-f]{1,8}\.|\blocalhost\b|\[::|\bjndi\b|"""
          + _CALL + "|" + _EVASION)
_KINDS = (("sqli", _SQLI), ("xss", _XSS), ("traversal", _TRAVERSAL), ("cmdi", _CMDI), ("other", _OTHER))
# a scanner's probe carries whatever it tries: any kind's syntax witnesses it
SYNTAX: Mapping[str, re.Pattern[str]] = {kind: re.compile(pattern, re.IGNORECASE) for kind, pattern in
                                         (*_KINDS, ("probe", "|".join(f"(?:{pattern})" for _, pattern in _KINDS)))}
# a cookie written by a script: a JavaScript object literal of simple keys and values, and ``a=1&b=2`` pairs
_LITERAL_ENTRY = r"""\s*[\w$]+\s*:\s*(?:'[^'\\]*'|"[^"\\]*"|[\w.+-]*)\s*"""
_OBJECT_LITERAL = re.compile(rf"\{{(?:{_LITERAL_ENTRY}(?:,{_LITERAL_ENTRY})*)?\}}")
_LITERAL_VALUE = re.compile(r"""[\w$]+\s*:\s*(?:'([^'\\]*)'|"([^"\\]*)"|([\w.+-]*))""")
_PAIRS = re.compile(r"[\w.%-]+=[^&=\s]*(?:&[\w.%-]+=[^&=\s]*)+")
# a kind the model gives at least this share of its attack_kind answer is one it names (the top kind always is)
KIND_SHARE = 0.2
# the values read, and each value's first characters (as the payload detectors bound their work)
MAX_VALUES = 256
MAX_CHARS = 4096
_BODY_CHARS = 65536


@dataclass(frozen=True, slots=True)
class Witness:
    """Where the syntax of a named kind was found: ``kind``, ``location`` (``query:id``, ``json:$.a``), a ``fragment`` around it."""

    kind: str
    location: str
    fragment: str

    def describe(self) -> str:
        return f"{self.kind} syntax in {self.location} ({self.fragment!r})"


def named_kinds(attack_kind: Mapping[str, float] | None) -> tuple[str, ...]:
    """The kinds the model names: its top kind and every kind with at least KIND_SHARE; every kind when it names none."""
    if not attack_kind:
        return ("probe",)
    top = max(attack_kind, key=lambda k: attack_kind[k])
    named = [top, *(k for k, p in attack_kind.items() if k != top and p >= KIND_SHARE)]
    return tuple(k if k in SYNTAX else "probe" for k in named)


def values(features: Features) -> Iterator[tuple[str, str, bool]]:
    """``(location, value, form-encoded)`` for every value the client chose that can carry an injection (module docstring)."""
    if features.path and features.path != "/":
        yield "path", features.path, False
    if features.query:
        for location, value, plus, _, _ in pairs(features.query, "query", True):
            yield location, value, plus
    body = features.body_prefix[:_BODY_CHARS]
    if body:
        for location, value, plus, _, _ in body_values(features.header_map.get("content-type", ""), body, whole=True):
            yield location, value, plus
    cookie = features.header_map.get("cookie")
    if cookie:
        for part in cookie.split(";"):
            name, eq, value = part.strip().partition("=")
            if eq and not is_token(value):
                for leaf in cookie_values(value):
                    yield f"cookie:{name}", leaf, False
    for name, value in features.header_map.items():
        if name not in DESCRIPTIVE and suspicious(value):  # the cookie header is descriptive: read above, value by value
            yield f"header:{name}", value, False


def cookie_values(value: str) -> list[str]:
    """A cookie's values as the script that wrote it reads them back: the string values of a JSON document, the values
    of ``a=1&b=2`` pairs, or the values of a JavaScript object literal (``{stamp:'x',necessary:true}``); any other
    value, or one whose structure does not hold to the end (a quote closed early, a pair with a space), whole.

    Consent managers keep their state so (OneTrust ``OptanonConsent`` as pairs, Cookiebot ``CookieConsent`` as an
    object literal): their quotes, braces and ``&`` are the serialization a script wrote, on every request of a person
    who clicked the banner, not syntax a value breaks out with."""
    text = unquote(value) if "%" in value else value
    if text[:1] in ("{", "["):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict | list):
            return [leaf for _, leaf, _, _, _ in json_values(text.encode())]
        if _OBJECT_LITERAL.fullmatch(text):
            return [leaf for m in _LITERAL_VALUE.finditer(text[1:-1]) if (leaf := next((g for g in m.groups() if g), ""))]
    if "&" in value and _PAIRS.fullmatch(value):
        return [unquote_plus(v) for _, _, v in (pair.partition("=") for pair in value.split("&")) if v]
    return [value]


def syntax_witness(features: Features, kinds: Iterable[str]) -> Witness | None:
    """The first value holding the syntax of one of ``kinds`` (:func:`named_kinds`), or None when no value does."""
    patterns = [(kind, SYNTAX[kind]) for kind in dict.fromkeys(kinds) if kind in SYNTAX]
    if not patterns:
        return None
    for i, (location, value, plus) in enumerate(values(features)):
        if i >= MAX_VALUES:
            break
        for text, _ in variants(value[:MAX_CHARS], plus=plus):
            for kind, pattern in patterns:
                m = pattern.search(text)
                if m is not None:
                    return Witness(kind, location, fragment(text, m.start(), m.end()))
    return None
