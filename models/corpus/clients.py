"""Who sends a request: browser, library, scanner and crawler header sets, and their history.

Browser header sets come from the extracted data (``data/browsers.json``): navigation header sets captured
from real browsers (curl-impersonate's signatures, browserforge's network) and real user agents
(fake-useragent, the npm ``user-agents`` data, Playwright's device descriptors), fitted to the request's
context by the Fetch standard's rules (``Sec-Fetch-*``, ``Accept`` per destination, ``Origin`` on writes).
Library, scanner and crawler sets are each tool's documented default headers, in the order the tool sends
them (facts, recorded below as data).

A :class:`Look` is what the client head may read; it never depends on the payload.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"

# Browser families the corpus covers, and the engine whose captured header sets carry each.
FAMILIES = ("chrome", "chrome-android", "edge", "opera", "samsung", "firefox", "safari-mac", "safari-ios",
            "ios-other", "webview")
_ENGINE = {"chrome": "chromium", "edge": "chromium", "opera": "chromium", "chrome-android": "chromium-mobile",
           "samsung": "chromium-mobile", "firefox": "firefox", "safari-mac": "safari-mac",
           "safari-ios": "safari-ios", "ios-other": "safari-ios"}
_PROFILE_ENGINE = {"chrome": "chromium", "edge": "chromium", "chrome-android": "chromium-mobile",
                   "firefox": "firefox", "safari-mac": "safari-mac", "safari-ios": "safari-ios"}
_ORDER_KEY = {"chromium": "chrome", "chromium-mobile": "chrome", "firefox": "firefox", "safari-mac": "safari",
              "safari-ios": "safari"}
# sec-ch-ua brand per Chromium family (each browser's documented brand string)
_BRAND = {"chrome": "Google Chrome", "chrome-android": "Google Chrome", "edge": "Microsoft Edge", "opera": "Opera",
          "samsung": "Samsung Internet", "webview": "Android WebView"}
# Fetch Metadata (Sec-Fetch-*) shipped in Chrome 76, Firefox 90, Safari 16.4
_FETCH_METADATA_SINCE = {"chromium": 76.0, "chromium-mobile": 76.0, "firefox": 90.0, "safari-mac": 16.4,
                         "safari-ios": 16.4}

# Sources by kind. A half takes one header-set source and one or two user-agent sources.
PROFILE_SOURCES = ("curl-impersonate", "browserforge")
UA_SOURCES = ("fake-useragent", "user-agents-npm", "playwright-devices")


@functools.cache
def _browsers() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "browsers.json").read_text())
    return data


@functools.cache
def _bots() -> dict[str, list[dict[str, str]]]:
    data: dict[str, list[dict[str, str]]] = json.loads((DATA / "bots.json").read_text())
    return data


def _num(version: str) -> float:
    parts = re.findall(r"\d+", version)
    if not parts:
        return 0.0
    return float(f"{parts[0]}.{parts[1] if len(parts) > 1 else 0}")


def _ios_version(ua: str) -> str:
    m = re.search(r"OS (\d+)_(\d+)", ua)
    return f"{m.group(1)}.{m.group(2)}" if m else ""


@dataclass
class Look:
    """A client's request headers before the site's parts (Host, Referer, Cookie, body headers) are added."""

    headers: list[list[str]]
    wire: str                      # "h1" (names as the client spells them) or "h2" (lower-case names)
    client_kind: str               # browser, library, scanner, crawler, headless
    source: str
    family: str                    # browser family or the tool's name
    engine: str = ""
    version: float = 0.0
    fetch_metadata: bool = False
    header_source: str = ""        # where the header set (names, order, values) came from, when not ``source``
    extras: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- browsers

@functools.cache
def _profiles(sources: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    by_engine: dict[str, list[dict[str, Any]]] = {}
    for p in _browsers()["profiles"]:
        if p["source"] in sources and p["family"] in _PROFILE_ENGINE:
            by_engine.setdefault(_PROFILE_ENGINE[p["family"]], []).append(p)
    return by_engine


@functools.cache
def _ua_rows(sources: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    by_family: dict[str, list[dict[str, Any]]] = {}
    for r in _browsers()["user_agents"]:
        if r["source"] in sources:
            by_family.setdefault(r["family"], []).append(r)
    for p in _browsers()["profiles"]:
        if p["source"] in sources:
            ua = next((v for n, v in p["headers"] if n.lower() == "user-agent"), "")
            by_family.setdefault(p["family"], []).append({"source": p["source"], "family": p["family"], "ua": ua,
                                                          "mobile": p["mobile"], "version": p["version"]})
    return by_family


@functools.cache
def _profile_by_ua() -> dict[tuple[str, str], dict[str, Any]]:
    """Each captured profile by (source, user agent) (the first when two share one)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for p in _browsers()["profiles"]:
        ua = next((v for n, v in p["headers"] if n.lower() == "user-agent"), "")
        out.setdefault((p["source"], ua), p)
    return out


