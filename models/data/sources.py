"""User-agent pools from PyPI packages, and the rule that holds sources out for evaluation.

Browsers come from ``fake-useragent`` (real, current user agents with their browser and
OS); crawlers and libraries from ``crawler-user-agents`` (instances with tags). Every
generated request draws from *sources* — a user agent, a path template, a payload
production, a sentence — and :func:`side_of` assigns each source by a stable hash to
one of three sides: ``train`` (the network learns from it), ``calib`` (temperature
scaling is fitted on it: sources the network never saw, so the fitted confidence holds
for new traffic, not only for familiar traffic) and ``eval`` (the held-out
measurement). Evaluation requests are built only from user agents, templates, payload
forms and texts that neither training nor calibration saw.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

Split = Literal["train", "calib", "eval", "unseen-releases", "unseen-injections", "unseen-protocols"]
SPLITS: tuple[Split, ...] = ("train", "calib", "eval")  # the sides of the hash split; the measurement splits (below) are outside it
EVAL_SHARE = 0.25
CALIB_SHARE = 0.15
_SALT = "clef-flash/split/1"


def _unit(kind: str, key: str) -> float:
    digest = hashlib.sha256(f"{_SALT}/{kind}/{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def side_of(kind: str, key: str) -> Split:
    """The side source ``key`` of ``kind`` belongs to (stable across runs and machines)."""
    u = _unit(kind, key)
    return "eval" if u < EVAL_SHARE else "calib" if u < EVAL_SHARE + CALIB_SHARE else "train"


def held_out(kind: str, key: str) -> bool:
    """True when the source belongs to the evaluation side."""
    return side_of(kind, key) == "eval"


def on_side(kind: str, key: str, split: Split) -> bool:
    """True when the source belongs to ``split``."""
    return side_of(kind, key) == split


def assign(members: list[Any], kind: str, key: Callable[[Any], str]) -> dict[Split, list[Any]]:
    """Split a group of sources three ways, keeping every side non-empty.

    A group of one is shared by every side (there is nothing to hold out); otherwise
    eval and train each keep at least one member, and calib falls back to the train
    members when the hash gave it none.
    """
    if len(members) == 1:
        return {"train": list(members), "calib": list(members), "eval": list(members)}
    sides: dict[Split, list[Any]] = {s: [m for m in members if side_of(kind, key(m)) == s] for s in SPLITS}
    if not sides["eval"]:
        donor = "calib" if sides["calib"] else "train"
        sides["eval"].append(sides[donor].pop())
    if not sides["train"]:
        donor = "calib" if sides["calib"] else "eval"
        sides["train"].append(sides[donor].pop(0))
    if not sides["calib"]:
        sides["calib"] = list(sides["train"])
    return sides


@dataclass(frozen=True, slots=True)
class BrowserAgent:
    """A real browser user agent and what its headers must look like.

    ``engine``: chromium, firefox or webkit (every iOS browser is WebKit); ``brand``
    is the client-hint brand of a Chromium browser; ``major`` its version.
    """

    ua: str
    engine: str
    mobile: bool
    brand: str
    major: int
    platform: str
    weight: float


@dataclass(frozen=True, slots=True)
class CrawlerAgent:
    """A crawler or library user agent with its tags from crawler-user-agents."""

    pattern: str
    ua: str
    tags: tuple[str, ...]
    role: str  # good, bad, library


# Tags whose crawlers operators generally want (search, feeds, link previews, uptime
# checks, archiving, ad landing-page checks) and tags they generally challenge (AI
# training crawlers, SEO crawlers, scanners, automated browsers). Libraries depend on
# where they go: API, feed and git paths are theirs; scraping HTML pages is not.
GOOD_TAGS = frozenset({"search-engine", "feed-reader", "monitoring", "social-preview", "advertising", "archiver"})
BAD_TAGS = frozenset({"ai-crawler", "seo", "scanner", "browser-automation"})
LIBRARY_TAGS = frozenset({"http-library"})

_BRANDS = (("Edg/", "Microsoft Edge"), ("EdgA/", "Microsoft Edge"), ("OPR/", "Opera"), ("YaBrowser/", "Yandex"),
           ("SamsungBrowser/", "Samsung Internet"), ("Chrome/", "Google Chrome"))


def _platform(ua: str) -> str:
    if "iPhone" in ua or "iPad" in ua:
        return "iOS"
    if "Android" in ua:
        return "Android"
    if "Windows" in ua:
        return "Windows"
    if "Macintosh" in ua:
        return "macOS"
    if "CrOS" in ua:
        return "Chrome OS"
    return "Linux"


def _classify(ua: str) -> tuple[str, str, int] | None:
    """(engine, brand, major) of a browser user agent, or None for what we do not model."""
    if "iPhone" in ua or "iPad" in ua:
        m = re.search(r"Version/(\d+)", ua) or re.search(r"OS (\d+)_", ua)
        return ("webkit", "Safari", int(m.group(1)) if m else 17)
    if "Firefox/" in ua:
        m = re.search(r"Firefox/(\d+)", ua)
        return ("firefox", "Firefox", int(m.group(1)) if m else 120)
    if "Chrome/" in ua:
        m = re.search(r"Chrome/(\d+)", ua)
        brand = next(b for marker, b in _BRANDS if marker in ua)
        return ("chromium", brand, int(m.group(1)) if m else 120)
    if "Safari/" in ua and "Macintosh" in ua and "Version/" in ua:
        m = re.search(r"Version/(\d+)", ua)
        return ("webkit", "Safari", int(m.group(1)) if m else 17)
    return None


@functools.cache
def browser_agents() -> tuple[BrowserAgent, ...]:
    """Distinct browser user agents from fake-useragent, weighted by their share."""
    text = resources.files("fake_useragent").joinpath("data/browsers.jsonl").read_text(encoding="utf-8")
    weights: dict[str, float] = {}
    for line in text.splitlines():
        row = json.loads(line)
        weights[row["useragent"]] = weights.get(row["useragent"], 0.0) + float(row.get("percent") or 0.01)
    # fake-useragent has few Firefox agents; add the documented Firefox UA format for
    # recent releases so the engine is not learnt from two dozen strings
    for version in range(102, 137):
        for os_part in ("Windows NT 10.0; Win64; x64", "Macintosh; Intel Mac OS X 10.15", "X11; Linux x86_64",
                        "X11; Ubuntu; Linux x86_64", "Android 14; Mobile"):
            ua = f"Mozilla/5.0 ({os_part}; rv:{version}.0) Gecko/{'20100101' if 'Android' not in os_part else f'{version}.0'} Firefox/{version}.0"
            weights.setdefault(ua, 0.01)
    out = []
    for ua, weight in sorted(weights.items()):
        kind = _classify(ua)
        if kind is None:
            continue
        engine, brand, major = kind
        out.append(BrowserAgent(ua, engine, "Mobile" in ua or "Android" in ua or "iPhone" in ua, brand, major,
                                _platform(ua), weight))
    return tuple(out)


def _role(tags: tuple[str, ...]) -> str | None:
    if BAD_TAGS.intersection(tags):
        return "bad"
    if GOOD_TAGS.intersection(tags):
        return "good"
    if LIBRARY_TAGS.intersection(tags):
        return "library"
    return None  # academic and untagged crawlers: no agreed label, left out


@functools.cache
def crawler_agents() -> tuple[CrawlerAgent, ...]:
    """Every crawler-user-agents instance with a role (good, bad, library)."""
    import crawleruseragents

    out = []
    for entry in crawleruseragents.CRAWLER_USER_AGENTS_DATA:
        tags = tuple(entry.get("tags") or ())
        role = _role(tags)
        if role is None:
            continue
        for ua in entry.get("instances") or ():
            if ua and ua.isascii():
                out.append(CrawlerAgent(entry["pattern"], ua, tags, role))
    return tuple(out)


@functools.cache
def browsers_for(split: Split) -> tuple[BrowserAgent, ...]:
    """Browser agents of one side of the split (by user-agent string), or a measurement split's own."""
    if split == UNSEEN_RELEASES:
        return releases_browser_agents()
    if split in MODULE_SPLITS:
        return unseen_module_browser_agents(split)
    return tuple(a for a in browser_agents() if on_side("ua", a.ua, split))


