"""Extract the corpus data files (``models/corpus/data/``) from pinned packages and public repositories.

The generator reads only the committed data files; this script is how they were made and how they are
remade when a source moves. Every input is named with its version or commit in ``data/SOURCES.md``.

Browser data (facts recorded as data, no code taken):

- ``curl-impersonate`` signatures (repository ``lexiforest/curl-impersonate``, ``tests/signatures``): the
  HTTP/2 HEADERS frame real browsers sent, in wire order, per browser version and OS;
- ``browserforge`` with ``apify-fingerprint-datapoints``: header sets sampled from the Bayesian network learnt
  from real browser traffic (names, values, order per browser and HTTP version);
- ``fake-useragent`` (PyPI), ``user-agents`` (npm, Intoli) and Playwright's device descriptors: real user
  agents with their browser, OS and device class.

Payloads come from PayloadsAllTheThings, fuzzdb and the payloadbox lists (mirrors fetched by the search tool;
paths given with ``--mirrors``). The OWASP Core Rule Set and its regression tests are never read.

The request shapes of real applications (``data/apps-*.json``) are made by ``models.corpus.build_apps``.

    python -m models.corpus.build --mirrors /work/.mirror --npm-user-agents /tmp/npmua/package
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"

CURL_IMPERSONATE = "lexiforest+curl-impersonate"
PATT = "swisskyrepo+PayloadsAllTheThings"
FUZZDB = "fuzzdb-project+fuzzdb"
PAYLOADBOX = ("payloadbox+sql-injection-payload-list", "payloadbox+xss-payload-list",
              "payloadbox+command-injection-payload-list", "payloadbox+rfi-lfi-payload-list",
              "payloadbox+xxe-injection-payload-list", "payloadbox+ssti-payloads")
LOG4J_WORDS = "Puliczek+CVE-2021-44228-PoC-log4j-bypass-words"
FORBIDDEN = ("coreruleset", "owasp-modsecurity-crs", "crs-regression", "regression-tests")

MAX_PAYLOAD = 600       # characters; longer list entries are documents, not parameters
MIN_PAYLOAD = 4         # shorter entries ("(", "*|", "/") are fuzzing characters, not payloads
PER_FAMILY = 900        # payloads kept per (source, family)


# ---------------------------------------------------------------------------------------------- git mirrors

def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, errors="surrogateescape").stdout


def _head(repo: Path) -> str:
    return _git(repo, "rev-parse", "HEAD").strip()


def _files(repo: Path) -> list[str]:
    return _git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()


def _show(repo: Path, path: str) -> str:
    raw = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True,
                         capture_output=True).stdout
    return raw.decode("utf-8", "replace")


def _mirror(root: Path, name: str) -> Path:
    if any(f in name.lower() for f in FORBIDDEN):
        raise SystemExit(f"refusing reserved source {name}")
    repo = root / name / "repo"
    if not repo.is_dir():
        raise SystemExit(f"missing mirror {repo}: fetch github:{name.replace('+', '/')} first")
    return repo


# ---------------------------------------------------------------------------------------------- browsers

def _family_from_name(browser: str, os_name: str) -> str:
    b = browser.lower()
    if b.startswith("safari"):
        return "safari-ios" if "ios" in os_name.lower() else "safari-mac"
    if b in ("tor",):
        return "firefox"
    return b


def curl_impersonate_profiles(repo: Path) -> list[dict[str, Any]]:
    """One profile per signature file: the navigation HEADERS frame, pseudo-headers dropped."""
    import yaml  # type: ignore[import-untyped]

    out = []
    for path in sorted(p for p in _files(repo) if p.startswith("tests/signatures/") and p.endswith(".yaml")):
        for doc in yaml.safe_load_all(_show(repo, path)):
            if not doc or "signature" not in doc:
                continue
            meta = doc.get("browser") or {}
            frames = doc["signature"].get("http2", {}).get("frames", [])
            heads = [f for f in frames if f.get("frame_type") == "HEADERS"]
            if not heads:
                continue
            headers = []
            for line in heads[0]["headers"]:
                name, _, value = line.partition(": ")
                headers.append([name, value])
            family = _family_from_name(str(meta.get("name", "")), str(meta.get("os", "")))
            if Path(path).stem.startswith("tor_"):
                continue  # Tor Browser: a privacy build of Firefox, not a family people are judged by here
            ua = next((v for n, v in headers if n == "user-agent"), "")
            out.append({"id": f"curl-impersonate/{Path(path).stem}", "source": "curl-impersonate",
                        "family": _refine_family(family, ua), "version": str(meta.get("version", "")),
                        "os": str(meta.get("os", "")), "mobile": _is_mobile(ua), "wire": "h2",
                        "headers": headers})
    return out


def _is_mobile(ua: str) -> bool:
    return any(t in ua for t in ("Mobile", "iPhone", "iPad", "Android"))


def _refine_family(family: str, ua: str) -> str:
    if family == "chrome" and "Android" in ua:
        return "chrome-android"
    return family


_BF_COMBOS = (("chrome", "desktop"), ("chrome", "mobile"), ("edge", "desktop"), ("firefox", "desktop"),
              ("firefox", "mobile"), ("safari", "desktop"), ("safari", "mobile"))


def browserforge_profiles(per_combo: int, seed: int) -> list[dict[str, Any]]:
    """Header sets sampled from browserforge's network, as the network gives them.

    The generator's own additions are removed (they are written rules, not learnt data): ``Sec-Fetch-*``
    (added from a constant table) and ``Accept-Language`` (built from the locale argument); the corpus
    generator adds both per request from the browser version's documented behaviour.
    """
    from browserforge.headers import HeaderGenerator

    random.seed(seed)
    gen = HeaderGenerator()
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for browser, device in _BF_COMBOS:
        for http in (1, 2):
            for _ in range(per_combo):
                try:
                    raw = gen.generate(browser=browser, device=device, http_version=http)
                except (ValueError, TypeError):
                    break
                headers: list[list[str]] = []
                for k, v in raw.items():
                    low = k.lower()
                    if low.startswith("sec-fetch-") or low == "accept-language" or \
                            any(h[0].lower() == low for h in headers):
                        continue   # the network has nodes for both spellings; a browser sends one
                    headers.append([k if http == 1 else low, v])
                ua = next((v for n, v in headers if n.lower() == "user-agent"), "")
                if not ua:
                    continue
                key = json.dumps(headers)
                if key in seen:
                    continue
                seen.add(key)
                fam = _ua_family(ua)
                if fam is None:
                    continue
                out.append({"id": f"browserforge/{len(out)}", "source": "browserforge", "family": fam,
                            "version": _ua_version(ua, fam), "os": _ua_os(ua), "mobile": _is_mobile(ua),
                            "wire": "h1" if http == 1 else "h2", "headers": headers})
    return out


def headers_order() -> dict[str, list[str]]:
    """apify-fingerprint-datapoints' observed header order per browser (HTTP/1 names in their case)."""
    pkg = resources.files("apify_fingerprint_datapoints") / "data" / "headers-order.json"
    data = json.loads(pkg.read_text())
    hints = ("sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform")   # Chromium spells these lower-case on HTTP/1.1
    return {k: [n for n in v if (not n.startswith(":") and n != n.lower()) or n in hints] for k, v in data.items()}


