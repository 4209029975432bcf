"""The two-question corpus: what a request carries and who sends it, drawn independently.

Every row is one HTTP request as the gateway receives it, with two labels that are drawn apart:
``payload_label`` (benign or attack, with ``attack_kind`` and the finer ``attack_family``) and
``client_label`` (human, good_bot, bad_bot). Payloads are placed the same way whoever sends them, so a
client's look says nothing about its payload; benign requests come from every kind of client.

Record fields (one JSON object a line): ``method``, ``path`` (target with query), ``http_version``,
``headers`` ([[name, value], ...] in wire order, original case), ``body`` (str or null), ``client_ip``,
``client`` (ClientStats fields, on part of the rows), ``payload_label``, ``attack_kind``, ``attack_family``,
``client_label``, ``label`` (the single class: attack when the payload is one, else the client label),
``source`` (the data source of the client's look), ``payload_source`` (the corpus or benign text source),
``site`` and ``site_type``, ``front``, ``browser_family`` (or the tool's name), ``client_kind``, ``group``,
``app`` (the real-application source whose request shape the row uses, ``models.corpus.apps``, or null),
``verified`` (good bots: true for a crawler naming an operator the shipped rules verify by address, which it then
comes from; false for the rest).

Halves split the sources for cross-source training: ``--half a`` and ``--half b`` share no browser data
source, user-agent source, payload corpus, site type, site vocabulary, library, scanner or crawler.

    python -m models.corpus.generate --rows 200000 --seed 1 --half a --out models/work/corpus/a.jsonl
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from models.corpus import apps, clients, fronts, payloads, sites
from models.corpus.clients import Look
from models.corpus.sites import Request, Site

CLIENT_LABELS = ("human", "good_bot", "bad_bot")


@dataclass(frozen=True)
class Half:
    """The sources one half (or both) draws from."""

    name: str
    profile_sources: tuple[str, ...]
    ua_sources: tuple[str, ...]
    payload_sources: tuple[str, ...]
    site_types: tuple[str, ...]
    libraries: tuple[clients.Tool, ...]
    scanners: tuple[clients.Tool, ...]

    @property
    def key(self) -> str | None:
        return None if self.name == "all" else self.name

    def sources(self) -> set[str]:
        return set(self.profile_sources) | set(self.ua_sources) | set(self.payload_sources)


HALVES = {
    "a": Half("a", ("curl-impersonate",), ("fake-useragent",), payloads.HALF_PAYLOADS["a"], sites.HALF_SITES["a"],
              clients.LIBRARIES_A, clients.SCANNERS_A),
    "b": Half("b", ("browserforge",), ("user-agents-npm", "playwright-devices"), payloads.HALF_PAYLOADS["b"],
              sites.HALF_SITES["b"], clients.LIBRARIES_B, clients.SCANNERS_B),
    "all": Half("all", clients.PROFILE_SOURCES, clients.UA_SOURCES, payloads.PAYLOAD_SOURCES, sites.SITE_TYPES,
                clients.LIBRARIES_A + clients.LIBRARIES_B, clients.SCANNERS_A + clients.SCANNERS_B),
}
ALL_SOURCES = clients.PROFILE_SOURCES + clients.UA_SOURCES + payloads.PAYLOAD_SOURCES


def restrict(half: Half, only: Sequence[str]) -> Half:
    """``half`` limited to the named sources (browser-data, user-agent and payload sources)."""
    keep = set(only)
    unknown = keep - set(ALL_SOURCES)
    if unknown:
        raise ValueError(f"unknown sources {sorted(unknown)}; known: {', '.join(ALL_SOURCES)}")
    prof = tuple(s for s in half.profile_sources if s in keep) or half.profile_sources
    uas = tuple(s for s in half.ua_sources if s in keep)
    pay = tuple(s for s in half.payload_sources if s in keep) or half.payload_sources
    return Half(half.name, prof, uas, pay, half.site_types, half.libraries, half.scanners)


# ---------------------------------------------------------------------------------------------- mixing

@dataclass(frozen=True)
class Mix:
    """Shares of the draw. Client and payload are drawn independently of each other."""

    human: float = 0.45
    good_bot: float = 0.15
    attack: float = 0.4
    with_history: float = 0.75
    direct: float = 0.35          # share of rows that reach the gateway without a front
    app: float = 0.5              # share of search, form, API and write requests that are a real application's


_GROUP_WEIGHTS = {
    "browser": {"page": 0.3, "asset": 0.22, "search": 0.13, "form": 0.08, "api": 0.15, "write": 0.1, "login": 0.02},
    "crawler": {"page": 0.55, "asset": 0.15, "search": 0.1, "form": 0.02, "api": 0.15, "write": 0.03, "login": 0.0},
    "library": {"page": 0.2, "asset": 0.05, "search": 0.15, "form": 0.08, "api": 0.3, "write": 0.2, "login": 0.02},
    "scanner": {"page": 0.3, "asset": 0.05, "search": 0.2, "form": 0.12, "api": 0.15, "write": 0.15, "login": 0.03},
    # credential stuffing: bad bots behind real browser header sets, signing in all day
    "stuffing": {"page": 0.1, "asset": 0.05, "search": 0.05, "form": 0.05, "api": 0.1, "write": 0.05, "login": 0.6},
}
APP_GROUPS = ("search", "form", "api", "write")
_LOCALES = ("en-US", "en-GB", "de-DE", "fr-FR", "es-ES", "it-IT", "pt-BR", "ja-JP", "zh-CN", "ko-KR", "ru-RU",
            "nl-NL", "pl-PL", "tr-TR", "sv-SE", "ar-SA", "hi-IN", "id-ID", "vi-VN", "uk-UA", "he-IL", "cs-CZ")


def _accept_language(rng: random.Random, engine: str) -> str:
    """The Accept-Language a browser derives from its language list (each engine's documented format)."""
    first = rng.choice(_LOCALES)
    lang = first.split("-")[0]
    if engine.startswith("safari"):
        return rng.choice((first, f"{first},{lang};q=0.9", f"{lang}-{first.split('-')[1]},{lang};q=0.9"))
    if engine == "firefox":
        return rng.choice((f"{first},{lang};q=0.5", f"{lang},en-US;q=0.7,en;q=0.3" if lang != "en" else "en-US,en;q=0.5",
                           f"{first},{lang};q=0.8,en-US;q=0.5,en;q=0.3"))
    if lang == "en":
        return rng.choice((f"{first},en;q=0.9", f"{first},en;q=0.9,en-US;q=0.8", "en-US,en;q=0.9"))
    return rng.choice((f"{first},{lang};q=0.9,en-US;q=0.8,en;q=0.7", f"{first},{lang};q=0.9", f"{lang},en;q=0.9"))


# ---------------------------------------------------------------------------------------------- headers

def _find(headers: list[list[str]], name: str) -> int:
    low = name.lower()
    return next((i for i, h in enumerate(headers) if h[0].lower() == low), -1)


def _set(headers: list[list[str]], name: str, value: str, order: tuple[str, ...]) -> None:
    """Set ``name`` in place, or insert it where the engine's observed order puts it."""
    i = _find(headers, name)
    if i >= 0:
        headers[i][1] = value
        return
    lowered = [o.lower() for o in order]
    want = lowered.index(name.lower()) if name.lower() in lowered else len(lowered)
    for j, h in enumerate(headers):
        pos = lowered.index(h[0].lower()) if h[0].lower() in lowered else -1
        if pos > want:
            headers.insert(j, [name, value])
            return
    headers.append([name, value])


def _drop(headers: list[list[str]], *names: str) -> None:
    low = {n.lower() for n in names}
    headers[:] = [h for h in headers if h[0].lower() not in low]


_ACCEPT = {
    "image": {"chromium": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
              "firefox": "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5",
              "safari": "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,"
                        "image/svg+xml,image/*;q=0.8,*/*;q=0.5"},
    "style": {"chromium": "text/css,*/*;q=0.1", "firefox": "text/css,*/*;q=0.1", "safari": "text/css,*/*;q=0.1"},
}
_H1_NAMES = {"sec-ch-ua": "sec-ch-ua", "sec-ch-ua-mobile": "sec-ch-ua-mobile", "sec-ch-ua-platform": "sec-ch-ua-platform",
             "dnt": "DNT", "te": "TE"}


def _h1_name(name: str) -> str:
    low = name.lower()
    if low in _H1_NAMES:
        return _H1_NAMES[low]
    return "-".join(p[:1].upper() + p[1:] for p in low.split("-"))


def browser_headers(rng: random.Random, look: Look, req: Request, site: Site, wire: str,
                    content_type: str | None, body_len: int | None) -> list[list[str]]:
    """A browser's headers for ``req``: the captured navigation set fitted to the request's destination."""
    engine = look.engine
    fam = "chromium" if engine.startswith("chromium") else ("firefox" if engine == "firefox" else "safari")
    headers = [[n.lower(), v] for n, v in look.headers]   # lower-case while editing; cased at the end
    order = clients.header_order(engine, "h2")
    _drop(headers, "host", "connection", "te" if wire == "h1" else "", "content-length", "content-type")
    ctx = req.context
    nav = ctx in ("nav", "nav-post")
    if ctx in _ACCEPT:
        _set(headers, "accept", _ACCEPT[ctx][fam], order)
    elif ctx in ("script", "font"):
        _set(headers, "accept", "*/*", order)
    elif ctx == "beacon":   # navigator.sendBeacon and fetch(keepalive) from telemetry SDKs
        _set(headers, "accept", "*/*", order)
    elif ctx in ("xhr", "xhr-write"):
        _set(headers, "accept", rng.choice(("*/*", "application/json", "application/json, text/plain, */*",
                                            "application/json, text/javascript, */*; q=0.01")), order)
    if not nav:
        _drop(headers, "upgrade-insecure-requests", "sec-fetch-user", "cache-control")
    if look.fetch_metadata:
        typed = ctx == "nav" and rng.random() < 0.3
        site_v = "none" if typed else ("same-origin" if rng.random() < 0.8 or not nav else "cross-site")
        dest = {"nav": "document", "nav-post": "document", "xhr": "empty", "xhr-write": "empty"}.get(ctx, ctx)
        mode = "navigate" if nav else ("cors" if ctx in ("xhr", "xhr-write", "font") else "no-cors")
        dest = "empty" if ctx == "beacon" else dest
        _set(headers, "sec-fetch-site", site_v, order)
        _set(headers, "sec-fetch-mode", mode, order)
        if nav and fam != "safari":   # WebKit sends no Sec-Fetch-User
            _set(headers, "sec-fetch-user", "?1", order)
        _set(headers, "sec-fetch-dest", dest, order)
    else:
        _drop(headers, "sec-fetch-site", "sec-fetch-mode", "sec-fetch-user", "sec-fetch-dest")
        typed = ctx == "nav" and rng.random() < 0.3
    if _find(headers, "priority") >= 0:
        _set(headers, "priority", "u=0, i" if nav else rng.choice(("u=1, i", "u=1", "i", "u=2", "u=4, i")), order)
    if look.extras.get("no-accept-language"):
        _drop(headers, "accept-language")
    else:
        _set(headers, "accept-language", _accept_language(rng, engine), order)
    if not typed:
        _set(headers, "referer", f"https://{site.host}{rng.choice(('/', '/' + rng.choice(site.words)))}", order)
    if ctx in ("nav-post", "xhr-write", "beacon") and req.method != "GET":
        _set(headers, "origin", f"https://{site.host}", order)
    if content_type is not None:
        _set(headers, "content-type", content_type, order)
    if rng.random() < 0.65:
        _set(headers, "cookie", "; ".join(f"{c}={_cookie_value(rng)}" for c in
                                          rng.sample(site.cookies, rng.randint(1, len(site.cookies)))), order)
    if ctx == "nav" and rng.random() < 0.1:
        _set(headers, "cache-control", "max-age=0", order)
    for name, value in look.extras.items():
        if name.startswith("x-") and value:
            _set(headers, name, value, order)
    if ctx in ("xhr", "xhr-write") and rng.random() < 0.12:
        _set(headers, "x-requested-with", "XMLHttpRequest", order)
    if body_len is not None:
        _set(headers, "content-length", str(body_len), order)
    if wire == "h2":
        return headers
    # HTTP/1.1: Host first, Connection where the engine puts it, names in the engine's case
    if fam == "chromium":
        _drop(headers, "priority")
    h1_order = clients.header_order(engine, "h1")
    cased = {o.lower(): o for o in h1_order}
    out = [[cased.get(n, _h1_name(n)), v] for n, v in headers]
    _set(out, "Connection", "keep-alive", h1_order)
    out.insert(0, ["Host", site.host])
    return out


def _cookie_value(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.choice((26, 32, 40))))
    if r < 0.7:
        return f"GA1.2.{rng.randint(10**8, 10**9)}.{rng.randint(1_600_000_000, 1_780_000_000)}"
    return rng.choice(("1", "true", "dark", "en", "accepted", "yes"))