@functools.cache
def crawlers_for(split: Split, role: str) -> tuple[CrawlerAgent, ...]:
    """Crawler agents of one role and one side of the split (by user-agent string), or a measurement split's own."""
    if split == UNSEEN_RELEASES or split in MODULE_SPLITS:
        return tuple(a for a in (releases_crawler_agents() if split == UNSEEN_RELEASES else unseen_module_crawler_agents(split)) if a.role == role)
    return tuple(a for a in crawler_agents() if a.role == role and on_side("ua", a.ua, split))


# ---------------------------------------------------------------------------- the unseen-releases split
#
# ``unseen-releases`` is a side outside the hash split: it draws from sources no other side has, written for it alone,
# so that a model can be measured on traffic newer than anything its training, its calibration and its evaluation
# split were drawn from. Browsers are releases newer than any the packages ship (in the formats their
# vendors publish); crawlers are new releases of the verified search engines and operators invented here. It is used
# only to measure (``clefgate eval``): never to train, calibrate or choose.
UNSEEN_RELEASES: Split = "unseen-releases"

_CHROME_BUILDS = {137: 7151, 138: 7204, 139: 7258, 140: 7339, 141: 7390, 142: 7444, 143: 7499, 144: 7559}


def chrome_desktop(tail: str) -> list[tuple[str, float]]:
    """(user agent, weight) of one Chrome release on Windows, macOS and Linux in the reduced format (``tail``: its
    engine and version part), weighted roughly by share; the measurement splits start their Chrome releases with these."""
    return [(f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) {tail} Safari/537.36", 4.0),
            (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {tail} Safari/537.36", 1.2),
            (f"Mozilla/5.0 (X11; Linux x86_64) {tail} Safari/537.36", 0.4)]


# User-agent parts the module splits (models.data.unseen_injections, unseen_protocols) build their releases from.
WEBKIT = "AppleWebKit/605.1.15 (KHTML, like Gecko)"
IOS = "CPU iPhone OS 18_6 like Mac OS X"  # iOS 26 and later freeze the system version Safari reports at 18_6
IPAD = "CPU OS 18_6 like Mac OS X"
GOOGLEBOT = "compatible; Googlebot/2.1; +http://www.google.com/bot.html"
BINGBOT = "compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm"
NEXUS = "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko)"
APPLEBOT = "(Applebot/0.1; +http://www.apple.com/go/applebot)"


def safari_releases(minors: tuple[str, ...]) -> list[tuple[str, float]]:
    """(user agent, weight) of Safari releases on macOS, iPhone and iPad, weighted roughly by share."""
    out: list[tuple[str, float]] = []
    for minor in minors:
        out += [(f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {WEBKIT} Version/{minor} Safari/605.1.15", 1.0),
                (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Version/{minor} Mobile/15E148 Safari/604.1", 5.0),
                (f"Mozilla/5.0 (iPad; {IPAD}) {WEBKIT} Version/{minor} Mobile/15E148 Safari/604.1", 0.8)]
    return out


def search_crawler_release(v: int, chrome: str) -> list[tuple[str, tuple[str, ...], str]]:
    """(user agent, tags, role) of one Chrome release ``v`` (``chrome``: its ``Chrome/…`` token) as Googlebot (desktop and
    smartphone) and bingbot send it, and as headless Chrome on Linux, a bad bot's automation."""
    search = ("search-engine",)
    return [(f"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; {GOOGLEBOT}) {chrome} Safari/537.36", search, "good"),
            (f"{NEXUS} {chrome} Mobile Safari/537.36 ({GOOGLEBOT})", search, "good"),
            (f"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; {BINGBOT}) {chrome} Safari/537.36", search, "good"),
            (f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/{v}.0.0.0 Safari/537.36",
             ("browser-automation",), "bad")]


def applebot_releases(mac: tuple[str, ...], iphone: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], str]]:
    """(user agent, tags, role) of Applebot on Safari releases for macOS and iPhone."""
    search = ("search-engine",)
    return ([(f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {WEBKIT} Version/{v} Safari/605.1.15 {APPLEBOT}", search, "good") for v in mac]
            + [(f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Version/{v} Mobile/15E148 Safari/604.1 {APPLEBOT}", search, "good") for v in iphone])


def _releases_browser_strings() -> list[tuple[str, float]]:
    """(user agent, weight) of browser releases after the packages' newest, weighted roughly by share."""
    out: list[tuple[str, float]] = []
    for v in _CHROME_BUILDS:
        tail = f"AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0"
        out += chrome_desktop(tail)
        out += [(f"Mozilla/5.0 (X11; CrOS x86_64 16328.65.0) {tail} Safari/537.36", 0.2),
                (f"Mozilla/5.0 (Linux; Android 10; K) {tail} Mobile Safari/537.36", 3.5),
                (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) {tail} Safari/537.36 Edg/{v}.0.0.0", 1.0),
                (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {tail} Safari/537.36 Edg/{v}.0.0.0", 0.2),
                (f"Mozilla/5.0 (Linux; Android 10; K) {tail} Mobile Safari/537.36 EdgA/{v}.0.0.0", 0.1),
                (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) {tail} Safari/537.36 OPR/{v - 16}.0.0.0", 0.2),
                (f"Mozilla/5.0 (iPhone; CPU iPhone OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/{v}.0.{_CHROME_BUILDS[v]}.{v % 7 * 13 + 40} Mobile/15E148 Safari/604.1", 0.4)]
    for v in range(139, 147):
        out += [(f"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.6),
                (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.2),
                (f"Mozilla/5.0 (X11; Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.3),
                (f"Mozilla/5.0 (Android 15; Mobile; rv:{v}.0) Gecko/{v}.0 Firefox/{v}.0", 0.1)]
    for minor in ("26.0", "26.0.1", "26.1", "26.2"):  # Safari's numbering jumped from 18 to 26 in 2025; iOS 26 reports 18_6
        out += [(f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{minor} Safari/605.1.15", 1.0),
                (f"Mozilla/5.0 (iPhone; CPU iPhone OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{minor} Mobile/15E148 Safari/604.1", 5.0),
                (f"Mozilla/5.0 (iPad; CPU OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{minor} Mobile/15E148 Safari/604.1", 0.8)]
    for samsung, chrome in ((28, 130), (29, 136)):
        out.append((f"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/{samsung}.0 Chrome/{chrome}.0.0.0 Mobile Safari/537.36", 0.5))
    return out


def _agents(strings: list[tuple[str, float]], known: set[str]) -> tuple[BrowserAgent, ...]:
    """Browser agents of (user agent, weight) pairs, leaving out the unclassifiable and the ``known``."""
    out = []
    for ua, weight in strings:
        kind = _classify(ua)
        if kind is None or ua in known:
            continue
        engine, brand, major = kind
        out.append(BrowserAgent(ua, engine, "Mobile" in ua or "Android" in ua or "iPhone" in ua, brand, major, _platform(ua), weight))
    return tuple(out)


@functools.cache
def releases_browser_agents() -> tuple[BrowserAgent, ...]:
    """The unseen-releases split's browsers: none of them is a string of :func:`browser_agents`."""
    return _agents(_releases_browser_strings(), {a.ua for a in browser_agents()})


def _releases_crawler_strings() -> list[tuple[str, tuple[str, ...], str]]:
    """(user agent, tags, role): this year's verified search-engine releases, and operators written for the unseen-releases split."""
    out: list[tuple[str, tuple[str, ...], str]] = []
    for v, build in _CHROME_BUILDS.items():
        chrome = f"Chrome/{v}.0.{build}.{v % 5 * 31 + 7}"
        out += [(f"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) {chrome} Safari/537.36", ("search-engine",), "good"),
                (f"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) {chrome} Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", ("search-engine",), "good"),
                (f"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) {chrome} Safari/537.36", ("search-engine",), "good"),
                (f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/{v}.0.0.0 Safari/537.36", ("browser-automation",), "bad")]
    for version in ("17.4", "18.1", "18.5", "26.0"):
        out.append((f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{version} Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", ("search-engine",), "good"))
    invented = (
        ("Lectern/3.1 (Feed Fetcher; +https://lectern.example/about; {n} subscribers)", ("feed-reader",), "good"),
        ("Quire RSS/0.9.{n} (+https://quire.example/bot)", ("feed-reader",), "good"),
        ("Mozilla/5.0 (compatible; Brookfeed/2.{n}; +https://brookfeed.example/crawler)", ("feed-reader",), "good"),
        ("Vigilo-Uptime/1.{n} (+https://vigilo.example/monitoring)", ("monitoring",), "good"),
        ("Mozilla/5.0 (compatible; StatusHarbor/4.{n}; +https://statusharbor.example/bot)", ("monitoring",), "good"),
        ("Beaconly Health Check/2.{n}", ("monitoring",), "good"),
        ("Mozilla/5.0 (compatible; Threadwave-LinkPreview/1.{n}; +https://threadwave.example/preview)", ("social-preview",), "good"),
        ("Chorus-Unfurl/3.{n} (+https://chorus.example/unfurl)", ("social-preview",), "good"),
        ("Mozilla/5.0 (compatible; Marlinbot/1.{n}; +https://marlin-search.example/bot)", ("search-engine",), "good"),
        ("Wrenbot/0.{n} (+https://wren.example/search/crawler)", ("search-engine",), "good"),
        ("Mozilla/5.0 (compatible; Stacksave-Archiver/1.{n}; +https://stacksave.example)", ("archiver",), "good"),
        ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Corvidbot/1.{n}; +https://corvid.example/bot)", ("ai-crawler",), "bad"),
        ("Mozilla/5.0 (compatible; LumenAI-Crawler/2.{n}; +https://lumen-ai.example/crawler)", ("ai-crawler",), "bad"),
        ("TesseraBot/1.{n} (+https://tessera.example/training-data)", ("ai-crawler",), "bad"),
        ("Mozilla/5.0 (compatible; Halyard-Agent/0.{n}; AI assistant fetch; +https://halyard.example/agent)", ("ai-crawler",), "bad"),
        ("KestrelGPT-Fetcher/1.{n}", ("ai-crawler",), "bad"),
        ("Mozilla/5.0 (compatible; RankLoomBot/3.{n}; +https://rankloom.example/bot.html)", ("seo",), "bad"),
        ("Mozilla/5.0 (compatible; BacklinkHarvester/7.{n}; +http://blh.example/)", ("seo",), "bad"),
        ("SerpLantern Site Audit/5.{n}", ("seo",), "bad"),
        ("Mozilla/5.0 (compatible; SurfaceMapper/2.{n}; +https://surfacemapper.example/scanning)", ("scanner",), "bad"),
        ("AttackSurfaceProbe/1.{n} (research; contact abuse@asp.example)", ("scanner",), "bad"),
    )
    for fmt, tags, role in invented:
        out += [(fmt.format(n=n), tags, role) for n in (0, 3, 7, 12)]
    return out


@functools.cache
def releases_crawler_agents() -> tuple[CrawlerAgent, ...]:
    """The unseen-releases split's crawlers: none of them is a string of :func:`crawler_agents`."""
    return _crawlers(_releases_crawler_strings(), {a.ua for a in crawler_agents()})


def _crawlers(strings: list[tuple[str, tuple[str, ...], str]], known: set[str]) -> tuple[CrawlerAgent, ...]:
    """Crawler agents of (user agent, tags, role) triples, leaving out the ``known``."""
    return tuple(CrawlerAgent(re.escape(ua), ua, tags, role) for ua, tags, role in strings if ua not in known)


# ---------------------------------------------------------------------------- the module splits
#
# Each module split is a side outside the hash split whose sources are a module of their own
# (``models.data.unseen_injections``, ``models.data.unseen_protocols``): drawn like the unseen-releases split, from
# sources none of the sides, the unseen-releases split or a module split listed before it has. Used only to measure,
# never to train or choose. A new one is a module and a name at the end of ``MODULE_SPLITS``.
UNSEEN_INJECTIONS: Split = "unseen-injections"
UNSEEN_PROTOCOLS: Split = "unseen-protocols"
MODULE_SPLITS: tuple[Split, ...] = (UNSEEN_INJECTIONS, UNSEEN_PROTOCOLS)


def unseen_module(split: Split) -> Any:
    """The module holding a module split's sources (imported on first use: it imports ``site`` and ``attacks``)."""
    return importlib.import_module(f"models.data.{split.replace('-', '_')}")


def built_before(split: Split) -> tuple[Split, ...]:
    """The module splits listed before ``split`` (it has none of their sources)."""
    return MODULE_SPLITS[:MODULE_SPLITS.index(split)]


@functools.cache
def unseen_module_browser_agents(split: Split) -> tuple[BrowserAgent, ...]:
    """A module split's browsers: none of them is a string of the sides', the unseen-releases split's or a module split listed before it."""
    known = browser_agents() + releases_browser_agents() + tuple(a for e in built_before(split) for a in unseen_module_browser_agents(e))
    return _agents(list(unseen_module(split).BROWSER_STRINGS), {a.ua for a in known})


@functools.cache
def unseen_module_crawler_agents(split: Split) -> tuple[CrawlerAgent, ...]:
    """A module split's crawlers: none of them is a string of the sides', the unseen-releases split's or a module split listed before it."""
    known = crawler_agents() + releases_crawler_agents() + tuple(a for e in built_before(split) for a in unseen_module_crawler_agents(e))
    return _crawlers(list(unseen_module(split).CRAWLER_STRINGS), {a.ua for a in known})