# ---------------------------------------------------------------------------------------------- user agents

_WEBVIEW_MARKS = ("; wv)", "FBAN/", "FBAV/", "Instagram", "GSA/", "Line/", "Twitter", "WKWebView", "MicroMessenger",
                  "Snapchat", "Pinterest", "musical_ly", "TikTok")


def _ua_family(ua: str) -> str | None:
    """The browser family a user agent names (``None`` for what is not a browser people use)."""
    if any(m in ua for m in _WEBVIEW_MARKS):
        return "webview"
    if "SamsungBrowser/" in ua:
        return "samsung"
    if "OPR/" in ua or "Opera" in ua or "OPT/" in ua:
        return "opera"
    if "Edg/" in ua or "EdgA/" in ua or "EdgiOS/" in ua:
        return "edge"
    if "YaBrowser" in ua or "Silk/" in ua or "UCBrowser" in ua or "HeadlessChrome" in ua:
        return None
    if "CriOS/" in ua or "FxiOS/" in ua:
        return "ios-other"
    if ("iPhone" in ua or "iPad" in ua) and "Chrome/" in ua:
        return None   # a Blink engine on iOS does not exist: a made-up user agent
    if "Firefox/" in ua:
        return "firefox"
    if "Chrome/" in ua:
        return "chrome-android" if "Android" in ua else "chrome"
    if "Safari/" in ua and "Version/" in ua:
        return "safari-ios" if ("iPhone" in ua or "iPad" in ua) else "safari-mac"
    if "AppleWebKit" in ua and ("iPhone" in ua or "iPad" in ua):
        return "webview"
    return None


