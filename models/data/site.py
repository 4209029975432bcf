"""The sites behind the gateway: path templates, page text, search queries, form bodies.

Six kinds of site (shop, forge, forum, blog, docs, API) with the pages, assets, XHR
endpoints, feeds, git endpoints and forms real users and legitimate clients ask for.
Each path template is a *source* held out as a whole (``sources.side_of``), so the
evaluation split asks for URLs shaped in ways training never saw. Human text includes
**hard negatives**: quotes, apostrophes, "order by", ``<b>`` in reviews, SQL and shell
snippets in forum posts — benign requests that a pattern-matching WAF flags.
"""

from __future__ import annotations

import functools
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, urlencode

from models.data import devqueries, langtext, stdtext
from models.data.sources import MODULE_SPLITS, Split, assign, unseen_module

HOSTS = {"shop": "shop.example.com", "forge": "git.example.org", "forum": "forum.example.net",
         "blog": "blog.example.com", "docs": "docs.example.io", "api": "api.example.com"}

WORDS = ("red", "blue", "green", "black", "white", "linen", "wool", "cotton", "leather", "steel", "oak", "mini", "pro", "max",
         "ultra", "classic", "vintage", "summer", "winter", "travel", "outdoor", "kitchen", "garden", "office", "gaming",
         "wireless", "organic", "slim", "heavy", "light", "smart", "retro", "modern", "compact", "deluxe", "basic")
NOUNS = ("shoes", "jacket", "backpack", "lamp", "chair", "desk", "kettle", "headphones", "keyboard", "mouse", "tent", "bottle",
         "watch", "scarf", "hoodie", "sneakers", "monitor", "camera", "blender", "pan", "mug", "notebook", "charger", "cable",
         "speaker", "pillow", "blanket", "sofa", "shelf", "drill", "bike", "helmet", "gloves", "socks", "dress", "shirt")
CATEGORIES = ("men", "women", "kids", "home", "electronics", "sports", "books", "toys", "beauty", "garden", "office", "sale",
              "new-arrivals", "accessories", "outdoor", "kitchen")
USERS = ("alice", "bob", "carol", "dmitri", "emma", "farid", "grace", "hiro", "ines", "jonas", "kim", "lena", "marco",
         "nadia", "oskar", "priya", "quentin", "rosa", "sven", "tara", "umar", "vera", "wei", "ximena", "yusuf", "zoe",
         "devops-team", "infra", "webdev", "datasci")
REPOS = ("clefgate", "dotfiles", "website", "api-server", "infra", "terraform-modules", "docs", "cli", "parser", "renderer",
         "mobile-app", "design-system", "scheduler", "ledger", "crawler-guard", "backup-tools", "ansible-roles", "compiler")
FILES = ("README.md", "src/main.rs", "src/lib.rs", "cmd/server/main.go", "pkg/api/handler.go", "app/models/user.rb",
         "src/index.ts", "package.json", "Cargo.toml", "setup.py", "docs/install.md", "Makefile", "Dockerfile",
         "src/components/Button.tsx", "lib/parser.py", "tests/test_parser.py", ".github/workflows/ci.yml", "go.mod")
TAGS = ("python", "rust", "golang", "security", "devops", "design", "release", "announcement", "howto", "performance",
        "privacy", "self-hosting", "networking", "databases", "frontend", "typescript", "linux", "homelab")
TOPICS = ("how-to-reset-my-password", "release-notes-2-4", "best-practices-for-backups", "feature-request-dark-mode",
          "weird-error-after-upgrade", "welcome-to-the-forum", "show-your-setup", "migrating-from-mysql-to-postgres",
          "slow-queries-on-large-tables", "docker-compose-networking", "help-with-nginx-config", "monthly-meetup",
          "bug-report-login-loop", "why-is-my-build-failing", "tips-for-beginners", "roadmap-discussion")
SECTIONS = ("guide", "reference", "tutorial", "howto", "api", "faq", "changelog", "internals", "config")
PAGES = ("installation", "quickstart", "configuration", "deployment", "upgrading", "troubleshooting", "security",
         "performance", "logging", "metrics", "rules", "policies", "authentication", "caching", "glossary")
BRANCHES = ("main", "master", "develop", "release-1.4", "feature/login", "fix/memory-leak")

# Benign searches, plus hard negatives that share surface features with injections.
QUERIES = ("red shoes", "wireless headphones", "standing desk", "rain jacket men", "gift ideas", "usb c cable 2m",
           "coffee grinder", "size guide", "return policy", "nginx reverse proxy", "postgres backup", "rust async",
           "docker compose", "how to reset password", "shipping to canada", "black friday", "laptop stand",
           "kids bike 16 inch", "hiking boots waterproof", "4k monitor", "organic tea", "yoga mat")
HARD_QUERIES = ('"red shoes"', "O'Reilly books", "men's jacket", "women's running shoes", "rock 'n' roll t-shirt",
                '"exact phrase" -minus', "order by price", "select size guide", "union jack flag", "drop shipping",
                "insert coin arcade", "delete my account", "update firmware router", "where is my order?", "1=1 meaning",
                "sql injection tutorial", "<b> tag html", "script writing course", "alert bracelet", "cat ears headband",
                "C++ & C# books", "50% off; free shipping", "size 10 1/2", "x > y and y < z", "kids' toys & games",
                "don't starve", "can't login", "what is ../ in a path", "bash for loop", "SELECT statement examples",
                "javascript:void(0) meaning", "echo dot", "ping pong table", "union select meaning", "curl command example",
                "password manager", "admin panel template", "etc passwd file", "windows ini file", "onload event")
REVIEW_TEXT = ("Great product, fits perfectly.", "Arrived late but works fine.", "Not what I expected; the color is off.",
               "<b>Excellent</b> quality, would buy again!", "Love it <3 my kids use it every day",
               "5 stars. Size runs small -> order one size up.", "It's OK... the strap broke after 2 weeks :-(",
               "Compared to the old model (v2) this one is 100% better & quieter.", "<i>Highly</i> recommended<br>Fast delivery",
               "Don't buy the 'pro' version, the basic one is enough.", "Works with Mac & Windows; select the right driver.",
               "Material feels cheap; <u>not</u> worth the price.", 'The "waterproof" claim is true, tested in heavy rain.',
               "Order by 2pm and it ships same day - great service!", "Had to drop the price alert, it arrived on sale anyway.")
FORUM_TEXT = (
    "Thanks, that fixed it for me!",
    "I have the same problem since the last update. Any ideas?",
    "You can run `SELECT name, created_at FROM users ORDER BY created_at DESC LIMIT 10;` to check the latest sign-ups.",
    "Try `rm -rf node_modules && npm install` and then rebuild.",
    "In my nginx config I had `proxy_pass http://127.0.0.1:8080;` and it works now.",
    "The template uses {{ page.title }} and {% for post in posts %} loops, see the docs.",
    "My query is SELECT * FROM orders WHERE status = 'open' AND total > 100 - is an index on status enough?",
    "Set PATH=$HOME/bin:$PATH in your .bashrc, then `source ~/.bashrc`.",
    "Relative imports like ../../lib/utils break when you move the file.",
    "Use <code>&lt;script defer&gt;</code> so the page renders first.",
    "I'd say O'Brien's answer is right; it's the cache, not the DB.",
    "The error says: can't open '/etc/app/config.yaml': permission denied. chmod 640 fixed it.",
    "JOIN vs UNION: a UNION stacks rows, a JOIN combines columns.",
    "For Windows paths use C:\\Users\\you\\AppData\\Roaming instead.",
    "Use `${VAR:-default}` in the shell to give a default value.",
    "Has anyone tried the new release? Changelog looks good.",
    "DROP TABLE is irreversible, so please take a backup first!",
    "The onclick handler never fires on mobile, any idea why?",
)
COMMENT_MARKDOWN = (
    "LGTM, merging.", "Could you add a test for the empty case?", "This breaks on Windows because of the path separator.",
    "```\nSELECT id FROM jobs WHERE state = 'failed';\n```\nreturns nothing for me.",
    "Fixed in a1b2c3d. The `if err != nil { return err }` was missing.", "Duplicate of #42.",
    "Run `cargo test -- --nocapture` to see the output.", "Reproduced with `curl -X POST localhost:8080/api -d '{}'`.",
)


LANDING = ("pricing", "about", "about-us", "contact", "careers", "jobs", "features", "team", "press", "help", "faq", "terms", "privacy",
           "download", "downloads", "partners", "customers", "enterprise", "community", "events", "webinars", "newsletter", "support",
           "changelog", "roadmap", "security", "legal", "imprint", "impressum", "sustainability", "investors", "solutions", "integrations",
           "resources", "guides", "tutorials", "showcase", "gallery", "shop", "store", "deals", "gift-cards", "stores", "returns")
LOCALE_CODES = ("en", "de", "fr", "es", "it", "ja", "zh", "pt-br", "nl", "pl", "ko", "ru", "tr", "sv", "en-us", "en-gb", "fr-ca")
PARAM_NAMES = ("page", "sort", "ref", "lang", "view", "tab", "filter", "from", "to", "limit", "offset", "format", "color", "size",
               "src", "source", "mode", "type", "category", "tag", "year", "month", "currency", "region", "variant", "session_id")


