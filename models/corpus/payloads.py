"""What a request carries: attack payloads from public corpora and benign text that resembles them.

Payloads are the committed extract of PayloadsAllTheThings, fuzzdb and the payloadbox lists
(``data/payloads.json``, made by ``models.corpus.build``; ``data/SOURCES.md`` names each list). Each list
entry has a *family* (sqli, nosqli, xss, lfi, ssti, jndi, ...); the model's payload head keeps the older
coarse kinds (``KIND``) so the existing head maps. Benign values are what people and programs really put in
the same places: words, identifiers, tokens, code questions, other-language text, SVG and XML uploads.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"

ATTACK_KINDS = ("sqli", "xss", "traversal", "cmdi", "probe", "other")
KIND = {"sqli": "sqli", "nosqli": "other", "ldapi": "other", "xpathi": "other", "xss": "xss",
        "traversal": "traversal", "lfi": "traversal", "cmdi": "cmdi", "probe": "probe", "ssrf": "other",
        "ssti": "other", "jndi": "other", "deser": "other", "xxe": "other", "crlf": "other", "ssi": "other",
        "redirect": "other"}
PAYLOAD_SOURCES = ("payloadsallthethings", "fuzzdb", "payloadbox")
HALF_PAYLOADS = {"a": ("payloadsallthethings",), "b": ("fuzzdb", "payloadbox")}

# how often each family is drawn (the lists differ in size; these keep the coarse kinds balanced)
_FAMILY_WEIGHT = {"sqli": 6, "xss": 6, "traversal": 3, "lfi": 3, "cmdi": 5, "probe": 5, "nosqli": 1, "ldapi": 1,
                  "xpathi": 0.5, "ssrf": 1.5, "ssti": 1.5, "jndi": 1.2, "deser": 1, "xxe": 1.2, "crlf": 0.6,
                  "ssi": 0.6, "redirect": 1}

_FILES = ("etc/passwd", "etc/shadow", "etc/hosts", "windows/win.ini", "boot.ini", "proc/self/environ",
          "var/log/apache2/access.log", "WEB-INF/web.xml", ".env", "etc/issue")
_ATTACKER = ("evil.example", "attacker.test", "x.oast.fun", "burpcollaborator.net", "interact.sh", "203.0.113.9",
             "169.254.169.254", "canarytokens.com")
_COMMANDS = ("id", "whoami", "uname -a", "cat /etc/passwd", "sleep 5", "ping -c 3 127.0.0.1", "ls -la")


@functools.cache
def corpora() -> dict[str, dict[str, tuple[str, ...]]]:
    raw: dict[str, dict[str, list[str]]] = json.loads((DATA / "payloads.json").read_text())
    return {src: {fam: tuple(v) for fam, v in fams.items()} for src, fams in raw.items()}


@dataclass(frozen=True)
class Payload:
    """One attack string with where it came from."""

    text: str
    family: str
    source: str

    @property
    def kind(self) -> str:
        return KIND[self.family]


def _fill(rng: random.Random, text: str) -> str:
    """Replace the lists' placeholders with concrete targets."""
    text = text.replace("{FILE}", rng.choice(_FILES)).replace("{FILE_NAME}", rng.choice(_FILES))
    text = text.replace("XXpathXX", f"http://{rng.choice(_ATTACKER)}/{rng.choice(('shell.txt', 'x', 'a.php'))}?")
    text = text.replace("{target}", rng.choice(_ATTACKER)).replace("{cmd}", rng.choice(_COMMANDS))
    text = text.replace("[ATTACKER.DOMAIN.TLD]", rng.choice(_ATTACKER))
    return text


def families(sources: tuple[str, ...]) -> dict[str, list[str]]:
    """family -> the sources (of ``sources``) that have it."""
    out: dict[str, list[str]] = {}
    for src in sources:
        for fam, items in corpora().get(src, {}).items():
            if items:
                out.setdefault(fam, []).append(src)
    return out