def _engine_of(family: str, ua: str) -> str:
    if "iPhone" in ua or "iPad" in ua:
        return "safari-ios"      # every browser on iOS runs WebKit and sends WebKit's headers
    if family == "webview":
        return "chromium-mobile"
    return _ENGINE[family]


def _major(ua: str) -> float:
    m = re.search(r"(?:Chrome|Firefox|Version)/(\d+)(?:\.(\d+))?", ua) or re.search(r"OS (\d+)_(\d+)", ua)
    return float(f"{m.group(1)}.{m.group(2) or 0}") if m else 0.0


def _nearest(skeletons: list[dict[str, Any]], ua: str, rng: random.Random) -> dict[str, Any]:
    """One of the three skeletons whose browser version is nearest the user agent's (header sets change
    with versions: encodings, client hints, priority)."""
    want = _major(ua)
    ranked = sorted(skeletons, key=lambda p: (abs(_major(_skeleton_ua(p)) - want), p["id"]))
    return rng.choice(ranked[:3])


def _skeleton_ua(p: dict[str, Any]) -> str:
    return next((v for n, v in p["headers"] if n.lower() == "user-agent"), "")


def _platform(ua: str) -> str:
    for mark, name in (("Android", "Android"), ("iPhone", "iOS"), ("Windows", "Windows"), ("Macintosh", "macOS"),
                       ("CrOS", "Chrome OS"), ("Linux", "Linux")):
        if mark in ua:
            return name
    return "Unknown"


def _brands(template: str, family: str, ua: str) -> str:
    """The skeleton's sec-ch-ua list with its brand and versions swapped for this user agent's."""
    chrome = re.search(r"Chrome/(\d+)", ua)
    major = chrome.group(1) if chrome else "120"
    own = {"edge": r"Edg[A]?/(\d+)", "opera": r"OPR/(\d+)", "samsung": r"SamsungBrowser/(\d+)"}.get(family)
    own_major = major
    if own:
        m = re.search(own, ua)
        own_major = m.group(1) if m else major
    entries = re.findall(r'"([^"]+)";v="(\d+)"', template)
    out = []
    for name, ver in entries:
        if name in ("Google Chrome", "Microsoft Edge", "Opera", "Samsung Internet", "Android WebView"):
            out.append(f'"{_BRAND.get(family, "Google Chrome")}";v="{own_major}"')
        elif name == "Chromium":
            out.append(f'"Chromium";v="{major}"')
        else:
            out.append(f'"{name}";v="{ver}"')
    if not any(_BRAND.get(family, "Google Chrome") in e for e in out):
        out.append(f'"{_BRAND.get(family, "Google Chrome")}";v="{own_major}"')
    return ", ".join(out)


_WEBVIEW_APPS = ("com.facebook.katana", "com.instagram.android", "com.twitter.android", "jp.naver.line.android",
                 "com.google.android.gm", "com.linkedin.android", "com.reddit.frontpage", "org.telegram.messenger",
                 "com.zhiliaoapp.musically", "com.pinterest")


