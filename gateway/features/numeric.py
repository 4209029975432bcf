"""The numeric feature vector: header structure, lengths, entropy, consistency flags, client window.

Part of the feature contract (see ``gateway.features``): changing anything here needs
a FEATURE_VERSION bump and a retrained model.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections import Counter

from gateway.features.encoding import MAX_TOKENS
from gateway.features.request import Features
from gateway.features.serialization import INFRA_HEADERS, body_text, decoded_target

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
# Characters that carry injections, counted by one character-class scan (str.translate with deletions, or a
# str.count per character, cost 2-4 times as much on a target or a user agent).
_SUSPICIOUS = "'\"<>;|`$(){}\\*"
_SUSPICIOUS_RE = re.compile("[" + re.escape(_SUSPICIOUS) + "]")

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


_CLOG2C = [0.0] + [c * math.log2(c) for c in range(1, MAX_TOKENS + 1)]
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
    return len(_SUSPICIOUS_RE.findall(text)) / len(text)


def _order_score(ranks: list[int]) -> float:
    """Share of adjacent pairs in increasing order; 0.5 when there is nothing to compare."""
    if len(ranks) < 2:
        return 0.5
    return sum(map(operator.lt, ranks, ranks[1:])) / (len(ranks) - 1)


_MAJOR_DIGITS = 9  # a version number longer than this is not one: read its first digits


def _major(ua: str, marker: str) -> int:
    """The number after ``marker`` (``Chrome/126.0`` -> 126), 0 when there is none.

    Clients write these headers, so the number is read from at most nine decimal
    digits: ``int()`` refuses a run of 4,301 digits, and ``str.isdigit`` also accepts
    ``²`` (one latin-1 byte on the wire) which ``int()`` refuses too. Either raised out
    of featurizing and sent the request down the model's fallback path, unscored.
    """
    i = ua.find(marker)
    if i < 0:
        return 0
    j = i + len(marker)
    k = j
    end = min(len(ua), j + _MAJOR_DIGITS)
    while k < end and ua[k].isdecimal():
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


# What depends only on the header names (in wire order) or only on the user agent is computed once per
# distinct value: the same browser or client sends the same names and user agent request after request.
# Both caches are bounded (LRU) and hold pure functions' results, so the vector is the same either way.
_CACHED_KEY_CHARS = 1024  # the longest key the caches below keep (browsers: names ~300, user agents ~150)


@functools.lru_cache(maxsize=4096)
def _name_facts(all_names: tuple[str, ...]) -> tuple[float, ...]:
    """(header count, names length, lower-case share, host not first, one order score per template)."""
    lowered = [n.lower() for n in all_names]
    if INFRA_HEADERS.isdisjoint(lowered):
        names, lower = list(all_names), lowered
    else:
        keep = [i for i, n in enumerate(lowered) if n not in INFRA_HEADERS]
        names, lower = [all_names[i] for i in keep], [lowered[i] for i in keep]
    n_headers = len(names)
    return (n_headers, sum(map(len, all_names)), (sum(map(str.islower, names)) / n_headers) if n_headers else 0.0,
            float(bool(lower) and lower[0] != "host"),
            *(_order_score([ranks[n] for n in lower if n in ranks]) for ranks in _ORDER_RANKS.values()))


@functools.lru_cache(maxsize=4096)
def _ua_facts(ua: str) -> tuple[int, bool, bool, bool, bool, bool, bool]:
    """(Chromium major version, is Chromium, is Firefox, is Safari, is a library, looks like a bot, names a headless browser)."""
    ual = ua.lower()
    chromium_major = _major(ua, "Chrome/") or _major(ua, "CriOS/")
    is_chromium = chromium_major > 0 or "Chromium/" in ua
    is_firefox = not is_chromium and ("Firefox/" in ua or "FxiOS/" in ua)
    is_safari = not is_chromium and not is_firefox and "Safari/" in ua and "Version/" in ua
    return (chromium_major, is_chromium, is_firefox, is_safari, ual.startswith(_LIBRARY_PREFIXES), _BOT_RE.search(ual) is not None,
            "headless" in ual or "phantomjs" in ual)


def numeric_vector(features: Features) -> list[float]:
    """The numeric features, in ``NUMERIC_NAMES`` order, each roughly within [0, 1]."""
    hm = features.header_map
    ua = features.user_agent or hm.get("user-agent", "")
    version = features.http_version
    method = features.method
    all_names = tuple(map(_NAME, features.headers))
    # only ordinary keys are cached: a client sending 60 KB of header names or user agent, request after request,
    # would otherwise fill each 4,096-entry cache with its own (hundreds of MB); such a request is computed afresh
    name_facts = _name_facts if sum(map(len, all_names)) <= _CACHED_KEY_CHARS else _name_facts.__wrapped__
    n_headers, names_length, lowercase_share, host_not_first, *templates = name_facts(all_names)

    ua_facts = _ua_facts if len(ua) <= _CACHED_KEY_CHARS else _ua_facts.__wrapped__
    chromium_major, is_chromium, is_firefox, is_safari, is_library, is_botlike, is_headless = ua_facts(ua)
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
    body = body_text(features)
    target = features.target
    body_len = features.content_length if features.content_length is not None else len(features.body_prefix)

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
        _log(names_length + sum(map(len, map(_VALUE, features.headers))) + 4 * n_headers, 9.0),
        lowercase_share,
        host_not_first,
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
        float(is_botlike), float(is_library), float(is_headless),
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