def tool_headers(rng: random.Random, look: Look, site: Site, content_type: str | None,
                 body_len: int | None) -> list[list[str]]:
    """A library's, scanner's or crawler's headers with the host and body headers filled in."""
    headers = [[n, v] for n, v in look.headers if not (n.lower() == "content-length" and body_len is None)]
    lower_names = all(n == n.lower() for n, _ in headers)
    i = _find(headers, "host")
    if i >= 0:
        headers[i][1] = site.host
    else:
        headers.insert(0, ["host" if lower_names else "Host", site.host])
    if look.client_kind == "library" and rng.random() < 0.3:
        headers.append(["authorization" if lower_names else "Authorization", payloads.credential(rng)])
    if look.client_kind in ("library", "scanner") and rng.random() < 0.15:
        headers.append(["cookie" if lower_names else "Cookie", f"{rng.choice(site.cookies)}={_cookie_value(rng)}"])
    if content_type is not None:
        _drop(headers, "content-type")
        headers.append(["content-type" if lower_names else "Content-Type", content_type])
    if body_len is not None:
        j = _find(headers, "content-length")
        if j >= 0:
            headers[j][1] = str(body_len)
        else:
            headers.append(["content-length" if lower_names else "Content-Length", str(body_len)])
    return headers


# ---------------------------------------------------------------------------------------------- placing