def browser(rng: random.Random, family: str, profile_sources: Sequence[str], ua_sources: Sequence[str]) -> Look:
    """A browser of ``family``: a user agent from ``ua_sources`` or a profile's own, on a captured skeleton of
    its engine from ``profile_sources``."""
    rows = _ua_rows(tuple(ua_sources) + tuple(profile_sources)).get(family)
    if not rows:
        raise ValueError(f"no {family} user agents in {ua_sources}")
    row = rng.choice(rows)
    ua = row["ua"]
    engine = _engine_of(family, ua)
    skeletons = _profiles(tuple(profile_sources)).get(engine) or _profiles(PROFILE_SOURCES)[engine]
    # the profile itself when the row is one, otherwise a skeleton of the engine
    own = _profile_by_ua().get((row["source"], ua))
    skel = own if own is not None else _nearest(skeletons, ua, rng)
    headers = [[n, v] for n, v in skel["headers"]]
    wire = skel["wire"]
    for h in headers:
        low = h[0].lower()
        if low == "user-agent":
            h[1] = ua
        elif low == "sec-ch-ua":
            h[1] = _brands(h[1], family, ua)
        elif low == "sec-ch-ua-mobile":
            h[1] = "?1" if row["mobile"] else "?0"
        elif low == "sec-ch-ua-platform":
            h[1] = f'"{_platform(ua)}"'
    chrome_major = re.search(r"Chrome/(\d+)", ua)
    if family in ("firefox", "safari-mac", "safari-ios", "ios-other") or engine.startswith("safari") or \
            (chrome_major is not None and int(chrome_major.group(1)) < 89):   # client hints shipped in Chrome 89
        headers = [h for h in headers if not h[0].lower().startswith("sec-ch-ua")]
    if engine == "safari-ios":
        version = _num(_ios_version(ua))
    elif engine.startswith("chromium"):
        version = float(chrome_major.group(1)) if chrome_major else 0.0
    else:
        version = _num(str(row.get("version", "")))
    if engine == "safari-mac":
        m = re.search(r"Version/([\d.]+)", ua)
        version = _num(m.group(1)) if m else version
    fetch_md = version >= _FETCH_METADATA_SINCE[engine] or version == 0.0
    extras: dict[str, str] = {}
    if family == "webview" and engine == "chromium-mobile" and rng.random() < 0.6:
        extras["x-requested-with"] = rng.choice(_WEBVIEW_APPS)
    return Look(headers=headers, wire=wire, client_kind="browser", source=row["source"], family=family,
                engine=engine, version=version, fetch_metadata=fetch_md, header_source=skel["source"], extras=extras)


@functools.cache
def families_available(profile_sources: tuple[str, ...], ua_sources: tuple[str, ...]) -> tuple[str, ...]:
    """The families these sources have user agents for, in ``FAMILIES`` order."""
    rows = _ua_rows(tuple(ua_sources) + tuple(profile_sources))
    return tuple(f for f in FAMILIES if rows.get(f))


@functools.cache
def header_order(engine: str, wire: str) -> tuple[str, ...]:
    """The observed order of request headers for an engine (apify-fingerprint-datapoints' data)."""
    names: list[str] = _browsers()["order"][_ORDER_KEY[engine]]
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(n.lower() if wire == "h2" else n, None)
    return tuple(seen)


# ---------------------------------------------------------------------------------------------- libraries
# Each tool's default request headers in the order it sends them ("{v}" is the tool's version, drawn from
# the list beside it). Facts from each tool's documented or observable defaults.

@dataclass(frozen=True)
class Tool:
    """A non-browser client: its header template, versions, and whether it names itself honestly."""

    name: str
    kind: str                       # library, scanner, crawler
    headers: tuple[tuple[str, str], ...]
    versions: tuple[str, ...] = ("",)
    wire: str = "h1"


