"""Feature version 2: two inputs with nothing in common, one per question.

- **Payload input** (*what is asked*): the method, the target as sent and decoded, the
  body prefix (and its form decoding), the content type, the Referer's path and query,
  cookie values and the values of headers that carry data rather than describe the
  client (custom ``X-…`` values, ``X-Forwarded-Host`` when it is not a host name, any
  client-describing header whose value holds injection characters). It never sees the
  user agent, the header names or their order, the HTTP version or the client's history.
- **Client input** (*who is asking*): header names in wire order, case-folded, without
  infrastructure and hop-by-hop headers (``Connection``, ``Keep-Alive``, ``TE``…, which
  fronts remove or set) and without ``Host``; the values that describe the client
  (User-Agent, Accept*, client hints, Fetch Metadata, Priority, DNT, Sec-GPC…); whether a
  front added ``X-Forwarded-*`` (then the HTTP version is the front's and is not read);
  the client's window statistics. It never sees the target, the body or any value that
  carries data.

Both are encoded with ``gateway.features.encoding`` (bytes and HTTP phrases). Part of the
feature contract: a change here needs a FEATURE_VERSION bump and a retrained model.
"""

from __future__ import annotations

import functools
import operator
import re
from typing import NamedTuple

from gateway.features.numeric import _BOT_RE, _LIBRARY_PREFIXES, _ch_major, _entropy, _log, _major, _suspicious
from gateway.features.request import Features
from gateway.features.serialization import _decode_target, body_text, decoded_target, hint_lines

# Headers a front, a CDN or this gateway adds or rewrites: their names and values say nothing about the
# client and differ per deployment. Exact names and name prefixes.
FRONT_HEADERS = frozenset({
    "x-forwarded-for", "x-forwarded-proto", "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-server",
    "x-forwarded-ssl", "x-forwarded-scheme", "forwarded", "via", "x-real-ip", "x-request-id", "x-amzn-trace-id",
    "cf-connecting-ip", "cf-ray", "cf-ipcountry", "cf-visitor", "cdn-loop", "true-client-ip", "x-client-ip",
    "x-cloud-trace-context", "traceparent", "tracestate", "x-envoy-external-address", "x-scheme", "x-url-scheme",
    "fastly-client-ip", "x-azure-clientip", "x-azure-ref", "x-arr-log-id", "x-original-forwarded-for", "b3", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled", "x-b3-parentspanid", "x-haproxy-server-state",
})
FRONT_PREFIXES = ("x-envoy-", "x-amzn-", "x-forwarded-", "cf-", "x-goog-", "x-azure-", "x-vercel-", "x-datadog-")
# Connection-level headers: set, removed or rewritten by every hop (fronts drop them, HTTP/2 forbids most).
HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-connection", "te", "upgrade", "transfer-encoding",
                         "content-length", "host", "trailer", "http2-settings"})
# Headers whose values describe the client; they go to the client input (and to the payload input only when
# the value holds injection characters, see ``_PAYLOAD_CHARS``).
CLIENT_HEADERS = frozenset({
    "user-agent", "accept", "accept-language", "accept-encoding", "sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform",
    "sec-ch-ua-platform-version", "sec-ch-ua-full-version-list", "sec-ch-ua-arch", "sec-ch-ua-bitness", "sec-ch-ua-model",
    "sec-ch-ua-full-version", "sec-ch-ua-wow64", "sec-ch-prefers-color-scheme", "sec-fetch-site", "sec-fetch-mode",
    "sec-fetch-dest", "sec-fetch-user", "sec-fetch-storage-access", "priority", "dnt", "sec-gpc", "upgrade-insecure-requests",
    "cache-control", "pragma", "x-requested-with", "origin", "save-data", "purpose", "sec-purpose", "x-purpose",
    "downlink", "ect", "rtt", "device-memory", "viewport-width", "dpr", "accept-charset",
})
# Headers whose values are payload and have their own line (or none: credentials are never serialized).
PAYLOAD_OWN = frozenset({"cookie", "referer", "content-type", "authorization", "proxy-authorization"})
# Hostname-shaped headers: their value reaches the payload input only when it is not a plain host name.
HOST_HEADERS = frozenset({"x-forwarded-host", "x-host", "x-original-host", "x-forwarded-server"})
_HOSTNAME_RE = re.compile(r"[A-Za-z0-9.\-:\[\]]*")
# Characters no browser or library puts in a client-describing header value (JSON client hints aside:
# their quotes are expected). A value with one is carrying something, and the payload input reads it.
_PAYLOAD_CHARS = re.compile(r"[{}<>`$\\|']|\(\)|%[0-9a-fA-F]{2}|\.\./")

