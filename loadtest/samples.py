"""Realistic requests as ``Features``, offline: the model benchmark's and the GPU check's inputs.

The same identities the traffic simulator uses (``loadtest.identities``): browser page
loads, assets and XHRs with family-correct headers, crawler and scraper heads, feed
readers and API clients, credential stuffing, scanner probes and injections, in
roughly the proportions of the default scenario's steady phase, with a fixed seed.
"""

from __future__ import annotations

import random
from urllib.parse import urlencode

from gateway.features import Features, from_record
from loadtest.behaviours import ASSETS, PRODUCTS, XHR, crawl_frontier, next_page
from loadtest.identities import (
    AI_AGENTS,
    BENIGN_SEARCHES,
    FEED_AGENTS,
    GOOGLEBOT_AGENTS,
    INJECTION_AGENTS,
    PAYLOADS,
    SCANNER_AGENTS,
    SCANNER_PATHS,
    SEO_AGENTS,
    AddressBook,
    crawler_head,
    feed_head,
    injection_target,
    library_head,
    random_browser,
)

HOST = "shop.example"
# kind -> share of the sample
MIX = {"page": 0.30, "asset": 0.20, "xhr": 0.10, "form": 0.03, "crawler": 0.06, "scraper": 0.12, "feed_api": 0.05,
       "stuffing": 0.04, "scanner": 0.05, "injection": 0.05}


def _record(method: str, target: str, headers: list[tuple[str, str]], ip: str, body: bytes = b"") -> Features:
    return from_record({"method": method, "path": target, "http_version": "1.1", "headers": [list(h) for h in headers],
                        "body": body.decode() if body else None, "client_ip": ip})


def sample_features(n: int, seed: int = 5) -> list[tuple[str, Features]]:
    """``n`` requests as (kind, Features), drawn with a fixed seed."""
    rng = random.Random(seed)
    book = AddressBook.build(random.Random(seed + 1))
    kinds = list(MIX)
    weights = [MIX[k] for k in kinds]
    out: list[tuple[str, Features]] = []
    for _ in range(n):
        kind = rng.choices(kinds, weights)[0]
        browser = random_browser(rng)
        page = next_page(rng.choice(["/", "/shop", f"/shop/{rng.choice(PRODUCTS)}", "/forum"]), rng)
        referer = f"http://{HOST}{page}"
        cookie = "clefgate_pass=k1.eyJ0IjoicCJ9.c2ln" if rng.random() < 0.3 else ""
        ip = book.residential.draw()
        if kind == "page":
            f = _record("GET", page, browser.navigate(HOST, referer=rng.choice(["", referer]), site="same-origin", cookie=cookie), ip)
        elif kind == "asset":
            path, dest = rng.choice(ASSETS)
            f = _record("GET", path, browser.subresource(HOST, dest, referer=referer, cookie=cookie), ip)
        elif kind == "xhr":
            f = _record("GET", XHR, browser.fetch(HOST, referer=referer, cookie=cookie), ip)
        elif kind == "form":
            body = urlencode({"q": rng.choice(BENIGN_SEARCHES), "id": str(rng.choice(PRODUCTS))}).encode()
            f = _record("POST", "/cart", browser.form(HOST, origin=f"http://{HOST}", referer=referer, body_length=len(body)), ip, body)
        elif kind == "crawler":
            ua = rng.choice(GOOGLEBOT_AGENTS + AI_AGENTS + SEO_AGENTS)
            f = _record("GET", crawl_frontier(rng, 1, robots=False)[0], crawler_head(ua, HOST), book.datacenter.draw())
        elif kind == "scraper":
            library = rng.choice(("requests", "aiohttp", "go", "scrapy", "axios", "httpx"))
            f = _record("GET", crawl_frontier(rng, 1, robots=False)[0], library_head(library, HOST, user_agent=browser.user_agent),
                        book.datacenter.draw())
        elif kind == "feed_api":
            if rng.random() < 0.5:
                f = _record("GET", "/feed.xml", feed_head(rng.choice(FEED_AGENTS), HOST), book.datacenter.draw())
            else:
                f = _record("GET", "/api/items?limit=10", [*library_head("okhttp", HOST, accept="application/json"),
                                                           ("Authorization", "Bearer tok_0123456789abcdef")], book.datacenter.draw())
        elif kind == "stuffing":
            body = urlencode({"user": f"user{rng.randint(1, 99999)}@mail.example", "password": "Password1!"}).encode()
            f = _record("POST", "/login", [*library_head("requests", HOST, user_agent=browser.user_agent),
                                           ("Content-Type", "application/x-www-form-urlencoded")], ip, body)
        elif kind == "scanner":
            f = _record("GET", rng.choice(SCANNER_PATHS), library_head("go", HOST, user_agent=rng.choice(SCANNER_AGENTS)),
                        book.datacenter.draw())
        else:
            family = rng.choice(sorted(PAYLOADS))
            f = _record("GET", injection_target(family, rng.choice(PAYLOADS[family]), rng),
                        library_head("requests", HOST, user_agent=rng.choice(INJECTION_AGENTS)), book.datacenter.draw())
        out.append((kind, f))
    return out

