"""How each kind of simulated client behaves: one coroutine per session.

The site is the demo origin's (``gateway/tools/demo.py``): ``/``, ``/shop``, ``/shop/<id>``,
``/forum``, ``/search?q=``, ``/login`` (GET and POST), ``/cart`` (POST),
``/feed.xml``, ``/api/items``, ``/robots.txt`` and two static assets.

Each kind names the model class it truly belongs to (``truth``: human, good_bot,
bad_bot, attack — the ground truth for the reliability diagram) and the group it is
reported in (people, good bots, bad bots, attacks, and the flood on its own: its volume
would drown every other bad bot in the shares).
"""

from __future__ import annotations

import asyncio
import html
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from loadtest.client import Response
from loadtest.identities import (
    AI_AGENTS,
    BENIGN_SEARCHES,
    FEED_AGENTS,
    INJECTION_AGENTS,
    PAYLOADS,
    SCANNER_AGENTS,
    SCANNER_PATHS,
    SEARCH_WORDS,
    SEO_AGENTS,
    VERIFIED_CRAWLERS,
    Browser,
    crawler_head,
    feed_head,
    injection_target,
    library_head,
    random_browser,
    search_target,
)
from loadtest.scenario import ClientMix
from loadtest.simulator import STOPPED, Session, SessionResult, Simulation

PRODUCTS = (1, 2, 3, 4, 5)
ASSETS = (("/static/site.css", "style"), ("/static/site.js", "script"))
XHR = "/api/items?limit=3"

_NONCE = re.compile(r'data-nonce="([^"]+)"')
_DIFFICULTY = re.compile(r'data-difficulty="(\d+)"')
_TOKEN = re.compile(r'name="token" value="([^"]+)"')
_ACTION = re.compile(r'<form id="cg-form" method="post" action="([^"]+)"')
# a challenged form post: the form the page keeps, and the page that posts it again once the check is passed
_KEPT = re.compile(r'<input type="hidden" name="form" value="([^"]*)"')
_RESEND = re.compile(r'<form id="cg-resend" method="post" action="([^"]+)">(.*?)<button', re.S)
_FIELD = re.compile(r'<input type="hidden" name="([^"]*)" value="([^"]*)">')
_REFRESH = re.compile(r'http-equiv="refresh" content="(\d+);url=([^"]+)"')


# ------------------------------------------------------------------------------------------ the site

def next_page(current: str, rng: random.Random) -> str:
    """Where a person clicks next from ``current`` (a walk over the demo site's links)."""
    path = current.split("?", 1)[0]
    if path == "/shop":
        return rng.choice([f"/shop/{rng.choice(PRODUCTS)}"] * 4 + ["/", "/forum", "/shop?sort=price"])
    if path.startswith("/shop/"):
        return rng.choice(["/shop", "/shop", f"/shop/{rng.choice(PRODUCTS)}", search_target(rng.choice(SEARCH_WORDS))])
    if path == "/search":
        return rng.choice([f"/shop/{rng.choice(PRODUCTS)}", "/shop", search_target(rng.choice(BENIGN_SEARCHES))])
    if path == "/forum":
        return rng.choice(["/forum?page=2", "/", "/shop", search_target(rng.choice(BENIGN_SEARCHES))])
    return rng.choice(["/shop", "/shop", "/forum", search_target(rng.choice(BENIGN_SEARCHES)), "/login", f"/shop/{rng.choice(PRODUCTS)}"])


def crawl_frontier(rng: random.Random, n: int, *, robots: bool) -> list[str]:
    """``n`` distinct-looking URLs a crawler walks (pages, listings with page/sort parameters, searches)."""
    urls = ["/robots.txt"] if robots else []
    base = ["/", "/shop", "/forum", "/feed.xml", *(f"/shop/{p}" for p in PRODUCTS)]
    while len(urls) < n:
        r = rng.random()
        if r < 0.35:
            urls.append(rng.choice(base))
        elif r < 0.6:
            urls.append(f"/shop?page={rng.randint(1, 40)}&sort={rng.choice(('price', 'name', 'new'))}")
        elif r < 0.8:
            urls.append(f"/forum?page={rng.randint(1, 60)}")
        else:
            urls.append(search_target(rng.choice(SEARCH_WORDS)))
    return urls[:n]


# ------------------------------------------------------------------------------------------ challenges