LIBRARIES_A = (
    Tool("python-requests", "library", (("User-Agent", "python-requests/{v}"), ("Accept-Encoding", "gzip, deflate"),
                                        ("Accept", "*/*"), ("Connection", "keep-alive")),
         ("2.25.1", "2.28.2", "2.31.0", "2.32.3", "2.32.5")),
    Tool("curl", "library", (("Host", ""), ("User-Agent", "curl/{v}"), ("Accept", "*/*")),
         ("7.68.0", "7.81.0", "7.88.1", "8.5.0", "8.7.1", "8.11.1", "8.14.1")),
    Tool("go-http-client", "library", (("Host", ""), ("User-Agent", "Go-http-client/1.1"),
                                       ("Accept-Encoding", "gzip"))),
    Tool("axios", "library", (("Accept", "application/json, text/plain, */*"), ("User-Agent", "axios/{v}"),
                              ("Accept-Encoding", "gzip, compress, deflate, br"), ("Host", ""),
                              ("Connection", "keep-alive")), ("0.27.2", "1.6.8", "1.7.9", "1.11.0")),
    Tool("wget", "library", (("User-Agent", "Wget/{v}"), ("Accept", "*/*"), ("Accept-Encoding", "identity"),
                             ("Host", ""), ("Connection", "Keep-Alive")), ("1.20.3", "1.21.2", "1.21.4", "1.25.0")),
    Tool("okhttp", "library", (("Host", ""), ("Connection", "Keep-Alive"), ("Accept-Encoding", "gzip"),
                               ("User-Agent", "okhttp/{v}")), ("3.12.13", "4.9.3", "4.12.0", "5.1.0")),
    Tool("powershell", "library", (("User-Agent", "Mozilla/5.0 (Windows NT; Windows NT 10.0; en-US) "
                                                  "WindowsPowerShell/{v}"), ("Host", ""),
                                   ("Connection", "Keep-Alive")), ("5.1.19041.4648", "5.1.22621.2506")),
)
LIBRARIES_B = (
    Tool("python-httpx", "library", (("Host", ""), ("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate"),
                                     ("Connection", "keep-alive"), ("User-Agent", "python-httpx/{v}")),
         ("0.23.3", "0.25.2", "0.27.2", "0.28.1")),
    Tool("aiohttp", "library", (("Host", ""), ("User-Agent", "Python/3.{v}"), ("Accept", "*/*"),
                                ("Accept-Encoding", "gzip, deflate")),
         ("10 aiohttp/3.8.6", "11 aiohttp/3.9.5", "12 aiohttp/3.10.11", "13 aiohttp/3.12.15")),
    Tool("java-httpclient", "library", (("Connection", "Upgrade, HTTP2-Settings"), ("Content-Length", "0"),
                                        ("Host", ""), ("HTTP2-Settings", "AAEAAEAAAAIAAAABAAMAAABkAAQBAAAAAAUAAEAA"),
                                        ("Upgrade", "h2c"), ("User-Agent", "Java-http-client/{v}")),
         ("11.0.22", "17.0.12", "21.0.4")),
    Tool("node-fetch", "library", (("host", ""), ("connection", "keep-alive"), ("accept", "*/*"),
                                   ("accept-language", "*"), ("sec-fetch-mode", "cors"), ("user-agent", "node"),
                                   ("accept-encoding", "gzip, deflate"))),
    Tool("apache-httpclient", "library", (("Host", ""), ("Connection", "Keep-Alive"),
                                          ("User-Agent", "Apache-HttpClient/{v}"),
                                          ("Accept-Encoding", "gzip,deflate")),
         ("4.5.13 (Java/11.0.19)", "4.5.14 (Java/17.0.8)", "5.2.1 (Java/21.0.2)")),
    Tool("ruby-net-http", "library", (("Accept-Encoding", "gzip;q=1.0,deflate;q=0.6,identity;q=0.3"),
                                      ("Accept", "*/*"), ("User-Agent", "Ruby"), ("Host", ""))),
    Tool("guzzle", "library", (("User-Agent", "GuzzleHttp/7"), ("Host", ""))),
)
SCANNERS_A = (
    Tool("sqlmap", "scanner", (("Cache-Control", "no-cache"), ("User-Agent", "sqlmap/{v} (https://sqlmap.org)"),
                               ("Host", ""), ("Accept", "*/*"), ("Accept-Encoding", "gzip,deflate"),
                               ("Connection", "close")), ("1.6.12#stable", "1.7.2#stable", "1.8.4#stable")),
    Tool("nikto", "scanner", (("User-Agent", "Mozilla/5.00 (Nikto/{v}) (Evasions:None) (Test:{t})"), ("Host", ""),
                              ("Connection", "Keep-Alive")), ("2.1.6", "2.5.0")),
    Tool("nuclei", "scanner", (("Host", ""), ("User-Agent", "{browser}"), ("Connection", "close"),
                               ("Accept", "*/*"), ("Accept-Language", "en"), ("Accept-Encoding", "gzip"))),
    Tool("gobuster", "scanner", (("Host", ""), ("User-Agent", "gobuster/{v}"), ("Accept-Encoding", "gzip")),
         ("3.1.0", "3.6")),
    Tool("wpscan", "scanner", (("Host", ""), ("User-Agent", "WPScan v{v} (https://wpscan.com/wordpress-security-"
                                                           "scanner)"), ("Accept", "*/*"),
                               ("Accept-Encoding", "gzip, deflate")), ("3.8.22", "3.8.25")),
    Tool("zap", "scanner", (("Host", ""), ("User-Agent", "{browser}"), ("Pragma", "no-cache"),
                            ("Cache-Control", "no-cache"), ("Accept", "*/*"))),
)
SCANNERS_B = (
    Tool("ffuf", "scanner", (("Host", ""), ("User-Agent", "Fuzz Faster U Fool v{v}"), ("Accept-Encoding", "gzip")),
         ("1.5.0", "2.1.0-dev")),
    Tool("feroxbuster", "scanner", (("Host", ""), ("User-Agent", "feroxbuster/{v}"), ("Accept", "*/*")),
         ("2.10.1", "2.11.0")),
    Tool("dirsearch", "scanner", (("Host", ""), ("User-Agent", "{browser}"), ("Accept-Encoding", "gzip, deflate"),
                                  ("Accept", "*/*"), ("Connection", "keep-alive"),
                                  ("Keep-Alive", "timeout=15, max=1000"), ("Cache-Control", "max-age=0"))),
    Tool("zgrab", "scanner", (("Host", ""), ("User-Agent", "Mozilla/5.0 zgrab/0.x"), ("Accept", "*/*"),
                              ("Accept-Encoding", "gzip"))),
    Tool("nmap-nse", "scanner", (("Connection", "close"), ("User-Agent", "Mozilla/5.0 (compatible; Nmap Scripting "
                                                                         "Engine; https://nmap.org/book/nse.html)"),
                                 ("Host", ""))),
    Tool("masscan", "scanner", (("User-Agent", "masscan/1.3 (https://github.com/robertdavidgraham/masscan)"),
                                ("Accept", "*/*"))),
    Tool("burp", "scanner", (("Host", ""), ("User-Agent", "{browser}"), ("Accept", "*/*"),
                             ("Accept-Language", "en-US;q=0.9,en;q=0.8"), ("Accept-Encoding", "gzip, deflate, br"),
                             ("Connection", "close"), ("Cache-Control", "max-age=0"))),
)