_PRE_ENCODED = re.compile(r"%[0-9a-fA-F]{2}")


def _encode(rng: random.Random, value: str, where: str) -> str:
    """``value`` as it appears in a request target: kept when it is already percent-encoded, else encoded
    the way browsers or libraries do."""
    if _PRE_ENCODED.search(value) and not re.search(r"[\s\x00-\x1f\x7f-\uffff]", value):
        return value
    if _PRE_ENCODED.search(value):
        return "".join(c if c.isascii() and c.isprintable() and c not in " #" else quote(c, safe="") for c in value)
    if where == "path":
        return quote(value, safe="/:@!$&'()*+,;=~")
    if rng.random() < 0.5:
        return quote_plus(value, safe="")
    return quote(value, safe="/:@!$'()*,;~").replace("%20", "+") if rng.random() < 0.5 else \
        quote(value, safe="/:@!$'()*,;~")


_UNSAFE = re.compile(r"[^\x21-\x7e]|#")


def _wire_safe(text: str) -> str:
    """Values the site wrote in plain text (words with spaces) encoded as a form does; encoded values kept."""
    if not _UNSAFE.search(text):
        return text
    return "".join(c if not _UNSAFE.match(c) else ("+" if c == " " else quote(c, safe="")) for c in text)


def _target(req: Request, rng: random.Random) -> str:
    path = _wire_safe(req.path)
    q = "&".join(f"{_wire_safe(k)}={_wire_safe(v)}" for k, v in req.query)
    return f"{path}?{q}" if q else path