async def pass_challenge(s: Session, browser: Browser, challenge: Response, target: str, *, runs_js: bool) -> tuple[Response | None, str]:
    """Do what a browser does with a challenge page; return the response to the retried request.

    With JavaScript: solve the proof-of-work (in the solver process), post the form to
    the verify endpoint, keep the pass cookie and follow the redirect. Without: wait for
    the ``<noscript>`` meta refresh and follow it, when the page offers one.
    """
    page = challenge.body.decode("utf-8", "replace")
    if runs_js:
        nonce, difficulty, token, action = (_NONCE.search(page), _DIFFICULTY.search(page), _TOKEN.search(page), _ACTION.search(page))
        if not (nonce and difficulty and token and action):
            return None, "unsolvable"
        counter = await s.sim.solver.solve(html.unescape(nonce.group(1)), int(difficulty.group(1)))
        answer = {"token": html.unescape(token.group(1)), "counter": str(counter)}
        kept = _KEPT.search(page)
        if kept is not None:
            answer["form"] = html.unescape(kept.group(1))
        body = urlencode(answer).encode()
        verify, outcome = await s.send("POST", html.unescape(action.group(1)),
                                       browser.form(s.host, origin=s.origin, referer=s.url(target), body_length=len(body),
                                                    cookie=s.jar.header()), body, purpose="verify")
    else:
        refresh = _REFRESH.search(page)
        if refresh is None:
            return None, "no-js"
        await s.pause(float(refresh.group(1)), float(refresh.group(1)))
        verify, outcome = await s.send("GET", html.unescape(refresh.group(2)),
                                       browser.navigate(s.host, referer=s.url(target), site="same-origin", cookie=s.jar.header(),
                                                        user_activated=False), purpose="verify")
    if outcome != "verify_ok" or verify is None:
        return None, "refused"
    s.result.solved += 1
    resend = _RESEND.search(verify.body.decode("utf-8", "replace")) if verify.status == 200 else None
    if resend is not None:
        # the kept form, posted again by the answer's page as a browser's script does
        form = urlencode([(html.unescape(n), html.unescape(v)) for n, v in _FIELD.findall(resend.group(2))]).encode()
        return await s.send("POST", html.unescape(resend.group(1)),
                            browser.form(s.host, origin=s.origin, referer=s.url(target), body_length=len(form), cookie=s.jar.header()),
                            form)
    location = verify.header("location") or target
    parts = urlsplit(location)
    again = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return await s.send("GET", again, browser.navigate(s.host, referer=s.url(target), site="same-origin", cookie=s.jar.header(),
                                                       user_activated=False))


# ------------------------------------------------------------------------------------------ people

async def person(s: Session, mix: ClientMix) -> None:
    """A person browsing: pages, their assets (cached after the first), the page's XHR, think time,
    cookies, a search with odd-looking text now and then, a form post; solves challenges like a browser."""
    rng = s.rng
    browser = random_browser(rng)
    runs_js = rng.random() < float(mix.options.get("js_share", 0.97))
    pages = rng.randint(*mix.requests)
    if rng.random() < 0.4:
        referer, site = "https://www.google.com/", "cross-site"
    else:
        referer, site = "", "none"
    target = rng.choice(["/", "/", "/shop", f"/shop/{rng.choice(PRODUCTS)}", "/forum", search_target(rng.choice(BENIGN_SEARCHES))])
    cached = False
    for _ in range(pages):
        response, outcome = await s.send("GET", target, browser.navigate(s.host, referer=referer, site=site, cookie=s.jar.header()))
        tries = 0
        while outcome == "challenged" and response is not None and tries < 2:
            tries += 1
            response, outcome = await pass_challenge(s, browser, response, target, runs_js=runs_js)
            if response is None:
                s.result.outcome = "stuck"
                return
        if outcome in STOPPED:
            s.result.outcome = "blocked" if outcome != "challenged" else "stuck"
            return
        page_url = s.url(target)
        if outcome == "forwarded" and response is not None and response.status == 200:
            if not cached:
                await asyncio.gather(*(s.send("GET", path, browser.subresource(s.host, dest, referer=page_url, cookie=s.jar.header()))
                                       for path, dest in ASSETS))
                cached = True
            if runs_js:
                await s.send("GET", XHR, browser.fetch(s.host, referer=page_url, cookie=s.jar.header()))
            await _maybe_post(s, browser, target, page_url, runs_js=runs_js)
        await s.pause(*mix.gap_s)
        referer, site = page_url, "same-origin"
        target = next_page(target, rng)