# Crawler conventions (documented by each operator); the user agent comes from crawler-user-agents.
_CRAWLER_HEADERS = {
    "googlebot": (("Host", ""), ("Connection", "keep-alive"), ("Accept", "text/html,application/xhtml+xml,"
                                                                         "application/xml;q=0.9,*/*;q=0.8"),
                  ("From", "googlebot(at)googlebot.com"), ("User-Agent", "{ua}"),
                  ("Accept-Encoding", "gzip, deflate, br")),
    "bingbot": (("Cache-Control", "no-cache"), ("Connection", "Keep-Alive"), ("Pragma", "no-cache"),
                ("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate"), ("From", "bingbot(at)microsoft.com"),
                ("User-Agent", "{ua}"), ("Host", "")),
    "generic": (("Host", ""), ("User-Agent", "{ua}"), ("Accept", "*/*"), ("Accept-Encoding", "gzip")),
    "feed": (("Host", ""), ("User-Agent", "{ua}"), ("Accept", "application/rss+xml, application/atom+xml, "
                                                              "application/xml;q=0.9, */*;q=0.8"),
             ("Accept-Encoding", "gzip"), ("If-Modified-Since", "{date}")),
    "monitor": (("Host", ""), ("User-Agent", "{ua}"), ("Accept", "*/*"), ("Cache-Control", "no-cache"),
                ("Connection", "close")),
}


