"""Non-browser request heads: crawlers, HTTP libraries and CLI tools, and spoofing defects.

Crawlers and libraries send short, fixed header sets in their own order (curl: Host,
User-Agent, Accept; python-requests: Host, User-Agent, Accept-Encoding, Accept,
Connection; Go: Host, User-Agent, Accept-Encoding…). A bot that borrows a browser's
user agent usually keeps its library's head, or builds a browser head and gets a
detail wrong; :func:`spoof_defects` writes those mistakes.
"""

from __future__ import annotations

import functools
import random

from models.data.browsers import Headers
from models.data.sources import MODULE_SPLITS, UNSEEN_RELEASES, Split, built_before, on_side, unseen_module

# Library and CLI user agents (name, versions): the clients of APIs, feeds, git and downloads.
_LIBRARIES = (
    ("curl", [f"curl/7.{m}.{p}" for m in range(58, 89, 3) for p in (0, 1)] + [f"curl/8.{m}.{p}" for m in range(0, 12) for p in (0, 1)]),
    ("wget", [f"Wget/1.{m}.{p}" for m in (19, 20, 21, 24, 25) for p in range(0, 5)]),
    ("requests", [f"python-requests/2.{m}.{p}" for m in range(18, 33) for p in (0, 1, 2)]),
    ("httpx", [f"python-httpx/0.{m}.{p}" for m in range(20, 29) for p in (0, 1, 2)]),
    ("aiohttp", [f"Python/3.{py} aiohttp/3.{m}.{p}" for py in (9, 10, 11, 12, 13) for m in (8, 9, 10, 11) for p in (1, 3)]),
    ("urllib", [f"Python-urllib/3.{m}" for m in range(6, 14)]),
    ("go", ["Go-http-client/1.1", "Go-http-client/2.0"] + [f"go-resty/2.{m}.0 (https://github.com/go-resty/resty)" for m in range(5, 16)]),
    ("git", [f"git/2.{m}.{p}" for m in range(30, 48) for p in (0, 1, 2)] + [f"JGit/{m}.{p}.0.202{m % 5}0101" for m in (5, 6, 7) for p in range(0, 4)]
     + [f"git/2.{m}.{p}.windows.1" for m in range(35, 48) for p in (0, 1)]),
    ("axios", [f"axios/1.{m}.{p}" for m in range(0, 8) for p in (0, 2, 4)]),
    ("node", ["node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", "node", "undici"] + [f"node-fetch/3.3.{p}" for p in range(3)]),
    ("okhttp", [f"okhttp/4.{m}.{p}" for m in range(9, 13) for p in range(0, 4)] + [f"okhttp/3.{m}.0" for m in range(10, 15)]),
    ("java", [f"Java-http-client/{v}" for v in ("11.0.21", "17.0.9", "17.0.2", "21.0.1", "21.0.4")] + [f"Apache-HttpClient/4.5.{p} (Java/17.0.{q})" for p in range(10, 15) for q in (5, 8, 9)]),
    ("postman", [f"PostmanRuntime/7.{m}.{p}" for m in range(30, 43) for p in (0, 1, 3)]),
    ("httpie", [f"HTTPie/3.2.{p}" for p in range(0, 5)] + [f"HTTPie/2.{m}.0" for m in range(3, 7)]),
    ("ruby", [f"Faraday v2.{m}.{p}" for m in range(5, 12) for p in (0, 1)] + [f"Ruby/3.{m}.0" for m in range(0, 4)]),
    ("php", [f"GuzzleHttp/7 curl/8.{m}.0 PHP/8.{p}.{q}" for m in (1, 4, 5) for p in (1, 2, 3) for q in (2, 10)]),
    ("dotnet", ["Microsoft-WebDAV-MiniRedir/10.0.19045", "Microsoft.Data.Mashup", "RestSharp/110.2.0.0", "RestSharp/106.15.0.0"]),
    ("feedcli", ["Miniflux/2.0.51 (+https://miniflux.app)", "Miniflux/2.1.3 (+https://miniflux.app)", "FreshRSS/1.23.1 (Linux; https://freshrss.org)",
                 "FreshRSS/1.24.0 (Linux; https://freshrss.org)", "CommaFeed/4.3.0 (https://github.com/Athou/commafeed)",
                 "Tiny Tiny RSS/23.12 (https://tt-rss.org/)", "NetNewsWire (RSS Reader; https://netnewswire.com/)", "newsboat/2.34.0 (Linux x86_64)"]),
)


