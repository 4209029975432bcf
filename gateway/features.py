"""Features: the one definition of what the gateway knows about a request.

``Features`` is built once per request by the proxy (or by ``from_record`` for
training, evaluation and replay) and read by rules, the model and the logs.
The canonical text serialization and the numeric vector the model reads live
here too, so that serving and training can never disagree.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

import numpy as np


@dataclass(frozen=True, slots=True)
class ClientStats:
    """Per-client sliding-window statistics (from ``gateway.clients``), before this request."""

    requests: int = 0
    rate_per_min: float = 0.0
    error_ratio: float = 0.0
    path_diversity: float = 0.0
    mean_gap_s: float = 0.0
    challenges_passed: int = 0


@dataclass(frozen=True, slots=True)
class Features:
    """Everything the gateway knows about one request when it decides.

    Strings are decoded from the wire as latin-1 (byte-preserving). ``path`` and
    ``query`` are raw (percent-encoding kept); decoding is the reader's choice.
    ``headers`` keeps wire order and the client's spelling of names;
    ``header_map`` maps lower-case names to values (repeats joined with ", ").
    """

    method: str
    path: str
    query: str = ""
    http_version: str = "1.1"
    headers: tuple[tuple[str, str], ...] = ()
    header_map: Mapping[str, str] = field(default_factory=dict)
    client_ip: str = ""
    peer_ip: str = ""
    host: str = ""
    user_agent: str = ""
    content_length: int | None = None
    chunked: bool = False
    body_prefix: bytes = b""
    scheme: str = "http"
    request_id: str = ""
    received_at: float = 0.0
    client: ClientStats | None = None

    @property
    def target(self) -> str:
        """The request-target as sent: path plus ``?query`` when there is one."""
        return f"{self.path}?{self.query}" if self.query else self.path

    def header(self, name: str, default: str = "") -> str:
        """Value of a header by lower-case name ("" when absent)."""
        return self.header_map.get(name, default)


def make_header_map(headers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Lower-case name -> value, repeated headers joined with ", " (cookie with "; ")."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in out:
            out[key] = out[key] + ("; " if key == "cookie" else ", ") + value
        else:
            out[key] = value
    return out


def _wire(text: Any) -> str:
    """A JSON string as the server would have decoded its bytes (UTF-8 bytes read as latin-1)."""
    s = str(text)
    return s if s.isascii() else s.encode("utf-8", "surrogateescape").decode("latin-1")


def _client_stats(raw: Any) -> ClientStats | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return ClientStats(
            requests=int(raw.get("requests", 0)),
            rate_per_min=float(raw.get("rate_per_min", 0.0)),
            error_ratio=float(raw.get("error_ratio", 0.0)),
            path_diversity=float(raw.get("path_diversity", 0.0)),
            mean_gap_s=float(raw.get("mean_gap_s", 0.0)),
            challenges_passed=int(raw.get("challenges_passed", 0)),
        )
    except (TypeError, ValueError):
        return None


def from_record(record: Mapping[str, Any]) -> Features:
    """Build Features from a logged or generated request record.

    The record shape is the one ``clefgate eval`` reads: ``method``, ``path``
    (with query), ``http_version``, ``headers`` as ``[[name, value], ...]`` in
    wire order, ``body`` (str or null), ``client_ip``; optionally ``client``, the
    per-client window statistics (``ClientStats`` field names); other keys are
    ignored. Non-ASCII text is turned into what the server sees on the wire
    (UTF-8 bytes decoded as latin-1), so records and live requests serialize alike.
    """
    target = _wire(record.get("path") or "/")
    if target.startswith(("http://", "https://")):
        parts = urlsplit(target)
        path, query = parts.path or "/", parts.query
    else:
        path, _, query = target.partition("?")
    headers = tuple((_wire(n), _wire(v)) for n, v in (record.get("headers") or ()))
    header_map = make_header_map(headers)
    body = record.get("body")
    if body is None:
        body_bytes = b""
    elif isinstance(body, bytes):
        body_bytes = body
    else:
        body_bytes = str(body).encode("utf-8", "surrogateescape")
    cl = header_map.get("content-length")
    content_length = int(cl) if cl and cl.strip().isdigit() else (len(body_bytes) if body_bytes else None)
    version = str(record.get("http_version") or "1.1")
    if version.upper().startswith("HTTP/"):
        version = version[5:]
    return Features(
        method=str(record.get("method") or "GET").upper(),
        path=path,
        query=query,
        http_version=version,
        headers=headers,
        header_map=header_map,
        client_ip=str(record.get("client_ip") or ""),
        peer_ip=str(record.get("client_ip") or ""),
        host=header_map.get("host", ""),
        user_agent=header_map.get("user-agent", ""),
        content_length=content_length,
        chunked="chunked" in header_map.get("transfer-encoding", "").lower(),
        body_prefix=body_bytes[:4096],
        request_id=str(record.get("request_id") or ""),
        client=_client_stats(record.get("client")),
    )


# ---------------------------------------------------------------------------- model input
#
# Everything below is the contract between serving and training. Any change to the
# serialization, the phrase vocabulary, the numeric vector or the encoding must bump
# FEATURE_VERSION: a model trained on version N is refused by a runtime at version M.
# FEATURE_FINGERPRINT hashes the tables below, so a table edited without a version bump
# is caught too (the manifest records both).

FEATURE_VERSION = "1"

# Longest model input, in token ids. The encoder groups PATCH ids into one position, so
# this caps the encoder at MAX_TOKENS / PATCH = 64 positions.
MAX_TOKENS = 512
PATCH = 8
# Batches are padded to a multiple of BUCKET ids (a multiple of PATCH), so that
# batches of similar requests share a handful of shapes.
BUCKET = 64

PAD_ID = 0
# ids 1..256 are bytes 0..255; 257 stands for a character that is not a latin-1 byte
# (only reachable from hand-made records); phrases follow.
BYTE_OFFSET = 1
UNKNOWN_ID = 257
PHRASE_OFFSET = 258
VOCAB_SIZE = 512

# Per-field budgets of the text serialization, in characters. They keep the common
# browser request at ~250-350 ids after phrase encoding and any request under 512.
_MAX_TARGET = 160
_MAX_DECODED = 128
_MAX_NAMES = 32
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
_OWN_LINE = frozenset({
    "host", "user-agent", "accept", "accept-language", "accept-encoding", "sec-ch-ua",
    "sec-ch-ua-mobile", "sec-ch-ua-platform", "sec-fetch-site", "sec-fetch-mode",
    "sec-fetch-dest", "sec-fetch-user", "content-type", "referer", "cookie", "authorization",
    "content-length", "connection", "upgrade-insecure-requests", "cache-control", "pragma",
    "priority", "te", "dnt", "origin", "if-none-match", "if-modified-since", "transfer-encoding",
    "keep-alive", "sec-gpc", "x-requested-with", "proxy-authorization",
})

# A fixed phrase vocabulary: HTTP boilerplate that browsers and clients send verbatim.
# Each phrase becomes one id, which shortens a browser request ~2x (the encoder's cost
# is linear in length) while every other character stays a byte, so payloads are seen
# exactly. Order is the id order: append only, and bump FEATURE_VERSION.
PHRASES: tuple[str, ...] = (
    # header names (as they appear, lower-cased, on the names line)
    "user-agent", "accept-language", "accept-encoding", "accept", "connection",
    "upgrade-insecure-requests", "sec-ch-ua-platform", "sec-ch-ua-mobile", "sec-ch-ua",
    "sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "sec-fetch-user", "cache-control",
    "content-type", "content-length", "cookie", "referer", "origin", "priority", "pragma",
    "x-requested-with", "authorization", "if-none-match", "if-modified-since", "keep-alive",
    "sec-gpc", "transfer-encoding", "host",
    # user-agent boilerplate
    "Mozilla/5.0 ", "AppleWebKit/537.36 (KHTML, like Gecko)", "AppleWebKit/605.1.15 (KHTML, like Gecko)",
    "Safari/537.36", "Safari/605.1.15", "Safari/604.1", "(Windows NT 10.0; Win64; x64)",
    "(Macintosh; Intel Mac OS X 10_15_7)", "(X11; Linux x86_64)", "Gecko/20100101 Firefox/",
    "Chrome/", "Mobile Safari/537.36", "Version/", "(iPhone; CPU iPhone OS ", " like Mac OS X)",
    "(Linux; Android ", "Edg/", "compatible; ", "+http://", "+https://", ".0.0.0", "Mobile/15E148",
    "(iPad; CPU OS ", "Firefox/", "OPR/", "SamsungBrowser/", "YaBrowser/", "CriOS/", "FxiOS/",
    # accept* values
    "text/html,application/xhtml+xml,application/xml;q=0.9,", "image/avif,image/webp,image/apng,",
    "image/svg+xml,image/*,*/*;q=0.8", "application/signed-exchange;v=b3;q=0.7", "*/*;q=0.8",
    "image/webp,", "text/css,*/*;q=0.1", "application/json", "application/x-www-form-urlencoded",
    "multipart/form-data", "text/plain", "charset=UTF-8", "gzip, deflate, br, zstd", "gzip, deflate, br",
    "gzip, deflate", "en-US,en;q=0.9", "en-US,en;q=0.5", "en-GB,en;q=0.9",
    # client hints and fetch metadata
    '"Not_A Brand";v="', '"Not A(Brand";v="', '"Not)A;Brand";v="', '"Not/A)Brand";v="',
    '"Chromium";v="', '"Google Chrome";v="', '"Microsoft Edge";v="', '"Windows"', '"macOS"',
    '"Android"', '"Linux"', "same-origin", "same-site", "cross-site", "navigate", "no-cors",
    # URLs
    "https://", "http://", "www.", ".com/", ".html", ".php",
)



def _trie_pattern(words: Sequence[str]) -> str:
    """A regex matching the longest of ``words`` at a position, shaped as a trie.

    Python's ``re`` tries alternatives one by one; factoring common prefixes makes
    each position cost one character-class test instead of one test per phrase.
    """
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        group = "(?:" + "|".join(branches) + ")"
        return group + "?" if "" in node else group

    return build(trie)


_PHRASE_RE = re.compile(_trie_pattern(PHRASES))
_PHRASE_CHAR = {p: chr(0xE000 + i) for i, p in enumerate(PHRASES)}
_PRIVATE_FIRST = 0xE000


def _phrase_char(match: re.Match[str]) -> str:
    return _PHRASE_CHAR[match[0]]


# Canonical header orders (lower-case) of the major client families. A request is
# compared with each: the share of its adjacent known-header pairs that follow the
# family's order. Browsers are consistent; hand-rolled clients spoofing a browser
# user agent usually are not.
ORDER_TEMPLATES: dict[str, tuple[str, ...]] = {
    "chromium": ("host", "connection", "content-length", "cache-control", "sec-ch-ua", "sec-ch-ua-mobile",
                 "sec-ch-ua-platform", "origin", "content-type", "upgrade-insecure-requests", "user-agent", "accept",
                 "sec-fetch-site", "sec-fetch-mode", "sec-fetch-user", "sec-fetch-dest", "referer",
                 "accept-encoding", "accept-language", "cookie", "priority"),
    "firefox": ("host", "user-agent", "accept", "accept-language", "accept-encoding", "content-type",
                "content-length", "origin", "connection", "referer", "cookie", "upgrade-insecure-requests",
                "sec-fetch-dest", "sec-fetch-mode", "sec-fetch-site", "sec-fetch-user", "priority", "pragma",
                "cache-control", "te"),
    "safari": ("host", "content-type", "origin", "accept", "sec-fetch-site", "cookie", "sec-fetch-dest",
               "content-length", "accept-language", "sec-fetch-mode", "user-agent", "referer",
               "accept-encoding", "connection", "priority"),
    "library": ("host", "user-agent", "accept-encoding", "accept", "connection", "authorization",
                "content-type", "content-length"),
}
_ORDER_RANKS = {family: {name: i for i, name in enumerate(order)} for family, order in ORDER_TEMPLATES.items()}

_LIBRARY_PREFIXES = ("curl/", "wget/", "python-", "python/", "go-http-client", "java/", "okhttp", "libwww",
                     "axios/", "node-fetch", "node", "git/", "scrapy", "httpx", "aiohttp", "php", "ruby",
                     "perl", "guzzle", "apache-httpclient", "reqwest", "undici", "got ", "powershell",
                     "http.rb", "faraday", "dart", "rest-client", "restsharp", "winhttp", "libcurl")
_BOT_RE = re.compile(r"bot|crawl|spider|slurp|scan|fetch|https?://|archiv|monitor|preview|feed|rss|check")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# Characters that carry injections; counted with str.count (C speed) rather than a loop.
_SUSPICIOUS = tuple("'\"<>;|`$(){}\\*")

NUMERIC_NAMES: tuple[str, ...] = (
    "http_1.0", "http_1.1", "http_2+",
    "method_get", "method_head", "method_post", "method_put_patch_delete", "method_options", "method_other",
    "header_count", "header_bytes", "names_lowercase", "host_not_first",
    "order_chromium", "order_firefox", "order_safari", "order_library",
    "path_length", "query_length", "body_length", "ua_length", "path_depth",
    "target_entropy", "body_entropy", "target_suspicious_chars", "body_suspicious_chars",
    "percent_escapes", "double_encoded", "dot_dot_slash", "nonprintable",
    "has_user_agent", "has_accept", "has_accept_language", "has_accept_encoding", "has_sec_ch_ua",
    "has_sec_fetch", "has_referer", "has_cookie", "has_authorization", "has_origin",
    "has_x_requested_with", "has_content_type", "has_upgrade_insecure", "has_connection",
    "ua_chromium", "ua_firefox", "ua_safari", "ua_mobile", "ua_botlike", "ua_library", "ua_headless",
    "ch_version_mismatch", "ch_on_non_chromium", "ch_missing_on_chromium", "ch_platform_mismatch",
    "fetch_missing_on_browser", "accept_any_on_navigation", "language_missing_on_browser", "http10_browser",
    "client_present", "client_requests", "client_rate", "client_error_ratio", "client_path_diversity",
    "client_gap", "client_challenges_passed",
)
NUM_FEATURES = len(NUMERIC_NAMES)

FEATURE_FINGERPRINT = hashlib.sha256(json.dumps(
    [FEATURE_VERSION, MAX_TOKENS, PATCH, BUCKET, VOCAB_SIZE, PHRASE_OFFSET, list(PHRASES), NUMERIC_NAMES,
     ORDER_TEMPLATES, sorted(INFRA_HEADERS), sorted(_OWN_LINE)]).encode()).hexdigest()[:16]


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


def _body_text(features: Features) -> str:
    return features.body_prefix[:_MAX_BODY].decode("latin-1") if features.body_prefix else ""


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
    lines = [f"{features.method} {target[:_MAX_TARGET]}"]
    if "%" in target or ("+" in features.query):
        decoded = decoded_target(features)
        if decoded != target:
            lines.append("~" + decoded[:_MAX_DECODED])
    names = [n.lower() for n, _ in features.headers]
    lines.append(f"h {features.http_version} " + " ".join([n for n in names if n not in INFRA_HEADERS][:_MAX_NAMES]))
    get = hm.get
    value = get("user-agent")
    if value is not None:
        lines.append("u " + value[:_MAX_UA])
    value = get("accept")
    if value is not None:
        lines.append("a " + value[:_MAX_ACCEPT])
    value = get("accept-language")
    if value is not None:
        lines.append("l " + value[:_MAX_SHORT])
    value = get("accept-encoding")
    if value is not None:
        lines.append("e " + value[:_MAX_SHORT])
    value = get("sec-ch-ua")
    if value is not None or "sec-ch-ua-platform" in hm:
        lines.append(f"c {(value or '')[:_MAX_CH_UA]}|{get('sec-ch-ua-mobile', '')[:4]}|{get('sec-ch-ua-platform', '')[:16]}")
    if "sec-fetch-mode" in hm or "sec-fetch-site" in hm or "sec-fetch-dest" in hm:
        lines.append(f"f {get('sec-fetch-site', '-')[:16]} {get('sec-fetch-mode', '-')[:16]} "
                     f"{get('sec-fetch-dest', '-')[:16]} {get('sec-fetch-user', '-')[:4]}")
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
        body = _body_text(features)
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
        if key in _OWN_LINE or key in INFRA_HEADERS:
            continue
        part = f"{key}={value[:_MAX_OTHER_VALUE]}"
        parts.append(part)
        total += len(part) + 1
        if total >= _MAX_OTHER_TOTAL:
            break
    return " ".join(parts)[:_MAX_OTHER_TOTAL]


def encode(text: str) -> np.ndarray:
    """Token ids (int64) of a serialization: phrases first, then one id per byte."""
    if not text.isascii():
        # Characters above latin-1 only come from hand-made records; the wire is bytes.
        text = "".join(c if ord(c) < 256 else "\x00" for c in text)
    coded = _PHRASE_RE.sub(_phrase_char, text)
    chars = np.frombuffer(coded.encode("utf-32-le"), dtype=np.uint32)[:MAX_TOKENS].astype(np.int64)
    return np.where(chars >= _PRIVATE_FIRST, chars - (_PRIVATE_FIRST - PHRASE_OFFSET), chars + BYTE_OFFSET)


def decode_ids(ids: np.ndarray) -> str:
    """The text behind token ids (padding dropped): for explanations and debugging."""
    out: list[str] = []
    for i in ids.tolist():
        if i == PAD_ID:
            continue
        if i >= PHRASE_OFFSET:
            out.append(PHRASES[i - PHRASE_OFFSET] if i - PHRASE_OFFSET < len(PHRASES) else "\ufffd")
        elif i == UNKNOWN_ID:
            out.append("\ufffd")
        else:
            out.append(chr(i - BYTE_OFFSET))
    return "".join(out)


_CLOG2C = [0.0] + [c * math.log2(c) for c in range(1, MAX_TOKENS + _MAX_DECODED + 1)]
_NAME = operator.itemgetter(0)
_VALUE = operator.itemgetter(1)


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character of the first MAX_TOKENS, scaled to [0, 1] by 8 bits."""
    text = text[:MAX_TOKENS]
    n = len(text)
    if n < 2:
        return 0.0
    # H = log2(n) - sum(c log2 c) / n, with c log2 c from a table (texts are bounded)
    clog = sum(map(_CLOG2C.__getitem__, Counter(text).values()))
    return max(0.0, (math.log2(n) - clog / n) / 8.0)