def _segment(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.35:
        return rng.choice(WORDS + NOUNS + CATEGORIES + TAGS + SECTIONS + PAGES)
    if r < 0.55:
        return _slug(rng)
    if r < 0.7:
        return str(rng.randint(1, 10**6))
    if r < 0.8:
        return rng.choice(LOCALE_CODES)
    if r < 0.9:
        return f"v{rng.randint(1, 5)}" if rng.random() < 0.5 else f"{rng.randint(2010, 2025)}"
    return _hex(rng, rng.choice((8, 12, 24)))


SCRIPT_EXTENSIONS = ("php", "aspx", "asp", "jsp", "do", "action", "cfm", "html", "htm", "shtml", "pl", "cgi", "py", "xhtml")
REDIRECT_PARAMS = ("next", "redirect", "redirect_uri", "return", "returnTo", "return_url", "continue", "url", "dest", "callback", "state", "code")
# Parameter names attacks are often put in, here with benign values: a name is no evidence.
BENIGN_PARAMS: dict[str, tuple[str, ...]] = {
    "id": ("{n}",), "p": ("{n}",), "cat": ("{n}", "{word}"), "pid": ("{n}",), "uid": ("{n}",), "article": ("{n}",), "item": ("{n}", "{slug}"),
    "file": ("{slug}.pdf", "report-{n}.csv", "{word}.png", "docs/{slug}.html"), "path": ("/{word}/{slug}", "docs/{word}"),
    "url": ("https://www.example.org/{slug}", "https%3A%2F%2Fblog.example.com%2F{slug}"), "next": ("/{word}", "/account/orders", "%2Fcart"),
    "redirect": ("/{word}/{n}", "%2Fdashboard"), "return": ("/", "/{word}"), "callback": ("jQuery{n}_{n}", "cb{n}", "handle{word}"),
    "template": ("{word}", "default", "wide"), "host": ("{word}.example.com",), "ip": ("203.0.113.{small}", "2001:db8::{small}"),
    "cmd": ("list", "view", "edit"), "action": ("view", "edit", "save", "delete", "subscribe"), "do": ("search", "show", "login"),
    "op": ("view", "list"), "debug": ("0", "false"), "view": ("grid", "list", "{word}"), "doc": ("{slug}", "{n}"), "email": ("{email}",),
    "query": ("{query}",), "q": ("{query}",), "s": ("{query}",), "search": ("{query}",), "filter": ("{word}", "price:{n}-{n}"),
    "sort": ("price", "-date", "name,asc"), "order": ("asc", "desc", "newest"), "lang": ("{locale}",), "dest": ("/{word}",),
    "token": ("{hex}",), "sid": ("{hex}",), "ts": ("{epoch}",), "v": ("{small}", "{hex}"), "ref": ("{word}", "{hex}"),
}


def _fill(rng: random.Random, pattern: str) -> str:
    out = pattern
    for key, make in (("{n}", lambda: str(rng.randint(1, 99999))), ("{small}", lambda: str(rng.randint(1, 250))),
                      ("{word}", lambda: rng.choice(WORDS + NOUNS + CATEGORIES)), ("{slug}", lambda: _slug(rng)),
                      ("{email}", lambda: _email(rng)), ("{query}", lambda: search_query(rng)), ("{locale}", lambda: rng.choice(LOCALE_CODES)),
                      ("{hex}", lambda: _hex(rng, rng.choice((8, 16, 32)))), ("{epoch}", lambda: str(1_600_000_000 + rng.randint(0, 10**8)))):
        while key in out:
            out = out.replace(key, make(), 1)
    return out


def _params(rng: random.Random, lo: int, hi: int, *, camel: bool = False, names: tuple[str, ...] | None = None) -> str:
    """A query string of benign parameters (``?a=b&…``), or "" when zero are drawn."""
    k = rng.randint(lo, hi)
    if k == 0:
        return ""
    pairs = []
    for _ in range(k):
        name = rng.choice(names or tuple(BENIGN_PARAMS) + PARAM_NAMES)
        value = _fill(rng, rng.choice(BENIGN_PARAMS.get(name, ("{word}", "{n}"))))
        if " " in value or ("/" in value and rng.random() < 0.5):
            value = _q(value, rng)
        pairs.append(f"{name[0].upper() + name[1:] if camel else name}={value}")
    return "?" + "&".join(pairs)


def _value(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        return str(rng.randint(0, 5000))
    if r < 0.6:
        return rng.choice(WORDS + NOUNS + CATEGORIES + ("asc", "desc", "grid", "list", "json", "true", "false", "EUR", "USD"))
    if r < 0.8:
        return search_query(rng)
    return f"{rng.randint(2015, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _slug(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.choice(NOUNS)}"


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


_B62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _b62(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_B62) for _ in range(n))


def _b64url(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_B62 + "-_") for _ in range(n))


def _xhr(target: str) -> Endpoint:
    """A page's own GET for data (fetch/XHR)."""
    return Endpoint("GET", target, "xhr", "xhr")


def _compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _pkt(line: str) -> str:
    """A git pkt-line: four hex digits of length (themselves included), then the line."""
    return f"{len(line) + 4:04x}{line}"


# Shares of people's text drawn on the training side from real text instead of the pools: English (``stdtext``), and on
# top of it other languages (``langtext``).
REAL_TEXT_SHARE = 0.3
LANG_TEXT_SHARE = 0.05


class Draw(random.Random):
    """A seeded random source that also knows which side of the hold-out it draws for.

    Text pools (queries, reviews, posts) are split like every other source, so the
    evaluation split's hard negatives are sentences training never saw. On the training
    side, ``real_text`` of the draws are real English text instead (``stdtext``: the Python
    reference and standard-library docstrings) and the next ``lang_text`` other languages
    (``langtext``: Django's translations), so that text unlike the pools, in any script,
    is no evidence of an attack. One random number decides, so the English draws are the
    same whatever ``lang_text`` is. On the training and calibration sides, ``dev_questions``
    (a generator setting, 0 by default) of the hard-negative searches drawn from the pools
    (people's and bots') are developer questions about code (``devqueries``, its
    fragments split between those two sides). The held-out side draws exactly as without
    any of them (no extra random numbers), and ``generate`` sets all three to 0 for attack
    rows. ``routes`` adds the training-only page shapes of ``ROUTES`` to the training side, ``rest_writes``
    people's ``REST_WRITES``, ``evasions`` is the share of the training side's injections written in an
    evasion encoding (``attacks.evade``), ``mounts`` the share of its site pages drawn under one of the
    directories of ``MOUNTS``, and ``xhr_attacks`` the share of its JSON-body injections sent the way a page's
    script sends a write (Origin and fetch metadata, as people's ``REST_WRITES`` are); every other side draws as
    without them.
    """

    def __init__(self, seed: int, split: Split, dev_questions: float = 0.0, routes: bool = False, *,
                 rest_writes: bool = False, evasions: float = 0.0, mounts: float = 0.0, xhr_attacks: float = 0.0) -> None:
        super().__init__(seed)
        self.split = split
        self.routes = routes  # ``templates`` adds them on the training side only
        self.rest_writes = rest_writes  # likewise
        self.evasions = evasions if split == "train" else 0.0
        self.mounts = mounts if split == "train" else 0.0
        self.xhr_attacks = xhr_attacks if split == "train" else 0.0
        self.real_text = REAL_TEXT_SHARE if split == "train" else 0.0
        self.lang_text = LANG_TEXT_SHARE if split == "train" else 0.0
        self.dev_questions = dev_questions if split in ("train", "calib") else 0.0

    def text(self, pool: tuple[str, ...]) -> str:
        """One item of ``pool`` from this draw's side of the split, or on the training side sometimes real text.

        Real text is a line for the search pools and a paragraph (line breaks as LF, or
        as CRLF the way a browser submits a textarea) for posts, comments and reviews.
        """
        draw = self.random() if self.real_text or self.lang_text else 1.0
        if draw < self.real_text + self.lang_text:
            lines, paragraphs = stdtext.snippets() if draw < self.real_text else langtext.snippets()
            if pool is QUERIES or pool is HARD_QUERIES:
                return self.choice(lines)
            para = self.choice(paragraphs)
            return para.replace("\n", "\r\n") if self.random() < 0.5 else para
        if pool is HARD_QUERIES and self.dev_questions and self.random() < self.dev_questions:
            return devqueries.query(self, self.split)
        if self.split == "unseen-releases" and id(pool) in _RELEASES_TEXT:
            return self.choice(_RELEASES_TEXT[id(pool)])
        return self.choice(_side(pool, self.split))


_POOLS: dict[tuple[int, str], tuple[str, ...]] = {}


def _side(pool: tuple[str, ...], split: Split) -> tuple[str, ...]:
    """``pool``'s items on ``split``'s side; a measurement split reads the held-out side of pools it has no text of its own for."""
    key = (id(pool), split)
    if key not in _POOLS:
        sides = assign(list(pool), "text", str)
        _POOLS[key] = tuple(sides["eval" if split == "unseen-releases" or split in MODULE_SPLITS else split])
    return _POOLS[key]


def _text(rng: random.Random, pool: tuple[str, ...]) -> str:
    return rng.text(pool) if isinstance(rng, Draw) else rng.choice(pool)


def search_query(rng: random.Random, hard_share: float = 0.35) -> str:
    """A human search query; ``hard_share`` of them are hard negatives."""
    return _text(rng, HARD_QUERIES) if rng.random() < hard_share else _text(rng, QUERIES)