def draw(rng: random.Random, sources: tuple[str, ...], kind: str | None = None) -> Payload:
    """A payload from ``sources`` (of coarse ``kind`` when given)."""
    fams = families(sources)
    names = sorted(f for f in fams if kind is None or KIND[f] == kind)
    if not names:
        raise ValueError(f"no {kind} payloads in {sources}")
    # a family with few distinct strings is drawn less, so that no string repeats until it is memorised
    sizes = {f: sum(len(corpora()[src][f]) for src in fams[f]) for f in names}
    fam = rng.choices(names, weights=[_FAMILY_WEIGHT.get(f, 1.0) * min(1.0, sizes[f] / 60) for f in names])[0]
    src = rng.choice(fams[fam])
    return Payload(_fill(rng, rng.choice(corpora()[src][fam])), fam, src)


def kinds_available(sources: tuple[str, ...]) -> list[str]:
    return sorted({KIND[f] for f in families(sources)})


# ---------------------------------------------------------------------------------------------- benign

_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(bytes(rng.getrandbits(8) for _ in range(n))).decode()


def _jwt(rng: random.Random) -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = json.dumps({"sub": str(rng.randint(1, 10**6)), "iat": 1_760_000_000 + rng.randint(0, 10**7),
                         "scope": rng.choice(("read", "read write", "openid profile email"))}).encode()
    body = base64.urlsafe_b64encode(claims).decode().rstrip("=")
    return f"{head}.{body}.{base64.urlsafe_b64encode(bytes(rng.getrandbits(8) for _ in range(32))).decode().rstrip('=')}"


def credential(rng: random.Random) -> str:
    """An Authorization value as API clients send it."""
    r = rng.random()
    if r < 0.5:
        return f"Bearer {_jwt(rng)}"
    if r < 0.75:
        return f"Basic {base64.b64encode(f'{rng.randint(1, 9999)}:{_b64(rng, 12)}'.encode()).decode()}"
    return f"{rng.choice(('Token', 'Bearer', 'ApiKey'))} " + "".join(rng.choice(_TOKEN_CHARS) for _ in range(40))


def svg(rng: random.Random, words: tuple[str, ...]) -> str:
    """A drawing as editors save it."""
    w, h = rng.randint(16, 800), rng.randint(16, 800)
    shapes = []
    for _ in range(rng.randint(1, 6)):
        shapes.append(rng.choice((
            f'<rect x="{rng.randint(0, w)}" y="{rng.randint(0, h)}" width="{rng.randint(1, w)}" height="{rng.randint(1, h)}"'
            f' fill="#{rng.randint(0, 0xFFFFFF):06x}"/>',
            f'<circle cx="{rng.randint(0, w)}" cy="{rng.randint(0, h)}" r="{rng.randint(1, 99)}" stroke="#333"/>',
            f'<path d="M{rng.randint(0, w)} {rng.randint(0, h)} L{rng.randint(0, w)} {rng.randint(0, h)} Z"/>',
            f'<text x="4" y="{rng.randint(8, h)}" font-family="sans-serif">{rng.choice(words)}</text>')))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="{w}" '
            f'height="{h}" viewBox="0 0 {w} {h}">\n<title>{rng.choice(words)}</title>\n' + "\n".join(shapes) + "\n</svg>")


def xml_doc(rng: random.Random, words: tuple[str, ...]) -> str:
    """A data document such as feeds, invoices and sitemaps are."""
    root = rng.choice(words)
    items = "".join(f"<{rng.choice(('item', 'entry', 'row', 'record'))} id=\"{rng.randint(1, 9999)}\">"
                    f"<name>{rng.choice(words)}</name><value>{rng.randint(0, 10**6)}</value></"
                    f"{'item'}>" for _ in range(rng.randint(1, 5)))
    items = re.sub(r"<(entry|row|record) (id=\"\d+\">.*?)</item>", r"<\1 \2</\1>", items)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} version="{rng.randint(1, 3)}.0">{items}</{root}>'


@dataclass(frozen=True)
class Benign:
    """A benign value and the text source it came from."""

    text: str
    source: str


def _half_key(text: str) -> str:
    return "a" if hashlib.sha256(f"text/{text}".encode()).digest()[0] % 2 == 0 else "b"


@functools.cache
def _lang_lines(half: str | None) -> tuple[str, ...]:
    try:
        from models.data import langtext
        lines, _posts = langtext.snippets()
    except (RuntimeError, ImportError):
        return ()
    return tuple(x for x in lines if half is None or _half_key(x) == half)


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")