def _suspicious(text: str) -> float:
    if not text:
        return 0.0
    return sum(map(text.count, _SUSPICIOUS)) / len(text)


def _order_score(ranks: list[int]) -> float:
    """Share of adjacent pairs in increasing order; 0.5 when there is nothing to compare."""
    if len(ranks) < 2:
        return 0.5
    return sum(map(operator.lt, ranks, ranks[1:])) / (len(ranks) - 1)


def _major(ua: str, marker: str) -> int:
    i = ua.find(marker)
    if i < 0:
        return 0
    j = i + len(marker)
    k = j
    while k < len(ua) and ua[k].isdigit():
        k += 1
    return int(ua[j:k]) if k > j else 0


def _ch_major(ch: str) -> int:
    for brand in ('"Google Chrome";v="', '"Chromium";v="', '"Microsoft Edge";v="'):
        v = _major(ch, brand)
        if v:
            return v
    return 0


def _log(x: float, scale: float) -> float:
    return math.log1p(max(0.0, x)) / scale


def numeric_vector(features: Features) -> list[float]:
    """The numeric features, in ``NUMERIC_NAMES`` order, each roughly within [0, 1]."""
    hm = features.header_map
    ua = features.user_agent or hm.get("user-agent", "")
    ual = ua.lower()
    version = features.http_version
    method = features.method
    all_names = list(map(_NAME, features.headers))
    lowered = [n.lower() for n in all_names]
    if INFRA_HEADERS.isdisjoint(lowered):
        names, lower = all_names, lowered
    else:
        keep = [i for i, n in enumerate(lowered) if n not in INFRA_HEADERS]
        names, lower = [all_names[i] for i in keep], [lowered[i] for i in keep]
    n_headers = len(names)

    chromium_major = _major(ua, "Chrome/") or _major(ua, "CriOS/")
    is_chromium = chromium_major > 0 or "Chromium/" in ua
    is_firefox = not is_chromium and ("Firefox/" in ua or "FxiOS/" in ua)
    is_safari = not is_chromium and not is_firefox and "Safari/" in ua and "Version/" in ua
    is_library = ual.startswith(_LIBRARY_PREFIXES)
    is_botlike = _BOT_RE.search(ual) is not None
    is_browser = (is_chromium or is_firefox or is_safari) and not is_botlike and not is_library

    ch = hm.get("sec-ch-ua")
    ch_major = _ch_major(ch) if ch else 0
    platform = hm.get("sec-ch-ua-platform", "").strip('"').lower()
    platform_mismatch = bool(platform) and (
        (platform == "windows" and "Windows" not in ua) or (platform == "macos" and "Mac OS X" not in ua)
        or (platform == "android" and "Android" not in ua) or (platform == "linux" and "Linux" not in ua))
    mode = hm.get("sec-fetch-mode")
    accept = hm.get("accept", "")
    navigation = mode == "navigate" or (mode is None and method == "GET" and "text/html" in accept)

    # bounded: a long target costs no more than its first kilobyte
    dec = decoded_target(features)[:1024]
    body = _body_text(features)
    target = features.target
    body_len = features.content_length if features.content_length is not None else len(features.body_prefix)

    templates = []
    for ranks in _ORDER_RANKS.values():
        templates.append(_order_score([ranks[n] for n in lower if n in ranks]))

    client = features.client
    if client is not None:
        stats = [1.0, _log(client.requests, 8.0), _log(client.rate_per_min, 7.0), min(1.0, client.error_ratio),
                 min(1.0, client.path_diversity), _log(client.mean_gap_s, 8.0), min(client.challenges_passed, 5) / 5]
    else:
        stats = [0.0] * 7

    flags = [
        version.startswith("1.0") or version.startswith("0.9"), version == "1.1", version[:1] in ("2", "3"),
        method == "GET", method == "HEAD", method == "POST", method in ("PUT", "PATCH", "DELETE"),
        method == "OPTIONS", method not in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"),
    ]
    return [
        *map(float, flags),
        min(1.0, n_headers / 32.0),
        _log(sum(map(len, all_names)) + sum(map(len, map(_VALUE, features.headers))) + 4 * n_headers, 9.0),
        (sum(map(str.islower, names)) / n_headers) if n_headers else 0.0,
        float(bool(lower) and lower[0] != "host"),
        *templates,
        _log(len(features.path), 6.0), _log(len(features.query), 6.0), _log(body_len, 12.0), _log(len(ua), 6.0),
        min(1.0, features.path.count("/") / 10.0),
        _entropy(dec), _entropy(body), _suspicious(dec), _suspicious(body),
        _log(target.count("%") + body.count("%"), 5.0), float("%25" in target or "%25" in body),
        min(1.0, (dec.count("../") + dec.count("..\\") + body.count("../")) / 4.0),
        float(_CONTROL_RE.search(dec) is not None),
        float(bool(ua)), float("accept" in hm), float("accept-language" in hm), float("accept-encoding" in hm),
        float(ch is not None), float("sec-fetch-mode" in hm or "sec-fetch-site" in hm), float("referer" in hm),
        float("cookie" in hm), float("authorization" in hm), float("origin" in hm), float("x-requested-with" in hm),
        float("content-type" in hm), float("upgrade-insecure-requests" in hm), float("connection" in hm),
        float(is_chromium), float(is_firefox), float(is_safari), float("Mobile" in ua or "Android" in ua),
        float(is_botlike), float(is_library), float("headless" in ual or "phantomjs" in ual),
        float(is_chromium and ch_major > 0 and chromium_major > 0 and ch_major != chromium_major),
        float(ch is not None and not is_chromium),
        float(is_browser and is_chromium and chromium_major >= 90 and ch is None),
        float(platform_mismatch),
        float(is_browser and mode is None and "sec-fetch-site" not in hm),
        float(is_browser and navigation and accept.strip() == "*/*"),
        float(is_browser and "accept-language" not in hm),
        float(is_browser and version.startswith("1.0")),
        *stats,
    ]