def _multipart(rng: random.Random, req: Request, upload_text: str) -> tuple[str, str]:
    boundary = rng.choice(("----WebKitFormBoundary", "---------------------------", "--------------------------")) + \
        "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(16))
    parts = []
    for k, v in req.body.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n')
    name, ctype = req.upload or ("file.txt", "text/plain")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                 f"Content-Type: {ctype}\r\n\r\n{upload_text}\r\n")
    return "".join(parts) + f"--{boundary}--\r\n", f"multipart/form-data; boundary={boundary}"


def _body(rng: random.Random, req: Request, upload_text: str | None) -> tuple[str | None, str | None]:
    if req.body_kind is None:
        return None, None
    if req.body_kind == "form":
        enc = "&".join(f"{quote_plus(k)}={_form_value(str(v))}" for k, v in req.body.items())
        return enc, "application/x-www-form-urlencoded"
    if req.body_kind == "multipart":
        return _multipart(rng, req, upload_text if upload_text is not None else "")
    if req.body_kind == "raw":
        return str(req.body.get("text", "")), str(req.body.get("content_type", "text/plain;charset=UTF-8"))
    if req.body_kind == "xml":
        return str(req.body.get("xml", "")), rng.choice(("application/xml", "text/xml", "application/xml; charset=UTF-8"))
    ctype = rng.choice(("application/json", "application/json", "application/json; charset=utf-8", "text/plain;charset=UTF-8"))
    return json.dumps(req.body, ensure_ascii=rng.random() < 0.5, separators=rng.choice(((",", ":"), (", ", ": ")))), ctype


def _form_value(v: str) -> str:
    if _PRE_ENCODED.search(v) and not re.search(r"[\s\x00-\x1f]", v):
        return v
    return quote_plus(v, safe="")