_VERSION_RE = {
    "samsung": r"SamsungBrowser/([\d.]+)", "opera": r"(?:OPR|OPT)/([\d.]+)", "edge": r"Edg(?:A|iOS)?/([\d.]+)",
    "firefox": r"Firefox/([\d.]+)", "chrome": r"Chrome/([\d.]+)", "chrome-android": r"Chrome/([\d.]+)",
    "safari-ios": r"Version/([\d.]+)", "safari-mac": r"Version/([\d.]+)", "ios-other": r"(?:CriOS|FxiOS)/([\d.]+)",
    "webview": r"(?:Chrome|OS) ([\d_.]+)|Chrome/([\d.]+)",
}


def _ua_version(ua: str, family: str) -> str:
    m = re.search(_VERSION_RE.get(family, r"/([\d.]+)"), ua)
    if not m:
        return ""
    return next(g for g in m.groups() if g is not None).replace("_", ".") if m.groups() else m.group(0)


def _ua_os(ua: str) -> str:
    for mark, name in (("iPhone", "ios"), ("iPad", "ios"), ("Android", "android"), ("Windows", "windows"),
                       ("Macintosh", "macos"), ("CrOS", "chromeos"), ("Linux", "linux")):
        if mark in ua:
            return name
    return "other"


def _ua_rows(source: str, uas: Iterable[str], cap_per_family: int) -> list[dict[str, Any]]:
    seen: set[str] = set()
    count: dict[str, int] = {}
    out = []
    for ua in uas:
        ua = ua.strip()
        if not ua or ua in seen:
            continue
        seen.add(ua)
        fam = _ua_family(ua)
        if fam is None or count.get(fam, 0) >= cap_per_family:
            continue
        count[fam] = count.get(fam, 0) + 1
        out.append({"source": source, "family": fam, "version": _ua_version(ua, fam), "os": _ua_os(ua),
                    "mobile": _is_mobile(ua), "ua": ua})
    return out


def fake_useragent_uas(cap: int) -> list[dict[str, Any]]:
    pkg = resources.files("fake_useragent") / "data" / "browsers.jsonl"
    rows = [json.loads(line) for line in pkg.read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: -float(r.get("percent", 0)))
    return _ua_rows("fake-useragent", (r["useragent"] for r in rows), cap)


def npm_user_agents(package: Path, cap: int) -> list[dict[str, Any]]:
    rows = json.loads((package / "dist" / "user-agents.json").read_text())
    rows.sort(key=lambda r: -float(r.get("weight", 0)))
    return _ua_rows("user-agents-npm", (r["userAgent"] for r in rows), cap)


def playwright_devices(cap: int) -> list[dict[str, Any]]:
    import playwright

    bundle = Path(playwright.__file__).parent / "driver" / "package" / "lib" / "coreBundle.js"
    text = bundle.read_text(errors="replace")
    uas = re.findall(r'^\s+"[^"\n]+": \{\n\s+userAgent: "([^"]+)"', text, flags=re.M)
    return _ua_rows("playwright-devices", uas, cap)


# ---------------------------------------------------------------------------------------------- bots

_GOOD_BOT = re.compile(r"googlebot|bingbot|applebot|duckduckbot|yandex(bot|images)|baiduspider|slurp|petalbot|"
                       r"facebookexternalhit|twitterbot|linkedinbot|slackbot|discordbot|telegrambot|whatsapp|"
                       r"feedly|feedfetcher|feedburner|newsblur|inoreader|uptimerobot|pingdom|statuscake|"
                       r"site24x7|datadog|newrelic|better ?uptime|gtmetrix|lighthouse|chrome-lighthouse|"
                       r"ia_archiver|archive\.org_bot|commoncrawl|ccbot|qwantify|seznambot|mojeekbot|"
                       r"semrushbot|ahrefsbot|dotbot|mj12bot|bytespider|gptbot|claudebot|perplexitybot|"
                       r"amazonbot|git/|github-camo|gitlab|bitbucket|w3c_validator|validator\.nu", re.I)
# a crawler that says what it is and where to read about it
_DECLARED = re.compile(r"(bot|crawl|spider|feed|monitor|checker|fetcher|preview|archiv|validator|reader|index)"
                       r".*(\+?https?://|@)|(\+?https?://|@).*(bot|crawl|spider|feed|monitor)", re.I)