# The unseen-releases split's libraries (``sources.UNSEEN_RELEASES``): releases after the newest above, in each family's own format, and new members
# of the families (Bun and Deno speak for node). None is a string of ``_LIBRARIES``.
_RELEASES_LIBRARIES = (
    ("curl", [f"curl/8.{m}.{p}" for m in range(12, 18) for p in (0, 1)]),
    ("wget", ["Wget/1.25.1", "Wget/1.26.0", "Wget/1.26.1"]),
    ("requests", [f"python-requests/2.{m}.{p}" for m in (33, 34, 35) for p in (3, 4)]),
    ("httpx", ["python-httpx/0.29.0", "python-httpx/0.29.1", "python-httpx/1.0.0", "python-httpx/1.0.2"]),
    ("aiohttp", [f"Python/3.{py} aiohttp/3.{m}.{p}" for py in (13, 14) for m in (12, 13) for p in (2, 7, 15)]),
    ("urllib", ["Python-urllib/3.14", "Python-urllib/3.15"]),
    ("go", [f"go-resty/3.0.{p} (https://resty.dev)" for p in range(0, 4)] + ["Go-http-client/3.0"]),
    ("git", [f"git/2.{m}.{p}" for m in range(48, 53) for p in (0, 1, 3)] + [f"git/2.{m}.0.windows.2" for m in range(48, 53)]),
    ("axios", [f"axios/1.{m}.{p}" for m in range(8, 14) for p in (1, 3)]),
    ("node", ["Bun/1.2.21", "Bun/1.3.1", "Deno/2.4.5", "Deno/2.5.0", "node-fetch/3.3.3", "undici/7.16.0"]),
    ("okhttp", [f"okhttp/5.{m}.{p}" for m in range(0, 3) for p in (0, 1)]),
    ("java", ["Java-http-client/24.0.2", "Java-http-client/25", "Java-http-client/25.0.1"]
     + [f"Apache-HttpClient/5.{m}.{p} (Java/21.0.{q})" for m in (4, 5) for p in (1, 4) for q in (7, 8)]),
    ("postman", [f"PostmanRuntime/7.{m}.{p}" for m in range(43, 49) for p in (0, 2)]),
    ("httpie", ["HTTPie/3.2.5", "HTTPie/3.3.0", "HTTPie/3.3.1"]),
    ("ruby", [f"Faraday v2.{m}.{p}" for m in range(12, 15) for p in (0, 2)] + ["Ruby/3.4.0", "Ruby/3.5.0"]),
    ("php", [f"GuzzleHttp/7 curl/8.{m}.0 PHP/8.4.{q}" for m in (10, 14) for q in (5, 13)]),
    ("dotnet", ["RestSharp/112.1.0.0", "RestSharp/113.0.0.0", "Microsoft-WebDAV-MiniRedir/10.0.26100"]),
    ("feedcli", ["Miniflux/2.2.10 (+https://miniflux.app)", "Miniflux/2.2.13 (+https://miniflux.app)", "FreshRSS/1.26.3 (Linux; https://freshrss.org)",
                 "FreshRSS/1.27.1 (Linux; https://freshrss.org)", "CommaFeed/5.9.0 (https://github.com/Athou/commafeed)", "newsboat/2.40.0 (Linux x86_64)"]),
)


@functools.cache
def library_agents(split: Split) -> tuple[tuple[str, str], ...]:
    """(family, user agent) of libraries and CLI tools on one side of the split, or a measurement split's own."""
    if split == UNSEEN_RELEASES:
        known = {ua for _, uas in _LIBRARIES for ua in uas}
        return tuple((fam, ua) for fam, uas in _RELEASES_LIBRARIES for ua in uas if ua not in known)
    if split in MODULE_SPLITS:
        earlier = _LIBRARIES + _RELEASES_LIBRARIES + tuple(f for e in built_before(split) for f in unseen_module(e).LIBRARIES)
        known = {ua for _, uas in earlier for ua in uas}
        return tuple((fam, ua) for fam, uas in unseen_module(split).LIBRARIES for ua in uas if ua not in known)
    return tuple((fam, ua) for fam, uas in _LIBRARIES for ua in uas if on_side("ua", ua, split))