def _place(rng: random.Random, req: Request, value: str, where: str, name: str) -> None:
    """Put ``value`` in the request at slot (``where``, ``name``)."""
    if where == "path":
        base = req.path.rstrip("/")
        head, _, _last = base.rpartition("/")
        req.path = f"{head}/{_encode(rng, value, 'path')}" if head or base.startswith("/") else f"/{_encode(rng, value, 'path')}"
    elif where == "query":
        enc = _encode(rng, value, "query")
        for i, (k, _v) in enumerate(req.query):
            if k == name:
                req.query[i] = (k, enc)
                return
        req.query.append((name, enc))
    elif where in ("form", "json"):
        req.body[name] = value
    elif where == "raw":
        apps.place_raw(req.body, name, value)
    elif where == "graphql":
        variables = req.body.setdefault("variables", {})
        if isinstance(variables, dict):
            variables[name] = value


def _pairs(query: str) -> list[tuple[str, str]]:
    out = []
    for kv in query.split("&"):
        if kv:
            k, _, v = kv.partition("=")
            out.append((k, v))
    return out


_HEADER_SLOTS = ("X-Api-Version", "Referer", "X-Correlation-Id", "If-None-Match", "X-Client-Version")


# the payload model reads a body's first 200 characters (gateway.features.split); an attack must start early enough
# in it to be seen, or the row teaches that the body's benign opening is an attack. Later values are the payload
# detectors' to read, which inspect every value of the whole body.
_SEEN_BODY = 120


def _visible_slots(req: Request) -> list[tuple[str, str]]:
    """The slots of ``req`` whose value the payload model reads: the target's, and body values that start early."""
    if req.body_kind == "raw":
        text = str(req.body.get("text", ""))
    elif req.body_kind == "form":
        text = "&".join(f"{k}={v}" for k, v in req.body.items())
    elif req.body_kind in ("json", "graphql"):
        text = json.dumps(req.body)
    else:
        text = ""
    out = []
    for where, name in req.slots:
        if where in ("form", "json"):
            at = text.find(f"{name}=" if req.body_kind == "form" else json.dumps(name))
        elif where == "raw":
            at = text.find(name)
        else:
            at = 0
        if 0 <= at < _SEEN_BODY:
            out.append((where, name))
    return out


@dataclass
class Placed:
    """Where a value ended up beyond the target and body: an extra header, a cookie."""

    header: tuple[str, str] | None = None
    cookie: str | None = None
    upload: str | None = None


def place_attack(rng: random.Random, req: Request, site: Site, p: payloads.Payload) -> tuple[Request, Placed]:
    """Put the payload where its family is delivered."""
    placed = Placed()
    fam = p.family
    if fam == "probe":
        path = p.text if p.text.startswith("/") else "/" + p.text
        path = re.sub(r"\s", "%20", path)
        req = Request(rng.choice(("GET", "GET", "GET", "HEAD", "POST")), path.split("?")[0],
                      _pairs(path.partition("?")[2]), "probe", "nav")
        return req, placed
    if fam == "ssrf" and p.text.startswith("/") and "?" in p.text:     # fuzzdb's remote-include targets
        path, _, q = p.text.partition("?")
        req.path, req.query = path, _pairs(q)
        return req, placed
    if fam == "xxe":
        doc = p.text
        if doc.lstrip().startswith("<!ENTITY"):
            doc = f'<?xml version="1.0"?>\n<!DOCTYPE r [\n{doc}\n]>\n<r>&xxe;</r>'
        elif doc.lstrip().startswith("<!DOCTYPE"):
            doc = f'<?xml version="1.0"?>\n{doc}\n<r/>'
        if req.body_kind == "multipart" or rng.random() < 0.25:
            req.body_kind = "multipart"
            req.method = "POST"
            req.upload = (f"{rng.choice(site.words)}.{rng.choice(('xml', 'svg', 'docx.xml'))}", "application/xml")
            placed.upload = doc
        else:
            req.method = rng.choice(("POST", "PUT"))
            req.body_kind, req.body = "xml", {"xml": doc}
            req.context = "xhr-write"
        return req, placed
    if fam in ("jndi", "deser") and rng.random() < 0.4:
        if fam == "deser" or rng.random() < 0.4:
            placed.cookie = p.text
        else:
            placed.header = (rng.choice(_HEADER_SLOTS), p.text)
        return req, placed
    if fam == "crlf" and rng.random() < 0.5:
        req.path = req.path.rstrip("/") + "/" + p.text.lstrip("/")
        return req, placed
    if req.body_kind == "multipart" and rng.random() < 0.3 and fam in ("xss", "ssti", "cmdi"):
        placed.upload = p.text
        return req, placed
    where, name = rng.choice(_visible_slots(req) or [("query", site.params["search"])])
    if fam in ("traversal", "lfi", "redirect", "ssrf") and where in ("form", "json", "graphql", "raw") and rng.random() < 0.5:
        where, name = "query", rng.choice(("file", "page", "path", "template", "url", "next", "dest", "doc",
                                           site.params["redirect"]))
    _place(rng, req, p.text, where, name)
    return req, placed


