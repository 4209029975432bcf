"""The canonical text serialization of a request: one bounded line per field, fixed order.

Part of the feature contract (see ``gateway.features``): changing anything here needs
a FEATURE_VERSION bump and a retrained model.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote, unquote_plus

from gateway.features.request import Features

# Per-field budgets of the text serialization, in characters. They keep the common
# browser request at ~250-350 ids after phrase encoding and any request under 512.
_MAX_TARGET = 160
_MAX_DECODED = 128
_MAX_NAMES = 32
# Added without a FEATURE_VERSION bump: no request the model was trained or pinned on reaches them (0 of 30,000
# generated train/calib rows changes, nor any golden request); before them a client's 64 KiB of header names
# became a 56,000-character text.
_MAX_NAME = 48          # one header name (the longest in the generated data: 25)
_MAX_NAMES_LINE = 640   # all of them (generated data: at most 278)
_MAX_METHOD = 24
_MAX_VERSION = 8
_MAX_UA = 160
_MAX_ACCEPT = 72
_MAX_SHORT = 40
_MAX_CH_UA = 96
_MAX_REFERER = 64
_MAX_OTHER_VALUE = 48
_MAX_OTHER_TOTAL = 128
_MAX_BODY = 160
_MAX_BODY_DECODED = 112

# Headers added by load balancers, CDNs and this gateway's own hops. They say nothing
# about the client (and differ per deployment), so they are left out of the names
# line, the order signatures and the header counts.
INFRA_HEADERS = frozenset({
    "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port",
    "x-forwarded-prefix", "forwarded", "via", "x-real-ip", "x-request-id", "x-amzn-trace-id",
    "cf-connecting-ip", "cf-ray", "cf-ipcountry", "cf-visitor", "true-client-ip",
    "x-cloud-trace-context", "traceparent", "tracestate", "x-envoy-external-address",
})

# Headers whose values have their own line (or are summarised as flags); every other
# header's value goes, truncated, on the "x" line where injections in headers show up.
# Cookie and Authorization values never enter the serialization (it is logged).
OWN_LINE_HEADERS = frozenset({
    "host", "user-agent", "accept", "accept-language", "accept-encoding", "sec-ch-ua",
    "sec-ch-ua-mobile", "sec-ch-ua-platform", "sec-fetch-site", "sec-fetch-mode",
    "sec-fetch-dest", "sec-fetch-user", "content-type", "referer", "cookie", "authorization",
    "content-length", "connection", "upgrade-insecure-requests", "cache-control", "pragma",
    "priority", "te", "dnt", "origin", "if-none-match", "if-modified-since", "transfer-encoding",
    "keep-alive", "sec-gpc", "x-requested-with", "proxy-authorization",
})


def _decode_target(text: str, plus: bool) -> str:
    """Percent-decode (twice at most, as double encoding is a classic evasion)."""
    out = unquote_plus(text, encoding="latin-1") if plus else unquote(text, encoding="latin-1")
    if "%" in out and out != text:
        again = unquote_plus(out, encoding="latin-1") if plus else unquote(out, encoding="latin-1")
        return again
    return out


def decoded_target(features: Features) -> str:
    """Path percent-decoded and query form-decoded ('+' is a space there)."""
    path, query = features.path, features.query
    dpath = _decode_target(path, False) if "%" in path else path
    if not query:
        return dpath
    dquery = _decode_target(query, True) if ("%" in query or "+" in query) else query
    return f"{dpath}?{dquery}"


def body_text(features: Features) -> str:
    """The body prefix as text (latin-1, byte-preserving), bounded like its serialization line."""
    return features.body_prefix[:_MAX_BODY].decode("latin-1") if features.body_prefix else ""


# header values serialized as they are (truncated), in this order, each on a line of its own
_PLAIN_LINES = (("user-agent", "u ", _MAX_UA), ("accept", "a ", _MAX_ACCEPT), ("accept-language", "l ", _MAX_SHORT),
                ("accept-encoding", "e ", _MAX_SHORT))


def hint_lines(hm: Mapping[str, str]) -> list[str]:
    """The client-hint line (``c ...``) and the Fetch Metadata line (``f ...``) of a request's header map, when it has them."""
    get = hm.get
    out = []
    value = get("sec-ch-ua")
    if value is not None or "sec-ch-ua-platform" in hm:
        out.append(f"c {(value or '')[:_MAX_CH_UA]}|{get('sec-ch-ua-mobile', '')[:4]}|{get('sec-ch-ua-platform', '')[:16]}")
    if "sec-fetch-mode" in hm or "sec-fetch-site" in hm or "sec-fetch-dest" in hm:
        out.append(f"f {get('sec-fetch-site', '-')[:16]} {get('sec-fetch-mode', '-')[:16]} "
                   f"{get('sec-fetch-dest', '-')[:16]} {get('sec-fetch-user', '-')[:4]}")
    return out


