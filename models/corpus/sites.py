"""Generated sites: many URL vocabularies and frameworks, so that no path vocabulary can be memorised.

A site is drawn from a site type and a seed: its host, its words (from ``data/words.txt``), its parameter
names, its API prefix, asset layout, cookie names and URL style. Each type has page, asset, search, form
POST, JSON API and REST write (PUT/PATCH/DELETE) requests, in the shape that kind of site sends them.
Every request names its *slots*: where a value (benign text or an attack payload) can go.
"""

from __future__ import annotations

import functools
import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"

SITE_TYPES = ("shop", "docs", "rest-api", "spa", "media", "forum", "cms", "graphql", "gov", "booking")
HALF_SITES = {"a": ("shop", "docs", "rest-api", "spa", "media"), "b": ("forum", "cms", "graphql", "gov", "booking")}
GROUPS = ("page", "asset", "search", "form", "api", "write", "login")

_TLDS = ("com", "org", "net", "io", "de", "co.uk", "fr", "nl", "app", "dev", "gov.example", "shop", "info", "eu")
# parameter roles and the names sites use for them (a site takes one name per role)
_ROLE_NAMES = {
    "search": ("q", "query", "s", "search", "term", "keywords", "k", "text", "find", "searchTerm", "search_query"),
    "page": ("page", "p", "pg", "offset", "start", "pageNumber", "page_no", "cursor"),
    "sort": ("sort", "order", "orderby", "sort_by", "sortOrder", "o", "dir"),
    "filter": ("filter", "category", "cat", "tag", "type", "kind", "facet", "section", "topic", "brand"),
    "id": ("id", "item", "pid", "itemId", "product_id", "ref", "uid", "doc", "entry", "record"),
    "lang": ("lang", "hl", "locale", "l", "language"),
    "redirect": ("next", "return", "returnUrl", "redirect", "continue", "back", "goto", "url", "callback"),
    "token": ("token", "csrf", "_token", "authenticity_token", "csrfmiddlewaretoken", "__RequestVerificationToken",
              "nonce", "_wpnonce"),
}
_FORM_FIELDS = ("name", "email", "message", "comment", "subject", "title", "body", "address", "city", "phone",
                "username", "password", "note", "description", "reason", "company", "first_name", "last_name",
                "zip", "country", "content", "summary", "feedback", "question", "answer", "bio", "website")
_COOKIES = ("sessionid", "PHPSESSID", "JSESSIONID", "connect.sid", "_session", "laravel_session", "ASP.NET_SessionId",
            "sid", "session", "auth", "_ga", "_gid", "csrftoken", "wordpress_logged_in", "cart", "consent", "theme")


@functools.cache
def words() -> tuple[str, ...]:
    """The vocabulary sites draw from."""
    return tuple(w for w in (DATA / "words.txt").read_text().split() if w)


def _half_of(word: str) -> str:
    return "a" if hashlib.sha256(f"word/{word}".encode()).digest()[0] % 2 == 0 else "b"


@functools.cache
def half_words(half: str | None) -> tuple[str, ...]:
    """The vocabulary of one half (words split by a stable hash), or all of it."""
    return tuple(w for w in words() if half is None or _half_of(w) == half)


@dataclass
class Site:
    """One generated site: its type, host and vocabularies."""

    kind: str
    host: str
    words: tuple[str, ...]
    resources: tuple[str, ...]
    params: dict[str, str]
    fields: tuple[str, ...]
    cookies: tuple[str, ...]
    api_prefix: str
    asset_prefix: str
    ext: str              # page suffix: "", "/", ".html", ".php", ".aspx"
    name: str = ""


@dataclass
class Request:
    """A request a site's user agent would make, before the client's headers are added."""

    method: str
    path: str
    query: list[tuple[str, str]]
    group: str                       # page, asset, search, form, api, write
    context: str                     # nav, nav-post, image, script, style, font, xhr, xhr-write
    body_kind: str | None = None     # form, json, graphql, xml, multipart
    body: dict[str, object] = field(default_factory=dict)
    slots: list[tuple[str, str]] = field(default_factory=list)   # (where, name): query, path, form, json, graphql
    upload: tuple[str, str] | None = None                        # (file name, content type) for multipart


