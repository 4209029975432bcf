"""Browser request heads: the header sets and orders each engine really sends.

Chromium (Chrome, Edge, Opera, Samsung Internet, Yandex) sends client hints
(``sec-ch-ua*``) and fetch metadata; Firefox sends fetch metadata but no client
hints; Safari and every iOS browser (WebKit) send neither client hints nor, before
16.4, fetch metadata. Orders differ per engine and per request kind (navigation,
form post, XHR, image, script, style, font). These are the facts a spoofing client
tends to get wrong, which is why they are written out exactly here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from models.data.sources import BrowserAgent

Headers = list[list[str]]

KINDS = ("navigate", "form", "xhr", "xhr_post", "image", "script", "style", "font")

# (Chromium Accept-Language, Firefox, Safari) per locale
LOCALES = (
    ("en-US,en;q=0.9", "en-US,en;q=0.5", "en-US,en;q=0.9"),
    ("en-GB,en-US;q=0.9,en;q=0.8", "en-GB,en;q=0.5", "en-GB,en;q=0.9"),
    ("de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7", "de,en-US;q=0.7,en;q=0.3", "de-DE,de;q=0.9"),
    ("fr-FR,fr;q=0.9,en-US;q=0.8,en;q=0.7", "fr,fr-FR;q=0.8,en-US;q=0.5,en;q=0.3", "fr-FR,fr;q=0.9"),
    ("es-ES,es;q=0.9", "es-ES,es;q=0.8,en-US;q=0.5,en;q=0.3", "es-ES,es;q=0.9"),
    ("pt-BR,pt;q=0.9,en-US;q=0.8,en;q=0.7", "pt-BR,pt;q=0.8,en-US;q=0.5,en;q=0.3", "pt-BR,pt;q=0.9"),
    ("ja,en-US;q=0.9,en;q=0.8", "ja,en-US;q=0.7,en;q=0.3", "ja-JP,ja;q=0.9"),
    ("zh-CN,zh;q=0.9", "zh-CN,zh;q=0.8,zh-TW;q=0.7,zh-HK;q=0.5,en-US;q=0.3,en;q=0.2", "zh-CN,zh-Hans;q=0.9"),
    ("nl-NL,nl;q=0.9,en-US;q=0.8,en;q=0.7", "nl,en-US;q=0.7,en;q=0.3", "nl-NL,nl;q=0.9"),
    ("pl-PL,pl;q=0.9,en-US;q=0.8,en;q=0.7", "pl,en-US;q=0.7,en;q=0.3", "pl-PL,pl;q=0.9"),
    ("it-IT,it;q=0.9,en-US;q=0.8,en;q=0.7", "it-IT,it;q=0.8,en-US;q=0.5,en;q=0.3", "it-IT,it;q=0.9"),
    ("ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7", "ko-KR,ko;q=0.8,en-US;q=0.5,en;q=0.3", "ko-KR,ko;q=0.9"),
    ("tr-TR,tr;q=0.9,en-US;q=0.8,en;q=0.7", "tr-TR,tr;q=0.8,en-US;q=0.5,en;q=0.3", "tr-TR,tr;q=0.9"),
    ("sv-SE,sv;q=0.9,en-US;q=0.8,en;q=0.7", "sv-SE,sv;q=0.8,en-US;q=0.5,en;q=0.3", "sv-SE,sv;q=0.9"),
)

_GREASE = ("Not_A Brand", "Not A(Brand", "Not)A;Brand", "Not/A)Brand", "Not-A.Brand", "Not.A/Brand")
_CH_PLATFORM = {"Windows": '"Windows"', "macOS": '"macOS"', "Linux": '"Linux"', "Android": '"Android"',
                "Chrome OS": '"Chrome OS"', "iOS": '"iOS"'}


@dataclass
class Context:
    """Where and how a browser sends one request."""

    host: str
    kind: str = "navigate"
    site: str = "none"  # sec-fetch-site: none, same-origin, same-site, cross-site
    referer: str | None = None
    cookie: str | None = None
    content_type: str | None = None
    content_length: int | None = None
    locale: int = 0
    lowercase: bool = False  # names as an HTTP/2 hop or a normalising balancer passes them on
    reload: bool = False
    requested_with: bool = False
    accept_json: bool = False
    # the method is neither GET nor HEAD: the Fetch standard has browsers send Origin then, body or not
    origin: bool = False


def sec_ch_ua(brand: str, major: int, *, grease_seed: int | None = None) -> str:
    """The brand list Chromium sends: its brand, Chromium and a GREASE brand, in a version-dependent order."""
    seed = major if grease_seed is None else grease_seed
    grease = f'"{_GREASE[seed % len(_GREASE)]}";v="{(8, 24, 99)[seed % 3]}"'
    items = [f'"Chromium";v="{major}"', grease]
    if brand != "Chromium":
        items.insert(0, f'"{brand}";v="{major}"')
    order = seed % 3
    return ", ".join(items[order:] + items[:order])


def chromium(agent: BrowserAgent, ctx: Context, rng: random.Random) -> Headers:
    """A Chromium request head (HTTP/1.1 spelling)."""
    kind = ctx.kind
    al = LOCALES[ctx.locale][0]
    ae = "gzip, deflate, br, zstd" if agent.major >= 123 else "gzip, deflate, br"
    ch = [["sec-ch-ua", sec_ch_ua(agent.brand, agent.major)], ["sec-ch-ua-mobile", "?1" if agent.mobile else "?0"],
          ["sec-ch-ua-platform", _CH_PLATFORM.get(agent.platform, '"Unknown"')]]
    h: Headers = [["Host", ctx.host], ["Connection", "keep-alive"]]
    if kind in ("navigate", "form"):
        if kind == "form":
            h.append(["Content-Length", str(ctx.content_length or 0)])
        if ctx.reload or kind == "form":
            h.append(["Cache-Control", "max-age=0"])
        h += ch
        if kind == "form":
            h += [["Origin", f"https://{ctx.host}"], ["Content-Type", ctx.content_type or "application/x-www-form-urlencoded"]]
        h += [["Upgrade-Insecure-Requests", "1"], ["User-Agent", agent.ua],
              ["Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
                         "application/signed-exchange;v=b3;q=0.7"],
              ["Sec-Fetch-Site", ctx.site], ["Sec-Fetch-Mode", "navigate"]]
        if ctx.site == "none" or kind == "form" or rng.random() < 0.8:
            h.append(["Sec-Fetch-User", "?1"])
        h.append(["Sec-Fetch-Dest", "document"])
        priority = "u=0, i"
    else:
        if kind == "xhr_post":
            h.append(["Content-Length", str(ctx.content_length or 0)])
        h += [ch[2], ["User-Agent", agent.ua]]
        accept = {"image": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", "style": "text/css,*/*;q=0.1",
                  "script": "*/*", "font": "*/*"}.get(kind, "application/json, text/plain, */*" if ctx.accept_json else "*/*")
        if kind in ("xhr", "xhr_post"):
            h.append(["Accept", accept])
            h += [ch[0]]
            if kind == "xhr_post":
                h.append(["Content-Type", ctx.content_type or "application/json"])
            h.append(ch[1])
            if ctx.requested_with:
                h.append(["X-Requested-With", "XMLHttpRequest"])
            if kind == "xhr_post" or ctx.origin:
                h.append(["Origin", f"https://{ctx.host}"])
        else:
            h += [ch[0], ch[1]]
            if kind == "font":
                h.append(["Origin", f"https://{ctx.host}"])
            h.append(["Accept", accept])
        mode = "cors" if kind in ("xhr", "xhr_post", "font") else "no-cors"
        dest = {"xhr": "empty", "xhr_post": "empty"}.get(kind, kind)
        h += [["Sec-Fetch-Site", ctx.site], ["Sec-Fetch-Mode", mode], ["Sec-Fetch-Dest", dest]]
        priority = {"image": "i", "script": "u=1", "style": "u=0", "font": "u=0"}.get(kind, "u=1, i")
    if ctx.referer:
        h.append(["Referer", ctx.referer])
    h += [["Accept-Encoding", ae], ["Accept-Language", al]]
    if ctx.cookie:
        h.append(["Cookie", ctx.cookie])
    if agent.major >= 124:
        h.append(["Priority", priority])
    return h


def firefox(agent: BrowserAgent, ctx: Context, rng: random.Random) -> Headers:
    """A Firefox request head."""
    kind = ctx.kind
    if kind in ("navigate", "form"):
        accept = ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" if agent.major >= 128 else
                  "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8")
    else:
        accept = {"image": "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5",
                  "style": "text/css,*/*;q=0.1"}.get(kind, "application/json, text/plain, */*" if ctx.accept_json else "*/*")
    h: Headers = [["Host", ctx.host], ["User-Agent", agent.ua], ["Accept", accept],
                  ["Accept-Language", LOCALES[ctx.locale][1]],
                  ["Accept-Encoding", "gzip, deflate, br, zstd" if agent.major >= 126 else "gzip, deflate, br"]]
    if kind in ("form", "xhr_post"):
        h += [["Content-Type", ctx.content_type or ("application/x-www-form-urlencoded" if kind == "form" else "application/json")],
              ["Content-Length", str(ctx.content_length or 0)], ["Origin", f"https://{ctx.host}"]]
    elif ctx.origin:
        h.append(["Origin", f"https://{ctx.host}"])
    if kind in ("xhr", "xhr_post") and ctx.requested_with:
        h.append(["X-Requested-With", "XMLHttpRequest"])
    h.append(["Connection", "keep-alive"])
    if ctx.referer:
        h.append(["Referer", ctx.referer])
    if ctx.cookie:
        h.append(["Cookie", ctx.cookie])
    if kind in ("navigate", "form"):
        h.append(["Upgrade-Insecure-Requests", "1"])
        h += [["Sec-Fetch-Dest", "document"], ["Sec-Fetch-Mode", "navigate"], ["Sec-Fetch-Site", ctx.site]]
        if ctx.site == "none" or kind == "form" or rng.random() < 0.8:
            h.append(["Sec-Fetch-User", "?1"])
    else:
        dest = {"xhr": "empty", "xhr_post": "empty"}.get(kind, kind)
        h += [["Sec-Fetch-Dest", dest], ["Sec-Fetch-Mode", "cors" if kind in ("xhr", "xhr_post", "font") else "no-cors"],
              ["Sec-Fetch-Site", ctx.site]]
    if ctx.reload and kind == "navigate":
        h += [["Pragma", "no-cache"], ["Cache-Control", "no-cache"]]
    if agent.major >= 115:
        h.append(["Priority", "u=0, i" if kind in ("navigate", "form") else "u=2"])
    return h


def webkit(agent: BrowserAgent, ctx: Context, rng: random.Random) -> Headers:
    """A Safari (or any iOS browser) request head."""
    kind = ctx.kind
    fetch_md = agent.major >= 16 or "CriOS" in agent.ua or "FxiOS" in agent.ua
    if kind in ("navigate", "form"):
        accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    else:
        accept = {"image": "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,"
                           "image/svg+xml,image/*;q=0.8,*/*;q=0.5",
                  "style": "text/css,*/*;q=0.1"}.get(kind, "application/json, text/plain, */*" if ctx.accept_json else "*/*")
    h: Headers = [["Host", ctx.host]]
    if kind in ("form", "xhr_post"):
        h += [["Content-Type", ctx.content_type or ("application/x-www-form-urlencoded" if kind == "form" else "application/json")],
              ["Origin", f"https://{ctx.host}"]]
    elif ctx.origin:
        h.append(["Origin", f"https://{ctx.host}"])
    h.append(["Accept", accept])
    dest = {"navigate": "document", "form": "document", "xhr": "empty", "xhr_post": "empty"}.get(kind, kind)
    mode = "navigate" if kind in ("navigate", "form") else ("cors" if kind in ("xhr", "xhr_post", "font") else "no-cors")
    if fetch_md:
        h.append(["Sec-Fetch-Site", ctx.site])
    if ctx.cookie:
        h.append(["Cookie", ctx.cookie])
    if fetch_md:
        h.append(["Sec-Fetch-Dest", dest])
    if kind in ("form", "xhr_post"):
        h.append(["Content-Length", str(ctx.content_length or 0)])
    h.append(["Accept-Language", LOCALES[ctx.locale][2]])
    if fetch_md:
        h.append(["Sec-Fetch-Mode", mode])
    if kind in ("xhr", "xhr_post") and ctx.requested_with:
        h.append(["X-Requested-With", "XMLHttpRequest"])
    h.append(["User-Agent", agent.ua])
    if ctx.referer:
        h.append(["Referer", ctx.referer])
    h += [["Accept-Encoding", "gzip, deflate, br"], ["Connection", "keep-alive"]]
    if agent.major >= 17 and kind in ("navigate", "form"):
        h.append(["Priority", "u=0, i"])
    return h


def browser_head(agent: BrowserAgent, ctx: Context, rng: random.Random) -> Headers:
    """The head ``agent`` sends for ``ctx``; names lower-cased when the hop normalises them."""
    build = {"chromium": chromium, "firefox": firefox, "webkit": webkit}[agent.engine]
    head = build(agent, ctx, rng)
    if ctx.lowercase:
        head = [[n.lower(), v] for n, v in head if n.lower() != "connection"]
    return head