def serialize(features: Features) -> str:
    """The canonical text the model reads: one line per field, fixed order, bounded.

    Lines (absent fields are left out; the model sees their absence):

    - ``METHOD target`` — raw, as sent; then ``~decoded`` when decoding changes it;
    - ``h VERSION names…`` — header names, lower-cased, in wire order (infrastructure
      headers such as X-Forwarded-For left out);
    - ``u`` user agent, ``a`` accept, ``l`` accept-language, ``e`` accept-encoding;
    - ``c`` sec-ch-ua ``|`` mobile ``|`` platform; ``f`` sec-fetch site mode dest user;
    - ``t`` content type; ``r`` referer as ``same PATH`` / ``cross HOST/PATH`` (or
      ``raw VALUE`` when it is not an http(s) URL);
    - ``k`` credentials present (``cookie``, the authorization scheme) — never values;
    - ``x`` other header values, ``name=value``, each and all truncated;
    - ``b`` body prefix; then ``~decoded`` for form bodies when decoding changes it.
    """
    hm = features.header_map
    target = features.target
    lines = [f"{features.method[:_MAX_METHOD]} {target[:_MAX_TARGET]}"]
    if "%" in target or ("+" in features.query):
        decoded = decoded_target(features)
        if decoded != target:
            lines.append("~" + decoded[:_MAX_DECODED])
    names = [n.lower() for n, _ in features.headers]
    shown = " ".join([n[:_MAX_NAME] for n in names if n not in INFRA_HEADERS][:_MAX_NAMES])
    lines.append(f"h {features.http_version[:_MAX_VERSION]} " + shown[:_MAX_NAMES_LINE])
    get = hm.get
    for name, prefix, limit in _PLAIN_LINES:
        value = get(name)
        if value is not None:
            lines.append(prefix + value[:limit])
    lines += hint_lines(hm)
    value = get("content-type")
    if value is not None:
        lines.append("t " + value[:_MAX_SHORT])
    value = get("referer")
    if value is not None:
        lines.append("r " + _referer(value, features.host))
    if "cookie" in hm or "authorization" in hm:
        auth = get("authorization")
        scheme = auth.split(" ", 1)[0][:16] if auth else ""
        lines.append("k" + (" cookie" if "cookie" in hm else "") + (f" auth={scheme}" if auth is not None else ""))
    other = _other_values(features.headers)
    if other:
        lines.append("x " + other)
    if features.body_prefix:
        body = body_text(features)
        lines.append("b " + body)
        if ("%" in body or "+" in body) and "urlencoded" in get("content-type", ""):
            decoded = _decode_target(body, True)
            if decoded != body:
                lines.append("~" + decoded[:_MAX_BODY_DECODED])
    return "\n".join(lines)


def _referer(value: str, host: str) -> str:
    """``same PATH`` / ``cross HOST/PATH`` for a URL; anything else verbatim (``raw VALUE``).

    A referer that is not an http(s) URL is what injections in this header look like,
    so it is kept as sent rather than parsed.
    """
    low = value[:8].lower()
    if not (low.startswith("https://") or low.startswith("http://")):
        return "raw " + value[:_MAX_REFERER]
    rest = value.split("://", 1)[1]
    ref_host, slash, path = rest.partition("/")
    if host and ref_host == host:
        return "same /" + path[:_MAX_REFERER]
    return "cross " + (ref_host + slash + path)[:_MAX_REFERER]


def _other_values(headers: tuple[tuple[str, str], ...]) -> str:
    parts: list[str] = []
    total = 0
    for name, value in headers:
        key = name.lower()
        if key in OWN_LINE_HEADERS or key in INFRA_HEADERS:
            continue
        part = f"{key}={value[:_MAX_OTHER_VALUE]}"
        parts.append(part)
        total += len(part) + 1
        if total >= _MAX_OTHER_TOTAL:
            break
    return " ".join(parts)[:_MAX_OTHER_TOTAL]
