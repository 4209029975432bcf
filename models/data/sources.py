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
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

Split = Literal["train", "calib", "eval"]
SPLITS: tuple[Split, ...] = ("train", "calib", "eval")
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
    """Browser agents of one side of the split (by user-agent string)."""
    return tuple(a for a in browser_agents() if on_side("ua", a.ua, split))


@functools.cache
def crawlers_for(split: Split, role: str) -> tuple[CrawlerAgent, ...]:
    """Crawler agents of one role and one side of the split (by user-agent string)."""
    return tuple(a for a in crawler_agents() if a.role == role and on_side("ua", a.ua, split))