def place_benign(rng: random.Random, req: Request, site: Site, half: str | None) -> tuple[Request, Placed, str]:
    """Fill a slot with a realistic value; uploads carry drawings and data documents."""
    placed = Placed()
    if req.body_kind == "multipart":
        placed.upload = (payloads.svg(rng, site.words) if req.upload and req.upload[0].endswith(".svg")
                         else payloads.xml_doc(rng, site.words) if req.upload and req.upload[0].endswith(".xml")
                         else " ".join(rng.choice(site.words) for _ in range(rng.randint(3, 60))))
    if req.method in ("POST", "PUT") and req.body_kind == "json" and rng.random() < 0.05:
        req.body_kind, req.body = "xml", {"xml": payloads.xml_doc(rng, site.words)}
        return req, placed, "xml"
    if rng.random() < 0.25 and req.group in ("page", "asset"):
        return req, placed, "site"
    where, name = rng.choice(req.slots)
    typed = req.group in ("search", "form", "api", "write", "login", "post", "telemetry") and where != "path"
    b = payloads.benign(rng, site.words, half, where, rich=typed)
    _place(rng, req, b.text, where, name)
    return req, placed, b.source


# ---------------------------------------------------------------------------------------------- rows

RULES_DIR = Path(__file__).resolve().parents[2] / "rules"


@functools.cache
def verifiable_crawlers() -> tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]:
    """(user-agent pattern, published networks) of every crawler the shipped rules verify by address
    (``rules/crawlers.yaml``: a rule with a ``user_agent`` and an ``ip: list:NAME``)."""
    import yaml

    out = []
    for rule in yaml.safe_load((RULES_DIR / "crawlers.yaml").read_text())["rules"]:
        ip = rule.get("ip")
        if rule.get("action") == "allow" and rule.get("user_agent") and isinstance(ip, str) and ip.startswith("list:"):
            lines = (RULES_DIR / "lists" / f"{ip.removeprefix('list:')}.txt").read_text().splitlines()
            nets = tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))
            out.append((re.compile(rule["user_agent"].removeprefix("(?i)"), re.IGNORECASE), nets))
    return tuple(out)


def _operator_address(rng: random.Random, user_agent: str) -> str | None:
    """An address inside the published ranges of the crawler ``user_agent`` names, or None when no rule verifies it."""
    for pattern, nets in verifiable_crawlers():
        if pattern.search(user_agent):
            net = ipaddress.ip_network(rng.choice(nets), strict=False)
            return str(net[rng.randrange(net.num_addresses)]) if net.num_addresses > 1 else str(net.network_address)
    return None