_PLAIN_COOKIE = re.compile(r"[A-Za-z0-9._~+/=%:-]*")
_MULTIPART_NOISE = re.compile(r"(?m)^--[^\r\n]*(\r?\n|$)|Content-Disposition: form-data; ")

_MAX_TARGET = 200
_MAX_DECODED = 160
_MAX_METHOD = 24
_MAX_SHORT = 48
_MAX_REFERER = 96
_MAX_COOKIE = 120
_MAX_COOKIE_VALUE = 48
_MAX_OTHER_VALUE = 64
_MAX_OTHER_TOTAL = 160
_MAX_BODY = 200
_MAX_BODY_DECODED = 160
_MAX_NAME = 40
_MAX_NAMES = 32
_MAX_NAMES_LINE = 480
_MAX_UA = 160
_MAX_ACCEPT = 80

PAYLOAD_NUMERIC_NAMES: tuple[str, ...] = (
    "method_get", "method_head", "method_post", "method_put_patch_delete", "method_options", "method_other",
    "path_length", "query_length", "body_length", "path_depth", "query_params",
    "target_entropy", "body_entropy", "target_suspicious_chars", "body_suspicious_chars", "values_suspicious_chars",
    "percent_escapes", "double_encoded", "dot_dot_slash", "nonprintable",
    "content_json", "content_form", "content_multipart", "content_xml", "content_other",
    "has_cookie_values", "has_header_values", "path_extension",
)
CLIENT_NUMERIC_NAMES: tuple[str, ...] = (
    "http_1.0", "http_1.1", "http_2+", "front_forwarded", "header_count", "ua_length",
    "has_user_agent", "has_accept", "has_accept_language", "has_accept_encoding", "has_sec_ch_ua", "has_sec_fetch",
    "has_referer", "has_cookie", "has_authorization", "has_origin", "has_x_requested_with", "has_upgrade_insecure",
    "has_priority", "ua_chromium", "ua_firefox", "ua_safari", "ua_mobile", "ua_botlike", "ua_library", "ua_headless",
    "ch_version_mismatch", "ch_on_non_chromium", "ch_platform_mismatch", "accept_any_on_navigation",
    "client_present", "client_requests", "client_rate", "client_error_ratio", "client_path_diversity",
    "client_gap", "client_challenges_passed",
)
NUM_PAYLOAD = len(PAYLOAD_NUMERIC_NAMES)
NUM_CLIENT = len(CLIENT_NUMERIC_NAMES)
TABLES = [sorted(FRONT_HEADERS), list(FRONT_PREFIXES), sorted(HOP_HEADERS), sorted(CLIENT_HEADERS), sorted(PAYLOAD_OWN),
          sorted(HOST_HEADERS), _PAYLOAD_CHARS.pattern, _PLAIN_COOKIE.pattern, _MULTIPART_NOISE.pattern, list(PAYLOAD_NUMERIC_NAMES), list(CLIENT_NUMERIC_NAMES),
          [_MAX_TARGET, _MAX_DECODED, _MAX_REFERER, _MAX_COOKIE, _MAX_OTHER_TOTAL, _MAX_BODY, _MAX_NAMES_LINE, _MAX_UA]]


def is_front(name: str) -> bool:
    """A header a front or this gateway's hops add (``name`` lower-case)."""
    return name in FRONT_HEADERS or name.startswith(FRONT_PREFIXES)


# ``_PAYLOAD_CHARS`` in pieces: re scans an alternation position by position (2.4 µs for a browser's user agent), a
# bare character class and substring tests in one C pass each (0.9 µs). The same answer for every string (tested).
_PAYLOAD_CHAR_CLASS = re.compile(r"[{}<>`$\\|']")
_PERCENT_HEX = re.compile(r"%[0-9a-fA-F]{2}")


def _carries_payload(value: str) -> bool:
    """Does ``_PAYLOAD_CHARS`` match somewhere in ``value``?"""
    return (_PAYLOAD_CHAR_CLASS.search(value) is not None or "()" in value or "../" in value
            or ("%" in value and _PERCENT_HEX.search(value) is not None))


def _referer_part(value: str) -> str:
    """Path and query of an http(s) Referer (the host is the site's, not the request's payload); anything else raw."""
    low = value[:8].lower()
    if low.startswith("https://") or low.startswith("http://"):
        rest = value.split("://", 1)[1]
        path = rest.partition("/")[2]
        return "/" + path[:_MAX_REFERER]
    return "raw " + value[:_MAX_REFERER]