def _q(text: str, rng: random.Random) -> str:
    """Encode a query value the way browsers do (spaces as + in forms, %20 in some JS)."""
    return quote_plus(text, safe="") if rng.random() < 0.8 else quote(text, safe="")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A request a site answers: ``method target``, a body, and what kind of request it is.

    ``kind``: page, search, asset (with its browser fetch kind in ``fetch``), xhr, form,
    api, feed, git, download, robots, health.
    """

    method: str
    target: str
    kind: str
    fetch: str = "navigate"
    body: str | None = None
    content_type: str | None = None


Maker = Callable[[random.Random], Endpoint]


@dataclass(frozen=True, slots=True)
class Template:
    """A path template: an id (the unit of hold-out), its site, its group and a maker."""

    id: str
    site: str
    group: str
    make: Maker


def _page(fmt: Callable[[random.Random], str], kind: str = "page") -> Maker:
    return lambda rng: Endpoint("GET", fmt(rng), kind)


def _asset(fmt: Callable[[random.Random], str], fetch: str) -> Maker:
    return lambda rng: Endpoint("GET", fmt(rng), "asset", fetch)


def _form(target: Callable[[random.Random], str], body: Callable[[random.Random], dict[str, str]]) -> Maker:
    def make(rng: random.Random) -> Endpoint:
        return Endpoint("POST", target(rng), "form", "form", urlencode(body(rng)), "application/x-www-form-urlencoded")
    return make


def _json(method: str, target: Callable[[random.Random], str], body: Callable[[random.Random], object], kind: str = "xhr") -> Maker:
    def make(rng: random.Random) -> Endpoint:
        return Endpoint(method, target(rng), kind, "xhr_post", json.dumps(body(rng), separators=(",", ":")), "application/json")
    return make


def _email(rng: random.Random) -> str:
    return f"{rng.choice(USERS)}{rng.randint(1, 999)}@{rng.choice(('gmail.com', 'example.org', 'proton.me', 'outlook.com'))}"


def _password(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "!@#$%^&*") for _ in range(rng.randint(8, 16)))


def _review(rng: random.Random) -> dict[str, str]:
    return {"rating": str(rng.randint(1, 5)), "title": _text(rng, REVIEW_TEXT)[:30], "body": _text(rng, REVIEW_TEXT)}


def _reply(rng: random.Random) -> dict[str, str]:
    posts = {_text(rng, FORUM_TEXT) for _ in range(rng.randint(1, 2))}
    return {"raw": " ".join(sorted(posts)), "topic_id": str(rng.randint(100, 99999)),
            "reply_to_post_number": str(rng.randint(1, 40))}


def _version(rng: random.Random) -> str:
    return f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"


TEMPLATES: tuple[Template, ...] = (
    # --- shop
    Template("shop.home", "shop", "page", _page(lambda r: "/")),
    Template("shop.product", "shop", "page", _page(lambda r: f"/products/{_slug(r)}-{r.randint(100, 99999)}")),
    Template("shop.product_short", "shop", "page", _page(lambda r: f"/p/{r.randint(100000, 999999)}")),
    Template("shop.category", "shop", "page", _page(lambda r: f"/c/{r.choice(CATEGORIES)}?page={r.randint(1, 30)}&sort={r.choice(('price_asc', 'price_desc', 'new', 'popular'))}")),
    Template("shop.filter", "shop", "page", _page(lambda r: f"/c/{r.choice(CATEGORIES)}?color={r.choice(WORDS[:6])}&size={r.choice(('s', 'm', 'l', 'xl', '42', '10.5'))}&price_min={r.randint(0, 50)}&price_max={r.randint(60, 500)}")),
    Template("shop.collection", "shop", "page", _page(lambda r: f"/collections/{r.choice(CATEGORIES)}/{_slug(r)}")),
    Template("shop.brand", "shop", "page", _page(lambda r: f"/brands/{r.choice(WORDS)}{r.choice(NOUNS)}")),
    Template("shop.search", "shop", "search", _page(lambda r: f"/search?q={_q(search_query(r), r)}", "search")),
    Template("shop.search_filtered", "shop", "search", _page(lambda r: f"/search?q={_q(search_query(r), r)}&category={r.choice(CATEGORIES)}&page={r.randint(1, 5)}", "search")),
    Template("shop.cart", "shop", "page", _page(lambda r: r.choice(("/cart", "/checkout/shipping", "/checkout/payment", "/checkout/review")))),
    Template("shop.orders", "shop", "page", _page(lambda r: f"/account/orders/{r.randint(10**7, 10**8)}")),
    Template("shop.wishlist", "shop", "page", _page(lambda r: r.choice(("/wishlist", "/account/wishlist", f"/wishlist/{_hex(r, 12)}")))),
    Template("shop.compare", "shop", "page", _page(lambda r: f"/compare?ids={','.join(str(r.randint(100, 99999)) for _ in range(r.randint(2, 4)))}")),
    Template("shop.stores", "shop", "page", _page(lambda r: f"/stores/{r.choice(('berlin', 'lyon', 'austin', 'osaka', 'leeds', 'porto'))}{r.choice(('', '/hours', '/events'))}")),
    Template("shop.returns", "shop", "page", _page(lambda r: f"/account/returns/{r.randint(10**6, 10**7)}{r.choice(('', '/label', '/status'))}")),
    Template("shop.api_cart", "shop", "xhr", lambda r: Endpoint("GET", "/api/cart", "xhr", "xhr")),
    Template("shop.api_stock", "shop", "xhr", lambda r: Endpoint("GET", f"/api/products/{r.randint(100, 99999)}/availability?store={r.randint(1, 80)}", "xhr", "xhr")),
    Template("shop.api_reco", "shop", "xhr", lambda r: Endpoint("GET", f"/api/recommendations?product={r.randint(100, 99999)}&limit={r.choice((4, 8, 12))}", "xhr", "xhr")),
    Template("shop.cart_add", "shop", "xhr_post", _json("POST", lambda r: "/api/cart/items", lambda r: {"sku": f"SKU-{r.randint(1000, 9999)}", "qty": r.randint(1, 3)})),
    Template("shop.review", "shop", "form", _form(lambda r: f"/products/{r.randint(100, 99999)}/reviews", _review)),
    Template("shop.login", "shop", "login", _form(lambda r: "/account/login", lambda r: {"email": _email(r), "password": _password(r), "remember": "on"})),
    Template("shop.newsletter", "shop", "form", _form(lambda r: "/newsletter/subscribe", lambda r: {"email": _email(r), "consent": "1"})),
    Template("shop.address", "shop", "form", _form(lambda r: "/checkout/address", lambda r: {"name": f"{r.choice(USERS).title()} O'Neil", "street": f"{r.randint(1, 300)} Main St. #{r.randint(1, 20)}", "city": "Springfield", "zip": f"{r.randint(10000, 99999)}"})),
    # --- forge
    Template("forge.repo", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}")),
    Template("forge.issue", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/issues/{r.randint(1, 3000)}")),
    Template("forge.issues", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/issues?state={r.choice(('open', 'closed'))}&labels={r.choice(('bug', 'enhancement', 'good+first+issue', 'help+wanted'))}")),
    Template("forge.blob", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/src/branch/{r.choice(BRANCHES)}/{r.choice(FILES)}")),
    Template("forge.commits", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/commits/branch/{r.choice(BRANCHES)}?page={r.randint(1, 40)}")),
    Template("forge.commit", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/commit/{_hex(r, 40)}")),
    Template("forge.pull_files", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/pulls/{r.randint(1, 900)}/files")),
    Template("forge.compare", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/compare/{r.choice(BRANCHES)}...{r.choice(BRANCHES)}")),
    Template("forge.wiki", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/wiki/{r.choice(PAGES).title()}{r.choice(('', '?action=_history'))}")),
    Template("forge.tags", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/{r.choice(('tags', 'releases', 'branches', 'activity', 'settings'))}")),
    Template("forge.actions", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/actions/runs/{r.randint(1, 9000)}{r.choice(('', '/jobs/0', '/attempts/2'))}")),
    Template("forge.user", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}?tab={r.choice(('repositories', 'activity', 'stars'))}")),
    Template("forge.explore", "forge", "search", _page(lambda r: f"/explore/repos?q={_q(search_query(r), r)}&sort=moststars", "search")),
    Template("forge.raw", "forge", "download", lambda r: Endpoint("GET", f"/{r.choice(USERS)}/{r.choice(REPOS)}/raw/branch/{r.choice(BRANCHES)}/{r.choice(FILES)}", "download")),
    Template("forge.git_refs", "forge", "git", lambda r: Endpoint("GET", f"/{r.choice(USERS)}/{r.choice(REPOS)}.git/info/refs?service=git-upload-pack", "git")),
    Template("forge.git_pack", "forge", "git", lambda r: Endpoint("POST", f"/{r.choice(USERS)}/{r.choice(REPOS)}.git/git-upload-pack", "git", body=f"0011command=fetch0014agent=git/2.4{r.randint(0, 7)}.00016object-format=sha10001000dthin-pack000fno-progress0032want {_hex(r, 40)}\n0009done\n0000", content_type="application/x-git-upload-pack-request")),
    Template("forge.archive", "forge", "download", lambda r: Endpoint("GET", f"/{r.choice(USERS)}/{r.choice(REPOS)}/archive/v{_version(r)}.tar.gz", "download")),
    Template("forge.release", "forge", "download", lambda r: Endpoint("GET", f"/{r.choice(USERS)}/{r.choice(REPOS)}/releases/download/v{_version(r)}/{r.choice(REPOS)}-{r.choice(('linux-amd64', 'darwin-arm64', 'windows-amd64.zip'))}.tar.gz", "download")),
    Template("forge.api_repo", "forge", "api", lambda r: Endpoint("GET", f"/api/v1/repos/{r.choice(USERS)}/{r.choice(REPOS)}", "api")),
    Template("forge.api_issues", "forge", "api", lambda r: Endpoint("GET", f"/api/v1/repos/{r.choice(USERS)}/{r.choice(REPOS)}/issues?state=open&page={r.randint(1, 9)}&limit=50", "api")),
    Template("forge.api_status", "forge", "api", lambda r: Endpoint("GET", f"/api/v1/repos/{r.choice(USERS)}/{r.choice(REPOS)}/commits/{_hex(r, 40)}/status", "api")),
    Template("forge.api_pull", "forge", "api", _json("POST", lambda r: f"/api/v1/repos/{r.choice(USERS)}/{r.choice(REPOS)}/pulls", lambda r: {"title": r.choice(TOPICS).replace("-", " "), "head": r.choice(BRANCHES), "base": "main", "body": _text(r, COMMENT_MARKDOWN)}, "api")),
    Template("forge.comment", "forge", "form", _form(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/issues/{r.randint(1, 3000)}/comments", lambda r: {"content": _text(r, COMMENT_MARKDOWN), "_csrf": _hex(r, 32)})),
    # --- forum
    Template("forum.topic", "forum", "page", _page(lambda r: f"/t/{r.choice(TOPICS)}/{r.randint(100, 99999)}")),
    Template("forum.topic_post", "forum", "page", _page(lambda r: f"/t/{r.choice(TOPICS)}/{r.randint(100, 99999)}/{r.randint(2, 80)}")),
    Template("forum.category", "forum", "page", _page(lambda r: f"/c/{r.choice(TAGS)}/{r.randint(1, 40)}")),
    Template("forum.latest", "forum", "page", _page(lambda r: f"/latest?page={r.randint(1, 20)}&order={r.choice(('activity', 'posts', 'views'))}")),
    Template("forum.user", "forum", "page", _page(lambda r: f"/u/{r.choice(USERS)}/activity")),
    Template("forum.search", "forum", "search", _page(lambda r: f"/search?q={_q(search_query(r, 0.5), r)}", "search")),
    Template("forum.tag", "forum", "page", _page(lambda r: f"/tag/{r.choice(TAGS)}")),
    Template("forum.badges", "forum", "page", _page(lambda r: f"/badges/{r.randint(1, 60)}/{r.choice(('first-post', 'welcome', 'nice-reply', 'editor', 'autobiographer'))}")),
    Template("forum.groups", "forum", "page", _page(lambda r: f"/g/{r.choice(TAGS)}{r.choice(('', '/members', '/activity/posts'))}")),
    Template("forum.rss", "forum", "feed", lambda r: Endpoint("GET", r.choice(("/latest.rss", "/posts.rss")), "feed")),
    Template("forum.cat_rss", "forum", "feed", lambda r: Endpoint("GET", f"/c/{r.choice(TAGS)}.rss", "feed")),
    Template("forum.topic_json", "forum", "xhr", lambda r: Endpoint("GET", f"/t/{r.randint(100, 99999)}.json?track_visit=true&forceLoad=true", "xhr", "xhr")),
    Template("forum.poll", "forum", "xhr_post", lambda r: Endpoint("POST", f"/message-bus/{_hex(r, 32)}/poll", "xhr", "xhr_post", urlencode({"/latest": str(r.randint(1, 9999)), "__seq": str(r.randint(1, 99))}), "application/x-www-form-urlencoded")),
    Template("forum.reply", "forum", "form", _form(lambda r: "/posts", _reply)),
    Template("forum.login", "forum", "login", _form(lambda r: "/session", lambda r: {"login": r.choice(USERS), "password": _password(r)})),
    # --- blog
    Template("blog.post", "blog", "page", _page(lambda r: f"/{r.randint(2015, 2025)}/{r.randint(1, 12):02d}/{r.randint(1, 28):02d}/{r.choice(TOPICS)}/")),
    Template("blog.tag", "blog", "page", _page(lambda r: f"/tag/{r.choice(TAGS)}/")),
    Template("blog.page", "blog", "page", _page(lambda r: f"/page/{r.randint(2, 60)}/")),
    Template("blog.about", "blog", "page", _page(lambda r: r.choice(("/about/", "/contact/", "/privacy/", "/now/")))),
    Template("blog.archive", "blog", "page", _page(lambda r: f"/archive/{r.randint(2015, 2025)}/{r.randint(1, 12):02d}/")),
    Template("blog.amp", "blog", "page", _page(lambda r: f"/{r.randint(2015, 2025)}/{r.randint(1, 12):02d}/{r.choice(TOPICS)}/amp/")),
    Template("blog.author", "blog", "page", _page(lambda r: f"/author/{r.choice(USERS)}/{r.choice(('', 'page/2/', 'page/3/'))}")),
    Template("blog.series", "blog", "page", _page(lambda r: f"/series/{r.choice(TOPICS)}/part-{r.randint(1, 6)}/")),
    Template("blog.search", "blog", "search", _page(lambda r: f"/?s={_q(search_query(r), r)}", "search")),
    Template("blog.feed", "blog", "feed", lambda r: Endpoint("GET", "/feed/", "feed")),
    Template("blog.atom", "blog", "feed", lambda r: Endpoint("GET", r.choice(("/atom.xml", "/index.xml")), "feed")),
    Template("blog.rss", "blog", "feed", lambda r: Endpoint("GET", "/rss.xml", "feed")),
    Template("blog.tag_feed", "blog", "feed", lambda r: Endpoint("GET", f"/tag/{r.choice(TAGS)}/feed/", "feed")),
    Template("blog.comment", "blog", "form", _form(lambda r: "/comments", lambda r: {"post_id": str(r.randint(1, 900)), "author": r.choice(USERS), "email": _email(r), "comment": _text(r, REVIEW_TEXT) if r.random() < 0.5 else _text(r, FORUM_TEXT)})),
    Template("blog.contact", "blog", "form", _form(lambda r: "/contact/send", lambda r: {"name": r.choice(USERS).title(), "email": _email(r), "message": _text(r, FORUM_TEXT)})),
    # --- docs
    Template("docs.page", "docs", "page", _page(lambda r: f"/docs/{r.choice(('latest', 'stable', 'v1.4', 'v2.0'))}/{r.choice(SECTIONS)}/{r.choice(PAGES)}.html")),
    Template("docs.anchor", "docs", "page", _page(lambda r: f"/{r.choice(('en', 'de', 'ja'))}/{r.choice(('latest', 'stable'))}/{r.choice(PAGES)}/")),
    Template("docs.index", "docs", "page", _page(lambda r: f"/docs/{r.choice(('latest', 'stable', 'v1.4'))}/{r.choice(('index', 'genindex', 'search'))}.html")),
    Template("docs.search", "docs", "search", _page(lambda r: f"/search.html?q={_q(search_query(r, 0.5), r)}&check_keywords=yes&area=default", "search")),
    Template("docs.api_ref", "docs", "page", _page(lambda r: f"/api/{r.choice(REPOS)}/{r.choice(PAGES)}")),  # browsers never send the #fragment
    Template("docs.reference", "docs", "page", _page(lambda r: f"/reference/{r.choice(REPOS)}/{r.choice(PAGES)}.html")),
    Template("docs.api_versioned", "docs", "page", _page(lambda r: f"/api/{r.choice(('v1', 'v2', 'latest', 'stable'))}/{r.choice(PAGES)}{r.choice(('.html', '/', ''))}")),
    Template("docs.changelog", "docs", "page", _page(lambda r: r.choice(("/changelog/", "/release-notes/", f"/release-notes/{_version(r)}/", f"/changelog/{r.randint(2019, 2025)}/")))),
    Template("docs.tutorial", "docs", "page", _page(lambda r: f"/{r.choice(('tutorials', 'guides', 'howto', 'cookbook'))}/{r.choice(TOPICS)}/")),
    Template("docs.modules", "docs", "page", _page(lambda r: f"/modules/{r.choice(REPOS)}/{r.choice(SECTIONS)}/{r.choice(PAGES)}/")),
    Template("docs.searchindex", "docs", "xhr", lambda r: Endpoint("GET", f"/docs/{r.choice(('latest', 'stable'))}/searchindex.js", "xhr", "script")),
    # --- API
    Template("api.user", "api", "api", lambda r: Endpoint("GET", f"/v2/users/{r.randint(1, 10**6)}", "api")),
    Template("api.orders", "api", "api", lambda r: Endpoint("GET", f"/v2/orders?limit={r.choice((20, 50, 100))}&offset={r.randint(0, 50) * 50}&status={r.choice(('open', 'paid', 'shipped'))}", "api")),
    Template("api.item", "api", "api", lambda r: Endpoint("GET", f"/v1/items/{_hex(r, 8)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 12)}", "api")),
    Template("api.search", "api", "api", lambda r: Endpoint("GET", f"/v2/search?q={_q(search_query(r), r)}&fields=name,price", "api")),
    Template("api.graphql", "api", "api", _json("POST", lambda r: "/graphql", lambda r: {"query": "query Orders($first: Int!) { orders(first: $first) { edges { node { id total status } } } }", "variables": {"first": r.choice((10, 25, 50))}}, "api")),
    Template("api.events", "api", "api", _json("POST", lambda r: "/v1/events", lambda r: {"events": [{"type": r.choice(("page_view", "click", "purchase")), "ts": 1700000000 + r.randint(0, 10**7)} for _ in range(r.randint(1, 3))]}, "api")),
    Template("api.webhook", "api", "api", _json("POST", lambda r: f"/v1/webhooks/{r.choice(('stripe', 'github', 'gitlab', 'slack'))}", lambda r: {"id": f"evt_{_hex(r, 24)}", "type": r.choice(("charge.succeeded", "push", "issue_comment")), "created": 1700000000 + r.randint(0, 10**7)}, "api")),
    Template("api.token", "api", "api", lambda r: Endpoint("POST", "/oauth/token", "api", "xhr_post", urlencode({"grant_type": "client_credentials", "scope": "read:orders"}), "application/x-www-form-urlencoded")),
    Template("api.patch", "api", "api", _json("PATCH", lambda r: f"/v2/orders/{r.randint(1, 10**6)}", lambda r: {"status": "shipped", "tracking": f"1Z{_hex(r, 16).upper()}"}, "api")),
    Template("api.delete", "api", "api", lambda r: Endpoint("DELETE", f"/v2/carts/{r.randint(1, 10**6)}/items/{r.randint(1, 99)}", "api")),
    # --- assets, shared by every site
    Template("asset.js", "*", "asset", _asset(lambda r: f"/static/js/{r.choice(('main', 'vendor', 'runtime', 'app', 'chunk'))}.{_hex(r, 8)}.js", "script")),
    Template("asset.css", "*", "asset", _asset(lambda r: f"/static/css/{r.choice(('main', 'app', 'theme'))}.{_hex(r, 8)}.css", "style")),
    Template("asset.image", "*", "asset", _asset(lambda r: f"/images/{_slug(r)}.{r.choice(('jpg', 'png', 'webp'))}", "image")),
    Template("asset.thumb", "*", "asset", _asset(lambda r: f"/media/cache/{r.choice((200, 400, 800))}x{r.choice((200, 400, 600))}/{_slug(r)}.jpg", "image")),
    Template("asset.font", "*", "asset", _asset(lambda r: f"/fonts/{r.choice(('inter', 'roboto', 'source-sans'))}-{r.choice(('regular', 'bold', 'italic'))}.woff2", "font")),
    Template("asset.favicon", "*", "asset", _asset(lambda r: r.choice(("/favicon.ico", "/apple-touch-icon.png", "/favicon-32x32.png")), "image")),
    Template("asset.touch_icon", "*", "asset", _asset(lambda r: r.choice(("/apple-touch-icon-precomposed.png", f"/apple-touch-icon-{r.choice((120, 152, 167, 180))}x{r.choice((120, 152, 167, 180))}.png", "/apple-touch-icon-precomposed-152x152.png")), "image")),
    Template("asset.root_icons", "*", "asset", _asset(lambda r: r.choice(("/favicon.svg", "/favicon-16x16.png", f"/android-chrome-{r.choice((192, 512))}x{r.choice((192, 512))}.png", "/mstile-150x150.png", "/safari-pinned-tab.svg", "/icon.png", "/logo.svg")), "image")),
    Template("asset.manifest", "*", "asset", _asset(lambda r: r.choice(("/site.webmanifest", "/manifest.json", "/manifest.webmanifest", "/browserconfig.xml", "/app.webmanifest")), "xhr")),
    Template("asset.worker", "*", "asset", _asset(lambda r: r.choice(("/sw.js", "/service-worker.js", f"/workbox-{_hex(r, 8)}.js", "/firebase-messaging-sw.js", "/OneSignalSDKWorker.js")), "script")),
    Template("asset.next", "*", "asset", _asset(lambda r: f"/_next/static/chunks/{r.choice(('pages', 'app', 'framework'))}-{_hex(r, 16)}.js", "script")),
    Template("asset.icon", "*", "asset", _asset(lambda r: f"/assets/icons/{r.choice(NOUNS)}.svg?v={r.randint(1, 9)}", "image")),
    # --- generic shapes every kind of client requests (so that a path's *shape* alone
    # never tells a person from a bot or an attack: only its content may)
    Template("generic.locale", "*", "page", _page(lambda r: f"/{r.choice(LOCALE_CODES)}/{r.choice(('latest', 'stable', 'v2', '2024', 'help', 'docs'))}/{r.choice(PAGES + TOPICS)}/")),
    # the home page: the most requested URL of every site, so every side has it (a group of one is shared)
    Template("generic.home", "*", "home", _page(lambda r: r.choice(("/", "/", "/", "/", "/index.html", "/home", f"/?ref={r.choice(WORDS)}", f"/?lang={r.choice(LOCALE_CODES)}")))),
    # short root-level pages people open from links and bookmarks: what an unknown one-word path mostly is
    Template("generic.landing", "*", "page", _page(lambda r: "/" + r.choice(LANDING) + r.choice(("", "", "/", ".html")))),
    Template("generic.section", "*", "page", _page(lambda r: f"/{r.choice(CATEGORIES + NOUNS)}{r.choice(('', '/', ''))}")),
    Template("generic.localized", "*", "page", _page(lambda r: f"/{r.choice(LOCALE_CODES)}/{r.choice(LANDING)}{r.choice(('', '/'))}")),
    Template("generic.versioned", "*", "page", _page(lambda r: f"/{r.choice(('v1', 'v2', 'v3', '2024', '2025', 'beta', 'next', 'latest'))}{r.choice(('', '/'))}")),
    Template("generic.deep", "*", "page", _page(lambda r: "/" + "/".join(_segment(r) for _ in range(r.randint(1, 5))) + r.choice(("", "/", "", ".html")))),
    Template("generic.dated", "*", "page", _page(lambda r: f"/{r.choice(('news', 'posts', 'articles', 'events', 'press'))}/{r.randint(2012, 2025)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}-{_slug(r)}")),
    Template("generic.ids", "*", "page", _page(lambda r: f"/{r.choice(('item', 'view', 'listing', 'node', 'id', 'ticket', 'member'))}/{r.randint(1, 10**7)}{r.choice(('', '/edit', '/history', '/comments', '/photos'))}")),
    Template("generic.legacy", "*", "page", _page(lambda r: f"/{r.choice(('index', 'page', 'view', 'show', 'article', 'product', 'default', 'list'))}.{r.choice(('php', 'aspx', 'jsp', 'cfm', 'html', 'htm', 'asp'))}?{r.choice(('id', 'page', 'p', 'cat', 'article'))}={r.randint(1, 9999)}{r.choice(('', '&lang=' + r.choice(LOCALE_CODES), '&sort=' + r.choice(('asc', 'desc', 'date'))))}")),
    Template("generic.query", "*", "page", _page(lambda r: f"/{_segment(r)}?" + "&".join(f"{r.choice(PARAM_NAMES)}={_q(_value(r), r)}" for _ in range(r.randint(1, 4))))),
    Template("generic.tracking", "*", "page", _page(lambda r: f"/{_segment(r)}/{_slug(r)}?utm_source={r.choice(('newsletter', 'twitter', 'google', 'facebook'))}&utm_medium={r.choice(('email', 'social', 'cpc'))}&utm_campaign={r.choice(WORDS)}_{r.randint(1, 99)}{r.choice(('', '&gclid=' + _hex(r, 24), '&fbclid=' + _hex(r, 30)))}")),
    Template("generic.files", "*", "download", lambda r: Endpoint("GET", f"/{r.choice(('files', 'downloads', 'uploads', 'media', 'docs', 'assets'))}/{_slug(r)}.{r.choice(('pdf', 'zip', 'csv', 'docx', 'mp4', 'xlsx', 'epub', 'tar.gz'))}", "download")),
    Template("generic.script_page", "*", "page", _page(lambda r: f"/{_segment(r)}/{r.choice(WORDS + NOUNS + PAGES)}.{r.choice(SCRIPT_EXTENSIONS)}{_params(r, 0, 2)}")),
    Template("generic.php_app", "*", "page", _page(lambda r: f"/{r.choice(('index', 'forum', 'shop', 'gallery', 'viewtopic', 'product', 'search', 'member', 'calendar'))}.php{_params(r, 1, 3)}")),
    Template("generic.asp_app", "*", "page", _page(lambda r: f"/{r.choice(CATEGORIES).title()}/{r.choice(PAGES).title()}.aspx{_params(r, 0, 2, camel=True)}")),
    Template("generic.java_app", "*", "page", _page(lambda r: f"/{r.choice(('portal', 'app', 'web', 'store', 'bank'))}/{r.choice(WORDS)}{r.choice(('.do', '.action', '.jsf', '.jsp', ''))}{_params(r, 1, 3)}")),
    Template("generic.struts_app", "*", "page", _page(lambda r: f"/{r.choice(('portal', 'ebank', 'hr', 'intranet', 'crm'))}/{r.choice(CATEGORIES)}/{r.choice(('list', 'view', 'edit', 'search', 'detail'))}{r.choice(WORDS).title()}.action{_params(r, 0, 2)}")),
    Template("generic.servlet_app", "*", "page", _page(lambda r: f"/{r.choice(('portal', 'shop', 'erp', 'booking'))}/servlet/{r.choice(('Catalog', 'Booking', 'Report', 'Search', 'Account'))}{r.choice(('', 'Servlet'))}{_params(r, 1, 3)}")),
    Template("generic.faces_app", "*", "page", _page(lambda r: f"/{r.choice(('app', 'portal', 'claims', 'tickets'))}/faces/{r.choice(PAGES)}.xhtml{_params(r, 0, 2)}")),
    Template("generic.params", "*", "page", _page(lambda r: f"/{_segment(r)}/{_segment(r)}{_params(r, 1, 5)}")),
    Template("generic.redirects", "*", "page", _page(lambda r: f"/{r.choice(('login', 'logout', 'out', 'go', 'redirect', 'link', 'auth/callback', 'sso'))}{_params(r, 1, 2, names=REDIRECT_PARAMS)}")),
    Template("generic.login", "*", "login", _form(lambda r: r.choice(("/login", "/signin", "/users/sign_in", "/auth/login", "/account/signin")),
                                                   lambda r: {r.choice(("username", "user", "email", "login")): _email(r) if r.random() < 0.5 else r.choice(USERS),
                                                              "password": _password(r), **({"remember_me": "1"} if r.random() < 0.5 else {})})),
    Template("generic.login_json", "*", "login", _json("POST", lambda r: r.choice(("/api/login", "/api/auth/session", "/api/v1/sessions")),
                                                       lambda r: {"email": _email(r), "password": _password(r)}, "form")),
    Template("generic.signup", "*", "login", _form(lambda r: r.choice(("/register", "/signup", "/users", "/join")),
                                                    lambda r: {"name": r.choice(USERS).title(), "email": _email(r), "password": _password(r),
                                                               "password_confirmation": _password(r), "terms": "on"})),
    # --- crawler endpoints
    Template("robots", "*", "robots", lambda r: Endpoint("GET", "/robots.txt", "robots")),
    Template("sitemap", "*", "robots", lambda r: Endpoint("GET", r.choice(("/sitemap.xml", f"/sitemap-{r.randint(1, 9)}.xml", "/sitemap_index.xml")), "robots")),
    Template("health", "*", "health", lambda r: Endpoint(r.choice(("GET", "HEAD")), r.choice(("/", "/healthz", "/status", "/health")), "health")),
)

SITES = tuple(HOSTS)

# People's one-click actions (follow, star, react, save for later, apply a coupon): short form posts whose fields
# are an id, a token or a word, to paths of their own. On the training side only (``_assign``), so the calibration and
# evaluation files stay as they were; the paths share no word but "add" with the one-click measurement
# (``models.data.oneclick``: cart, like, vote, wishlist, checkout, settings, delete), which measures whether it generalises.
ACTIONS: tuple[Template, ...] = (
    Template("shop.basket_add", "shop", "form", _form(lambda r: "/basket/add", lambda r: {"item": str(r.randint(1, 99999))} if r.random() < 0.5 else {"product": str(r.randint(100, 99999)), "qty": str(r.randint(1, 4))})),
    Template("shop.favorite", "shop", "form", _form(lambda r: "/account/favorites", lambda r: {"product_id": str(r.randint(100, 999999))})),
    Template("shop.compare_add", "shop", "form", _form(lambda r: "/compare/add", lambda r: {"sku": f"{r.choice('ABCDEFGHKMNPRSTX')}{r.choice('ABCDEFGHKMNPRSTX')}-{r.randint(100, 99999)}"})),
    Template("shop.coupon", "shop", "form", _form(lambda r: "/coupon/apply", lambda r: {"code": f"{r.choice(WORDS).upper()}{r.choice((5, 10, 15, 20, 25))}"})),
    Template("shop.currency", "shop", "form", _form(lambda r: "/currency", lambda r: {"code": r.choice(("EUR", "USD", "GBP", "JPY", "CHF"))})),
    Template("forum.bookmark", "forum", "form", _form(lambda r: f"/t/{r.randint(1, 99999)}/bookmark", lambda r: {"post_number": str(r.randint(1, 200))})),
    Template("forum.react", "forum", "form", _form(lambda r: f"/p/{r.randint(1, 999999)}/react", lambda r: {"emoji": r.choice(("heart", "+1", "laughing", "tada", "eyes"))})),
    Template("forum.follow", "forum", "form", _form(lambda r: f"/u/{r.choice(USERS)}/follow", lambda r: {"follow": "1", "_csrf": _hex(r, 32)})),
    Template("forum.poll_answer", "forum", "form", _form(lambda r: f"/polls/{r.randint(1, 9999)}/answer", lambda r: {"option": str(r.randint(1, 6))})),
    Template("forum.mark_read", "forum", "form", _form(lambda r: "/notifications/read", lambda r: {"all": "1"} if r.random() < 0.5 else {"id": str(r.randint(1, 10**7))})),
    Template("blog.applause", "blog", "form", _form(lambda r: f"/posts/{r.randint(1, 900)}/applause", lambda r: {"count": str(r.randint(1, 50))})),
    Template("blog.rating", "blog", "form", _form(lambda r: f"/articles/{r.randint(1, 900)}/rating", lambda r: {"stars": str(r.randint(1, 5))})),
    Template("forge.star", "forge", "form", _form(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/star", lambda r: {"authenticity_token": _hex(r, 40)})),
    Template("forge.watch", "forge", "form", _form(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/subscription", lambda r: {"state": r.choice(("watching", "ignoring", "releases"))})),
    Template("forge.labels", "forge", "form", _form(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/issues/{r.randint(1, 3000)}/labels", lambda r: {"label": r.choice(("bug", "docs", "enhancement", "question"))})),
    Template("docs.feedback", "docs", "form", _form(lambda r: "/feedback", lambda r: {"page": f"/guide/{r.choice(WORDS)}", "helpful": r.choice(("yes", "no"))})),
    Template("docs.version", "docs", "form", _form(lambda r: "/select-version", lambda r: {"v": _version(r)})),
    Template("any.consent", "*", "form", _form(lambda r: "/privacy/consent", lambda r: {"accept": r.choice(("all", "necessary"))})),
    Template("any.setlang", "*", "form", _form(lambda r: "/i18n/setlang", lambda r: {"language": r.choice(("de", "fr", "es", "ja", "pt-br")), "next": "/"})),
    Template("any.signout", "*", "form", _form(lambda r: "/session/end", lambda r: {"_token": _hex(r, 40)})),
)


def _route(name: str, shapes: Callable[[random.Random], tuple[str, ...]]) -> Template:
    """A ``ROUTES`` page: one of the URL ``shapes`` (all drawn, then one chosen)."""
    return Template(f"routes.{name}", "*", "page", _page(lambda r: r.choice(shapes(r))))


# Pages in the URL conventions of widely deployed web software (wikis, bulletin boards, CMSs, shop engines, MVC
# frameworks, ColdFusion and classic ASP): what a person's first request to an unfamiliar site looks like. On the
# training side only, and only when the generator is asked for them (``routes``: the training config's
# ``data.routes``), so the calibration and evaluation files stay as they were: the held-out sides keep shapes of
# their own, and ``tests/models/test_flash_data.py`` checks these add no path word to the training side that a held-out
# template has. Crawlers, bad bots and attacks draw pages from them as from every page template (attacks put
# their payloads into them), so a shape alone is no evidence either way.
ROUTES: tuple[Template, ...] = (
    _route("wiki", lambda r: (
        f"/w/index.php?title={r.choice(NOUNS).title()}_{r.choice(WORDS)}&action={r.choice(('edit', 'raw', 'info', 'watch'))}",
        f"/w/index.php?title=Special:{r.choice(('RecentChanges', 'Random', 'WhatLinksHere', 'Categories'))}{r.choice(('', '&limit=50&days=7'))}",
        f"/pedia/{r.choice(WORDS).title()}_{r.choice(NOUNS)}{r.choice(('', '?oldid=' + str(r.randint(10**6, 10**8))))}")),
    _route("board", lambda r: (
        f"/showthread.php?t={r.randint(1, 999999)}{r.choice(('', '&page=' + str(r.randint(2, 40))))}",
        f"/viewforum.php?f={r.randint(1, 80)}{r.choice(('', '&start=' + str(25 * r.randint(1, 20))))}",
        f"/memberlist.php?mode=viewprofile&u={r.randint(2, 99999)}",
        f"/index.php?topic={r.randint(1, 99999)}.{15 * r.randint(0, 10)}")),
    _route("cms", lambda r: (
        f"/?p={r.randint(1, 30000)}", f"/?page_id={r.randint(2, 900)}", f"/node/{r.randint(1, 99999)}{r.choice(('', '/revisions', '?destination=/node/' + str(r.randint(1, 999))))}",
        f"/index.php?option=com_content&view=article&id={r.randint(1, 3000)}&Itemid={r.randint(100, 999)}",
        f"/{r.choice(TAGS)}/page/{r.randint(2, 60)}/")),
    _route("shop_engine", lambda r: (
        f"/catalogue/item/view/id/{r.randint(1, 99999)}/s/{_slug(r)}/category/{r.randint(2, 300)}/",
        f"/index.php?route=product/product&product_id={r.randint(28, 9999)}{r.choice(('', '&path=' + str(r.randint(18, 80))))}",
        f"/dp/B0{''.join(r.choice('ABCDEFGHJKLMNPQRSTUVWXYZ0123456789') for _ in range(8))}{r.choice(('', '/ref=sr_1_' + str(r.randint(1, 30))))}",
        f"/itm/{r.randint(10**11, 10**12 - 1)}{r.choice(('', '?hash=item' + _hex(r, 10)))}")),
    _route("mvc", lambda r: (
        f"/{r.choice(('Home', 'Products', 'Events', 'Members', 'Courses'))}/{r.choice(('Details', 'Index', 'Browse', 'Show'))}/{r.randint(1, 9999)}",
        f"/{r.choice(('courses', 'events', 'members', 'listings'))}/{r.randint(1, 99999)}/{r.choice(('show', 'details', 'overview'))}{r.choice(('', '?tab=' + r.choice(('info', 'reviews', 'photos'))))}",
        f"/Courses/Browse?Subject={r.choice(TAGS)}&Level={r.randint(100, 400)}")),
    _route("fusion", lambda r: (
        f"/index.cfm?fuseaction={r.choice(('courses', 'events', 'members'))}.{r.choice(('detail', 'listing', 'overview'))}&ID={r.randint(1, 99999)}",
        f"/Article.asp?ID={r.randint(1, 99999)}&CatID={r.randint(1, 60)}", f"/news_detail.asp?NewsID={r.randint(1, 9999)}")),
    _route("archive", lambda r: (
        f"/{r.randint(2009, 2025)}/{r.randint(1, 12):02d}/{_slug(r)}/", f"/archives/{r.randint(2009, 2025)}/{r.randint(1, 12):02d}/",
        f"/{r.randint(2009, 2025)}/{r.randint(1, 12):02d}/{r.randint(1, 28):02d}/{_slug(r)}.html")),
    _route("threads", lambda r: (
        f"/r/{r.choice(TAGS)}/comments/{_hex(r, 6)}/{r.choice(TOPICS).replace('-', '_')}/",
        f"/t/{r.choice(TOPICS)}/{r.randint(1, 99999)}/{r.randint(1, 300)}", f"/s/{''.join(r.choice('abcdefghjkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789') for _ in range(7))}")),
    _route("calendar", lambda r: (
        f"/calendar?month={r.randint(2019, 2026)}-{r.randint(1, 12):02d}&view={r.choice(('month', 'week', 'agenda'))}",
        f"/map?lat={r.uniform(-60, 70):.5f}&lon={r.uniform(-170, 170):.5f}&z={r.randint(3, 18)}",
        f"/timetable/{r.randint(1, 999)}?date={r.randint(2019, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}")),
    _route("gallery", lambda r: (
        f"/gallery/album.php?album={r.randint(1, 300)}&pic={r.randint(1, 9999)}",
        f"/photos/{r.choice(USERS)}/{r.randint(10**9, 10**10)}/in/album-{r.randint(10**5, 10**6)}/",
        f"/media/{r.randint(1, 99999)}/{r.choice(('full', 'thumb', 'large'))}")),
    _route("manual", lambda r: (
        f"/manual/{r.choice(LOCALE_CODES)}/function.{r.choice(WORDS)}-{r.choice(NOUNS)}.php",
        f"/{r.choice(('handbook', 'kb', 'knowledgebase'))}/{r.randint(100, 99999)}-{_slug(r)}",
        f"/kb/article.aspx?id={r.randint(100, 999999)}&lang={r.choice(LOCALE_CODES)}")),
    _route("java", lambda r: (
        f"/{r.choice(CATEGORIES)}/{r.choice(WORDS)}{r.choice(NOUNS).title()}.do?method={r.choice(('view', 'list', 'edit', 'search'))}&{r.choice(NOUNS)}Id={r.randint(1, 99999)}",
        f"/{r.choice(NOUNS)}/{r.choice(('Detail', 'List', 'Overview', 'Search'))}.jsp;jsessionid={_hex(r, 32).upper()}{r.choice(('', '?id=' + str(r.randint(1, 99999))))}",
        f"/{r.choice(NOUNS)}/{r.choice(('show', 'view', 'browse'))}{r.choice(NOUNS).title()}.action?{r.choice(NOUNS)}Id={r.randint(1, 99999)}",
        f"/{r.choice(PAGES)}.jsp?{r.choice(('tab', 'section', 'step'))}={r.randint(1, 9)}{r.choice(('', '&locale=' + r.choice(LOCALE_CODES)))}")),
    _route("portal", lambda r: (
        f"/{r.choice(('intranet', 'extranet', 'students'))}/{r.choice(('SitePages', 'sites'))}/{r.choice(PAGES).title()}.aspx",
        f"/{r.choice(('students', 'staff', 'library'))}/{r.choice(('catalogue', 'timetables', 'notices'))}/{r.randint(1, 999)}{_params(r, 0, 2)}",
        f"/cgi/{r.choice(('library', 'catalogue'))}.pl?{r.choice(('isbn', 'record', 'title'))}={r.randint(10**9, 10**10)}")),
)

# Directories sites mount an application under (a blog at /blog/, a shop at /shop/, an admin panel at /admin/, a
# web app at /app/). Scanners put their probes under the same guesses (``attacks._PROBE_PREFIXES``), so while no
# page of anyone else is drawn under them, a directory alone would tell an attack. On the training side only, and
# only when the generator is asked for them (``mounts``, the training config's ``data.mounts``): that share of the
# site pages people, crawlers, bots and attacks draw is placed under one of these. No word of them is new to the
# training side and also in a calibration or evaluation template (``web``, ``bank`` are left out for that).
MOUNTS = ("app", "apps", "www", "site", "new", "public", "cms", "blog", "admin", "portal", "community", "shop", "store",
          "beta", "intranet", "wp", "old")

# ---------------------------------------------------------------------------- the unseen-releases split
#
# The unseen-releases split's own pages (``sources.UNSEEN_RELEASES``): URL shapes written for it alone, for every kind of request the generator
# asks a site for (home, robots and health excepted: every client of every side asks for "/" and "/robots.txt"), and
# its own text for people's searches, reviews, posts and comments, hard negatives included. Only ``clefgate eval``
# reads what is drawn from them.
RELEASES_QUERIES = ("trail running shoes women", "noise cancelling earbuds", "cast iron skillet 12 inch", "ergonomic office chair",
                "merino base layer", "portable monitor usb c", "self hosted photo backup", "kubernetes ingress tls",
                "sourdough starter jar", "e-bike battery 48v", "wedding guest dress", "mechanical keyboard switches")
RELEASES_HARD_QUERIES = ("drop-down menu css", "union station parking", "select all shortcut mac", "etc/hosts file windows 11",
                     "'where the crawdads sing'", "1/2\" drill bit", "<3 emoticon meaning", "script font for logo",
                     "admin' dashboard template", "or else meaning", "sleep(5) javascript", "cat /dev/null vs truncate",
                     "null check in java", "${HOME} in dockerfile", "onerror attribute img", "..\\ windows path meaning",
                     "insert into select postgres", "\"; semicolon rules", "alert box html", "delete from table where id in",
                     "wget download whole site", "%20 in url", "a && b in bash", "iframe embed youtube")
RELEASES_REVIEW_TEXT = ("Runs true to size; I'd order your usual.", "Battery lasts ~2 days with ANC on -> very happy.",
                    "The 'waterproof' seams leaked after a week :(", "<b>Update:</b> the replacement works perfectly.",
                    "Great value & fast shipping; select the bigger size if unsure.", "Meh. 3/5 - the app's UI is clunky.",
                    "Bought 2 (one for my dad) and both arrived in <48h.", "Don't drop it on tiles... screen cracked on day one.")
RELEASES_FORUM_TEXT = (
    "Try `docker compose down -v && docker compose up -d` to recreate the volumes.",
    "My cron line is */5 * * * * /usr/bin/php /var/www/cron.php > /dev/null 2>&1 and it never runs.",
    "The query `SELECT COUNT(*) FROM events WHERE created_at > NOW() - INTERVAL '1 day'` takes 9 s, is that normal?",
    "You need <meta name=\"viewport\" content=\"width=device-width\"> or mobile zoom breaks.",
    "Same here since 2.3 - rolling back to 2.2 fixed it.",
    "Use ../shared/config.yaml relative to the binary, not the working directory.",
    "I'd avoid `eval` in bash scripts; use an array instead.",
    "In Windows set the path to C:\\Program Files\\App\\bin and restart the terminal.",
)
RELEASES_COMMENT_MARKDOWN = (
    "Nit: `os.path.join` instead of string concat?", "Rebased on main, CI is green now.",
    "```sql\nUPDATE jobs SET state = 'queued' WHERE state = 'stuck';\n```\nfixes the backlog.",
    "This fails when `$HOME` has a space in it.", "Closing as fixed by #1204.", "Could we add `<details>` around the long log?",
)
_RELEASES_TEXT = {id(QUERIES): RELEASES_QUERIES, id(HARD_QUERIES): RELEASES_HARD_QUERIES, id(REVIEW_TEXT): RELEASES_REVIEW_TEXT,
              id(FORUM_TEXT): RELEASES_FORUM_TEXT, id(COMMENT_MARKDOWN): RELEASES_COMMENT_MARKDOWN}


@functools.cache
def _unseen_module_templates(split: Split) -> tuple[Template, ...]:
    """A module split's pages (``sources.unseen_module``), with the held-out side's home, robots and health checks."""
    return tuple(unseen_module(split).TEMPLATES) + tuple(t for t in _SIDES["eval"] if t.group in ("home", "robots", "health"))


def _uuid(rng: random.Random) -> str:
    return f"{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}"


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2023, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


RELEASES_TEMPLATES: tuple[Template, ...] = (
    # --- shop
    Template("unseen-releases.shop.variant", "shop", "page", _page(lambda r: f"/product/{_slug(r)}/variant/{r.randint(1, 40)}?swatch={r.choice(WORDS[:8])}")),
    Template("unseen-releases.shop.deals", "shop", "page", _page(lambda r: f"/deals/{r.choice(('today', 'weekend', 'clearance', 'bundles'))}/{r.choice(CATEGORIES)}?page={r.randint(1, 12)}")),
    Template("unseen-releases.shop.giftcard", "shop", "page", _page(lambda r: f"/gift-cards/{r.choice((25, 50, 100))}-{r.choice(('birthday', 'thank-you', 'holiday'))}")),
    Template("unseen-releases.shop.track", "shop", "page", _page(lambda r: f"/order-status?order={r.randint(10**7, 10**8)}&zip={r.randint(10000, 99999)}")),
    Template("unseen-releases.shop.size_chart", "shop", "page", _page(lambda r: f"/help/size-chart/{r.choice(CATEGORIES)}/{r.choice(NOUNS)}")),
    Template("unseen-releases.shop.search", "shop", "search", _page(lambda r: f"/s?k={_q(search_query(r), r)}&ref=nav_search{r.choice(('', '&page=2', '&rh=p_72:4-stars'))}", "search")),
    Template("unseen-releases.shop.suggest", "shop", "xhr", lambda r: Endpoint("GET", f"/api/search/suggest?term={_q(search_query(r, 0.3)[:r.randint(3, 12)], r)}&limit=8", "xhr", "xhr")),
    Template("unseen-releases.shop.price", "shop", "xhr", lambda r: Endpoint("GET", f"/api/v3/prices?sku=SKU-{r.randint(1000, 9999)}&currency={r.choice(('EUR', 'USD', 'GBP'))}", "xhr", "xhr")),
    Template("unseen-releases.shop.cart_qty", "shop", "xhr_post", _json("PUT", lambda r: f"/api/cart/lines/{r.randint(1, 40)}", lambda r: {"quantity": r.randint(1, 5)})),
    Template("unseen-releases.shop.question", "shop", "form", _form(lambda r: f"/products/{r.randint(100, 99999)}/questions", lambda r: {"question": _text(r, REVIEW_TEXT), "nickname": r.choice(USERS)})),
    Template("unseen-releases.shop.login", "shop", "login", _form(lambda r: "/customer/account/loginPost/", lambda r: {"login[username]": _email(r), "login[password]": _password(r), "form_key": _hex(r, 16)})),
    # --- forge
    Template("unseen-releases.forge.blame", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/blame/{r.choice(BRANCHES)}/{r.choice(FILES)}")),
    Template("unseen-releases.forge.milestone", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/milestone/{r.randint(1, 60)}?closed={r.randint(0, 1)}")),
    Template("unseen-releases.forge.packages", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/-/packages/{r.choice(('npm', 'pypi', 'container', 'cargo'))}/{r.choice(REPOS)}/{_version(r)}")),
    Template("unseen-releases.forge.discussion", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/discussions/{r.randint(1, 900)}")),
    Template("unseen-releases.forge.code_search", "forge", "search", _page(lambda r: f"/search?q={_q(search_query(r, 0.5), r)}&type=code&repo={r.choice(USERS)}%2F{r.choice(REPOS)}", "search")),
    Template("unseen-releases.forge.snapshot", "forge", "download", lambda r: Endpoint("GET", f"/{r.choice(USERS)}/{(repo := r.choice(REPOS))}/-/archive/{(b := r.choice(('main', 'develop', 'master')))}/{repo}-{b}.zip", "download")),
    Template("unseen-releases.forge.lfs", "forge", "git", lambda r: Endpoint("POST", f"/{r.choice(USERS)}/{r.choice(REPOS)}.git/info/lfs/objects/batch", "git", body=json.dumps({"operation": "download", "transfers": ["basic"], "objects": [{"oid": _hex(r, 64), "size": r.randint(10**3, 10**8)}]}, separators=(",", ":")), content_type="application/vnd.git-lfs+json")),
    Template("unseen-releases.forge.api_contents", "forge", "api", lambda r: Endpoint("GET", f"/api/v1/repos/{r.choice(USERS)}/{r.choice(REPOS)}/contents/{r.choice(FILES)}?ref={r.choice(('main', 'develop'))}", "api")),
    Template("unseen-releases.forge.api_release", "forge", "api", lambda r: Endpoint("GET", f"/api/v1/repos/{r.choice(USERS)}/{r.choice(REPOS)}/releases/{r.choice(('latest', 'tags/v' + _version(r)))}", "api")),
    Template("unseen-releases.forge.review", "forge", "form", _form(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/pulls/{r.randint(1, 900)}/files/reviews/comments", lambda r: {"content": _text(r, COMMENT_MARKDOWN), "line": str(r.randint(1, 400)), "path": r.choice(FILES)})),
    Template("unseen-releases.forge.notifications", "forge", "xhr", lambda r: Endpoint("GET", f"/notifications/new?count={r.randint(0, 1)}", "xhr", "xhr")),
    # --- forum
    Template("unseen-releases.forum.discussion", "forum", "page", _page(lambda r: f"/d/{r.randint(10, 99999)}-{r.choice(TOPICS)}{r.choice(('', '/' + str(r.randint(2, 90))))}")),
    Template("unseen-releases.forum.unread", "forum", "page", _page(lambda r: f"/{r.choice(('unread', 'new', 'top'))}?filter={r.choice(('tracked', 'watching', 'all'))}&period={r.choice(('weekly', 'monthly'))}")),
    Template("unseen-releases.forum.summary", "forum", "page", _page(lambda r: f"/u/{r.choice(USERS)}/{r.choice(('summary', 'badges', 'activity/replies'))}")),
    Template("unseen-releases.forum.search", "forum", "search", _page(lambda r: f"/search/query?term={_q(search_query(r, 0.5), r)}&include_blurbs=true", "search")),
    Template("unseen-releases.forum.user_feed", "forum", "feed", lambda r: Endpoint("GET", r.choice((f"/u/{r.choice(USERS)}/activity.rss", f"/t/{r.choice(TOPICS)}/{r.randint(100, 99999)}.rss")), "feed")),
    Template("unseen-releases.forum.counts", "forum", "xhr", lambda r: Endpoint("GET", f"/topics/timings?topic_id={r.randint(100, 99999)}&post_number={r.randint(1, 60)}", "xhr", "xhr")),
    Template("unseen-releases.forum.presence", "forum", "xhr_post", lambda r: Endpoint("POST", "/presence/update", "xhr", "xhr_post", urlencode({"client_id": _hex(r, 32), "present_channels[]": f"/discourse-presence/reply/{r.randint(100, 99999)}"}), "application/x-www-form-urlencoded")),
    Template("unseen-releases.forum.draft", "forum", "form", _form(lambda r: "/drafts.json", lambda r: {"draft_key": f"topic_{r.randint(100, 99999)}", "raw": _text(r, FORUM_TEXT), "sequence": str(r.randint(0, 9))})),
    Template("unseen-releases.forum.login", "forum", "login", _form(lambda r: "/login.php?do=login", lambda r: {"vb_login_username": r.choice(USERS), "vb_login_password": _password(r), "securitytoken": "guest", "do": "login"})),
    # --- blog
    Template("unseen-releases.blog.slug", "blog", "page", _page(lambda r: f"/posts/{r.choice(TOPICS)}-{_hex(r, 6)}")),
    Template("unseen-releases.blog.category", "blog", "page", _page(lambda r: f"/category/{r.choice(TAGS)}/{r.choice(TAGS)}/{r.choice(('', 'page/' + str(r.randint(2, 9)) + '/'))}")),
    Template("unseen-releases.blog.print", "blog", "page", _page(lambda r: f"/{r.randint(2019, 2026)}/{r.choice(TOPICS)}/?{r.choice(('print=1', 'share=email', 'replytocom=' + str(r.randint(10, 9999))))}")),
    Template("unseen-releases.blog.search", "blog", "search", _page(lambda r: f"/search/?query={_q(search_query(r), r)}&section={r.choice(('posts', 'all', 'notes'))}", "search")),
    Template("unseen-releases.blog.feed", "blog", "feed", lambda r: Endpoint("GET", r.choice((f"/{r.choice(TAGS)}/index.xml", "/feed.json", "/notes/feed.xml")), "feed")),
    Template("unseen-releases.blog.subscribe", "blog", "form", _json("POST", lambda r: "/members/api/send-magic-link/", lambda r: {"email": _email(r), "emailType": r.choice(("signup", "signin"))}, "form")),
    Template("unseen-releases.blog.webmention", "blog", "form", _form(lambda r: "/webmention", lambda r: {"source": f"https://{r.choice(USERS)}.example.net/notes/{r.randint(1, 999)}", "target": f"https://blog.example.com/{r.randint(2019, 2026)}/{r.choice(TOPICS)}/"})),
    # --- docs
    Template("unseen-releases.docs.release", "docs", "page", _page(lambda r: f"/en/v{r.randint(3, 9)}.{r.randint(0, 12)}/{r.choice(SECTIONS)}/{r.choice(PAGES)}/")),
    Template("unseen-releases.docs.symbol", "docs", "page", _page(lambda r: f"/api-reference/{r.choice(REPOS)}/{r.choice(('classes', 'functions', 'types'))}/{r.choice(WORDS).title()}{r.choice(NOUNS).title()}")),
    Template("unseen-releases.docs.source", "docs", "page", _page(lambda r: f"/handbook/{r.choice(SECTIONS)}/{r.choice(PAGES)}.md")),
    Template("unseen-releases.docs.search", "docs", "search", _page(lambda r: f"/search/?q={_q(search_query(r, 0.5), r)}&version={r.choice(('stable', 'latest', 'v2'))}", "search")),
    Template("unseen-releases.docs.index", "docs", "xhr", lambda r: Endpoint("GET", r.choice((f"/_pagefind/fragment/en_{_hex(r, 7)}.pf_fragment", f"/assets/search-index.{_hex(r, 8)}.json")), "xhr", "xhr")),
    # --- API
    Template("unseen-releases.api.invoice_lines", "api", "api", lambda r: Endpoint("GET", f"/v3/invoices/inv_{_hex(r, 14)}/lines?limit={r.choice((10, 25, 100))}&expand[]=price", "api")),
    Template("unseen-releases.api.batch", "api", "api", _json("POST", lambda r: "/v3/batch", lambda r: {"requests": [{"method": "GET", "path": f"/v3/customers/cus_{_hex(r, 14)}"} for _ in range(r.randint(1, 3))]}, "api")),
    Template("unseen-releases.api.usage", "api", "api", lambda r: Endpoint("GET", f"/v3/reports/usage?start={_date(r)}&end={_date(r)}&granularity={r.choice(('hour', 'day'))}", "api")),
    Template("unseen-releases.api.file_meta", "api", "api", _json("PUT", lambda r: f"/v3/files/file_{_hex(r, 16)}", lambda r: {"name": f"{_slug(r)}.pdf", "purpose": r.choice(("dispute_evidence", "identity_document", "invoice"))}, "api")),
    Template("unseen-releases.api.mutation", "api", "api", _json("POST", lambda r: "/graphql", lambda r: {"operationName": "UpdateProfile", "query": "mutation UpdateProfile($input: ProfileInput!) { updateProfile(input: $input) { id displayName } }", "variables": {"input": {"displayName": r.choice(USERS).title(), "locale": r.choice(LOCALE_CODES)}}}, "api")),
    # --- shared by every site
    Template("unseen-releases.asset.bundle", "*", "asset", lambda r: (Endpoint("GET", f"/assets/index-{_hex(r, 8)}.js", "asset", "script") if r.random() < 0.6
                                                          else Endpoint("GET", f"/assets/{r.choice(('index', 'vendor'))}-{_hex(r, 8)}.css", "asset", "style"))),
    Template("unseen-releases.asset.resized", "*", "asset", _asset(lambda r: f"/cdn-cgi/image/width={r.choice((320, 640, 1280))},quality=75,format=auto/uploads/{_slug(r)}.jpg", "image")),
    Template("unseen-releases.asset.avatar", "*", "asset", _asset(lambda r: f"/user_avatar/{r.choice(USERS)}/{r.choice((48, 96, 144))}/{r.randint(1, 9999)}_2.png", "image")),
    Template("unseen-releases.asset.font", "*", "asset", _asset(lambda r: f"/_astro/{r.choice(('inter', 'lora', 'jetbrains-mono'))}-latin-{r.choice((400, 600, 700))}-normal.{_hex(r, 8)}.woff2", "font")),
    Template("unseen-releases.generic.story", "*", "page", _page(lambda r: f"/stories/{_slug(r)}-{r.randint(1000, 99999)}")),
    Template("unseen-releases.generic.help", "*", "page", _page(lambda r: f"/help-center/articles/{r.randint(10**6, 10**8)}-{_slug(r)}")),
    Template("unseen-releases.generic.event", "*", "page", _page(lambda r: f"/events/{r.randint(2024, 2026)}/{_slug(r)}/{r.choice(('tickets', 'schedule', 'speakers'))}")),
    Template("unseen-releases.generic.download", "*", "download", lambda r: Endpoint("GET", f"/dl/{_slug(r)}-v{_version(r)}.{r.choice(('dmg', 'msi', 'AppImage', 'deb'))}", "download")),
    Template("unseen-releases.generic.sso", "*", "login", _form(lambda r: f"/auth/realms/{r.choice(('main', 'staff'))}/login-actions/authenticate?session_code={_hex(r, 24)}&execution={_uuid(r)}&client_id=web",
                                                     lambda r: {"username": _email(r) if r.random() < 0.5 else r.choice(USERS), "password": _password(r), "credentialId": ""})),
    Template("unseen-releases.generic.sign_in", "*", "login", _json("POST", lambda r: "/api/v2/auth/sign-in", lambda r: {"identifier": _email(r), "password": _password(r), "remember": r.random() < 0.5}, "form")),
)


# People's writes from single-page apps: JSON PUT, PATCH and DELETE XHR to a site's own API (edit a post, change an
# address, remove a wish-list item). On the training side only, and only when the generator is asked for them
# (``rest_writes``: the training config's ``data.rest_writes``), so the other sides' files stay as they were. Without it no
# side has a person's PUT, PATCH or DELETE; the unseen-releases split's own PUT shape is not among these.
def rest_write(method: str, target: str, body: object | None = None) -> Endpoint:
    """A page script's write: ``method`` with a JSON ``body`` (none for a DELETE)."""
    if body is None:
        return Endpoint(method, target, "xhr", "xhr")
    return Endpoint(method, target, "xhr", "xhr_post", json.dumps(body, separators=(",", ":")), "application/json")