def library_head(family: str, ua: str, host: str, rng: random.Random, *, accept: str | None = None,
                 auth: str | None = None, content_type: str | None = None, content_length: int | None = None,
                 extra: Headers | None = None) -> Headers:
    """The head an HTTP library or CLI tool sends (its own set and order)."""
    cl: Headers = []
    if content_type:
        cl = [["Content-Type", content_type], ["Content-Length", str(content_length or 0)]]
    a: Headers = [["Authorization", auth]] if auth else []
    x = extra or []
    if family in ("curl", "httpie", "feedcli", "php"):
        h = [["Host", host], ["User-Agent", ua], ["Accept", accept or ("*/*" if family != "httpie" else "application/json, */*;q=0.5")]]
        if family == "httpie":
            h.insert(2, ["Accept-Encoding", "gzip, deflate"])
            h.append(["Connection", "keep-alive"])
        return h + a + x + cl
    if family in ("requests", "httpx"):
        return ([["Host", host], ["User-Agent", ua], ["Accept-Encoding", "gzip, deflate" + (", br" if rng.random() < 0.3 else "")], ["Accept", accept or "*/*"], ["Connection", "keep-alive"], *a, *x, *cl])
    if family in ("aiohttp", "urllib"):
        h = [["Host", host], ["Accept", accept or "*/*"], ["Accept-Encoding", "gzip, deflate"], ["User-Agent", ua]]
        if family == "urllib":
            h = [["Accept-Encoding", "identity"], ["Host", host], ["User-Agent", ua], ["Connection", "close"]]
        return h + a + x + cl
    if family == "go":
        return [["Host", host], ["User-Agent", ua]] + a + x + cl + ([["Accept", accept]] if accept else []) + [["Accept-Encoding", "gzip"]]
    if family == "wget":
        return [["User-Agent", ua], ["Accept", accept or "*/*"], ["Accept-Encoding", "identity"], ["Host", host], ["Connection", "Keep-Alive"], *a, *x, *cl]
    if family == "git":
        return ([["Host", host], ["User-Agent", ua], ["Accept", "*/*"], ["Accept-Encoding", "deflate, gzip, br, zstd"], ["Accept-Language", "en-US, *;q=0.9"], ["Pragma", "no-cache"], ["Git-Protocol", "version=2"], *a, *x, *cl])
    if family == "axios":
        return ([["Accept", accept or "application/json, text/plain, */*"]] + ([cl[0]] if cl else []) + [["User-Agent", ua]] + a
                + x + ([cl[1]] if cl else []) + [["Accept-Encoding", "gzip, compress, deflate, br"], ["Host", host], ["Connection", "keep-alive"]])
    if family == "node":
        return [["Accept", accept or "*/*"], ["User-Agent", ua], ["Accept-Encoding", "gzip,deflate"], ["Host", host], ["Connection", "close"], *a, *x, *cl]
    if family == "okhttp":
        return [["Host", host], ["Connection", "Keep-Alive"], ["Accept-Encoding", "gzip"], ["User-Agent", ua], *a, *x, *cl]
    if family == "java":
        return cl + [["Host", host], ["User-Agent", ua]] + a + x + ([["Accept", accept]] if accept else [])
    if family == "postman":
        return ([["User-Agent", ua], ["Accept", accept or "*/*"], ["Postman-Token", _uuid(rng)], ["Host", host], ["Accept-Encoding", "gzip, deflate, br"], ["Connection", "keep-alive"], *a, *x, *cl])
    return [["Host", host], ["User-Agent", ua], ["Accept", accept or "*/*"], *a, *x, *cl]