def make_site(rng: random.Random, kind: str, half: str | None) -> Site:
    """A site of ``kind`` drawn from ``rng`` and the half's vocabulary."""
    pool = half_words(half)
    vocab = tuple(rng.sample(pool, 40))
    params = {role: rng.choice(names) for role, names in _ROLE_NAMES.items()}
    if rng.random() < 0.35:   # some sites name parameters from their own words
        params["filter"] = rng.choice(vocab)
        params["id"] = f"{rng.choice(vocab)}_id"
    host_word = "-".join(rng.sample(vocab, rng.choice((1, 1, 2))))
    host = f"{rng.choice(('www.', '', 'shop.', 'app.', 'my.', 'portal.', 'm.', 'api.'))}{host_word}.{rng.choice(_TLDS)}"
    ext = rng.choice({"cms": ("/", "/", ".php"), "gov": (".aspx", ".html", "", "/", ".jsp"),
                      "docs": (".html", "/", ""), "forum": ("", "/", ".php")}.get(kind, ("", "", "/", ".html")))
    return Site(kind=kind, host=host, words=vocab, resources=tuple(rng.sample(vocab, 6)), params=params,
                fields=tuple(rng.sample(_FORM_FIELDS, 8)) + tuple(rng.sample(vocab, 3)),
                cookies=tuple(rng.sample(_COOKIES, 3)),
                api_prefix=rng.choice(("/api", "/api/v1", "/api/v2", "/v1", "/rest", "/json", "/_api", "/services/api",
                                       "/wp-json/wp/v2" if kind == "cms" else "/api/v3", "/backend/api")),
                asset_prefix=rng.choice(("/static", "/assets", "/_next/static", "/dist", "/build", "/wp-content/themes",
                                         "/public", "/res", "/media", "/cdn")),
                ext=ext, name=f"{kind}:{host}")


# ---------------------------------------------------------------------------------------------- pieces

def _slug(rng: random.Random, site: Site, n: tuple[int, int] = (1, 4)) -> str:
    return "-".join(rng.choice(site.words) for _ in range(rng.randint(*n)))