@dataclass(frozen=True, slots=True)
class ModelInput:
    """What the model reads about one request: the text, its token ids and the numeric vector.

    ``text`` and ``numeric`` are what the decision log records (the training feed);
    ``ids`` is ``encode(text)``.
    """

    text: str
    ids: np.ndarray
    numeric: tuple[float, ...]

    def cache_key(self) -> str:
        """A stable digest of the model-relevant input.

        Numeric values are rounded to two decimals so that per-client statistics
        that drift a little do not defeat a decision cache.
        """
        h = hashlib.blake2b(self.text.encode("utf-8", "surrogatepass"), digest_size=16)
        h.update(",".join(f"{v:.2f}" for v in self.numeric).encode())
        return h.hexdigest()

    def to_json(self) -> dict[str, Any]:
        """The decision-log form: feature version, text and numeric vector (ids are re-derived)."""
        return {"feature_version": FEATURE_VERSION, "text": self.text, "numeric": [round(v, 5) for v in self.numeric]}

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> ModelInput | None:
        """The inverse of ``to_json``; None when it was written by another feature version."""
        if obj.get("feature_version") != FEATURE_VERSION:
            return None
        text, numeric = obj.get("text"), obj.get("numeric")
        if not isinstance(text, str) or not isinstance(numeric, list) or len(numeric) != NUM_FEATURES:
            return None
        return ModelInput(text, encode(text), tuple(float(v) for v in numeric))


