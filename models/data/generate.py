"""Generate labelled requests, reproducibly, for one side of the hold-out split.

Usage::

    python -m models.data.generate --split eval --rows 16000 --seed 7 --out models/work/data/eval.jsonl

Every record has the shape ``clefgate eval`` and ``gateway.features.from_record``
read — ``method``, ``path`` (with query), ``http_version``, ``headers`` (wire order),
``body``, ``client_ip`` — plus ``label`` (human, good_bot, bad_bot, attack),
``attack_kind`` for attacks, ``verified`` for good bots whose identity a rule can
check (published crawler ranges, credentials), ``client`` (per-client window
statistics) on part of the rows, and ``source`` (how the row was made, for
per-source error analysis). The same seed, split and settings (``--dev-questions``,
``--routes``, ``--rest-writes``, ``--evasions``, ``--mounts``, ``--xhr-attacks``) always give the same rows.

Three splits outside the hash split measure a model on traffic newer than all it was built from.
Each draws the same kinds of request in the same mix, only from sources written for it that no
side of the split (and no split listed before it) has::

    python -m models.data.generate --split unseen-releases --rows 16000 --seed 7 --out models/work/unseen-releases.jsonl

``unseen-releases`` (``sources.UNSEEN_RELEASES``): newer browser and library releases, crawlers,
page shapes, texts, payload productions, probe families and scanners of its own.
``unseen-injections`` (``models.data.unseen_injections``): browsers, URL conventions and text no
other split has, and injection families none has (XPath, ESI, SSI, GraphQL abuse, formulas).
``unseen-protocols`` (``models.data.unseen_protocols``): the same again, with attack families on
authentication and protocols none has (JWT, SAML, open redirects, log injection, Cypher, CSS).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import ipaddress
import json
import random
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, urlencode

from models.data import attacks, automation, browsers, site
from models.data.site import Draw, Endpoint
from models.data.sources import MODULE_SPLITS, UNSEEN_RELEASES, BrowserAgent, CrawlerAgent, Split, browsers_for, crawlers_for, unseen_module

CLASSES = ("human", "good_bot", "bad_bot", "attack")
DEFAULT_MIX = {"human": 0.42, "good_bot": 0.13, "bad_bot": 0.21, "attack": 0.24}

# Published crawler ranges (a few prefixes each) — facts, used so that verified crawlers
# in the data come from where a verified-crawler rule expects them.
CRAWLER_RANGES = {
    "Googlebot": ("66.249.64.0/27", "66.249.66.0/27", "66.249.68.0/27", "66.249.72.0/27", "66.249.79.0/27"),
    "bingbot": ("157.55.39.0/24", "207.46.13.0/24", "40.77.167.0/24", "52.167.144.0/24"),
    "Applebot": ("17.166.20.0/24", "17.166.150.0/24", "17.241.208.160/27"),
    "DuckDuckBot": ("20.191.45.212/32", "40.88.21.235/32", "52.142.26.175/32"),
}
_DATACENTERS = ("3.80.0.0/12", "34.64.0.0/10", "35.192.0.0/12", "45.33.0.0/17", "51.15.0.0/16", "104.16.0.0/13",
                "138.68.0.0/16", "159.65.0.0/16", "167.99.0.0/16", "178.62.0.0/16", "185.220.100.0/22", "47.74.0.0/15")
_RESIDENTIAL = ("24.0.0.0/8", "73.0.0.0/8", "81.0.0.0/8", "86.0.0.0/8", "92.0.0.0/8", "98.0.0.0/8", "109.0.0.0/8",
                "176.0.0.0/8", "188.0.0.0/8", "2.0.0.0/8", "5.0.0.0/8", "37.0.0.0/8", "79.0.0.0/8", "90.0.0.0/8")
_SCANNER_UAS = ("sqlmap/1.7.2#stable (https://sqlmap.org)", "sqlmap/1.8.3#stable (https://sqlmap.org)", "Mozilla/5.00 (Nikto/2.5.0) (Evasions:None) (Test:000001)",
                "Mozilla/5.0 (compatible; Nmap Scripting Engine; https://nmap.org/book/nse.html)", "Fuzz Faster U Fool v2.1.0-dev",
                "gobuster/3.6", "Wfuzz/3.1.0", "masscan/1.3 (https://github.com/robertdavidgraham/masscan)", "zgrab/0.x",
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/74.0.3729.169 Safari/537.36",
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/81.0.4044.129 Safari/537.36",
                "Mozilla/5.0 (Windows NT 6.1; WOW64; Trident/7.0; rv:11.0) like Gecko", "Nuclei - Open-source project (github.com/projectdiscovery/nuclei)",
                "WPScan v3.8.25 (https://wpscan.com/wordpress-security-scanner)", "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)",
                "ReactorNetty/dev", "l9explore/1.2.2", "Hello World", "Mozilla/5.0 zgrab/0.x", "xfa1", "Expanse, a Palo Alto Networks company, searches across the global IPv4 space multiple times per day to identify customers' presences on the Internet. If you would like to be excluded from our scans, please send IP addresses/domains to: scaninfo@paloaltonetworks.com")
# the unseen-releases split's scanners (``sources.UNSEEN_RELEASES``): newer releases of the tools above and tools none of the sides has
_RELEASES_SCANNER_UAS = ("sqlmap/1.9.8#stable (https://sqlmap.org)", "Mozilla/5.00 (Nikto/2.5.0) (Evasions:4) (Test:003175)", "feroxbuster/2.11.0",
                     "Nuclei - Open-source project (github.com/projectdiscovery/nuclei) v3.4.7", "dirsearch/0.4.3", "katana/1.1.3",
                     "Mozilla/5.0 (X11; Linux x86_64; rv:78.0) Gecko/20100101 Firefox/78.0", "Mozilla/5.0 (compatible; Hakai/2.0)",
                     "Mozila/5.0 (Windows NT 10.0; Win64; x64)", "WPScan v3.8.28 (https://wpscan.com/wordpress-security-scanner)", "xray/1.9.11",
                     "Mozilla/5.0 (Windows NT 6.3; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/79.0.3945.79 Safari/537.36 (httpx scan)")
_PARAMS = ("q", "id", "search", "page", "name", "file", "url", "redirect", "next", "cat", "item", "user", "lang", "template", "path",
           "cmd", "host", "ip", "query", "sort", "order", "filter", "callback", "return", "dest", "view", "doc", "email", "debug")
_HEADER_TARGETS = ("User-Agent", "Referer", "X-Api-Version", "X-Custom-Header", "Accept-Language", "X-Originating-URL", "Origin", "X-Client-Data")


def _ip(rng: random.Random, ranges: Sequence[str]) -> str:
    net = ipaddress.ip_network(rng.choice(ranges))
    return str(net[rng.randrange(net.num_addresses)]) if net.num_addresses > 1 else str(net.network_address)


# Engine shares of browser traffic (roughly the public usage statistics): the pools
# themselves are skewed (fake-useragent has few Firefox agents).
ENGINE_SHARE = {"chromium": 0.58, "webkit": 0.30, "firefox": 0.12}


def _weighted(rng: random.Random, agents: Sequence[BrowserAgent]) -> BrowserAgent:
    """An agent: engine by ENGINE_SHARE (among those present), then by the pool's weights."""
    engines = [e for e in ENGINE_SHARE if any(a.engine == e for a in agents)]
    engine = rng.choices(engines, weights=[ENGINE_SHARE[e] for e in engines])[0]
    pool = [a for a in agents if a.engine == engine]
    return rng.choices(pool, weights=[a.weight for a in pool])[0]