def _id(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return str(rng.randint(1, 99999))
    if r < 0.7:
        return "".join(rng.choice("0123456789abcdef") for _ in range(24))
    if r < 0.85:
        h = "".join(rng.choice("0123456789abcdef") for _ in range(32))
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"
    return "".join(rng.choice("ABCDEFGHJKMNPQRSTVWXYZ0123456789") for _ in range(rng.choice((8, 10, 26))))


def _page_path(rng: random.Random, site: Site) -> str:
    w = rng.choice(site.words)
    k = site.kind
    choices: tuple[str, ...]
    if k == "shop":
        choices = (f"/products/{_slug(rng, site)}", f"/p/{_id(rng)}{site.ext}", f"/collections/{w}",
                   f"/{w}/{_slug(rng, site)}-{rng.randint(100, 99999)}{site.ext}", "/cart", "/checkout", f"/c/{w}")
    elif k == "docs":
        choices = (f"/docs/{w}/{_slug(rng, site)}{site.ext}", f"/en/latest/{w}/{rng.choice(site.words)}{site.ext}",
                   f"/reference/{w}{site.ext}", f"/guide/{_slug(rng, site, (1, 3))}{site.ext}",
                   f"/v{rng.randint(1, 9)}.{rng.randint(0, 20)}/{w}{site.ext}")
    elif k == "rest-api":
        choices = (f"{site.api_prefix}/{rng.choice(site.resources)}", "/docs", "/openapi.json", "/health",
                   f"{site.api_prefix}/{rng.choice(site.resources)}/{_id(rng)}")
    elif k == "spa":
        choices = ("/", f"/#/{w}", f"/app/{w}", f"/dashboard/{w}/{_id(rng)}", f"/{w}", f"/settings/{w}")
    elif k == "media":
        choices = (f"/watch/{_id(rng)}", f"/v/{_slug(rng, site)}", f"/channel/{w}", f"/album/{_slug(rng, site)}",
                   f"/{w}/episode-{rng.randint(1, 300)}", f"/photos/{w}/{_id(rng)}")
    elif k == "forum":
        choices = (f"/t/{_slug(rng, site)}/{rng.randint(1, 999999)}", f"/forum/{w}{site.ext}",
                   f"/threads/{_slug(rng, site)}.{rng.randint(1, 999999)}/", f"/u/{w}{rng.randint(1, 999)}",
                   f"/viewtopic.php?t={rng.randint(1, 99999)}", f"/c/{w}/{rng.randint(1, 99)}")
    elif k == "cms":
        choices = (f"/{rng.randint(2015, 2026)}/{rng.randint(1, 12):02d}/{_slug(rng, site)}/", f"/category/{w}/",
                   f"/tag/{w}/", f"/?p={rng.randint(1, 9999)}", f"/{_slug(rng, site)}/", f"/author/{w}/",
                   f"/page/{rng.randint(2, 40)}/")
    elif k == "graphql":
        choices = ("/", f"/{w}", f"/{w}/{_id(rng)}", "/explore", f"/@{w}{rng.randint(1, 99)}")
    elif k == "gov":
        choices = (f"/services/{_slug(rng, site, (1, 3))}{site.ext}", f"/forms/{w}-{rng.randint(100, 999)}{site.ext}",
                   f"/{w}/apply{site.ext}", f"/en/{w}/{rng.choice(site.words)}{site.ext}",
                   f"/Default{site.ext}" if site.ext else "/", f"/publications/{_slug(rng, site)}{site.ext}")
    else:  # booking
        choices = (f"/hotels/{w}/{_slug(rng, site)}", f"/flights/{w}-{rng.choice(site.words)}",
                   f"/booking/{_id(rng)}", f"/rooms/{rng.randint(1, 999)}", f"/destinations/{w}", "/my-trips")
    return rng.choice(choices)


def page(rng: random.Random, site: Site) -> Request:
    path = _page_path(rng, site)
    query: list[tuple[str, str]] = []
    if "?" in path:
        path, _, q = path.partition("?")
        k, _, v = q.partition("=")
        query.append((k, v))
    slots = [("path", "last")]
    if rng.random() < 0.4:
        role = rng.choice(("page", "sort", "filter", "lang", "id"))
        query.append((site.params[role], rng.choice((str(rng.randint(1, 50)), rng.choice(site.words), _id(rng)))))
        slots.append(("query", query[-1][0]))
    if rng.random() < 0.1:
        query.append((site.params["redirect"], rng.choice(("/", f"/{rng.choice(site.words)}",
                                                           f"https://{site.host}/{rng.choice(site.words)}"))))
        slots.append(("query", query[-1][0]))
    if not any(s[0] == "query" for s in slots):
        slots.append(("query", site.params[rng.choice(("id", "filter", "page", "redirect"))]))
    return Request("GET", path, query, "page", "nav", slots=slots)


def asset(rng: random.Random, site: Site) -> Request:
    r = rng.random()
    h = "".join(rng.choice("0123456789abcdef") for _ in range(rng.choice((8, 10, 20))))
    w = rng.choice(site.words)
    if r < 0.3:
        path, ctx = f"{site.asset_prefix}/js/{w}.{h}.js", "script"
    elif r < 0.5:
        path, ctx = f"{site.asset_prefix}/css/{w}.{h}.css", "style"
    elif r < 0.85:
        ext = rng.choice(("png", "jpg", "webp", "svg", "avif", "gif"))
        path, ctx = rng.choice((f"{site.asset_prefix}/img/{w}.{ext}", f"/images/{_slug(rng, site, (1, 2))}.{ext}",
                                f"/uploads/{rng.randint(2019, 2026)}/{rng.randint(1, 12):02d}/{w}-{rng.randint(1, 9)}"
                                f"{rng.choice(('', '-300x200', '@2x'))}.{ext}")), "image"
    elif r < 0.93:
        path, ctx = f"{site.asset_prefix}/fonts/{w}-{rng.choice(('regular', 'bold', 'italic'))}.woff2", "font"
    else:
        path, ctx = rng.choice(("/favicon.ico", "/apple-touch-icon.png", "/manifest.json", "/robots.txt")), "image"
    query = [(rng.choice(("v", "ver", "h", "t")), h[:8])] if rng.random() < 0.3 else []
    return Request("GET", path, query, "asset", ctx, slots=[("query", query[0][0] if query else "v")])


def search(rng: random.Random, site: Site) -> Request:
    base = {"docs": "/search", "cms": "/", "forum": "/search", "gov": f"/search{site.ext if site.ext != '/' else ''}",
            "spa": f"{site.api_prefix}/search", "rest-api": f"{site.api_prefix}/{rng.choice(site.resources)}",
            "graphql": "/search"}.get(site.kind, rng.choice(("/search", f"/{rng.choice(site.words)}/search", "/find")))
    name = site.params["search"]
    query = [(name, " ".join(rng.choice(site.words) for _ in range(rng.randint(1, 3))))]
    if rng.random() < 0.4:
        query.append((site.params["page"], str(rng.randint(1, 30))))
    if rng.random() < 0.3:
        query.append((site.params["filter"], rng.choice(site.words)))
    xhr = site.kind in ("spa", "rest-api") or rng.random() < 0.2
    return Request("GET", base, query, "search", "xhr" if xhr else "nav", slots=[("query", name)])


def form(rng: random.Random, site: Site) -> Request:
    w = rng.choice(site.words)
    path = rng.choice((f"/{w}/submit", "/contact", "/login", "/register", f"/comment/{rng.randint(1, 9999)}",
                       f"/forms/{w}{site.ext if site.ext != '/' else ''}", "/wp-comments-post.php" if site.kind == "cms"
                       else f"/{w}/new", "/account/update", "/subscribe", f"/apply/{w}"))
    fields = rng.sample(site.fields, rng.randint(2, 5))
    body: dict[str, object] = {f: rng.choice(site.words) for f in fields}
    if rng.random() < 0.6:
        body[site.params["token"]] = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                                             for _ in range(rng.choice((32, 40, 43, 64))))
    upload = None
    body_kind = "form"
    if rng.random() < 0.15:
        body_kind = "multipart"
        upload = rng.choice(((f"{w}.svg", "image/svg+xml"), (f"{w}.xml", "application/xml"),
                             (f"{w}.txt", "text/plain"), (f"{w}.csv", "text/csv"), (f"{w}.json", "application/json")))
    return Request("POST", path, [], "form", "nav-post", body_kind=body_kind, body=body,
                   slots=[("form", f) for f in fields], upload=upload)