_LIBRARY = re.compile(r"python-requests|python-urllib|python-httpx|aiohttp|curl/|wget|go-http-client|java/|"
                      r"okhttp|apache-httpclient|axios|node-fetch|undici|libwww-perl|ruby|guzzle|"
                      r"scrapy|phantomjs|headlesschrome|httpclient|postmanruntime|insomnia|powershell", re.I)


def crawler_user_agents() -> dict[str, list[dict[str, str]]]:
    """Declared crawlers (good) and automation clients (bad) from ``crawler-user-agents`` instances."""
    import crawleruseragents

    data = json.loads((Path(crawleruseragents.__file__).parent / "crawler-user-agents.json").read_text())
    good, bad = [], []
    for entry in data:
        for ua in entry.get("instances", [])[:20]:
            if not ua or len(ua) > 400:
                continue
            item = {"pattern": entry["pattern"], "ua": ua}
            if _LIBRARY.search(ua):
                bad.append(item)
            elif _GOOD_BOT.search(ua) or _DECLARED.search(ua):
                good.append(item)
    return {"good": good, "bad": bad}


# ---------------------------------------------------------------------------------------------- payloads

# (path glob, family) per source. Families refine the model's kinds (``KIND`` in payloads.py).
_PATT_LISTS = (
    ("SQL Injection/Intruder/", "sqli"), ("XSS Injection/Intruders/", "xss"),
    ("Directory Traversal/Intruder/", "traversal"), ("File Inclusion/Intruders/", "lfi"),
    ("Command Injection/Intruder/", "cmdi"), ("LDAP Injection/Intruder/", "ldapi"),
    ("NoSQL Injection/Intruder/", "nosqli"), ("XXE Injection/Intruder/", "xxe"),
    ("Server Side Template Injection/Intruder/", "ssti"), ("Server Side Request Forgery/Intruder/", "ssrf"),
    ("Open Redirect/Intruder/", "redirect"), ("CRLF Injection/Files/", "crlf"),
    ("Server Side Include Injection/Files/", "ssi"),
    ("Insecure Management Interface/Intruder/", "probe"),
)
_PATT_MARKDOWN = (
    ("CVE Exploits/Log4Shell.md", "jndi"), ("Insecure Deserialization/", "deser"),
    ("Server Side Template Injection/", "ssti"), ("Server Side Request Forgery/", "ssrf"),
    ("XXE Injection/", "xxe"), ("Insecure Source Code Management/", "probe"),
)
_FUZZDB_LISTS = (
    ("attack/sql-injection/", "sqli"), ("attack/xss/", "xss"), ("attack/html_js_fuzz/HTML5sec", "xss"),
    ("attack/path-traversal/", "traversal"), ("attack/lfi/", "lfi"), ("attack/os-cmd-execution/", "cmdi"),
    ("attack/ldap/", "ldapi"), ("attack/no-sql-injection/", "nosqli"), ("attack/xml/", "xxe"),
    ("attack/xpath/", "xpathi"), ("attack/server-side-include/", "ssi"), ("attack/rfi/", "ssrf"),
    ("attack/redirect/", "redirect"), ("attack/http-protocol/crlf", "crlf"),
    ("discovery/predictable-filepaths/", "probe"),
)
_PAYLOADBOX_LISTS = (
    ("payloadbox+sql-injection-payload-list", "Intruder/", "sqli"),
    ("payloadbox+xss-payload-list", "Intruder/", "xss"),
    ("payloadbox+ssti-payloads", "Intruder/ssti-payloads.txt", "ssti"),
    ("payloadbox+xxe-injection-payload-list", "Intruder/", "xxe"),
)
_PAYLOADBOX_MARKDOWN = (
    ("payloadbox+command-injection-payload-list", "README.md", "cmdi"),
    ("payloadbox+rfi-lfi-payload-list", "README.md", "lfi"),
)
# Lines from Markdown code blocks are kept only where they are a payload of the family.
_MD_FILTER = {
    "jndi": re.compile(r"\$\{.*j.*n.*d.*i", re.I),
    "deser": re.compile(r"(rO0AB|aced0005|O:\d+:\"|a:\d+:\{|!!python/|_\$\$ND_FUNC\$\$_|AAEAAAD|"
                        r"__reduce__|ObjectDataProvider|TypeObject|\{\"\$type\"|BAh)"),
    "ssti": re.compile(r"(\{\{.*\}\}|\$\{.*\}|<%.*%>|#\{.*\}|\{%.*%\}|\*\{.*\})"),
    "ssrf": re.compile(r"^(https?|gopher|dict|file|ldap|ftp|tftp|netdoc|jar|sftp)://\S+$", re.I),
    "xxe": re.compile(r"<!(DOCTYPE|ENTITY)", re.I),
    "probe": re.compile(r"^/?[\w.\-/]*\.(git|svn|hg|bzr|env|DS_Store)[\w.\-/]*$"),
    "cmdi": re.compile(r"[;|&`$]|\b(cat|id|whoami|uname|ping|sleep|nslookup|wget|curl)\b"),
    "lfi": re.compile(r"(\.\./|\.\.%2f|/etc/|c:\\|php://|file://|expect://|data://|zip://|phar://)", re.I),
}