def model_input(features: Features) -> ModelInput:
    """Serialize, encode and vectorize one request (the only path from Features to the model)."""
    text = serialize(features)
    return ModelInput(text, encode(text), tuple(numeric_vector(features)))


def bucket_length(n: int) -> int:
    """The padded length for a longest sequence of ``n`` ids (a multiple of BUCKET, ≤ MAX_TOKENS)."""
    return min(MAX_TOKENS, max(BUCKET, -(-n // BUCKET) * BUCKET))


def pad_batch(inputs: Sequence[ModelInput]) -> tuple[np.ndarray, np.ndarray]:
    """Stack inputs into the model's tensors: ``ids`` int64 [B, L] and ``numeric`` float32 [B, N].

    ``L`` is the batch's longest sequence rounded up to the bucket; shorter rows are
    padded with ``PAD_ID`` (the model masks padding).
    """
    if not inputs:
        return np.zeros((0, BUCKET), dtype=np.int64), np.zeros((0, NUM_FEATURES), dtype=np.float32)
    length = bucket_length(max(len(i.ids) for i in inputs))
    ids = np.zeros((len(inputs), length), dtype=np.int64)
    for row, item in enumerate(inputs):
        ids[row, : len(item.ids)] = item.ids
    numeric = np.array([i.numeric for i in inputs], dtype=np.float32)
    return ids, numeric