def _cookie_values(cookie: str) -> str:
    """The cookie pairs, those holding anything but token characters first (a payload appended to a long
    cookie header is not cut off by the bound), each and all bounded."""
    pieces = [p.strip() for p in cookie.split(";")]
    pieces.sort(key=lambda p: _PLAIN_COOKIE.fullmatch(p) is not None)
    parts: list[str] = []
    total = 0
    for piece in pieces:
        if not piece:
            continue
        part = piece[:_MAX_COOKIE_VALUE]
        parts.append(part)
        total += len(part) + 1
        if total >= _MAX_COOKIE:
            break
    return " ".join(parts)[:_MAX_COOKIE]


# How a header's value can reach the payload input (``_payload_values``): always, when it is not a plain host name,
# or when it carries payload characters (a client-describing header)
_ALWAYS, _NOT_HOSTNAME, _CARRYING = 0, 1, 2
_NAME = operator.itemgetter(0)
# the longest header-name sequence (its characters) whose facts are kept; a longer one is computed afresh every time,
# so a client sending kilobytes of names cannot fill the cache with them
_CACHED_NAMES_CHARS = 1024


class _HeaderFacts(NamedTuple):
    """What depends on a request's header names alone, in wire order (the same client sends the same names)."""

    front: bool  # a front added forwarding headers (``forwarded_by_front``)
    client_names: tuple[str, ...]  # ``client_names``
    names_line: str  # the client names as the ``h`` line shows them
    # the headers whose values may reach the payload input, in wire order: (index, ``name=`` as written, _ALWAYS | ...)
    payload_plan: tuple[tuple[int, str, int], ...]


def _header_facts_of(names: tuple[str, ...]) -> _HeaderFacts:
    front = False
    client: list[str] = []
    plan: list[tuple[int, str, int]] = []
    for i, name in enumerate(names):
        key = name.lower()
        infra = is_front(key)
        front = front or infra
        if key not in HOP_HEADERS and not infra:
            client.append(key)
        if key in PAYLOAD_OWN or key in HOP_HEADERS:
            continue
        if key in HOST_HEADERS:
            kind = _NOT_HOSTNAME
        elif infra:
            continue
        else:
            kind = _CARRYING if key in CLIENT_HEADERS else _ALWAYS
        plan.append((i, key[:_MAX_NAME] + "=", kind))
    line = " ".join(n[:_MAX_NAME] for n in client[:_MAX_NAMES])[:_MAX_NAMES_LINE]
    return _HeaderFacts(front, tuple(client), line, tuple(plan))


_header_facts_cached = functools.lru_cache(maxsize=4096)(_header_facts_of)


# the last request's headers and their facts: one request's texts and vectors ask three times for the same tuple
_last_facts: tuple[tuple[tuple[str, str], ...], _HeaderFacts] = ((), _header_facts_of(()))


def _header_facts(headers: tuple[tuple[str, str], ...]) -> _HeaderFacts:
    global _last_facts
    last = _last_facts  # one read: another thread may replace the pair, never half of it
    if last[0] is headers:
        return last[1]
    names = tuple(map(_NAME, headers))
    facts = _header_facts_cached(names) if sum(map(len, names)) <= _CACHED_NAMES_CHARS else _header_facts_of(names)
    _last_facts = (headers, facts)
    return facts


def _payload_values(headers: tuple[tuple[str, str], ...]) -> str:
    """``name=value`` of every header that carries data, bounded each and all."""
    parts: list[str] = []
    total = 0
    for i, prefix, kind in _header_facts(headers).payload_plan:
        value = headers[i][1]
        if kind == _CARRYING:
            if not _carries_payload(value):
                continue
        elif kind == _NOT_HOSTNAME and _HOSTNAME_RE.fullmatch(value):
            continue
        part = prefix + value[:_MAX_OTHER_VALUE]
        parts.append(part)
        total += len(part) + 1
        if total >= _MAX_OTHER_TOTAL:
            break
    return " ".join(parts)[:_MAX_OTHER_TOTAL]


def payload_text(features: Features) -> str:
    """The payload serialization: ``METHOD target`` (raw), ``~decoded``, ``t`` content type, ``r`` referer path,
    ``o`` cookie values, ``x`` payload-carrying header values, ``b`` body prefix and ``~decoded`` form body."""
    return payload_parts(features)[0]