# A list line is kept only where it carries its family's syntax (word lists of bare names are left out).
_SHAPE = {
    "sqli": re.compile(r"['\"#()=*;]|--|\b(select|union|sleep|waitfor|or|and)\b", re.I),
    "xss": re.compile(r"<|javascript:|\bon\w+\s*=|alert|prompt|confirm|\\u00", re.I),
    "traversal": re.compile(r"\.\.|%2e|%c0|/etc/|\\windows|boot\.ini|%00|0x2e", re.I),
    "lfi": re.compile(r"\.\.|%2e|/etc/|/proc/|/var/|c:|php://|file:|expect:|data:|zip:|phar:", re.I),
    "cmdi": re.compile(r"[;|&`$\n]|\b(cat|id|whoami|uname|ping|sleep|nslookup|wget|curl|dir|type|net)\b"),
    "ldapi": re.compile(r"\)\(|\*\)|\(\||\(&|\(!|=\*"),
    "xxe": re.compile(r"SYSTEM|PUBLIC|xi:include|<!ENTITY", re.I),
    "nosqli": re.compile(r"[${}';\[]"),
    "xpathi": re.compile(r"['\"].*\b(or|and)\b|count\(|name\(|//\w"),
    "ssi": re.compile(r"<!--#"),
    "redirect": re.compile(r"//|\\\\|https?:|\{target\}", re.I),
    "crlf": re.compile(r"%0d|%0a|\\r|\\n|0x0d|%e5%98", re.I),
    "ssti": re.compile(r"\{\{.*\}\}|\$\{.*\}|<%.*%>|#\{.*\}|\*\{.*\}|@\(|\[\[.*\]\]|#set|"
                       r"\{%.*(import|system|popen|__|eval|exec|include).*%\}", re.I),
    "jndi": re.compile(r"\$\{", re.I),
    "ssrf": re.compile(r"://|XXpathXX"),
    "probe": re.compile(r"[./]"),
}


def _clean(lines: Iterable[str], family: str) -> Iterator[str]:
    shape = _SHAPE.get(family)
    for line in lines:
        line = line.rstrip("\r\n")
        if len(line.strip()) < MIN_PAYLOAD or len(line) > MAX_PAYLOAD:
            continue
        if shape is not None and not shape.search(line):
            continue
        if family != "probe" and line.lstrip().startswith("#") and len(line) < 60 and " " in line:
            continue  # a comment in the list
        yield line


def _code_lines(md: str) -> Iterator[str]:
    inside = False
    for line in md.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if inside:
            yield line.strip()
        else:
            for m in re.finditer(r"`([^`]{4,})`", line):
                yield m.group(1).strip()


def _take(rng: random.Random, items: Iterable[str], cap: int) -> list[str]:
    uniq = sorted(set(items))
    rng.shuffle(uniq)
    return sorted(uniq[:cap])


def patt_payloads(repo: Path, rng: random.Random) -> dict[str, list[str]]:
    files = _files(repo)
    fams: dict[str, set[str]] = {}
    for prefix, fam in _PATT_LISTS:
        for path in files:
            if (path.startswith(prefix) and not path.endswith((".md", ".py", ".svg", ".png", ".jpg", ".jpeg"))
                    and "jsonp_endpoint" not in path):
                fams.setdefault(fam, set()).update(_clean(_show(repo, path).splitlines(), fam))
    for prefix, fam in _PATT_MARKDOWN:
        for path in files:
            if path.startswith(prefix) and path.endswith(".md"):
                rx = _MD_FILTER[fam]
                fams.setdefault(fam, set()).update(x for x in _clean(_code_lines(_show(repo, path)), fam)
                                                   if rx.search(x))
    return {fam: _take(rng, vals, PER_FAMILY) for fam, vals in sorted(fams.items())}


