"""Where a request carries a payload: what a block on P(attack) must be able to name.

The model reads the whole request and says how likely it is to be an attack, not where
the attack is. A block is evidence only when the request carries something a client put
there to be interpreted: a query, a body, a cookie value or a header value that can hold
an injection, or a path with injection characters in it. :func:`payload_carriers` lists
those places, the ones holding injection characters first, so the reason of a block can
name where; a request with none of them (``GET /products/12`` from a browser, whatever
headers describe the browser) carries no payload and is at most challenged.

What counts, and why:

* **query**: any query (what is asked, parameter by parameter);
* **body**: any body (a form field, a JSON document, a multipart part, raw bytes);
* **cookie**: a cookie whose value is more than a token (letters, digits and ``._~+/=:-``):
  session ids, analytics ids and the gateway's own pass cookie are tokens and carry
  nothing; a quoted, percent-encoded or JSON value can;
* **header**: a header value with injection characters (quotes, angle brackets, braces,
  ``$``, backquote, ``|``, backslash, ``../``, SQL comments, control characters, or their
  percent-encodings), in any header but those that only describe the client (Accept,
  Accept-Language, Sec-Fetch-*, client hints, ...) or the connection as a front proxy writes it
  (CF-Visitor, Via, Forwarded, trace ids) — User-Agent, Referer, X-Forwarded-Host
  and custom headers are where header injections go;
* **path**: a path with injection characters (raw or percent-decoded), encoded whitespace or
  shell separators, an embedded URL, an LDAP filter or a wildcard. A path that only names a
  resource (``/products/12``, ``/backup/``) is not a payload even when the model finds the
  resource suspicious: probing for files is challenged, and a client that keeps probing
  without solving earns its block.

It runs for requests the model finds suspicious (at or above the block threshold, or in
the challenge band for ``policy.suspicion_needs_syntax``) and for requests a rule challenges
(``rules.score_challenged``: only one that carries a payload is scored), not for the common case.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus

from gateway.features import Features

# characters and sequences injections need and ordinary values rarely hold, raw or percent-encoded
_INJECTION = re.compile(r"['\"<>`{}$|\\\x00-\x08\x0b\x0c\x0e-\x1f]|\.\.[/\\]|--|/\*|%(?:2[27]|3[cCeE]|60|7[bBcCdD]|5[cC]|00|0[aAdD])")
# what a path holds only when something is smuggled in it: encoded whitespace and shell/SQL separators, an embedded
# URL (server-side request forgery), an LDAP filter, a wildcard (the ordinary ``/products/12`` holds none of them)
_PATH_PAYLOAD = re.compile(r"%(?:0[09]|20|2[346]|3[bB]|7[cC]|60)|https?(?::|%3[aA])|\)\(|\*|\s")
# a cookie value that is only a token (ids, signed tokens, base64) carries no payload
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=:-]*")
# headers that only describe the client software or the request's framing: where header injections do not go
DESCRIPTIVE = frozenset({
    "host", "accept", "accept-language", "accept-encoding", "connection", "keep-alive", "te", "priority", "dnt",
    "sec-gpc", "upgrade-insecure-requests", "cache-control", "pragma", "content-length", "transfer-encoding",
    "content-type", "cookie", "sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform", "sec-ch-ua-platform-version",
    "sec-ch-ua-full-version-list", "sec-ch-ua-arch", "sec-ch-ua-model", "sec-ch-ua-bitness", "sec-ch-ua-wow64",
    "sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "sec-fetch-user", "if-none-match", "if-modified-since",
    "authorization", "proxy-authorization", "upgrade", "sec-websocket-key", "sec-websocket-version",
    "sec-websocket-extensions", "sec-websocket-protocol", "expect", "range", "if-range",
    # what the fronts users deploy write about the connection (Cloudflare's CF-Visitor is JSON on every request)
    "cf-visitor", "cf-connecting-ip", "cf-ipcountry", "cf-ray", "cdn-loop", "via", "forwarded", "x-forwarded-proto",
    "x-forwarded-port", "x-real-ip", "x-request-id", "x-amzn-trace-id", "x-cloud-trace-context", "traceparent", "tracestate",
    "x-envoy-expected-rq-timeout-ms", "x-envoy-attempt-count", "x-envoy-external-address",
})
_MAX_FRAGMENT = 80
_MAX_FIELDS = 64


def suspicious(value: str) -> bool:
    """The value holds injection characters, as sent or percent-decoded."""
    if _INJECTION.search(value) is not None:
        return True
    if "%" in value or "+" in value:
        return _INJECTION.search(unquote_plus(value)) is not None
    return False


def is_token(value: str) -> bool:
    """A cookie value that is only a token (an id, a signed token, base64): it carries no payload."""
    return _TOKEN.fullmatch(value) is not None


def _fragment(value: str) -> str:
    text = value if len(value) <= _MAX_FRAGMENT else value[:_MAX_FRAGMENT] + "…"
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def _fields(text: str, sep: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(sep, _MAX_FIELDS)[:_MAX_FIELDS]:
        name, _, value = part.strip().partition("=")
        out.append((name, value))
    return out


def payload_carriers(features: Features) -> tuple[tuple[str, str], ...]:
    """(location, fragment) of every place the request carries a payload; those with injection characters first.

    Locations read ``path``, ``query``, ``query:NAME``, ``body``, ``form:NAME``, ``cookie:NAME`` and
    ``header:NAME``; an empty tuple means the request carries no payload at all.
    """
    marked: list[tuple[str, str]] = []
    plain: list[tuple[str, str]] = []
    path = features.path
    if suspicious(path) or _PATH_PAYLOAD.search(path) is not None or ("%" in path and suspicious(unquote(path))):
        marked.append(("path", _fragment(path)))
    if features.query:
        fields = _fields(features.query, "&")
        hits = [(f"query:{_fragment(unquote_plus(name))}", _fragment(unquote_plus(value))) for name, value in fields if suspicious(value)
                or suspicious(name)]
        marked += hits
        if not hits:
            plain.append(("query", _fragment(features.query)))
    body = features.body_prefix
    if body or features.chunked or (features.content_length or 0) > 0:
        content_type = features.header_map.get("content-type", "").lower()
        text = body.decode("latin-1")
        hits = []
        if "application/x-www-form-urlencoded" in content_type:
            hits = [(f"form:{_fragment(unquote_plus(name))}", _fragment(unquote_plus(value))) for name, value in _fields(text, "&")
                    if suspicious(value) or suspicious(name)]
        marked += hits
        if not hits:
            (marked if suspicious(text) else plain).append(("body", _fragment(text)))
    cookie = features.header_map.get("cookie")
    if cookie:
        for name, value in _fields(cookie, ";"):
            if not is_token(value):
                (marked if suspicious(value) else plain).append((f"cookie:{_fragment(name)}", _fragment(value)))
    for name, value in features.header_map.items():
        if name not in DESCRIPTIVE and suspicious(value):
            marked.append((f"header:{name}", _fragment(value)))
    return (*marked, *plain)


def describe(carriers: tuple[tuple[str, str], ...], limit: int = 3) -> str:
    """``"query:id ('1 OR 1=1'), cookie:prefs"``: where the payload is, for a reason."""
    shown = [f"{location} ({fragment!r})" if i == 0 else location for i, (location, fragment) in enumerate(carriers[:limit])]
    more = len(carriers) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