async def _maybe_post(s: Session, browser: Browser, target: str, page_url: str, *, runs_js: bool = True) -> None:
    rng = s.rng
    if target.startswith("/shop/") and rng.random() < 0.25:
        body = urlencode({"id": target.rsplit("/", 1)[1]}).encode()
        await s.send("POST", "/cart", browser.form(s.host, origin=s.origin, referer=page_url, body_length=len(body), cookie=s.jar.header()),
                     body)
    elif target == "/login" and rng.random() < 0.5:
        user = rng.choice(("anna", "j.smith", "o'brien", "mike_t", "zoë"))
        body = urlencode({"user": f"{user}@example.org", "password": "correct horse " + str(rng.randint(1, 99))}).encode()
        response, outcome = await s.send("POST", "/login", browser.form(s.host, origin=s.origin, referer=page_url, body_length=len(body),
                                                                        cookie=s.jar.header()), body)
        if outcome == "challenged" and response is not None and runs_js:
            # a sign-in during a credential-stuffing wave: solved as a browser does, the form sent again
            await pass_challenge(s, browser, response, "/login", runs_js=True)


# ------------------------------------------------------------------------------------------ crawlers and scrapers

async def _crawl(s: Session, mix: ClientMix, head: Callable[[str], list[tuple[str, str]]], *, robots: bool) -> None:
    rng = s.rng
    n = rng.randint(*mix.requests)
    refusals = 0
    give_up = int(mix.options.get("give_up_after", 25))
    for url in crawl_frontier(rng, n, robots=robots):
        _, outcome = await s.send("GET", url, head(url))
        refusals = refusals + 1 if outcome in STOPPED else 0
        if refusals >= give_up:
            return
        await s.pause(*mix.gap_s)


async def verified_crawler(s: Session, mix: ClientMix) -> None:
    """Googlebot / Bingbot from the operator's published ranges (rules/lists)."""
    name = s.traits["crawler"]
    ua = s.rng.choice(VERIFIED_CRAWLERS[name][1])
    sender = "googlebot(at)googlebot.com" if name == "googlebot" else ""
    await _crawl(s, mix, lambda _: crawler_head(ua, s.host, from_header=sender), robots=True)


async def fake_crawler(s: Session, mix: ClientMix) -> None:
    """The same crawler user agents from data-centre addresses outside the published ranges."""
    name = s.rng.choice(sorted(VERIFIED_CRAWLERS))
    ua = s.rng.choice(VERIFIED_CRAWLERS[name][1])
    if s.rng.random() < 0.5:
        await _crawl(s, mix, lambda _: crawler_head(ua, s.host), robots=s.rng.random() < 0.5)
    else:
        library = s.rng.choice(("requests", "go", "scrapy"))
        await _crawl(s, mix, lambda _: library_head(library, s.host, user_agent=ua), robots=False)


async def ai_scraper(s: Session, mix: ClientMix) -> None:
    """An AI training/answer crawler that names itself; fast, no assets, no cookies."""
    ua = s.rng.choice(AI_AGENTS)
    await _crawl(s, mix, lambda _: crawler_head(ua, s.host), robots=s.rng.random() < 0.5)


async def seo_scraper(s: Session, mix: ClientMix) -> None:
    """An SEO crawler that names itself (Ahrefs, Semrush, MJ12...)."""
    ua = s.rng.choice(SEO_AGENTS)
    await _crawl(s, mix, lambda _: crawler_head(ua, s.host), robots=s.rng.random() < 0.7)


async def stealth_scraper(s: Session, mix: ClientMix) -> None:
    """A script with a browser's user agent but its HTTP library's headers (no client hints, fetch metadata...)."""
    ua = random_browser(s.rng).user_agent
    library = s.rng.choice(("requests", "aiohttp", "go", "scrapy", "axios", "httpx"))
    accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" if s.rng.random() < 0.5 else None
    await _crawl(s, mix, lambda _: library_head(library, s.host, user_agent=ua, accept=accept), robots=False)


async def headless_scraper(s: Session, mix: ClientMix) -> None:
    """A headless browser farm: correct browser headers, runs the challenge, then crawls fast with the pass."""
    rng = s.rng
    browser = random_browser(rng)
    referer, site = "", "none"
    refusals = 0
    for url in crawl_frontier(rng, rng.randint(*mix.requests), robots=False):
        response, outcome = await s.send("GET", url, browser.navigate(s.host, referer=referer, site=site, cookie=s.jar.header()))
        if outcome == "challenged" and response is not None:
            response, outcome = await pass_challenge(s, browser, response, url, runs_js=True)
            if response is None:
                outcome = "challenged"
        refusals = refusals + 1 if outcome in STOPPED else 0
        if refusals >= int(mix.options.get("give_up_after", 10)):
            return
        referer, site = s.url(url), "same-origin"
        await s.pause(*mix.gap_s)


# ------------------------------------------------------------------------------------------ legitimate automation