def _uuid(rng: random.Random) -> str:
    h = "".join(rng.choice("0123456789abcdef") for _ in range(32))
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def crawler_head(ua: str, host: str, rng: random.Random, *, accept: str | None = None, tags: tuple[str, ...] = (),
                 conditional: bool = False) -> Headers:
    """The head of a declared crawler: short, stable, often with From and conditional headers."""
    style = rng.random()
    feed = "feed-reader" in tags
    acc = accept or ("application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.8, */*;q=0.5" if feed else
                     rng.choice(("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "*/*",
                                 "text/html,application/xhtml+xml,application/xml;q=0.9,image/webp,*/*;q=0.8", "text/html")))
    if style < 0.45:
        h = [["Host", host], ["Connection", "keep-alive"], ["User-Agent", ua], ["Accept", acc],
             ["Accept-Encoding", rng.choice(("gzip, deflate, br", "gzip, deflate", "gzip"))]]
        if "search-engine" in tags and rng.random() < 0.5:
            h.insert(4, ["From", rng.choice(("googlebot(at)googlebot.com", "bingbot(at)microsoft.com", "crawler@example.net"))])
    elif style < 0.75:
        h = [["Host", host], ["Accept", acc], ["User-Agent", ua], ["Accept-Encoding", "gzip"], ["Connection", "close"]]
        if rng.random() < 0.5:
            h.insert(3, ["Accept-Language", rng.choice(("en-US,en;q=0.5", "en", "*"))])
    else:
        h = [["User-Agent", ua], ["Accept", acc], ["Accept-Encoding", "gzip, deflate"], ["Host", host]]
        if rng.random() < 0.3:
            h += [["Cache-Control", "no-cache"], ["Pragma", "no-cache"]]
    if conditional:
        h.append(["If-Modified-Since", f"{rng.choice(('Mon', 'Tue', 'Wed', 'Thu', 'Fri'))}, {rng.randint(1, 28):02d} "
                                        f"{rng.choice(('Jan', 'Feb', 'Mar', 'Apr', 'May'))} 2025 {rng.randint(0, 23):02d}:00:00 GMT"])
        if rng.random() < 0.6:
            h.append(["If-None-Match", f'W/"{rng.randint(10**6, 10**9):x}"'])
    return h


def spoof_defects(head: Headers, ua: str, engine: str, rng: random.Random, defects: list[str]) -> tuple[Headers, str]:
    """Apply spoofing mistakes to a browser head; returns (head, http_version)."""
    version = "1.1"
    h = [list(x) for x in head]

    def drop(*names: str) -> None:
        nonlocal h
        lowered = {n.lower() for n in names}
        h = [x for x in h if x[0].lower() not in lowered]

    for d in defects:
        if d == "no_accept_language":
            drop("Accept-Language")
        elif d == "no_fetch_metadata":
            drop("Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User")
        elif d == "missing_ch":
            drop("sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform")
        elif d == "ch_mismatch":
            for x in h:
                if x[0].lower() == "sec-ch-ua":
                    wrong = rng.choice((99, 101, 108, 110, 112, 116, 118, 120, 122, 126, 128, 131, 133, 136))
                    x[1] = f'"Chromium";v="{wrong}", "Google Chrome";v="{wrong}", "Not?A_Brand";v="24"'
        elif d == "ch_on_non_chromium":
            h.insert(1, ["sec-ch-ua", f'"Chromium";v="{rng.randint(110, 136)}", "Not_A Brand";v="24"'])
            h.insert(2, ["sec-ch-ua-mobile", "?0"])
            h.insert(3, ["sec-ch-ua-platform", '"Windows"'])
        elif d == "ch_platform":
            for x in h:
                if x[0].lower() == "sec-ch-ua-platform":
                    x[1] = rng.choice(('"Linux"', '"Windows"', '"macOS"', '"Android"'))
        elif d == "shuffled":
            host = [x for x in h if x[0].lower() == "host"]
            rest = [x for x in h if x[0].lower() != "host"]
            rng.shuffle(rest)
            h = host + rest if rng.random() < 0.7 else rest + host
        elif d == "http10":
            version = "1.0"
        elif d == "accept_any":
            for x in h:
                if x[0].lower() == "accept":
                    x[1] = "*/*"
        elif d == "no_accept_encoding":
            drop("Accept-Encoding")
        elif d == "lowercase_mixed":
            h = [[n.lower() if rng.random() < 0.5 else n, v] for n, v in h]
        elif d == "connection_close":
            for x in h:
                if x[0].lower() == "connection":
                    x[1] = "close"
    return h, version