def _rest(method: str, target: Callable[[random.Random], str], body: Callable[[random.Random], object] | None = None) -> Maker:
    def make(rng: random.Random) -> Endpoint:
        path = target(rng)
        return rest_write(method, path, None if body is None else body(rng))
    return make


REST_WRITES: tuple[Template, ...] = (
    Template("rest.shop_address", "shop", "xhr_post", _rest("PATCH", lambda r: f"/api/account/addresses/{r.randint(1, 9999)}",
                                                            lambda r: {"line1": f"{r.randint(1, 300)} {r.choice(WORDS).title()} Rd", "city": r.choice(("Leeds", "Porto", "Osaka")), "default": r.random() < 0.5})),
    Template("rest.shop_wishlist", "shop", "xhr_post", _rest("DELETE", lambda r: f"/api/wishlist/items/{r.randint(1, 99999)}")),
    Template("rest.shop_shipping", "shop", "xhr_post", _rest("PUT", lambda r: f"/api/checkout/{_hex(r, 16)}/shipping-method",
                                                             lambda r: {"method": r.choice(("standard", "express", "pickup"))})),
    Template("rest.forum_edit", "forum", "xhr_post", _rest("PUT", lambda r: f"/posts/{r.randint(100, 999999)}",
                                                           lambda r: {"post": {"raw": _text(r, FORUM_TEXT), "edit_reason": r.choice(("", "typo", "formatting"))}})),
    Template("rest.forum_delete", "forum", "xhr_post", _rest("DELETE", lambda r: f"/posts/{r.randint(100, 999999)}")),
    Template("rest.forum_title", "forum", "xhr_post", _rest("PUT", lambda r: f"/t/{r.choice(TOPICS)}/{r.randint(100, 99999)}",
                                                            lambda r: {"title": r.choice(TOPICS).replace("-", " "), "category_id": r.randint(1, 40)})),
    Template("rest.forge_issue", "forge", "xhr_post", _rest("PATCH", lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/issues/{r.randint(1, 3000)}",
                                                            lambda r: {"state": r.choice(("closed", "open")), "assignee": r.choice(USERS)})),
    Template("rest.forge_label", "forge", "xhr_post", _rest("DELETE", lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/issues/{r.randint(1, 3000)}/labels/{r.choice(('bug', 'docs', 'question'))}")),
    Template("rest.forge_comment", "forge", "xhr_post", _rest("PATCH", lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/comments/{r.randint(1, 99999)}",
                                                              lambda r: {"body": _text(r, COMMENT_MARKDOWN)})),
    Template("rest.blog_draft", "blog", "xhr_post", _rest("PATCH", lambda r: f"/api/drafts/{_hex(r, 12)}",
                                                          lambda r: {"title": r.choice(TOPICS).replace("-", " "), "body": _text(r, FORUM_TEXT)})),
    Template("rest.docs_preference", "docs", "xhr_post", _rest("PUT", lambda r: f"/api/preferences/{r.choice(('theme', 'language', 'version'))}",
                                                               lambda r: {"value": r.choice(("dark", "light", "en", "de", "stable", "latest"))})),
)


def _assign() -> dict[str, tuple[Template, ...]]:
    """Templates per side; each (site, group) keeps members on every side (``sources.assign``); the measurement splits have their own."""
    sides: dict[str, list[Template]] = {"train": [], "calib": [], "eval": []}
    groups: dict[tuple[str, str], list[Template]] = {}
    for t in TEMPLATES:
        groups.setdefault((t.site, t.group), []).append(t)
    for members in groups.values():
        for side, chosen in assign(members, "path-template", lambda t: t.id).items():
            sides[side] += chosen
    sides["train"] += ACTIONS
    sides["unseen-releases"] = list(RELEASES_TEMPLATES) + [t for t in sides["eval"] if t.group in ("home", "robots", "health")]
    return {k: tuple(v) for k, v in sides.items()}


_SIDES = _assign()


def templates(split: Split, site: str | None = None, groups: tuple[str, ...] | None = None, *,
              routes: bool = False, rest_writes: bool = False) -> tuple[Template, ...]:
    """Templates of one split, optionally of one site (plus shared ones) and some groups; ``routes`` adds ``ROUTES``
    and ``rest_writes`` ``REST_WRITES`` on the training side."""
    pool = _unseen_module_templates(split) if split in MODULE_SPLITS else _SIDES[split]
    if split == "train":
        pool += (ROUTES if routes else ()) + (REST_WRITES if rest_writes else ())
    return tuple(t for t in pool if (site is None or t.site in (site, "*")) and (groups is None or t.group in groups))