def _cookie(rng: random.Random) -> str:
    names = rng.sample(("session", "sid", "_ga", "_gid", "csrftoken", "cart", "theme", "lang", "consent", "_fbp", "PHPSESSID"), rng.randint(1, 4))
    return "; ".join(f"{n}={''.join(rng.choice('abcdef0123456789') for _ in range(rng.randint(8, 32)))}" for n in names)


def _stats(rng: random.Random, profile: str) -> dict[str, float]:
    """Per-client window statistics, as gateway.clients reports them, by behaviour profile."""
    if profile == "human":
        return {"requests": rng.randint(1, 250), "rate_per_min": round(rng.uniform(0.2, 30), 2), "error_ratio": round(rng.uniform(0, 0.08), 3),
                "path_diversity": round(rng.uniform(0.05, 0.8), 3), "mean_gap_s": round(rng.uniform(0.8, 90), 2), "challenges_passed": rng.choice((0, 0, 0, 1))}
    if profile == "crawler":
        return {"requests": rng.randint(5, 2000), "rate_per_min": round(rng.uniform(0.5, 40), 2), "error_ratio": round(rng.uniform(0, 0.2), 3),
                "path_diversity": round(rng.uniform(0.5, 1.0), 3), "mean_gap_s": round(rng.uniform(1.5, 120), 2), "challenges_passed": 0}
    if profile == "client":
        return {"requests": rng.randint(1, 3000), "rate_per_min": round(rng.uniform(0.1, 60), 2), "error_ratio": round(rng.uniform(0, 0.05), 3),
                "path_diversity": round(rng.uniform(0.0, 0.4), 3), "mean_gap_s": round(rng.uniform(1, 600), 2), "challenges_passed": 0}
    if profile == "scraper":
        return {"requests": rng.randint(50, 20000), "rate_per_min": round(rng.uniform(40, 900), 1), "error_ratio": round(rng.uniform(0, 0.35), 3),
                "path_diversity": round(rng.uniform(0.75, 1.0), 3), "mean_gap_s": round(rng.uniform(0.02, 1.5), 3), "challenges_passed": 0}
    if profile == "stuffing":
        return {"requests": rng.randint(20, 5000), "rate_per_min": round(rng.uniform(10, 400), 1), "error_ratio": round(rng.uniform(0.6, 1.0), 3),
                "path_diversity": round(rng.uniform(0.0, 0.1), 3), "mean_gap_s": round(rng.uniform(0.1, 6), 3), "challenges_passed": 0}
    # scanner
    return {"requests": rng.randint(10, 30000), "rate_per_min": round(rng.uniform(20, 2000), 1), "error_ratio": round(rng.uniform(0.5, 1.0), 3),
            "path_diversity": round(rng.uniform(0.8, 1.0), 3), "mean_gap_s": round(rng.uniform(0.01, 2), 3), "challenges_passed": 0}