def _client_ip(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return str(ipaddress.IPv6Address((0x2001 << 112) | (rng.getrandbits(16) << 96) | rng.getrandbits(64)))
    while True:
        ip = ipaddress.IPv4Address(rng.getrandbits(32))
        if ip.is_global:
            return str(ip)


@functools.cache
def site_pool(seed: int, half: str, per_type: int) -> dict[str, tuple[Site, ...]]:
    """The sites of a run: ``per_type`` of each of the half's types, drawn from the seed."""
    h = HALVES[half]
    return {kind: tuple(sites.make_site(random.Random(f"corpus/site/{seed}/{kind}/{j}"), kind, h.key)
                        for j in range(per_type)) for kind in h.site_types}


CLIENT_KINDS = ("browser", "crawler", "library", "named-bot", "scanner", "headless", "spoofed", "impersonator")
_LABEL_OF = {"browser": "human", "crawler": "good_bot"}


def _bad_kind(rng: random.Random) -> str:
    r = rng.random()
    for kind, upto in (("library", 0.25), ("named-bot", 0.4), ("scanner", 0.65), ("headless", 0.75),
                       ("spoofed", 0.87)):
        if r < upto:
            return kind
    return "impersonator"


def client_look(rng: random.Random, half: Half, kind: str, family: str | None = None) -> Look:
    """A client of ``kind`` (one of ``CLIENT_KINDS``) from ``half``'s sources; ``family`` picks the browser."""
    families = clients.families_available(half.profile_sources, half.ua_sources)
    if kind == "browser":
        return clients.browser(rng, family or rng.choice(families), half.profile_sources, half.ua_sources)
    if kind == "crawler":
        return clients.crawler_look(rng, half.key)
    if kind == "library":
        return clients.tool_look(rng, rng.choice(half.libraries), "")
    if kind == "named-bot":
        return clients.bad_ua_look(rng, half.key)
    if kind == "scanner":
        ua = next(v for n, v in clients.browser(rng, rng.choice(families), half.profile_sources,
                                                half.ua_sources).headers if n.lower() == "user-agent")
        return clients.tool_look(rng, rng.choice(half.scanners), ua)
    if kind == "headless":
        return clients.headless_look(rng, half.profile_sources, half.ua_sources)
    if kind == "spoofed":
        return clients.spoofed_look(rng, half.libraries, half.profile_sources, half.ua_sources)
    if kind == "impersonator":
        look = clients.browser(rng, family or rng.choice(families), half.profile_sources, half.ua_sources)
        look.client_kind = "impersonator"      # a bot sending a real browser's headers (curl_cffi and the like)
        return look
    raise ValueError(f"unknown client kind {kind!r}; known: {', '.join(CLIENT_KINDS)}")


def row(seed: int, index: int, half: Half, mix: Mix, sites_per_type: int, *, client: str | None = None,
        family: str | None = None, front: str | None = None, site_half: str | None = None) -> dict[str, Any]:
    """Row ``index`` of the run ``seed``: the same arguments always give the same row.

    Each part of a row draws from its own stream (labels, client, site and request, payload, headers, front,
    history), so a *variant* — the same row with ``client`` (a kind of ``CLIENT_KINDS``), browser ``family``,
    ``front`` or the site (one of the other half's, ``site_half``) swapped — keeps everything else: the same
    request and payload from another client, through another front, or on a site never seen.
    """
    base = f"corpus/row/{seed}/{half.name}/{index}"
    r_label, r_client, r_site, r_payload, r_headers, r_front, r_history = (
        random.Random(f"{base}/{part}") for part in ("label", "client", "site", "payload", "headers", "front",
                                                      "history"))
    r = r_label.random()
    client_label = "human" if r < mix.human else ("good_bot" if r < mix.human + mix.good_bot else "bad_bot")
    attack = r_label.random() < mix.attack
    kind = {"human": "browser", "good_bot": "crawler"}.get(client_label) or _bad_kind(r_label)
    stuffing = r_label.random() < 0.35
    look = client_look(r_client, half, kind)
    kind_key = "browser" if look.client_kind in ("browser", "headless", "impersonator") else look.client_kind
    if kind_key == "named-bot":
        kind_key = "library"
    if look.client_kind in ("impersonator", "headless") or look.source == "spoofed":
        kind_key = "stuffing" if stuffing else kind_key
    original_kind = look.client_kind
    if client is not None or family is not None:
        kind = client or ("browser" if family else kind)
        look = client_look(random.Random(f"{base}/client/{kind}/{family}"), half, kind, family)
        client_label = _LABEL_OF.get(kind, "bad_bot")
    site_source = HALVES[site_half] if site_half is not None else half
    pool = site_pool(seed, site_source.name, sites_per_type)
    site = r_site.choice(pool[r_site.choice(site_source.site_types)])
    groups = _GROUP_WEIGHTS[kind_key]
    group = r_site.choices(list(groups), weights=list(groups.values()))[0]
    req = sites.MAKERS[group](r_site, site)
    app_source = None
    if group in APP_GROUPS:   # an application's own request in place of the site's: its own stream
        r_app = random.Random(f"{base}/app")
        drawn = apps.request(r_app, site, site_source.key) if r_app.random() < mix.app else None
        if drawn is not None:
            req, app_source = drawn
    payload: payloads.Payload | None = None
    payload_source = "site"
    if attack:
        payload = payloads.draw(r_payload, half.payload_sources)
        req, placed = place_attack(r_payload, req, site, payload)
        payload_source = payload.source
    elif r_payload.random() < 0.05:
        req = Request(r_payload.choice(("GET", "GET", "HEAD")), r_payload.choice(payloads.WELL_KNOWN), [], "probe",
                      "nav" if original_kind == "browser" else "xhr")
        placed, payload_source = Placed(), "well-known"
    elif app_source is not None and r_payload.random() < 0.7:   # as the application sent it
        placed, payload_source = Placed(), f"app:{app_source}"
    else:
        req, placed, payload_source = place_benign(r_payload, req, site, half.key)
    body, ctype = _body(r_payload, req, placed.upload)
    body_len = len(body.encode("utf-8")) if body is not None else None
    direct = r_front.random() < mix.direct
    chosen_front = "none" if direct else r_front.choice(fronts.FRONTS[1:])
    if front is not None:
        chosen_front, direct = front, front == "none"
    is_browser = look.client_kind in ("browser", "headless", "impersonator")
    h2 = r_headers.random() < (0.85 if is_browser else 0.25)   # libraries speak HTTP/2 to TLS fronts less often
    client_wire = "h2" if h2 and not direct and look.client_kind != "crawler" else "h1"
    if is_browser:
        headers = browser_headers(r_headers, look, req, site, client_wire, ctype, body_len)
    else:
        headers = tool_headers(r_headers, look, site, ctype, body_len)
        if client_wire == "h2":
            headers = [[n.lower(), v] for n, v in headers]
    if placed.cookie is not None:
        i = _find(headers, "cookie")
        cname = r_payload.choice(site.cookies)
        if i >= 0:
            headers[i][1] = f"{headers[i][1]}; {cname}={placed.cookie}"
        else:
            headers.append(["Cookie" if client_wire == "h1" else "cookie", f"{cname}={placed.cookie}"])
    if placed.header is not None:
        name, value = placed.header
        i = _find(headers, name)
        if i >= 0:
            headers[i][1] = value
        else:
            at = max(1, len(headers) - r_payload.randint(0, 2))
            headers.insert(at, [name if client_wire == "h1" else name.lower(), value])
    client_ip = _client_ip(r_history)
    # a good crawler that names an operator publishing its ranges comes from them (the claim is true) when it asks
    # for a page; one carrying an attack made the claim up. Its own stream, so every other draw of the row stays
    operator_ip = _operator_address(random.Random(f"{base}/operator"), headers[ua][1] if (ua := _find(headers, "user-agent")) >= 0 else "") \
        if client_label == "good_bot" and look.client_kind == "crawler" and not payload else None
    client_ip = operator_ip or client_ip
    headers, version = fronts.apply(chosen_front, r_front, headers, client_ip, site.host, "1.1")
    rec: dict[str, Any] = {"method": req.method, "path": _target(req, r_site), "http_version": version,
                           "headers": headers, "body": body, "client_ip": client_ip}
    if r_history.random() < mix.with_history:
        rec["client"] = clients.history(r_history, client_label, look.client_kind)
    rec.update({
        "payload_label": "attack" if payload else "benign",
        "attack_kind": payload.kind if payload else None,
        "attack_family": payload.family if payload else None,
        "client_label": client_label,
        "label": "attack" if payload else client_label,
        "source": look.source,
        "header_source": look.header_source or look.source,
        "payload_source": payload_source,
        "site": site.name,
        "site_type": site.kind,
        "front": chosen_front,
        "browser_family": look.family,
        "client_kind": look.client_kind,
        "group": req.group,
        "app": app_source,
        "half": half.name,
    })
    if client_label == "good_bot":
        rec["verified"] = operator_ip is not None
    return rec


def generate(rows: int, seed: int, half: Half, mix: Mix | None = None, sites_per_type: int = 24) -> Iterator[dict[str, Any]]:
    """``rows`` rows of the run ``seed`` from ``half``'s sources."""
    mix = mix or Mix()
    for i in range(rows):
        yield row(seed, i, half, mix, sites_per_type)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--half", choices=("a", "b"), help="one half of the browser, payload and site sources")
    ap.add_argument("--sources", default="", help=f"comma-separated data sources to keep (of: {', '.join(ALL_SOURCES)})")
    ap.add_argument("--sites-per-type", type=int, default=24)
    ap.add_argument("--attack-share", type=float, default=Mix.attack)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--summary", action="store_true", help="print counts per label, family and source")
    args = ap.parse_args(argv)
    half = HALVES[args.half or "all"]
    if args.sources:
        half = restrict(half, [s.strip() for s in args.sources.split(",") if s.strip()])
    mix = Mix(attack=args.attack_share)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, Counter[str]] = {k: Counter() for k in ("label", "client_label", "payload_label", "attack_kind",
                                                             "browser_family", "source", "payload_source", "front",
                                                             "site_type", "client_kind")}
    with args.out.open("w", encoding="utf-8") as fh:
        for rec in generate(args.rows, args.seed, half, mix, args.sites_per_type):
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            for k, c in counts.items():
                c[str(rec.get(k))] += 1
    if args.summary:
        for k, c in counts.items():
            print(f"{k}: " + ", ".join(f"{n}={v}" for n, v in sorted(c.items(), key=lambda x: -x[1])), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