def api(rng: random.Random, site: Site) -> Request:
    if site.kind == "graphql" or (site.kind == "spa" and rng.random() < 0.3):
        op = rng.choice(site.words)
        res = rng.choice(site.resources)
        var = rng.choice((site.params["id"], site.params["search"], "slug", "first", "after"))
        q = (f"query {op.capitalize()}(${var}: String) {{ {res}({var}: ${var}) {{ id {rng.choice(site.words)} "
             f"{rng.choice(site.words)} }} }}")
        return Request("POST", rng.choice(("/graphql", "/api/graphql", "/gql", "/graphql/v1")), [], "api", "xhr-write",
                       body_kind="graphql", body={"query": q, "variables": {var: rng.choice(site.words)},
                                                  "operationName": op.capitalize()},
                       slots=[("graphql", var)])
    res = rng.choice(site.resources)
    path = rng.choice((f"{site.api_prefix}/{res}", f"{site.api_prefix}/{res}/{_id(rng)}",
                       f"{site.api_prefix}/{res}/{_id(rng)}/{rng.choice(site.resources)}"))
    query = []
    if rng.random() < 0.6:
        query.append((rng.choice((site.params["filter"], site.params["sort"], "fields", "include", "limit")),
                      rng.choice((rng.choice(site.words), str(rng.randint(1, 100))))))
    slots = [("path", "last"), ("query", query[0][0] if query else site.params["filter"])]
    return Request("GET", path, query, "api", "xhr", slots=slots)


def write(rng: random.Random, site: Site) -> Request:
    res = rng.choice(site.resources)
    method = rng.choice(("PUT", "PATCH", "DELETE", "POST", "PATCH"))
    path = f"{site.api_prefix}/{res}" + ("" if method == "POST" else f"/{_id(rng)}")
    if method == "DELETE":
        return Request("DELETE", path, [], "write", "xhr-write", slots=[("path", "last"), ("query", "force")])
    fields = rng.sample(site.fields, rng.randint(1, 4))
    body: dict[str, object] = {f: rng.choice(site.words) for f in fields}
    if rng.random() < 0.3:
        body[rng.choice(site.words)] = {rng.choice(site.words): rng.randint(0, 999), "enabled": rng.random() < 0.5}
    return Request(method, path, [], "write", "xhr-write", body_kind="json", body=body,
                   slots=[("json", f) for f in fields])


def login(rng: random.Random, site: Site) -> Request:
    """A sign-in: what people do now and then and credential-stuffing bots do all day."""
    json_api = site.kind in ("spa", "rest-api", "graphql") or rng.random() < 0.2
    path = rng.choice(("/login", "/signin", "/account/login", "/user/login", "/auth/login", "/session",
                       "/wp-login.php" if site.kind == "cms" else f"/{rng.choice(site.words)}/login"))
    user = rng.choice(("username", "email", "login", "user", "log" if site.kind == "cms" else "identifier"))
    secret = rng.choice(("password", "pass", "pwd", "passwd"))
    who = f"{rng.choice(site.words)}{rng.randint(1, 9999)}" + (f"@{rng.choice(site.words)}.com" if user == "email" else "")
    pwd = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#$%&*")
                  for _ in range(rng.randint(6, 20)))
    body: dict[str, object] = {user: who, secret: pwd}
    if json_api:
        return Request("POST", f"{site.api_prefix}{path}", [], "login", "xhr-write", body_kind="json", body=body,
                       slots=[("json", user), ("json", secret)])
    if rng.random() < 0.5:
        body[site.params["token"]] = "".join(rng.choice("abcdef0123456789") for _ in range(40))
    return Request("POST", path, [], "login", "nav-post", body_kind="form", body=body,
                   slots=[("form", user), ("form", secret)])


MAKERS = {"page": page, "asset": asset, "search": search, "form": form, "api": api, "write": write, "login": login}