async def feed_reader(s: Session, mix: ClientMix) -> None:
    """A feed reader polling /feed.xml (no JavaScript; must never be challenged)."""
    ua = s.rng.choice(FEED_AGENTS)
    for _ in range(s.rng.randint(*mix.requests)):
        await s.send("GET", "/feed.xml", feed_head(ua, s.host))
        await s.pause(*mix.gap_s)


async def api_client(s: Session, mix: ClientMix) -> None:
    """A program using the site's JSON API with a bearer token."""
    library = s.rng.choice(("okhttp", "httpx", "go"))
    token = "tok_" + "".join(s.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24))
    for _ in range(s.rng.randint(*mix.requests)):
        head = [*library_head(library, s.host, accept="application/json"), ("Authorization", f"Bearer {token}")]
        await s.send("GET", f"/api/items?limit={s.rng.randint(1, 50)}", head)
        await s.pause(*mix.gap_s)


# ------------------------------------------------------------------------------------------ attacks

async def credential_stuffing(s: Session, mix: ClientMix) -> None:
    """Leaked credentials tried against POST /login, each try from another residential proxy address."""
    rng = s.rng
    browser = random_browser(rng)
    spoof_library = rng.random() < 0.5
    library = rng.choice(("requests", "go", "axios"))
    for _ in range(rng.randint(*mix.requests)):
        address = s.sim.addresses.residential.draw()
        user = f"{rng.choice(('john', 'maria', 'admin', 'test', 'li.wei', 'sam'))}{rng.randint(1, 9999)}@{rng.choice(('gmail.com', 'mail.ru', 'yahoo.com'))}"
        body = urlencode({"user": user, "password": rng.choice(("123456", "Password1!", "qwerty2024", "letmein", "dragon99"))}).encode()
        if spoof_library:
            head = [*library_head(library, s.host, user_agent=browser.user_agent), ("Content-Type", "application/x-www-form-urlencoded")]
        else:
            head = browser.form(s.host, origin=s.origin, referer=s.url("/login"), body_length=len(body))
        await s.send("POST", "/login", head, body, address=address)
        await s.pause(*mix.gap_s)


async def scanner(s: Session, mix: ClientMix) -> None:
    """A vulnerability scanner walking well-known probe paths from one address."""
    rng = s.rng
    ua = rng.choice(SCANNER_AGENTS)
    library = rng.choice(("go", "curl", "requests"))
    paths = list(SCANNER_PATHS)
    rng.shuffle(paths)
    for path in paths[: rng.randint(*mix.requests)]:
        await s.send("GET", path, library_head(library, s.host, user_agent=ua))
        await s.pause(*mix.gap_s)


async def injection(s: Session, mix: ClientMix) -> None:
    """Injection attempts (SQL, XSS, traversal, command, template, JNDI) in queries, paths, form bodies and headers."""
    rng = s.rng
    ua = rng.choice(INJECTION_AGENTS)
    library = rng.choice(("requests", "curl", "go"))
    for _ in range(rng.randint(*mix.requests)):
        family = rng.choice(sorted(PAYLOADS))
        payload = rng.choice(PAYLOADS[family])
        where = rng.random()
        if where < 0.55:
            await s.send("GET", injection_target(family, payload, rng), library_head(library, s.host, user_agent=ua))
        elif where < 0.8:
            body = urlencode({"user": payload, "password": "x"}).encode()
            await s.send("POST", "/login", [*library_head(library, s.host, user_agent=ua),
                                            ("Content-Type", "application/x-www-form-urlencoded")], body)
        else:
            header = rng.choice(("User-Agent", "Referer", "X-Api-Version"))
            head = library_head(library, s.host, user_agent=payload if header == "User-Agent" else ua)
            if header != "User-Agent":
                head.append((header, payload))
            await s.send("GET", rng.choice(("/", "/shop", "/forum")), head)
        await s.pause(*mix.gap_s)


async def flood(s: Session, mix: ClientMix) -> None:
    """A layer-7 flood from a botnet: every request from another address, one tool's headers, hot URLs."""
    rng = s.rng
    tool = s.traits["tool"]
    for _ in range(rng.randint(*mix.requests)):
        target = rng.choice(("/", "/", "/search?q=lamp", "/shop", f"/shop/{rng.choice(PRODUCTS)}", "/forum"))
        await s.send("GET", target, tool, address=s.sim.addresses.residential.draw())
        await s.pause(*mix.gap_s)