def payload_parts(features: Features) -> tuple[str, str, str]:
    """(the payload serialization, the decoded target, the payload-carrying header values): what the text and the
    numeric vector both read, computed once."""
    hm = features.header_map
    target = features.target
    lines = [f"{features.method[:_MAX_METHOD]} {target[:_MAX_TARGET]}"]
    full = target
    if "%" in target or "+" in features.query:
        full = decoded = decoded_target(features)
        if decoded != target:
            lines.append("~" + decoded[:_MAX_DECODED])
    get = hm.get
    value = get("content-type")
    if value is not None:
        lines.append("t " + value[:_MAX_SHORT])
    value = get("referer")
    if value is not None:
        lines.append("r " + _referer_part(value))
    value = get("cookie")
    if value:
        lines.append("o " + _cookie_values(value))
    other = _payload_values(features.headers)
    if other:
        lines.append("x " + other)
    if features.body_prefix:
        raw = features.body_prefix[:_MAX_BODY * 4].decode("latin-1")
        # a multipart body without its boundaries and part-header boilerplate: the parts' content is the payload
        body = (_MULTIPART_NOISE.sub("", raw) if "multipart" in get("content-type", "") else raw)[:_MAX_BODY]
        lines.append("b " + body)
        if ("%" in body or "+" in body) and "urlencoded" in get("content-type", ""):
            decoded = _decode_target(body, True)
            if decoded != body:
                lines.append("~" + decoded[:_MAX_BODY_DECODED])
    return "\n".join(lines), full, other


def client_names(features: Features) -> list[str]:
    """The client's header names in wire order, lower-case, without front, hop-by-hop and ``Host`` headers."""
    return list(_header_facts(features.headers).client_names)


def forwarded_by_front(features: Features) -> bool:
    """Did a front add forwarding headers (so the HTTP version and connection headers are the front's)?"""
    return _header_facts(features.headers).front


_CLIENT_LINES = (("user-agent", "u ", _MAX_UA), ("accept", "a ", _MAX_ACCEPT), ("accept-language", "l ", _MAX_SHORT),
                 ("accept-encoding", "e ", _MAX_SHORT))
_FLAG_HEADERS = ("priority", "dnt", "sec-gpc", "upgrade-insecure-requests", "x-requested-with", "cache-control", "pragma",
                 "save-data", "sec-purpose", "purpose")


def client_text(features: Features) -> str:
    """The client serialization: ``h`` names, ``u``/``a``/``l``/``e`` values, ``c`` client hints, ``f`` Fetch Metadata,
    ``k`` the small client flags (priority, DNT, …, origin and credential presence)."""
    hm = features.header_map
    get = hm.get
    facts = _header_facts(features.headers)
    version = "front" if facts.front else features.http_version[:8]
    lines = [f"h {version} {facts.names_line}"]
    for name, prefix, limit in _CLIENT_LINES:
        value = get(name)
        if value is not None:
            lines.append(prefix + value[:limit])
    lines += hint_lines(hm)
    flags = [f"{n}={get(n, '')[:24]}" for n in _FLAG_HEADERS if n in hm]
    if "origin" in hm:
        flags.append("origin")
    if "cookie" in hm:
        flags.append("cookie")
    auth = get("authorization")
    if auth is not None:
        flags.append("auth=" + auth.split(" ", 1)[0][:16])
    if flags:
        lines.append("k " + " ".join(flags))
    return "\n".join(lines)


@functools.lru_cache(maxsize=4096)
def ua_facts(ua: str) -> tuple[int, bool, bool, bool, bool, bool, bool, bool]:
    """(Chromium major, Chromium, Firefox, Safari/WebKit, mobile, a library, bot-like, headless)."""
    ual = ua.lower()
    chromium_major = _major(ua, "Chrome/") or _major(ua, "CriOS/")
    is_chromium = chromium_major > 0 or "Chromium/" in ua
    is_firefox = not is_chromium and ("Firefox/" in ua or "FxiOS/" in ua)
    is_safari = not is_chromium and not is_firefox and "AppleWebKit/" in ua
    return (chromium_major, is_chromium, is_firefox, is_safari, "Mobile" in ua or "Android" in ua,
            ual.startswith(_LIBRARY_PREFIXES), _BOT_RE.search(ual) is not None, "headless" in ual or "phantomjs" in ual)


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_EXT_RE = re.compile(r"\.[A-Za-z0-9]{1,6}$")


_KNOWN_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# the six method features of each known method (any other: method_other alone)
_METHOD_FLAGS = {m: (float(m == "GET"), float(m == "HEAD"), float(m == "POST"), float(m in ("PUT", "PATCH", "DELETE")),
                     float(m == "OPTIONS"), 0.0) for m in _KNOWN_METHODS}