def _tool_name(pattern: str) -> str:
    """A crawler-user-agents pattern as a plain name ("[pP]ingdom" -> "pingdom")."""
    name = re.sub(r"\[([^\]])[^\]]*\]", r"\1", pattern)
    name = re.sub(r"\\.", "", name)
    name = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return name[:24] or "bot"


def _stable_half(key: str) -> str:
    import hashlib

    return "a" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "b"


def crawler_uas(half: str | None, kind: str) -> list[dict[str, str]]:
    """crawler-user-agents instances of ``kind`` (good or bad), split between halves by pattern."""
    rows = _bots()[kind]
    return [r for r in rows if half is None or _stable_half(r["pattern"]) == half]


def _fill(tool: Tool, rng: random.Random, browser_ua: str) -> list[list[str]]:
    v = rng.choice(tool.versions)
    out = []
    for name, value in tool.headers:
        value = value.replace("{v}", v).replace("{browser}", browser_ua)
        value = value.replace("{t}", rng.choice(("000001", "001234", "003519", "006521", "999990")))
        out.append([name, value])
    return out


def tool_look(rng: random.Random, tool: Tool, browser_ua: str) -> Look:
    """A library or scanner request's headers."""
    return Look(headers=_fill(tool, rng, browser_ua), wire=tool.wire, client_kind=tool.kind, source=tool.kind,
                family=tool.name)


def crawler_look(rng: random.Random, half: str | None) -> Look:
    """A declared crawler, feed reader or monitor with its operator's header conventions."""
    row = rng.choice(crawler_uas(half, "good"))
    ua = row["ua"]
    low = ua.lower()
    if "googlebot" in low or "google-" in low:
        key = "googlebot"
    elif "bingbot" in low:
        key = "bingbot"
    elif any(w in low for w in ("feed", "rss", "inoreader", "newsblur")):
        key = "feed"
    elif any(w in low for w in ("uptime", "pingdom", "statuscake", "site24x7", "monitor", "datadog")):
        key = "monitor"
    else:
        key = "generic"
    date = f"{rng.choice(('Mon', 'Tue', 'Wed', 'Thu', 'Fri'))}, {rng.randint(1, 28):02d} " \
           f"{rng.choice(('Jan', 'Mar', 'Jun', 'Sep', 'Nov'))} 2026 {rng.randint(0, 23):02d}:00:00 GMT"
    headers = [[n, v.replace("{ua}", ua).replace("{date}", date)] for n, v in _CRAWLER_HEADERS[key]]
    family = _tool_name(row["pattern"])
    return Look(headers=headers, wire="h1", client_kind="crawler", source="crawler-user-agents", family=family)


def bad_ua_look(rng: random.Random, half: str | None) -> Look:
    """An automation client that names itself (crawler-user-agents' library and scraper instances)."""
    row = rng.choice(crawler_uas(half, "bad"))
    headers = [["Host", ""], ["User-Agent", row["ua"]], ["Accept", "*/*"]]
    if rng.random() < 0.6:
        headers.append(["Accept-Encoding", rng.choice(("gzip", "gzip, deflate", "gzip, deflate, br"))])
    if rng.random() < 0.5:
        headers.append(["Connection", rng.choice(("keep-alive", "close"))])
    family = _tool_name(row["pattern"])
    return Look(headers=headers, wire="h1", client_kind="library", source="crawler-user-agents", family=family)