@functools.cache
def attack_words(half: str | None) -> tuple[tuple[str, ...], ...]:
    """The words of each payload of the half's corpora, in order, without their syntax: ``net user hacker Password1
    ADD`` from ``& net user hacker Password1 /ADD``. As benign values they teach that a word is not evidence, only
    the syntax around it is (people type "Password1", "select", "alert" and "passwd" too)."""
    sources = HALF_PAYLOADS.get(half or "", PAYLOAD_SOURCES)
    out = []
    for src in sources:
        for fam in sorted(corpora().get(src, {})):
            for text in corpora()[src][fam]:
                found = tuple(_WORD.findall(text))[:8]
                if found:
                    out.append(found)
    return tuple(out)


def benign(rng: random.Random, words: tuple[str, ...], half: str | None, where: str, rich: bool = True) -> Benign:
    """A benign value for a slot (``where``: query, path, form, json, graphql). ``rich`` values (questions about
    code, other languages, free text) go where people type; elsewhere values are words, identifiers, tokens."""
    r = rng.random()
    if not rich and 0.35 <= r < 0.62:
        r = rng.choice((0.1, 0.7, 0.9))
    if r < 0.35:
        n = 1 if where == "path" else rng.randint(1, 4)
        return Benign(" ".join(rng.choice(words) for _ in range(n)) if where != "path"
                      else "-".join(rng.choice(words) for _ in range(rng.randint(1, 3))), "words")
    if r < 0.5:
        from models.data import devqueries
        return Benign(devqueries.query(rng, "calib" if half == "b" else "train"), "devqueries")
    if r < 0.62:
        lines = _lang_lines(half)
        if lines:
            return Benign(rng.choice(lines), "langtext")
    if r < 0.75:
        t = rng.random()
        if t < 0.3:
            return Benign(_jwt(rng), "tokens")
        if t < 0.55:
            return Benign(_b64(rng, rng.choice((16, 24, 32, 48, 96))), "tokens")
        if t < 0.8:
            return Benign("".join(rng.choice(_TOKEN_CHARS) for _ in range(rng.randint(20, 64))), "tokens")
        return Benign("".join(rng.choice("0123456789abcdef") for _ in range(rng.choice((32, 40, 64)))), "tokens")
    if r < 0.85:
        t = rng.random()
        w = rng.choice(words)
        if t < 0.25:
            return Benign(f"{w}.{rng.choice(words)}@{rng.choice(words)}.{rng.choice(('com', 'org', 'de', 'io'))}",
                          "structured")
        if t < 0.5:
            return Benign(f"https://{rng.choice(words)}.{rng.choice(('com', 'org', 'net'))}/{w}?{rng.choice(words)}="
                          f"{rng.randint(1, 99)}", "structured")
        if t < 0.7:
            return Benign(f"{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
                          f"{rng.choice(('', 'T10:00:00Z', ' 14:30'))}", "structured")
        if t < 0.85:
            return Benign(f"{w} & {rng.choice(words)} (\"{rng.choice(words)}\") - {rng.randint(1, 99)}%", "structured")
        return Benign(f"{rng.choice(words)}'s {w} O'{rng.choice(words).capitalize()} <{rng.choice(words)}>",
                      "structured")
    if r < 0.92:
        return Benign(str(rng.choice((rng.randint(0, 10**6), round(rng.uniform(0, 999), 2), -rng.randint(1, 99)))),
                      "numbers")
    if r < 0.96:
        found = rng.choice(attack_words(half))
        start = rng.randrange(len(found))
        return Benign(("-" if where == "path" else " ").join(found[start:start + rng.randint(1, 4)]), "attack-words")
    return Benign(" ".join(rng.choice(words) for _ in range(rng.randint(5, 25))) + rng.choice((".", "?", "!", "")),
                  "words")


# well-known paths that clients request for good reasons (the benign side of scanner probes)
WELL_KNOWN = ("/robots.txt", "/sitemap.xml", "/favicon.ico", "/.well-known/security.txt", "/humans.txt",
              "/.well-known/openid-configuration", "/.well-known/apple-app-site-association", "/ads.txt",
              "/.well-known/assetlinks.json", "/health", "/status", "/feed", "/rss.xml", "/atom.xml",
              "/.well-known/change-password", "/manifest.webmanifest", "/sitemap_index.xml", "/crossdomain.xml")
