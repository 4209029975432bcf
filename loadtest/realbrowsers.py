"""Record what real browsers send: a small HTTPS shop, a person-like driver, one JSON line per request.

The recordings are test data for "a person is never blocked" and for the model's invariance and
evaluation checks (never training data). Each session runs one real browser from Debian's packages
(Chromium, Firefox ESR, Epiphany on WebKitGTK) under Xvfb, in its own network namespace that has only
``lo``, against a shop served under a real name (``shop.example.test``) with a throw-away CA that the
browser trusts the way a person's browser trusts a real one. The server writes every request exactly
as received: method, raw target, HTTP version, headers in wire order with their original case, body.

Usage (as root; the namespace, mounts and port 443 need it)::

    python -m loadtest.realbrowsers record --browser epiphany --locale en_GB.UTF-8 \\
        --client-ip 198.51.100.30 --out tests/data/browsers/epiphany.jsonl
    python -m loadtest.realbrowsers record --browser chromium --locale de_DE.UTF-8 --front nginx-h2 \\
        --client-ip 198.51.100.12 --out tests/data/browsers/chromium-via-nginx-h2.jsonl

``record`` makes the CA and the site's certificate with ``openssl`` in a temporary folder, then runs
``inside`` under ``unshare --net --mount --pid --fork``: it brings up ``lo`` (plus 127.0.0.2 so glibc
keeps returning IPv4 answers), bind-mounts an ``/etc/hosts`` mapping the name to 127.0.0.1, a
``resolv.conf`` and a CA bundle with the throw-away CA added, and starts ``session`` under
``dbus-run-session`` and ``xvfb-run``. ``session`` serves the shop, starts the browser with a fresh
profile and drives it like a person: typed URLs (Ctrl+L), links and buttons, a search form (GET), a
login and a contact form (POST, urlencoded), fetch() GET and POST with JSON, an XMLHttpRequest, a
script-driven navigation, a page that reloads itself, F5. Firefox and Epiphany get X key events from
``xdotool`` only; Chromium is started by Playwright (``headless=False``), which clicks and types in the
page, while typed URLs and F5 go through ``xdotool`` as for the others.

``--front nginx-h2`` puts Debian's nginx (``listen 443 ssl http2``, the configuration deploy/README.md
recommends) in front of the recording server, which then listens for plain HTTP/1.1 on 127.0.0.1:8080:
the records show what an h2-terminating front forwards. Its ``X-Forwarded-For`` carries the loopback
peer; the recorder writes the session's ``--client-ip`` there instead (the only value it changes), so
the records read as a client behind a front. Every session is bounded (``--limit``) and stops by itself.

Record format: the people-cases shape ``clefgate eval`` reads (``id``, ``label``, ``subtype``,
``method``, ``path``, ``http_version``, ``headers``, ``body``, ``client_ip``) plus ``browser``,
``browser_version``, ``locale``, ``front`` and ``step`` (what the driver was doing). ``subtype`` is
``<browser>-<major>-<kind>`` (kind: navigate, link, form-get, form-post, redirect, script-nav, reload,
script-reload, css, js, image, font, favicon, fetch-get, fetch-post, xhr, other), with
``-via-nginx-h2`` appended behind the front.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

HOST = "shop.example.test"
ORIGIN = f"https://{HOST}"
BROWSERS = ("chromium", "firefox", "epiphany")
FRONTS = ("direct", "nginx-h2")
BACKEND_PORT = 8080
_LAST_MODIFIED = "Tue, 03 Sep 2024 10:00:00 GMT"

# --------------------------------------------------------------------------------------------- the shop

_NAV = (  # (id, href, label): the header's links in tab order after the search box (tab stops 3..9)
    ("nav-home", "/", "Home"),
    ("nav-shoes", "/products/shoes", "Shoes"),
    ("nav-product", "/products/12", "Trail runner"),
    ("nav-cart", "/cart", "Cart"),
    ("nav-account", "/login", "Account"),
    ("nav-deals", "/deals", "Deals"),
    ("nav-contact", "/contact", "Contact"),
)
TAB_SEARCH = 1  # the search box is the first tab stop on every page, its button the second
TAB_NAV = {href: 3 + i for i, (_, href, _) in enumerate(_NAV)}
TAB_CONTENT = 3 + len(_NAV)  # the page's own first control


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    row = b"\x00" + bytes(rgb) * width
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b"")


def _ico(png: bytes) -> bytes:
    """An ICO holding one 32x32 PNG image."""
    return struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 32, 32, 0, 0, 1, 32, len(png), 22) + png


def _font() -> tuple[str, str, bytes]:
    """A real font file from the system (path on the site, content type, bytes)."""
    for pattern, kind in (("*.woff2", "font/woff2"), ("DejaVuSans.ttf", "font/ttf"), ("*.ttf", "font/ttf")):
        for found in sorted(Path("/usr/share/fonts").rglob(pattern)):
            return f"/static/fonts/shop{found.suffix}", kind, found.read_bytes()
    return "/static/fonts/shop.ttf", "font/ttf", b"\x00\x01\x00\x00"


_FONT_PATH, _FONT_TYPE, _FONT_BYTES = _font()

_CSS = f"""@font-face {{ font-family: ShopSans; src: url("{_FONT_PATH}"); font-display: swap; }}
body {{ font-family: ShopSans, sans-serif; margin: 0; background: #fafafa url("/static/img/bg.png"); }}
header {{ background: #234; padding: 8px; }} header a {{ color: #fff; margin-right: 12px; }}
.tiles a {{ display: inline-block; width: 220px; height: 160px; margin: 8px; background: #eee; }}
main {{ padding: 12px; }} .price {{ color: #a00; font-weight: bold; }}
"""

_JS = """(function () {
  if (document.cookie.indexOf("consent=") < 0) {
    document.cookie = "consent=accepted; path=/; max-age=31536000; SameSite=Lax; Secure";
  }
  document.cookie = "last_seen=" + encodeURIComponent(location.pathname) + "; path=/; SameSite=Lax; Secure";
  var page = document.body.getAttribute("data-page");
  function show(text) { var out = document.getElementById("out"); if (out) { out.textContent = text; } }
  if (page === "cart") {
    fetch("/api/cart", {headers: {"Accept": "application/json"}})
      .then(function (r) { return r.json(); }).then(function (c) { show(c.items.length + " item(s)"); });
    var xhr = new XMLHttpRequest();
    xhr.open("GET", "/api/stock?sku=12");
    xhr.setRequestHeader("X-Requested-With", "XMLHttpRequest");
    xhr.onload = function () { show(xhr.responseText); };
    xhr.send();
    document.getElementById("add").addEventListener("click", function () {
      fetch("/api/cart", {method: "POST", headers: {"Content-Type": "application/json"},
                          body: JSON.stringify({sku: "12", size: 42, qty: 1})})
        .then(function (r) { return r.json(); }).then(function (c) { show(c.items.length + " item(s)"); });
    });
    document.getElementById("checkout").addEventListener("click", function () {
      location.assign("/checkout?step=address");
    });
  }
  if (page === "deals" && !sessionStorage.getItem("deals-refreshed")) {
    sessionStorage.setItem("deals-refreshed", "1");
    setTimeout(function () { location.reload(); }, 4000);
  }
})();
"""


def _page(name: str, title: str, body: str) -> bytes:
    nav = "".join(f'<a id="{i}" href="{h}">{label}</a>' for i, h, label in _NAV)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - Example Shop</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/shop.css"><link rel="icon" href="/favicon.ico">
<script src="/static/shop.js" defer></script></head>
<body data-page="{name}"><header>
<form action="/search" method="get" role="search"><input name="q" aria-label="Search"><button>Search</button></form>
<nav>{nav}</nav><img src="/static/img/logo.png" alt="Example Shop" width="120" height="40"></header>
<main><h1>{title}</h1>{body}<p id="out"></p></main></body></html>
""".encode()


_PAGES: dict[str, tuple[str, str, str]] = {
    "/": ("home", "Welcome", '<div class="tiles"><a href="/products/shoes"><img src="/static/img/shoes.png" '
                             'alt="Shoes"></a><a href="/deals">Deals</a></div>'),
    "/products/shoes": ("category", "Shoes", '<div class="tiles"><a id="p12" href="/products/12"><img '
                                             'src="/static/img/p12.png" alt="Trail runner"></a></div>'),
    "/products/12": ("product", "Trail runner", '<a href="/cart">Add to cart</a><img src="/static/img/p12.png" '
                                                'alt=""><p class="price">89.00 EUR</p>'),
    "/search": ("search", "Search results", '<a href="/products/12">Trail runner</a>'),
    "/cart": ("cart", "Your cart", '<button id="add">Add one more</button><button id="checkout">Checkout</button>'),
    "/checkout": ("checkout", "Delivery address", "<p>Where should we deliver?</p>"),
    "/login": ("login", "Sign in", '<form action="/login" method="post"><input name="email" type="email" '
                                   'aria-label="Email"><input name="password" type="password" aria-label="Password">'
                                   '<button>Sign in</button></form>'),
    "/account": ("account", "Your account", "<p>Orders: 2</p>"),
    "/deals": ("deals", "Today's deals", '<img src="/static/img/deal.png" alt="">'),
    "/contact": ("contact", "Contact us", '<form action="/contact" method="post"><input name="name" '
                                          'aria-label="Name"><input name="email" type="email" aria-label="Email">'
                                          '<textarea name="message" aria-label="Message"></textarea>'
                                          '<button>Send</button></form>'),
}
_STATIC: dict[str, tuple[str, bytes, str]] = {  # path -> (content type, bytes, kind)
    "/static/shop.css": ("text/css; charset=utf-8", _CSS.encode(), "css"),
    "/static/shop.js": ("text/javascript; charset=utf-8", _JS.encode(), "js"),
    "/static/img/logo.png": ("image/png", _png(120, 40, (34, 51, 68)), "image"),
    "/static/img/bg.png": ("image/png", _png(8, 8, (250, 250, 250)), "image"),
    "/static/img/shoes.png": ("image/png", _png(200, 150, (180, 60, 40)), "image"),
    "/static/img/p12.png": ("image/png", _png(200, 150, (40, 120, 180)), "image"),
    "/static/img/deal.png": ("image/png", _png(300, 100, (220, 180, 0)), "image"),
    _FONT_PATH: (_FONT_TYPE, _FONT_BYTES, "font"),
    "/favicon.ico": ("image/x-icon", _ico(_png(32, 32, (34, 51, 68))), "favicon"),
}


@dataclass
class Response:
    """What the shop answers."""

    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def _json(status: int, value: Any) -> Response:
    return Response(status, "OK" if status == 200 else "Created",
                    [("Content-Type", "application/json"), ("Cache-Control", "no-store")], json.dumps(value).encode())


def answer(method: str, target: str, headers: list[list[str]], body: bytes) -> tuple[Response, str]:
    """The shop's response to a request, and the request's resource kind (css, xhr, form-post, page, ...)."""
    path, _, query = target.partition("?")
    lower = {n.lower(): v for n, v in headers}
    if path in _STATIC:
        ctype, content, kind = _STATIC[path]
        etag = '"' + hashlib.sha1(content).hexdigest()[:16] + '"'
        common = [("Cache-Control", "public, max-age=600"), ("ETag", etag), ("Last-Modified", _LAST_MODIFIED)]
        if lower.get("if-none-match") == etag or lower.get("if-modified-since") == _LAST_MODIFIED:
            return Response(304, "Not Modified", common), kind
        if _FONT_PATH == path:
            common.append(("Access-Control-Allow-Origin", ORIGIN))
        return Response(200, "OK", [("Content-Type", ctype), *common], content), kind
    if path == "/api/cart":
        items = [{"sku": "12", "qty": 1}]
        if method == "POST":
            with contextlib.suppress(ValueError):
                items.append(json.loads(body.decode("utf-8")))
            return _json(201, {"items": items}), "fetch-post"
        return _json(200, {"items": items}), "fetch-get"
    if path == "/api/stock":
        return _json(200, {"sku": parse_qs(query).get("sku", ["?"])[0], "in_stock": 3}), "xhr"
    if method == "POST" and path == "/login":
        return Response(303, "See Other", [("Location", "/account"), ("Content-Length", "0"), (
            "Set-Cookie", "session=7f3a9c2e41d0; Path=/; Secure; HttpOnly; SameSite=Lax")]), "form-post"
    if method == "POST" and path == "/contact":
        return Response(200, "OK", [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")],
                        _page("sent", "Thank you", "<p>We will answer within a day.</p>")), "form-post"
    if path in _PAGES:
        name, title, html = _PAGES[path]
        out = [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-cache")]
        if "sid=" not in lower.get("cookie", ""):
            out.append(("Set-Cookie", "sid=c1e2f3a4b5; Path=/; Secure; HttpOnly; SameSite=Lax"))
        return Response(200, "OK", out, _page(name, title, html)), "page"
    return Response(404, "Not Found", [("Content-Type", "text/plain")], b"not found\n"), "other"


# --------------------------------------------------------------------------------------------- recorder


@dataclass
class Session:
    """One recording session: who is browsing, and what the driver is doing now."""

    browser: str
    version: str
    locale: str
    front: str
    client_ip: str
    step: str = "start"
    records: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    redirects: set[str] = field(default_factory=set)

    @property
    def major(self) -> str:
        match = re.search(r"\d+", self.version)
        return match.group(0) if match else "0"

    def record(self, method: str, target: str, version: str, headers: list[list[str]], body: bytes,
               kind: str) -> None:
        if kind == "page":
            kind = "redirect" if target in self.redirects else self.step
            self.redirects.discard(target)
        subtype = f"{self.browser}-{self.major}-{kind}" + ("-via-nginx-h2" if self.front == "nginx-h2" else "")
        if self.front == "nginx-h2":  # the front's loopback peer stands for the person's public address
            headers = [[n, self.client_ip if n.lower() in ("x-forwarded-for", "x-real-ip") and v == "127.0.0.1" else v]
                       for n, v in headers]
        text: str | None
        try:
            text = body.decode("utf-8") if body else None
        except UnicodeDecodeError:
            text = None
        self.records.append({
            "id": "", "label": "human", "subtype": subtype, "method": method, "path": target,
            "http_version": version, "headers": headers, "body": text, "client_ip": self.client_ip,
            "browser": self.browser, "browser_version": self.version, "locale": self.locale,
            "front": self.front, "step": self.step,
        })
        self.changed.set()

    async def wait_for(self, start: int, predicate: Callable[[dict[str, Any]], bool], within: float) -> bool:
        """Wait until a record after index ``start`` satisfies ``predicate``."""
        deadline = time.monotonic() + within
        while True:
            if any(predicate(r) for r in self.records[start:]):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)


async def _read_body(reader: asyncio.StreamReader, lower: dict[str, str]) -> bytes:
    if "chunked" in lower.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return bytes(out)
            out += await reader.readexactly(size)
            await reader.readexactly(2)
    length = lower.get("content-length", "").strip()
    return await reader.readexactly(int(length)) if length.isdigit() else b""


def serve(session: Session) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A connection handler that records each request exactly as received and answers as the shop."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head[:-4].decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ", 2)
                headers = [[n, v.strip(" \t")] for n, _, v in (line.partition(":") for line in lines[1:])]
                lower = {n.lower(): v for n, v in headers}
                body = await _read_body(reader, lower)
                response, kind = answer(method, target, headers, body)
                session.record(method, target, version, headers, body, kind)
                location = dict(response.headers).get("Location")
                if location:
                    session.redirects.add(location)
                close = lower.get("connection", "").lower() == "close" or version == "HTTP/1.0"
                out = [f"HTTP/1.1 {response.status} {response.reason}", "Server: example-shop",
                       *(f"{n}: {v}" for n, v in response.headers)]
                if response.status != 304 and not any(n == "Content-Length" for n, _ in response.headers):
                    out.append(f"Content-Length: {len(response.body)}")
                out.append("Connection: close" if close else "Connection: keep-alive")
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
                if method != "HEAD" and response.status != 304:
                    writer.write(response.body)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ssl.SSLError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    return handle


# --------------------------------------------------------------------------------------------- drivers


async def _run(*argv: str, check: bool = False, within: float = 20.0) -> str:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), within)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"{' '.join(argv)}: no answer in {within:.0f}s") from None
    if check and proc.returncode:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {err.decode(errors='replace').strip()}")
    return out.decode(errors="replace")


class Keyboard:
    """X key events for the browser's window, as a person's keyboard sends them (xdotool)."""

    def __init__(self, window_class: str) -> None:
        self.window_class = window_class
        self.window = ""

    async def find_window(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            out = await _run("xdotool", "search", "--onlyvisible", "--class", self.window_class)
            ids = out.split()
            if ids:
                self.window = ids[-1]
                return
            await asyncio.sleep(1.0)
        raise RuntimeError(f"no visible window of class {self.window_class!r} after {within:.0f}s")

    async def focus(self) -> None:
        await _run("xdotool", "windowfocus", self.window)
        await _run("xdotool", "mousemove", "--window", self.window, "400", "5")

    async def key(self, *keys: str) -> None:
        await self.focus()
        for k in keys:
            await _run("xdotool", "key", "--clearmodifiers", k, check=True)
            await asyncio.sleep(0.15)

    async def type(self, text: str) -> None:
        await self.focus()
        await _run("xdotool", "type", "--delay", "70", text, check=True)


class Driver:
    """A person's walk through the shop; how a click or a form entry is made is the browser's driver's job."""

    def __init__(self, session: Session, keyboard: Keyboard, log: Callable[[str], None]) -> None:
        self.session = session
        self.keyboard = keyboard
        self.log = log
        self.missed: list[str] = []

    async def expect(self, step: str, action: Callable[[], Awaitable[None]], path: str, method: str = "GET",
                     within: float = 12.0) -> bool:
        self.session.step = step
        start = len(self.session.records)
        await action()
        ok = await self.session.wait_for(start, lambda r: r["method"] == method and r["path"] == path, within)
        self.log(f"{step:14} {method} {path}: {'seen' if ok else 'NOT SEEN'}")
        if not ok:
            self.missed.append(f"{step} {method} {path}")
        await asyncio.sleep(1.5)  # subresources, and a person's pause
        return ok

    async def typed(self, path: str, tries: int = 1) -> bool:
        """Type the URL into the address bar; a slow first start gets ``tries`` attempts, as a person retypes."""
        async def act() -> None:
            await self.keyboard.key("Escape", "ctrl+l")  # Escape: a person closes whatever panel is open first
            await self.keyboard.type(ORIGIN + path)
            await self.keyboard.key("Return")
        for attempt in range(tries):
            if await self.expect("navigate", act, path):
                if attempt:
                    del self.missed[-attempt:]
                return True
        return False

    async def reload(self, path: str) -> bool:
        return await self.expect("reload", lambda: self.keyboard.key("F5"), path)

    async def link(self, href: str, tab_stop: int) -> bool:
        return await self.expect("link", lambda: self.activate(tab_stop, f'a[href="{href}"]'), href)

    async def activate(self, tab_stop: int, selector: str, from_stop: int = 0) -> None:
        """Follow a link or press a button: Tab to it (from the page start or a focused control) and Enter."""
        await self.keyboard.key(*(["Tab"] * (tab_stop - from_stop)), "Return")

    async def fill(self, entries: list[tuple[int, str, str]], submit: tuple[int, str] | None = None) -> None:
        """Type into form fields (tab stop, selector, text), then submit: Enter in the last field, or the button."""
        stop = 0
        for tab_stop, _selector, text in entries:
            await self.keyboard.key(*(["Tab"] * (tab_stop - stop)))
            await self.keyboard.type(text)
            stop = tab_stop
        if submit is not None:
            await self.keyboard.key(*(["Tab"] * (submit[0] - stop)))
        await self.keyboard.key("Return")

    async def page_start(self) -> None:
        """Put keyboard focus at the start of the page, as after a fresh load."""
        await asyncio.sleep(0.3)

    async def walk(self) -> None:
        """The walk: every kind of request a shop's visitor makes."""
        await self.typed("/", tries=3)
        await self.link("/products/shoes", TAB_NAV["/products/shoes"])
        await self.expect("link", lambda: self.activate(TAB_CONTENT, "#p12"), "/products/12")
        await self.expect("form-get", lambda: self.fill([(TAB_SEARCH, 'input[name="q"]', "red shoes")]),
                          "/search?q=red+shoes")
        await self.link("/cart", TAB_NAV["/cart"])
        await self.session.wait_for(0, lambda r: r["path"] == "/api/stock?sku=12", 5.0)
        await self.expect("fetch", lambda: self.activate(TAB_CONTENT, "#add"), "/api/cart", method="POST")
        await self.expect("script-nav", lambda: self.activate(TAB_CONTENT + 1, "#checkout", TAB_CONTENT),
                          "/checkout?step=address")
        await self.link("/login", TAB_NAV["/login"])
        await self.expect("form-post", lambda: self.fill([
            (TAB_CONTENT, 'input[name="email"]', "ana.lima@example.org"),
            (TAB_CONTENT + 1, 'input[name="password"]', "Corr3ct-h0rse")]), "/login", method="POST")
        await self.session.wait_for(0, lambda r: r["path"] == "/account", 5.0)
        await asyncio.sleep(1.0)
        await self.reload("/account")
        await self.link("/deals", TAB_NAV["/deals"])
        self.session.step = "script-reload"  # the page reloads itself 4 s after its first load
        start = len(self.session.records)
        ok = await self.session.wait_for(start, lambda r: r["path"] == "/deals", 8.0)
        self.log(f"{'script-reload':14} GET /deals: {'seen' if ok else 'NOT SEEN'}")
        await asyncio.sleep(1.5)
        await self.link("/contact", TAB_NAV["/contact"])
        await self.expect("form-post", lambda: self.fill([
            (TAB_CONTENT, 'input[name="name"]', "Ana Lima"),
            (TAB_CONTENT + 1, 'input[name="email"]', "ana.lima@example.org"),
            (TAB_CONTENT + 2, 'textarea[name="message"]', "Do the trail runners come in size 42 & wide?")],
            (TAB_CONTENT + 3, 'form[action="/contact"] button')),
            "/contact", method="POST")
        await self.typed("/products/12")
        await self.reload("/products/12")
        await self.typed("/search?q=waterproof+boots")


class PlaywrightDriver(Driver):
    """Chromium: Playwright clicks and types in the page (real input events); the rest as for the others."""

    def __init__(self, session: Session, keyboard: Keyboard, log: Callable[[str], None], page: Any) -> None:
        super().__init__(session, keyboard, log)
        self.page = page

    async def activate(self, tab_stop: int, selector: str, from_stop: int = 0) -> None:
        await self.page.click(selector, timeout=8000)

    async def fill(self, entries: list[tuple[int, str, str]], submit: tuple[int, str] | None = None) -> None:
        for _tab_stop, selector, text in entries:
            await self.page.click(selector, timeout=8000)
            await self.page.keyboard.type(text, delay=60)
        if submit is not None:
            await self.page.click(submit[1], timeout=8000)
        else:
            await self.page.keyboard.press("Enter")


# --------------------------------------------------------------------------------------------- browsers


def browser_version(browser: str) -> str:
    """The browser's own ``--version`` line."""
    argv = {"chromium": ["chromium", "--version"], "firefox": ["firefox-esr", "--version"],
            "epiphany": ["epiphany-browser", "--version"]}[browser]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return (out.stdout.strip().splitlines() or ["unknown"])[-1]


_FIREFOX_PREFS = """user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.aboutwelcome.enabled", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("startup.homepage_welcome_url", "");
user_pref("browser.startup.page", 0);
user_pref("datareporting.policy.dataSubmissionPolicyBypassNotification", true);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("browser.tabs.warnOnClose", false);
user_pref("browser.sessionstore.resume_from_crash", false);
user_pref("signon.rememberSignons", false);
"""


async def _start(argv: list[str], env: dict[str, str], log_path: Path) -> asyncio.subprocess.Process:
    log = log_path.open("ab")
    return await asyncio.create_subprocess_exec(*argv, env=env, stdout=log, stderr=log, start_new_session=True)


async def _stop(proc: asyncio.subprocess.Process | None) -> None:
    if proc is None or proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 15)
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()


def _nss_trust(db: Path, ca: Path) -> None:
    db.mkdir(parents=True, exist_ok=True)
    subprocess.run(["certutil", "-N", "-d", f"sql:{db}", "--empty-password"], check=True, capture_output=True)
    subprocess.run(["certutil", "-A", "-n", "example-shop-test-ca", "-t", "C,,", "-i", str(ca), "-d", f"sql:{db}"],
                   check=True, capture_output=True)


async def drive(browser: str, session: Session, work: Path, log: Callable[[str], None]) -> list[str]:
    """Start the browser with a fresh profile, walk the shop, stop it; returns the steps that were not seen."""
    env = dict(os.environ)
    ca = work / "ca.pem"
    if browser == "chromium":
        from playwright.async_api import async_playwright
        _nss_trust(Path(env["HOME"]) / ".pki" / "nssdb", ca)
        pw_env: dict[str, str | float | bool] = dict(env)
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                str(work / "chromium-profile"), executable_path="/usr/bin/chromium", headless=False,
                no_viewport=True, env=pw_env, args=["--no-first-run", "--window-position=0,0", "--window-size=1280,900"])
            try:
                page = context.pages[0] if context.pages else await context.new_page()
                keyboard = Keyboard("chromium")
                await keyboard.find_window()
                clicker = PlaywrightDriver(session, keyboard, log, page)
                await clicker.walk()
                await asyncio.sleep(2.0)
                return clicker.missed
            finally:
                await context.close()
    if browser == "firefox":
        profile = work / "firefox-profile"
        _nss_trust(profile, ca)
        (profile / "user.js").write_text(_FIREFOX_PREFS)
        argv = ["firefox-esr", "--no-remote", "--profile", str(profile), "--new-instance", "about:blank"]
        window_class = "firefox"
    else:
        env["WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS"] = "1"
        env["GSETTINGS_BACKEND"] = "memory"
        argv = ["epiphany-browser", f"--profile={work / 'epiphany-profile'}", "about:blank"]
        window_class = "epiphany"
    proc = await _start(argv, env, work / f"{browser}.log")
    try:
        keyboard = Keyboard(window_class)
        await keyboard.find_window()
        await asyncio.sleep(4.0)  # first-start work: profile, extensions, a person waits for the window too
        await keyboard.find_window()
        driver = Driver(session, keyboard, log)
        await driver.walk()
        await asyncio.sleep(2.0)
        return driver.missed
    finally:
        await _stop(proc)


_NGINX = """worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format proto '$server_protocol $request_method $request_uri $status';
    access_log {work}/nginx-access.log proto;
    client_body_temp_path {work}/nginx-body;
    proxy_temp_path {work}/nginx-proxy;
    fastcgi_temp_path {work}/nginx-fastcgi;
    uwsgi_temp_path {work}/nginx-uwsgi;
    scgi_temp_path {work}/nginx-scgi;
    upstream shop {{ server 127.0.0.1:{port}; keepalive 16; }}
    server {{
        listen 127.0.0.1:443 ssl http2;
        server_name {host};
        ssl_certificate {work}/site.pem;
        ssl_certificate_key {work}/site.key;
        location / {{
            proxy_pass http://shop;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto https;
            proxy_request_buffering off;
            proxy_buffering off;
        }}
    }}
}}
"""


async def session_main(args: argparse.Namespace) -> int:
    """Inside the namespace, under Xvfb and a D-Bus session: serve, drive, write the records."""
    work = Path(args.workdir)
    lines: list[str] = []

    def log(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    session = Session(args.browser, args.version, args.locale, args.front, args.client_ip)
    nginx: asyncio.subprocess.Process | None = None
    if args.front == "nginx-h2":
        server = await asyncio.start_server(serve(session), "127.0.0.1", BACKEND_PORT)
        (work / "nginx.conf").write_text(_NGINX.format(work=work, port=BACKEND_PORT, host=HOST))
        nginx = await _start(["nginx", "-c", str(work / "nginx.conf"), "-p", str(work)], dict(os.environ),
                             work / "nginx.log")
        await asyncio.sleep(1.0)
    else:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(work / "site.pem", work / "site.key")
        tls.set_alpn_protocols(["http/1.1"])
        server = await asyncio.start_server(serve(session), "127.0.0.1", 443, ssl=tls)
    missed: list[str] = []
    try:
        missed = await asyncio.wait_for(drive(args.browser, session, work, log), args.limit)
    except (TimeoutError, RuntimeError) as exc:
        log(f"driver stopped: {exc!r}")
        missed = ["driver stopped early"]
    finally:
        server.close()
        await _stop(nginx)
    if nginx is not None and (work / "nginx-access.log").exists():
        protocols: dict[str, int] = {}
        for line in (work / "nginx-access.log").read_text().splitlines():
            protocols[line.split(" ", 1)[0]] = protocols.get(line.split(" ", 1)[0], 0) + 1
        log(f"nginx saw client protocols: {protocols}")
    with (work / "records.jsonl").open("w") as out:
        for record in session.records:
            out.write(json.dumps(record) + "\n")
    (work / "summary.json").write_text(json.dumps({"missed": missed, "log": lines, "records": len(session.records)}))
    log(f"{len(session.records)} requests recorded; steps not seen: {missed or 'none'}")
    return 0


# --------------------------------------------------------------------------------------------- setup


def make_certificates(work: Path) -> None:
    """A throw-away CA and a certificate for the shop's name, signed by it (openssl)."""
    def sh(*argv: str) -> None:
        subprocess.run(argv, check=True, capture_output=True, cwd=work)
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
       "-days", "7", "-subj", "/CN=Example Shop Test CA", "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "site.key", "-out", "site.csr",
       "-subj", f"/CN={HOST}")
    (work / "site.ext").write_text(f"subjectAltName=DNS:{HOST}\nbasicConstraints=CA:FALSE\n"
                                   "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    sh("openssl", "x509", "-req", "-in", "site.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
       "-out", "site.pem", "-days", "7", "-extfile", "site.ext")


def inside_main(args: argparse.Namespace) -> int:
    """In fresh net/mount/pid namespaces: loopback only, the name on 127.0.0.1, the CA trusted, then the session."""
    work = Path(args.workdir)
    for argv in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", "127.0.0.2/8", "dev", "lo"]):
        subprocess.run(argv, check=True)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout.splitlines()
    if len(links) != 1 or ": lo:" not in links[0]:
        raise SystemExit(f"refusing to record: the namespace has more than lo: {links}")
    for source, target in (("hosts", "/etc/hosts"), ("resolv.conf", "/etc/resolv.conf"),
                           ("ca-bundle.crt", "/etc/ssl/certs/ca-certificates.crt")):
        subprocess.run(["mount", "--bind", str(work / source), target], check=True)
    home = work / "home"
    home.mkdir(exist_ok=True)
    language = args.locale.split(".")[0]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": args.locale,
           "LANGUAGE": f"{language}:{language.split('_')[0]}", "LC_ALL": args.locale,
           "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "XDG_RUNTIME_DIR": str(work / "run"),
           "NO_AT_BRIDGE": "1"}
    (work / "run").mkdir(mode=0o700, exist_ok=True)
    argv = ["dbus-run-session", "--", "xvfb-run", "-a", "-s", "-screen 0 1280x960x24",
            sys.executable, "-m", "loadtest.realbrowsers", "session", "--workdir", str(work),
            "--browser", args.browser, "--version", args.version, "--locale", args.locale,
            "--front", args.front, "--client-ip", args.client_ip, "--limit", str(args.limit)]
    return subprocess.run(argv, env=env, check=False).returncode


def record_main(args: argparse.Namespace) -> int:
    """Set up, run one session in its own namespaces, append its records to ``--out``."""
    for tool in ("unshare", "dbus-run-session", "xvfb-run", "xdotool", "openssl", "certutil", "ip"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found (see tests/data/browsers/README.md for the packages)")
    version = browser_version(args.browser)
    work = Path(tempfile.mkdtemp(prefix=f"realbrowsers-{args.browser}-"))
    work.chmod(0o755)
    try:
        make_certificates(work)
        (work / "hosts").write_text(f"127.0.0.1\tlocalhost\n127.0.0.1\t{HOST}\n::1\tlocalhost\n")
        (work / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        system_bundle = Path("/etc/ssl/certs/ca-certificates.crt").read_text()
        (work / "ca-bundle.crt").write_text(system_bundle + (work / "ca.pem").read_text())
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        argv = ["timeout", "--kill-after=15", str(args.limit + 60), "unshare", "--net", "--mount", "--pid", "--fork",
                "--kill-child", "--mount-proc", sys.executable, "-m", "loadtest.realbrowsers", "inside",
                "--workdir", str(work), "--browser", args.browser, "--version", version, "--locale", args.locale,
                "--front", args.front, "--client-ip", args.client_ip, "--limit", str(args.limit)]
        rc = subprocess.run(argv, env=env, check=False).returncode
        records_path = work / "records.jsonl"
        if not records_path.exists():
            print(f"session failed (exit {rc}); logs kept in {work}", file=sys.stderr)
            args.keep = True
            return 1
        records = [json.loads(line) for line in records_path.read_text().splitlines() if line]
        summary = json.loads((work / "summary.json").read_text())
        if summary["missed"] and not args.allow_missing:
            print(f"not written: steps not seen: {summary['missed']}; logs kept in {work}", file=sys.stderr)
            args.keep = True
            return 1
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        existing = [json.loads(line) for line in out.read_text().splitlines() if line] if out.exists() else []
        tag = f"{args.browser}-{args.locale.split('.')[0].replace('_', '-')}" + (
            "-h2" if args.front == "nginx-h2" else "")
        existing = [r for r in existing if not r["id"].startswith(tag + "-")]
        for n, record in enumerate(records):
            record["id"] = f"{tag}-{n:03d}"
        with out.open("w") as fh:
            for record in existing + records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(f"{len(records)} records from {version} ({args.locale}, {args.front}) -> {out}; "
              f"steps not seen: {summary['missed'] or 'none'}")
        return 0 if rc == 0 else rc
    finally:
        if args.keep:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.realbrowsers", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("record", "inside", "session"):
        p = sub.add_parser(name, help={"record": "record one browser session (as root)",
                                       "inside": "internal: namespace setup", "session": "internal: the session"}[name])
        p.add_argument("--browser", choices=BROWSERS, required=True)
        p.add_argument("--locale", default="en_US.UTF-8", help="LANG for the browser, e.g. de_DE.UTF-8")
        p.add_argument("--front", choices=FRONTS, default="direct", help="direct TLS, or nginx terminating h2")
        p.add_argument("--client-ip", default="198.51.100.10", help="the documentation address the records carry")
        p.add_argument("--limit", type=int, default=300, help="seconds the session may run")
        if name == "record":
            p.add_argument("--out", required=True, help="JSONL file; this browser+locale+front's records are replaced")
            p.add_argument("--keep", action="store_true", help="keep the work folder (certificates, browser logs)")
            p.add_argument("--allow-missing", action="store_true",
                           help="write the records even if some steps of the walk were not seen")
        else:
            p.add_argument("--workdir", required=True)
            p.add_argument("--version", required=True)
    args = parser.parse_args(argv)
    if args.command == "record":
        return record_main(args)
    if args.command == "inside":
        return inside_main(args)
    return asyncio.run(session_main(args))


if __name__ == "__main__":
    sys.exit(main())