_FRESH = {"requests": 0, "rate_per_min": 0.0, "error_ratio": 0.0, "path_diversity": 0.0, "mean_gap_s": 0.0, "challenges_passed": 0}


def _client(rng: random.Random, profile: str, present: float = 0.75, fresh: float = 0.2) -> dict[str, float] | None:
    """Per-client statistics as the gateway passes them to the model.

    Serving always fills ``client`` (zeros for a client's first request, since the
    window is read before the request is counted); records replayed or evaluated
    without state have none. So: absent for 1 - ``present`` of rows, zeros for
    ``fresh`` of the present ones, and the behaviour profile otherwise.
    """
    r = rng.random()
    if r >= present:
        return None
    if r < present * fresh:
        return dict(_FRESH)
    return _stats(rng, profile)


def _record(method: str, target: str, headers: list[list[str]], body: str | None, ip: str, label: str, source: str,
            *, version: str = "1.1", kind: str | None = None, verified: bool = False,
            client: Mapping[str, float] | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"method": method, "path": target, "http_version": version, "headers": headers, "body": body,
                           "client_ip": ip, "label": label, "source": source}
    if kind is not None:
        rec["attack_kind"] = kind
    if label == "good_bot":
        rec["verified"] = verified
    if client is not None:
        rec["client"] = dict(client)
    return rec


def _fix_length(headers: list[list[str]], body: str | None) -> None:
    if body is None:
        return
    n = str(len(body.encode("utf-8")))
    for h in headers:
        if h[0].lower() == "content-length":
            h[1] = n


def _templates(rng: Draw, site_name: str, groups: tuple[str, ...]) -> tuple[site.Template, ...]:
    """The draw's templates of ``groups`` on ``site_name`` (its pages when it has none of them)."""
    return (site.templates(rng.split, site_name, groups, routes=rng.routes, rest_writes=rng.rest_writes)
            or site.templates(rng.split, site_name, ("page",), routes=rng.routes, rest_writes=rng.rest_writes))


def _make(rng: Draw, tpl: site.Template) -> Endpoint:
    """``tpl``'s endpoint; on the training side with ``mounts``, that share of them under a directory of
    ``site.MOUNTS`` (robots and health checks stay at the root, where clients look for them)."""
    ep = tpl.make(rng)
    if rng.mounts and tpl.group not in ("robots", "health") and rng.random() < rng.mounts:
        return dataclasses.replace(ep, target=f"/{rng.choice(site.MOUNTS)}{ep.target}")
    return ep


def _browser_request(rng: Draw, agent: BrowserAgent, ep: Endpoint, host: str) -> tuple[list[list[str]], str]:
    """Headers a real browser sends for ``ep`` (referer, cookies, fetch site chosen plausibly)."""
    kind = ep.fetch if ep.fetch in browsers.KINDS else "navigate"
    if ep.kind == "form":
        kind = "form"
    if kind == "navigate":
        site_kind = rng.choices(("none", "same-origin", "cross-site"), weights=(0.2, 0.62, 0.18))[0]
    else:
        site_kind = "same-origin" if rng.random() < 0.92 else "same-site"
    if site_kind == "same-origin" or (kind != "navigate" and rng.random() < 0.95):
        referer = f"https://{host}{rng.choice(('/', '/search?q=shoes', '/c/men', '/t/welcome/12', '/docs/latest/index.html', '/explore/repos'))}"
    elif site_kind == "cross-site":
        referer = rng.choice(("https://www.google.com/", "https://duckduckgo.com/", "https://www.bing.com/", "https://t.co/",
                              "https://news.ycombinator.com/", "https://www.reddit.com/", "android-app://com.google.android.gm/"))
    else:
        referer = None
    # Origin on a body-less write: people's script writes only (REST writes). A browser-shaped attacker's body-less
    # POST probe keeps the head the shipped versions were trained on, so the sides generate as before.
    ctx = browsers.Context(host=host, kind=kind, site=site_kind, referer=referer,
                           cookie=_cookie(rng) if rng.random() < 0.6 else None, content_type=ep.content_type,
                           content_length=len(ep.body.encode()) if ep.body else None, locale=rng.randrange(len(browsers.LOCALES)),
                           lowercase=rng.random() < 0.15, reload=rng.random() < 0.08, requested_with=rng.random() < 0.2,
                           accept_json=rng.random() < 0.5, origin=ep.kind == "xhr" and ep.method not in ("GET", "HEAD"))
    head = browsers.browser_head(agent, ctx, rng)
    if rng.random() < 0.08:
        head.append(["DNT" if rng.random() < 0.5 else "Sec-GPC", "1"])
    version = "2.0" if ctx.lowercase and rng.random() < 0.3 else "1.1"
    return head, version