def fuzzdb_payloads(repo: Path, rng: random.Random) -> dict[str, list[str]]:
    files = _files(repo)
    fams: dict[str, set[str]] = {}
    for prefix, fam in _FUZZDB_LISTS:
        for path in files:
            if path.startswith(prefix) and path.endswith(".txt") and "doc.txt" not in path:
                fams.setdefault(fam, set()).update(_clean(_show(repo, path).splitlines(), fam))
    return {fam: _take(rng, vals, PER_FAMILY) for fam, vals in sorted(fams.items())}


def payloadbox_payloads(root: Path, rng: random.Random) -> dict[str, list[str]]:
    fams: dict[str, set[str]] = {}
    for name, prefix, fam in _PAYLOADBOX_LISTS:
        repo = _mirror(root, name)
        for path in _files(repo):
            if path.startswith(prefix) and path.endswith(".txt"):
                fams.setdefault(fam, set()).update(_clean(_show(repo, path).splitlines(), fam))
    for name, path, fam in _PAYLOADBOX_MARKDOWN:
        repo = _mirror(root, name)
        rx = _MD_FILTER[fam]
        fams.setdefault(fam, set()).update(x for x in _clean(_code_lines(_show(repo, path)), fam) if rx.search(x))
    repo = _mirror(root, LOG4J_WORDS)
    fams.setdefault("jndi", set()).update(x for x in _clean(_code_lines(_show(repo, "README.md")), "jndi")
                                          if _MD_FILTER["jndi"].search(x))
    return {fam: _take(rng, vals, PER_FAMILY) for fam, vals in sorted(fams.items())}


# ---------------------------------------------------------------------------------------------- words

def stdlib_words(limit: int) -> list[str]:
    """Lower-case English words from the Python standard library's prose (docstrings and comments), the
    vocabulary generated sites draw their paths and parameter names from: common enough to read as names."""
    import sysconfig
    from collections import Counter

    root = Path(sysconfig.get_paths()["stdlib"])
    counts: Counter[str] = Counter()
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts or path.name.startswith("test"):
            continue
        text = path.read_text(errors="replace")
        for chunk in re.findall(r'"""(.*?)"""|#\s?([^\n]*)', text, flags=re.S):
            for word in re.findall(r"\b[a-z]{4,11}\b", " ".join(chunk)):
                counts[word] += 1
    common = [w for w, n in counts.items() if n >= 4]
    common.sort(key=lambda w: (-counts[w], w))
    return sorted(common[:limit])


# ---------------------------------------------------------------------------------------------- main

def _dump(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=None, separators=(",", ":"), sort_keys=True) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--npm-user-agents", type=Path, required=True, help="unpacked `npm pack user-agents` folder")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--out", type=Path, default=DATA)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    ci = _mirror(args.mirrors, CURL_IMPERSONATE)
    browsers: dict[str, Any] = {
        "profiles": curl_impersonate_profiles(ci) + browserforge_profiles(150, args.seed),
        "user_agents": (fake_useragent_uas(120) + npm_user_agents(args.npm_user_agents, 120)
                        + playwright_devices(60)),
        "order": headers_order(),
    }
    _dump(args.out / "browsers.json", browsers)
    _dump(args.out / "bots.json", crawler_user_agents())
    (args.out / "words.txt").write_text("\n".join(stdlib_words(6000)) + "\n")

    rng = random.Random(args.seed)
    patt = _mirror(args.mirrors, PATT)
    fuzzdb = _mirror(args.mirrors, FUZZDB)
    payloads = {"payloadsallthethings": patt_payloads(patt, rng), "fuzzdb": fuzzdb_payloads(fuzzdb, rng),
                "payloadbox": payloadbox_payloads(args.mirrors, rng)}
    _dump(args.out / "payloads.json", payloads)

    commits = {name: _head(_mirror(args.mirrors, name)) for name in (CURL_IMPERSONATE, PATT, FUZZDB, LOG4J_WORDS,
                                                                      *PAYLOADBOX)}
    print(json.dumps(commits, indent=1))
    for src, fams in payloads.items():
        print(src, {f: len(v) for f, v in fams.items()}, file=sys.stderr)
    fam_count: dict[str, int] = {}
    for p in browsers["profiles"] + browsers["user_agents"]:
        k = f"{p['source']}:{p['family']}"
        fam_count[k] = fam_count.get(k, 0) + 1
    print(json.dumps(fam_count, indent=1, sort_keys=True), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