def headless_look(rng: random.Random, profile_sources: Sequence[str], ua_sources: Sequence[str]) -> Look:
    """Headless Chrome as automation frameworks launch it: the Chrome set with ``HeadlessChrome`` in the user
    agent and brand list, or with the brand hidden but no ``Accept-Language`` (older headless modes)."""
    look = browser(rng, "chrome", profile_sources, ua_sources)
    hide = rng.random() < 0.4
    for h in look.headers:
        if h[0].lower() == "user-agent" and not hide:
            h[1] = h[1].replace("Chrome/", "HeadlessChrome/")
        if h[0].lower() == "sec-ch-ua" and not hide:
            h[1] = h[1].replace("Google Chrome", "HeadlessChrome")
    look.client_kind = "headless"
    look.source = "headless"
    look.family = "headless-chrome"
    look.extras["no-accept-language"] = "1" if hide or rng.random() < 0.5 else ""
    return look


def spoofed_look(rng: random.Random, libraries: Sequence[Tool], profile_sources: Sequence[str],
                 ua_sources: Sequence[str]) -> Look:
    """A library that sends a browser's user agent and nothing else of the browser."""
    fam = rng.choice(("chrome", "safari-mac", "firefox", "safari-ios", "chrome-android"))
    ua = next(v for n, v in browser(rng, fam, profile_sources, ua_sources).headers if n.lower() == "user-agent")
    tool = rng.choice(libraries)
    headers = _fill(tool, rng, ua)
    for h in headers:
        if h[0].lower() == "user-agent":
            h[1] = ua
    if not any(h[0].lower() == "user-agent" for h in headers):
        headers.insert(1, ["User-Agent", ua])
    return Look(headers=headers, wire="h1", client_kind="library", source="spoofed", family=f"spoofed-{tool.name}")


# ---------------------------------------------------------------------------------------------- history

def history(rng: random.Random, client_label: str, client_kind: str) -> dict[str, float]:
    """Per-client window statistics (``ClientStats`` fields) before this request, by who the client is.

    The ranges overlap on purpose: a slow scraper, a busy person and a crawler on a small site look alike
    in their counts, so history is evidence, not a label.
    """
    if client_label == "human":
        slow = rng.random() < 0.85
        requests = rng.randint(0, 40) if slow else rng.randint(40, 400)
        rate = rng.uniform(0.2, 12) if slow else rng.uniform(10, 90)
        errors = rng.choice((0.0, 0.0, 0.0, rng.uniform(0, 0.08), rng.uniform(0, 0.25)))
        diversity = rng.uniform(0.2, 0.95)
        gap = rng.uniform(1.5, 90) if slow else rng.uniform(0.05, 3)
        passed = rng.choice((0, 0, 0, 1, 1, 2))
    elif client_label == "good_bot":
        requests = rng.randint(1, 3000)
        rate = rng.uniform(0.5, 80)
        errors = rng.uniform(0, 0.3)
        diversity = rng.uniform(0.5, 1.0)
        gap = rng.uniform(0.5, 120)
        passed = 0
    else:
        low_and_slow = rng.random() < 0.2
        requests = rng.randint(1, 60) if low_and_slow else rng.randint(30, 20000)
        rate = rng.uniform(0.5, 15) if low_and_slow else rng.uniform(20, 3000)
        errors = rng.uniform(0, 0.2) if low_and_slow else rng.uniform(0.05, 0.95)
        diversity = rng.uniform(0.05, 1.0)
        gap = rng.uniform(2, 60) if low_and_slow else rng.uniform(0.005, 2.5)
        passed = 0 if rng.random() < 0.9 else 1
    return {"requests": requests, "rate_per_min": round(rate, 3), "error_ratio": round(errors, 4),
            "path_diversity": round(diversity, 4), "mean_gap_s": round(gap, 4), "challenges_passed": passed}