# ---------------------------------------------------------------------------- humans

def human(rng: Draw) -> dict[str, Any]:
    """A person in a browser: pages, assets, XHR, searches (hard negatives included), forms."""
    agent = _weighted(rng, browsers_for(rng.split))
    site_name = rng.choice(site.SITES[:5])
    host = site.HOSTS[site_name]
    group = rng.choices(("page", "home", "asset", "xhr", "xhr_post", "search", "form", "login", "download", "feed"),
                        weights=(0.32, 0.04, 0.22, 0.09, 0.04, 0.14, 0.08, 0.03, 0.02, 0.02))[0]
    options = _templates(rng, site_name, (group,))
    tpl = rng.choice(options)
    return person(rng, agent, _make(rng, tpl), host, f"human/{agent.engine}/{tpl.id}")


def person(rng: Draw, agent: BrowserAgent, ep: Endpoint, host: str, source: str) -> dict[str, Any]:
    """A person's record for ``ep``: the browser's head for it, a residential address and a person's client window."""
    head, version = _browser_request(rng, agent, ep, host)
    _fix_length(head, ep.body)
    stats = _client(rng, "human")
    return _record(ep.method, ep.target, head, ep.body, _ip(rng, _RESIDENTIAL), "human", source, version=version, client=stats)


# ---------------------------------------------------------------------------- good bots

def _crawler_endpoint(rng: Draw, tags: tuple[str, ...]) -> tuple[Endpoint, str]:
    site_name = rng.choice(site.SITES[:5])
    if "feed-reader" in tags:
        groups: tuple[str, ...] = ("feed",)
    elif "monitoring" in tags:
        groups = ("health",)
    elif "social-preview" in tags or "advertising" in tags:
        groups = ("page",)
    else:  # search engines and archivers: canonical pages, robots, sitemaps, a few assets
        groups = ("page", "page", "page", "robots", "robots", "asset")
    group = rng.choice(groups)
    options = _templates(rng, site_name, (group,))
    tpl = rng.choice(options)
    return _make(rng, tpl), site.HOSTS[site_name]


def _crawler_ip(rng: random.Random, agent: CrawlerAgent) -> tuple[str, bool]:
    for name, ranges in CRAWLER_RANGES.items():
        if name.lower() in agent.ua.lower():
            return _ip(rng, ranges), True
    return _ip(rng, _DATACENTERS), False


def good_bot(rng: Draw) -> dict[str, Any]:
    """Declared crawlers operators want, and API/feed/git/download clients on their own paths."""
    if rng.random() < 0.45:
        agent = rng.choice(crawlers_for(rng.split, "good"))
        ep, host = _crawler_endpoint(rng, agent.tags)
        head = automation.crawler_head(agent.ua, host, rng, tags=agent.tags, conditional="feed-reader" in agent.tags and rng.random() < 0.7)
        ip, verified = _crawler_ip(rng, agent)
        method = "HEAD" if "monitoring" in agent.tags and rng.random() < 0.4 else "GET"
        stats = _client(rng, "crawler")
        return _record(method, ep.target, head, None, ip, "good_bot", f"good/crawler/{agent.tags[0]}", verified=verified, client=stats)
    family, ua = rng.choice(automation.library_agents(rng.split))
    if family == "git" or (family in ("curl", "wget", "go") and rng.random() < 0.3):
        groups: tuple[str, ...] = ("git",) if family == "git" else ("download",)
        site_name = "forge"
    elif family == "feedcli":
        groups, site_name = ("feed",), rng.choice(("blog", "forum"))
    else:
        groups = ("api",)
        site_name = rng.choice(("api", "forge"))
    tpl = rng.choice(_templates(rng, site_name, groups))
    ep = tpl.make(rng)
    host = site.HOSTS[site_name]
    credentialed = ep.kind in ("api", "git") and rng.random() < 0.75
    auth = None
    if credentialed:
        auth = rng.choice((f"Bearer {''.join(rng.choice('abcdefghijklmnopqrstuvwxyz0123456789') for _ in range(40))}",
                           f"token ghp_{''.join(rng.choice('ABCDEFabcdef0123456789') for _ in range(36))}",
                           "Basic " + "".join(rng.choice("ABCDEFGHabcdefgh0123456789") for _ in range(24)) + "=="))
    accept = {"api": "application/json", "feed": "application/rss+xml, application/atom+xml, */*;q=0.5"}.get(ep.kind)
    head = automation.library_head(family, ua, host, rng, accept=accept if rng.random() < 0.7 else None, auth=auth,
                                   content_type=ep.content_type, content_length=len(ep.body.encode()) if ep.body else None)
    _fix_length(head, ep.body)
    stats = _client(rng, "client")
    return _record(ep.method, ep.target, head, ep.body, _ip(rng, _DATACENTERS + _RESIDENTIAL), "good_bot",
                   f"good/client/{family}/{ep.kind}", verified=credentialed, client=stats)