def _flood_tool(rng: random.Random, host: str) -> list[tuple[str, str]]:
    """The fixed head a flooding tool sends: a browser user agent with a library's headers, or a stripped browser head."""
    ua = rng.choice(("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
                     "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Safari/605.1.15"))
    if rng.random() < 0.5:
        return library_head(rng.choice(("go", "requests", "aiohttp")), host, user_agent=ua)
    return [("Host", host), ("User-Agent", ua), ("Accept", "*/*"), ("Cache-Control", "no-cache"), ("Connection", "keep-alive")]


# ------------------------------------------------------------------------------------------ registry

def _person_outcome(r: SessionResult) -> str:
    if r.blocked:
        return "blocked"
    if r.challenged:
        return "passed_after_challenge" if r.solved and r.forwarded else "stuck"
    return "passed_direct"


def _bot_outcome(r: SessionResult) -> str:
    if r.blocked:
        return "blocked"
    if r.challenged:
        return "passed_after_challenge" if r.solved else "challenged"
    return "passed"


@dataclass(frozen=True)
class Kind:
    """A kind of client: its behaviour, ground truth and report group."""

    name: str
    truth: str  # human, good_bot, bad_bot, attack
    group: str  # people, good_bots, bad_bots, attacks, flood
    behaviour: Callable[[Session, ClientMix], Awaitable[None]]
    address: str  # residential, datacenter, verified
    description: str
    max_connections: int = 1

    def make_session(self, sim: Simulation) -> Session:
        rng = random.Random(sim.rng.random())
        crawler = None
        if self.address == "verified":
            crawler = rng.choice(sorted(VERIFIED_CRAWLERS))
            address = sim.addresses.verified[crawler].draw()
        elif self.address == "datacenter":
            address = sim.addresses.datacenter.draw()
        else:
            address = sim.addresses.residential.draw()
        session = Session(sim, self.name, address, max_connections=self.max_connections, rng=rng)
        if crawler is not None:
            session.traits["crawler"] = crawler
        if self.name == "flood":
            session.traits["tool"] = _flood_tool(rng, sim.scenario.host)
        if self.truth != "human" and self.name != "headless_scraper":
            session.keeps_cookies = False
        return session

    def session_outcome(self, result: SessionResult) -> str:
        return _person_outcome(result) if self.truth == "human" else _bot_outcome(result)


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("person", "human", "people", person, "residential", "people browsing with a real browser", max_connections=2),
    Kind("verified_crawler", "good_bot", "good_bots", verified_crawler, "verified", "Googlebot/Bingbot from their published ranges"),
    Kind("feed_reader", "good_bot", "good_bots", feed_reader, "datacenter", "feed readers polling /feed.xml"),
    Kind("api_client", "good_bot", "good_bots", api_client, "datacenter", "API clients with a bearer token"),
    Kind("fake_crawler", "bad_bot", "bad_bots", fake_crawler, "datacenter", "crawler user agents from outside the published ranges"),
    Kind("ai_scraper", "bad_bot", "bad_bots", ai_scraper, "datacenter", "AI crawlers naming themselves (GPTBot, ClaudeBot, CCBot...)"),
    Kind("seo_scraper", "bad_bot", "bad_bots", seo_scraper, "datacenter", "SEO crawlers naming themselves (Ahrefs, Semrush...)"),
    Kind("stealth_scraper", "bad_bot", "bad_bots", stealth_scraper, "datacenter", "browser user agent, HTTP library headers"),
    Kind("headless_scraper", "bad_bot", "bad_bots", headless_scraper, "datacenter", "headless browsers that solve the challenge"),
    Kind("credential_stuffing", "bad_bot", "attacks", credential_stuffing, "residential", "POST /login from rotating residential proxies"),
    Kind("scanner", "attack", "attacks", scanner, "datacenter", "vulnerability scanners probing well-known paths"),
    Kind("injection", "attack", "attacks", injection, "datacenter", "SQL/XSS/traversal/command/template/JNDI injection attempts"),
    Kind("flood", "bad_bot", "flood", flood, "residential", "a layer-7 flood: many addresses, one tool, hot URLs"),
)}

GROUPS = ("people", "good_bots", "bad_bots", "attacks", "flood")
TRUTH_CLASSES = ("human", "good_bot", "bad_bot", "attack")


def truth_of_request_id(request_id: str) -> str | None:
    """The ground-truth class of a simulator request id (``sim.<kind>.<n>``), or None."""
    parts = request_id.split(".")
    if len(parts) == 3 and parts[0] == "sim" and parts[1] in KINDS:
        return KINDS[parts[1]].truth
    return None


def kind_of_request_id(request_id: str) -> str | None:
    parts = request_id.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "sim" and parts[1] in KINDS else None