_OTHER_METHOD = (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
_CONTENT_KINDS = ("json", "urlencoded", "multipart", "xml")
_NO_CONTENT_TYPE = (0.0, 0.0, 0.0, 0.0, 0.0)


def _content_flags(ctype: str) -> tuple[float, ...]:
    """content_json, content_form, content_multipart, content_xml, content_other of a lower-case content type."""
    if not ctype:
        return _NO_CONTENT_TYPE
    kinds = [k in ctype for k in _CONTENT_KINDS]
    return (*map(float, kinds), float(not any(kinds)))


def payload_vector(features: Features, other_values: str | None = None, decoded: str | None = None) -> list[float]:
    """The payload's numeric features, in ``PAYLOAD_NUMERIC_NAMES`` order, each roughly within [0, 1]
    (``other_values`` and ``decoded``: ``payload_parts``' when already computed)."""
    hm = features.header_map
    dec = (decoded if decoded is not None else decoded_target(features))[:1024]
    body = body_text(features)
    target = features.target
    path = features.path
    body_len = features.content_length if features.content_length is not None else len(features.body_prefix)
    values = other_values if other_values is not None else _payload_values(features.headers)
    query = features.query
    return [
        *_METHOD_FLAGS.get(features.method, _OTHER_METHOD),
        _log(len(path), 6.0), _log(len(query), 6.0), _log(body_len, 12.0), min(1.0, path.count("/") / 10.0),
        min(1.0, (query.count("&") + 1) / 10.0) if query else 0.0,
        _entropy(dec), _entropy(body), _suspicious(dec), _suspicious(body), _suspicious(values),
        _log(target.count("%") + body.count("%"), 5.0), float("%25" in target or "%25" in body),
        min(1.0, (dec.count("../") + dec.count("..\\") + body.count("../")) / 4.0),
        float(_CONTROL_RE.search(dec) is not None),
        *_content_flags(hm.get("content-type", "").lower()),
        float(bool(hm.get("cookie"))), float(bool(values)), float(_EXT_RE.search(path) is not None),
    ]


# the has_* client features that are a header's presence alone, in CLIENT_NUMERIC_NAMES order
_PRESENT_AFTER_UA = ("accept", "accept-language", "accept-encoding")
_PRESENT_AFTER_FETCH = ("referer", "cookie", "authorization", "origin", "x-requested-with", "upgrade-insecure-requests", "priority")


def client_vector(features: Features) -> list[float]:
    """The client's numeric features, in ``CLIENT_NUMERIC_NAMES`` order, each roughly within [0, 1]."""
    hm = features.header_map
    ua = hm.get("user-agent", "")
    facts = _header_facts(features.headers)
    front = facts.front
    version = features.http_version
    names = facts.client_names
    chromium_major, is_chromium, is_firefox, is_safari, mobile, is_library, is_botlike, is_headless = (
        ua_facts(ua) if len(ua) <= 1024 else ua_facts.__wrapped__(ua))
    ch = hm.get("sec-ch-ua")
    ch_major = _ch_major(ch) if ch else 0
    platform = hm.get("sec-ch-ua-platform", "").strip('"').lower()
    platform_mismatch = bool(platform) and (
        (platform == "windows" and "Windows" not in ua) or (platform == "macos" and "Mac OS X" not in ua)
        or (platform == "android" and "Android" not in ua) or (platform == "linux" and "Linux" not in ua))
    is_browser = (is_chromium or is_firefox or is_safari) and not is_botlike and not is_library
    mode = hm.get("sec-fetch-mode")
    accept = hm.get("accept", "")
    client = features.client
    if client is not None:
        stats = [1.0, _log(client.requests, 8.0), _log(client.rate_per_min, 7.0), min(1.0, client.error_ratio),
                 min(1.0, client.path_diversity), _log(client.mean_gap_s, 8.0), min(client.challenges_passed, 5) / 5]
    else:
        stats = [0.0] * 7
    return [
        float(not front and (version.startswith("1.0") or version.startswith("0.9"))), float(not front and version == "1.1"),
        float(not front and version[:1] in ("2", "3")), float(front),
        min(1.0, len(names) / 32.0), _log(len(ua), 6.0),
        float(bool(ua)), *map(float, map(hm.__contains__, _PRESENT_AFTER_UA)),
        float(ch is not None), float("sec-fetch-mode" in hm or "sec-fetch-site" in hm),
        *map(float, map(hm.__contains__, _PRESENT_AFTER_FETCH)),
        float(is_chromium), float(is_firefox), float(is_safari), float(mobile), float(is_botlike), float(is_library),
        float(is_headless),
        float(is_chromium and ch_major > 0 and chromium_major > 0 and ch_major != chromium_major),
        float(ch is not None and not is_chromium), float(platform_mismatch),
        float(is_browser and mode == "navigate" and accept.strip() == "*/*"),
        *stats,
    ]