# ---------------------------------------------------------------------------- bad bots

def _page_endpoint(rng: Draw, groups: tuple[str, ...] = ("page", "search", "home")) -> tuple[Endpoint, str, str]:
    site_name = rng.choice(site.SITES[:5])
    tpl = rng.choice(_templates(rng, site_name, groups))
    return _make(rng, tpl), site.HOSTS[site_name], tpl.id


def bad_bot(rng: Draw) -> dict[str, Any]:
    """Crawlers operators challenge, scrapers, spoofed browsers, credential stuffing, fast headless browsers."""
    r = rng.random()
    if r < 0.36:  # self-declared: AI and SEO crawlers, scanners' user agents, automation tools
        agent = rng.choice(crawlers_for(rng.split, "bad"))
        # AI and SEO crawlers take every parametrised URL they find (searches, filters, pagination);
        # robots.txt and sitemaps are left out: every client may read those (a rule allows them)
        ep, host, _ = _page_endpoint(rng, ("page", "search", "home"))
        if any(t in agent.tags for t in ("browser-automation",)) and "Mozilla" in agent.ua and rng.random() < 0.5:
            browser = _weighted(rng, [a for a in browsers_for(rng.split) if a.engine == "chromium"])
            fake = BrowserAgent(agent.ua, "chromium", False, browser.brand, browser.major, "Linux", 1.0)
            head, _ = _browser_request(rng, fake, ep, host)
        else:
            head = automation.crawler_head(agent.ua, host, rng, tags=agent.tags)
        stats = _client(rng, "scraper")
        return _record("GET", ep.target, head, None, _ip(rng, _DATACENTERS), "bad_bot", f"bad/declared/{agent.tags[0]}", client=stats)
    if r < 0.52:  # libraries scraping HTML pages
        family, ua = rng.choice([x for x in automation.library_agents(rng.split) if x[0] not in ("git", "feedcli")])
        ep, host, _ = _page_endpoint(rng)
        accept = rng.choice((None, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"))
        head = automation.library_head(family, ua, host, rng, accept=accept)
        stats = _client(rng, "scraper")
        return _record("GET", ep.target, head, None, _ip(rng, _DATACENTERS), "bad_bot", f"bad/scraper/{family}", client=stats)
    if r < 0.86:  # spoofed browser user agents with the head wrong
        agent = _weighted(rng, browsers_for(rng.split))
        ep, host, _ = _page_endpoint(rng, ("page", "search", "home", "xhr"))
        if rng.random() < 0.35:
            family, _ = rng.choice([x for x in automation.library_agents(rng.split) if x[0] in ("requests", "httpx", "go", "aiohttp", "node", "axios", "curl", "java", "okhttp")])
            head = automation.library_head(family, agent.ua, host, rng, accept=rng.choice((None, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")))
            version, why = ("1.0" if rng.random() < 0.1 else "1.1"), f"library_head:{family}"
        else:
            head, version = _browser_request(rng, agent, ep, host)
            possible = ["no_accept_language", "shuffled", "http10", "accept_any", "no_accept_encoding", "lowercase_mixed", "connection_close"]
            if agent.engine in ("chromium", "firefox"):
                possible.append("no_fetch_metadata")
            if agent.engine == "chromium":
                possible += ["ch_mismatch", "ch_platform", "missing_ch", "missing_ch"]
            else:
                possible.append("ch_on_non_chromium")
            chosen = rng.sample(possible, k=rng.choice((1, 1, 2, 2, 3)))
            head, version = automation.spoof_defects(head, agent.ua, agent.engine, rng, chosen)
            why = "+".join(sorted(chosen))
        stats = _client(rng, "scraper")
        return _record(ep.method if ep.method == "GET" else "GET", ep.target, head, None, _ip(rng, _DATACENTERS + _RESIDENTIAL),
                       "bad_bot", f"bad/spoof/{why}", version=version, client=stats)
    if r < 0.93:  # credential stuffing against login forms
        site_name = rng.choice(site.SITES[:5])
        tpl = rng.choice(site.templates(rng.split, site_name, ("login",)))
        ep = _make(rng, tpl)
        host = site.HOSTS[site_name]
        if rng.random() < 0.5:
            agent = _weighted(rng, browsers_for(rng.split))
            head, version = _browser_request(rng, agent, ep, host)
            if rng.random() < 0.5:
                head, version = automation.spoof_defects(head, agent.ua, agent.engine, rng, [rng.choice(("no_accept_language", "shuffled", "accept_any"))])
        else:
            family, ua = rng.choice([x for x in automation.library_agents(rng.split) if x[0] in ("requests", "go", "curl", "httpx", "node")])
            head = automation.library_head(family, ua, host, rng, content_type=ep.content_type, content_length=len(ep.body or ""))
            version = "1.1"
        _fix_length(head, ep.body)
        return _record("POST", ep.target, head, ep.body, _ip(rng, _DATACENTERS + _RESIDENTIAL), "bad_bot", "bad/stuffing",
                       version=version, client=_stats(rng, "stuffing"))
    # a real browser engine driven fast: perfect head, only behaviour gives it away
    agent = _weighted(rng, [a for a in browsers_for(rng.split) if a.engine == "chromium"])
    ep, host, _ = _page_endpoint(rng)
    head, version = _browser_request(rng, agent, ep, host)
    return _record("GET", ep.target, head, None, _ip(rng, _DATACENTERS), "bad_bot", "bad/fast-browser", version=version,
                   client=_stats(rng, "scraper"))


# ---------------------------------------------------------------------------- attacks

def _encode_query(rng: random.Random, payload: str) -> str:
    r = rng.random()
    if r < 0.45:
        return quote_plus(payload, safe="")
    if r < 0.8:  # what a raw tool sends: only what cannot appear in a request-target is escaped
        return payload.replace("%", "%25" if rng.random() < 0.05 else "%").replace(" ", "%20").replace("#", "%23").replace("\n", "%0a").replace("\t", "%09").replace("&", "%26")
    if r < 0.93:
        return "".join(f"%{b:02X}" for b in payload.encode())
    return quote(quote(payload, safe=""), safe="")


def _attacker_head(rng: Draw, host: str, ep: Endpoint, content_type: str | None, body: str | None) -> tuple[list[list[str]], str]:
    """An attacker's head: a scanner's, a library's, or a real browser's (manual testing through a proxy)."""
    r = rng.random()
    if r < 0.4:
        agent = _weighted(rng, browsers_for(rng.split))
        ep2 = Endpoint(ep.method, ep.target, "form" if body and ep.method == "POST" else ep.kind,
                       "form" if body and content_type and "form" in content_type else ("xhr_post" if body else ep.fetch), body, content_type)
        head, version = _browser_request(rng, agent, ep2, host)
        return head, version
    if r < 0.7:
        family, ua = rng.choice([x for x in automation.library_agents(rng.split) if x[0] not in ("git", "feedcli")])
        head = automation.library_head(family, ua, host, rng, content_type=content_type, content_length=len(body or ""))
        return head, "1.1"
    ua = rng.choice(_RELEASES_SCANNER_UAS if rng.split == UNSEEN_RELEASES else unseen_module(rng.split).SCANNER_UAS if rng.split in MODULE_SPLITS
                    else _SCANNER_UAS)
    head = [["Host", host], ["User-Agent", ua], ["Accept", rng.choice(("*/*", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"))],
            ["Accept-Encoding", rng.choice(("gzip, deflate", "gzip", "identity"))], ["Connection", rng.choice(("close", "keep-alive"))]]
    if content_type:
        head += [["Content-Type", content_type], ["Content-Length", str(len(body or ""))]]
    return head, "1.1" if rng.random() < 0.9 else "1.0"


def attack(rng: Draw) -> dict[str, Any]:
    """Injections from the grammar in queries, paths, bodies and headers, and scanner probes."""
    site_name = rng.choice(site.SITES)
    host = site.HOSTS[site_name]
    if rng.random() < 0.28:
        path = attacks.probe(rng, rng.split)
        ep = Endpoint(rng.choice(("GET", "GET", "GET", "POST", "HEAD")), path, "page")
        head, version = _attacker_head(rng, host, ep, None, None)
        stats = _client(rng, "scanner", present=0.85, fresh=0.1)
        return _record(ep.method, path, head, None, _ip(rng, _DATACENTERS), "attack", "attack/probe", version=version, kind="probe", client=stats)
    prod = rng.choice(attacks.productions(rng.split))
    payload = prod.make(rng)
    where = rng.choice(prod.where)
    evasion = ""
    if rng.evasions and where in ("query", "path", "form", "json") and rng.random() < rng.evasions:
        evasion, payload = attacks.evade(rng, payload)
    if where == "xml":
        ep, _, _ = _page_endpoint(rng, ("api", "xhr_post", "form"))
        target, body, ctype, method = ep.target.split("?")[0], payload, rng.choice(("application/xml", "text/xml")), "POST"
    elif where == "form" or (where == "json" and rng.random() < 0.3):
        ep, _, _ = _page_endpoint(rng, ("form", "search", "page"))
        fields = {rng.choice(("username", "email", "comment", "q", "name", "message", "title", "search")): payload}
        if rng.random() < 0.7:
            fields = {"csrf": "".join(rng.choice("abcdef0123456789") for _ in range(16)), **fields, "submit": "1"}
        target, body, ctype, method = ep.target.split("?")[0], urlencode(fields), "application/x-www-form-urlencoded", "POST"
    elif where == "json":
        ep, _, _ = _page_endpoint(rng, ("api", "xhr_post", "xhr"))
        obj: dict[str, Any] = {rng.choice(("id", "query", "name", "filter", "username", "url", "template", "sort")): payload}
        if rng.random() < 0.6:
            obj["page"] = rng.randint(1, 9)
        target, body, ctype, method = ep.target.split("?")[0], json.dumps(obj), "application/json", rng.choice(("POST", "PUT", "PATCH"))
        if rng.xhr_attacks and rng.random() < rng.xhr_attacks:
            # the same document and target, sent as a page's script sends a write: compact JSON (JSON.stringify's),
            # Origin and fetch metadata included
            body = json.dumps(obj, separators=(",", ":"))
            head, version = _browser_request(rng, _weighted(rng, browsers_for(rng.split)),
                                             Endpoint(method, target, "xhr", "xhr_post", body, ctype), host)
            return _record(method, target, head, body, _ip(rng, _DATACENTERS + _RESIDENTIAL), "attack",
                           f"attack/{prod.id}/xhr_json" + (f"/{evasion}" if evasion else ""), version=version, kind=prod.kind,
                           client=_client(rng, "scanner"))
    elif where == "path":
        ep, _, _ = _page_endpoint(rng, ("page", "api", "asset"))
        base = ep.target.split("?")[0].rstrip("/")
        seg = quote(payload, safe="/%") if rng.random() < 0.6 else payload.replace(" ", "%20").replace("#", "%23").replace("?", "%3F").replace("\n", "%0a").replace("\t", "%09")
        target, body, ctype, method = f"{base.rsplit('/', 1)[0] if rng.random() < 0.5 else base}/{seg}", None, None, "GET"
    elif where == "header":
        ep, _, _ = _page_endpoint(rng, ("page", "search", "api"))
        target, body, ctype, method = ep.target, None, None, "GET"
    else:  # query
        ep, _, _ = _page_endpoint(rng, ("page", "search", "api", "xhr"))
        base, _, query = ep.target.partition("?")
        param = rng.choice(_PARAMS)
        value = _encode_query(rng, payload)
        if query and rng.random() < 0.5:
            pairs = query.split("&")
            i = rng.randrange(len(pairs))
            pairs[i] = pairs[i].split("=")[0] + "=" + (pairs[i].split("=", 1)[1] if rng.random() < 0.3 and "=" in pairs[i] else "") + value
            target = f"{base}?{'&'.join(pairs)}"
        else:
            target = f"{base}?{query + '&' if query else ''}{param}={value}"
        body, ctype, method = None, None, "GET"
    head, version = _attacker_head(rng, host, Endpoint(method, target, "page"), ctype, body)
    if where == "header":
        name = rng.choice(_HEADER_TARGETS)
        value = payload.replace("\r", " ").replace("\n", " ")
        replaced = False
        for h in head:
            if h[0].lower() == name.lower():
                h[1] = value if name != "Referer" or rng.random() < 0.5 else f"https://{host}/?q={value}"
                replaced = True
        if not replaced:
            head.insert(rng.randint(1, len(head)), [name, value])
    _fix_length(head, body)
    stats = _client(rng, "scanner")
    return _record(method, target, head, body, _ip(rng, _DATACENTERS + _RESIDENTIAL), "attack",
                   f"attack/{prod.id}/{where}" + (f"/{evasion}" if evasion else ""), version=version, kind=prod.kind, client=stats)


BUILDERS = {"human": human, "good_bot": good_bot, "bad_bot": bad_bot, "attack": attack}


def generate(split: Split, rows: int, seed: int, mix: Mapping[str, float] | None = None, *,
             dev_questions: float = 0.0, routes: bool = False, rest_writes: bool = False,
             evasions: float = 0.0, mounts: float = 0.0, xhr_attacks: float = 0.0) -> Iterator[dict[str, Any]]:
    """``rows`` records of one side of the split; row ``i`` depends only on (seed, split, i).

    ``dev_questions``: the share of hard-negative searches drawn from the pools (people's
    and bots'; on the training side after real text) that are developer questions
    (``devqueries``) on the training and calibration sides; the held-out side is the same
    whatever it is. ``routes`` adds ``site.ROUTES`` to the training side's pages,
    ``rest_writes`` people's ``site.REST_WRITES``, ``evasions`` is the share of the
    training side's injections (query, path, form, JSON) written in an evasion encoding
    (``attacks.evade``), and ``mounts`` the share of its site pages (people's, crawlers',
    bots' and attacks') drawn under a directory of ``site.MOUNTS``, and ``xhr_attacks`` the share of its
    JSON-body injections sent the way a page's script sends a write (Origin and fetch metadata). The last five
    change only the training side.
    """
    weights = dict(mix or DEFAULT_MIX)
    classes = list(weights)
    base = int.from_bytes(hashlib.sha256(f"{seed}/{split}".encode()).digest()[:6], "big")
    for i in range(rows):
        rng = Draw(base + i, split, dev_questions, routes, rest_writes=rest_writes, evasions=evasions, mounts=mounts,
                   xhr_attacks=xhr_attacks)
        label = rng.choices(classes, weights=[weights[c] for c in classes])[0]
        if label == "attack":
            rng.real_text = rng.lang_text = rng.dev_questions = 0.0  # attacks' benign parts (the page a payload is put on) keep the pools' text
        yield BUILDERS[label](rng)


def measurement_main(argv: Sequence[str] | None, prog: str, doc: str | None, rows: Callable[[int, int], Iterator[dict[str, Any]]],
                     default_rows: int, rows_help: str, what: str) -> int:
    """The command line of a measurement set (``oneclick``, ``restwrites``, ``evasions``): ``--rows``, ``--seed``, ``--out``."""
    ap = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=default_rows, help=rows_help)
    ap.add_argument("--seed", type=int, default=1, help="seed")
    ap.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    args = ap.parse_args(argv)
    n, digest = write_jsonl(rows(args.rows, args.seed), args.out)
    print(f"wrote {n} rows of {what} to {args.out} (sha256 {digest[:16]})")
    return 0


def write_jsonl(records: Iterator[dict[str, Any]], path: Path) -> tuple[int, str]:
    """Write records as JSON lines; returns (rows, sha256 of the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n"
            fh.write(line)
            h.update(line.encode("utf-8"))
            n += 1
    return n, h.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m models.data.generate``: write one split as JSONL."""
    ap = argparse.ArgumentParser(prog="python -m models.data.generate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("train", "calib", "eval", "unseen-releases", *MODULE_SPLITS), default="eval",
                    help="side of the source split to draw from (unseen-*: the measurement splits built only from "
                         "sources no side has; see the module docstring)")
    ap.add_argument("--rows", type=int, default=16000, help="number of requests")
    ap.add_argument("--seed", type=int, default=7, help="random seed")
    ap.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    ap.add_argument("--dev-questions", type=float, default=0.0, metavar="SHARE",
                    help="share of the hard-negative searches drawn from the pools that are developer questions (training and "
                         "calibration sides only; the training config's data.dev_questions)")
    ap.add_argument("--routes", action="store_true",
                    help="add site.ROUTES to the training side's pages (training side only; the training config's data.routes)")
    ap.add_argument("--rest-writes", action="store_true",
                    help="add people's PUT/PATCH/DELETE XHR (site.REST_WRITES) to the training side (the training config's "
                         "data.rest_writes)")
    ap.add_argument("--evasions", type=float, default=0.0, metavar="SHARE",
                    help="share of the training side's injections written in an evasion encoding (the training config's "
                         "data.evasions)")
    ap.add_argument("--mounts", type=float, default=0.0, metavar="SHARE",
                    help="share of the training side's site pages drawn under a directory sites mount apps at (site.MOUNTS; "
                         "the training config's data.mounts)")
    ap.add_argument("--xhr-attacks", type=float, default=0.0, metavar="SHARE",
                    help="share of the training side's JSON-body injections sent the way a page's script sends a write "
                         "(Origin and fetch metadata; the training config's data.xhr_attacks)")
    args = ap.parse_args(argv)
    if not 0.0 <= args.dev_questions <= 1.0:
        ap.error(f"--dev-questions {args.dev_questions} is not a fraction (0-1)")
    if args.dev_questions and args.split not in ("train", "calib"):
        ap.error(f"--dev-questions: the {args.split} side never draws developer questions")
    if args.routes and args.split != "train":
        ap.error("--routes: only the train side has ROUTES pages")
    if args.rest_writes and args.split != "train":
        ap.error("--rest-writes: only the train side has REST_WRITES pages")
    if not 0.0 <= args.evasions < 1.0:
        ap.error(f"--evasions {args.evasions} is not a fraction below 1")
    if args.evasions and args.split != "train":
        ap.error("--evasions: only the train side writes injections in evasion encodings")
    if not 0.0 <= args.mounts < 1.0:
        ap.error(f"--mounts {args.mounts} is not a fraction below 1")
    if args.mounts and args.split != "train":
        ap.error("--mounts: only the train side draws pages under MOUNTS")
    if not 0.0 <= args.xhr_attacks <= 1.0:
        ap.error(f"--xhr-attacks {args.xhr_attacks} is not a fraction (0-1)")
    if args.xhr_attacks and args.split != "train":
        ap.error("--xhr-attacks: only the train side sends injections as people's writes")
    n, digest = write_jsonl(generate(args.split, args.rows, args.seed, dev_questions=args.dev_questions, routes=args.routes,
                                     rest_writes=args.rest_writes, evasions=args.evasions, mounts=args.mounts,
                                     xhr_attacks=args.xhr_attacks), args.out)
    print(f"wrote {n} {args.split} rows to {args.out} (sha256 {digest[:16]})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
