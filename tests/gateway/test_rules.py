"""Rules: the shipped set decides the clear cases, every good file loads, every bad file lists exactly its problems."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.clients import ClientState
from gateway.config import ClientsConfig, ConfigError
from gateway.features import Features, make_header_map
from gateway.rules import RuleOptions, RuleTable, load
from gateway.rules.iplist import AgentSet, NamedLists
from gateway.rules.patterns import classify_path_globs, glob_to_regex, normalize_path
from gateway.verdict import Action, ScoreRequest, Verdict
from tests.conftest import make_features

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "rules"
HERE = Path(__file__).resolve().parents[1] / "rules"
LISTS = HERE / "lists"
GOOD = sorted((HERE / "good").glob("*.yaml"))
BAD = sorted((HERE / "bad").glob("*.yaml"))
OPTIONS = RuleOptions(backends=["app", "api", "beta"], policies=["checkout"], lists_dir=str(LISTS))

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
BINGBOT = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"
DUCKDUCKBOT = "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)"
GPTBOT = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
FLYRIVER = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/91.0.4472.124 Safari/537.36 "
            "Flyriverbot/1.1 (+https://www.flyriver.com/; AI Content Source Check)")
EXPANSE = ("Expanse, a Palo Alto Networks company, searches across the global IPv4 space multiple times per day to identify customers' "
           "presences on the Internet. If you would like to be excluded from our scans, please send IP addresses/domains to: "
           "scaninfo@paloaltonetworks.com")
# published user agents of bots that monitor, preview, archive, index, read feeds or verify ads, and of HTTP libraries: none
# says it serves AI, does SEO or maps the internet, so the *-by-description rules leave every one to the model
GOOD_BOTS = [
    # mobile apps whose names hold a cue, naming their platform or HTTP stack
    "ScannerPro/8.4 (iPhone; iOS 17.5; Scale/3.00) Alamofire/5.8.1",
    "CamScanner/6.60 (Android 14; SM-S921B) okhttp/4.9.3",
    "Genius Scan/7.2.1 (iPad; iOS 18.1)",
    "MyAssistant/3.0 (com.example.assistant; build:412; iOS 17.4.1) Alamofire/5.9.0",
    "Acme AI/2.1 (iPhone; iOS 18.0; Scale/3.00)",
    "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
    "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)",
    "Feedly/1.0 (+http://www.feedly.com/fetcher.html; 42 subscribers)",
    "Feedbin feed-id:1373711 - 2 subscribers",
    "Overcast/1.0 Podcast Sync (123 subscribers; feed-id=456; +http://overcast.fm/)",
    "FeedFetcher-Google; (+http://www.google.com/feedfetcher.html)",
    "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
    "Mozilla/5.0 (compatible; Yahoo Link Preview; https://help.yahoo.com/kb/mail/yahoo-link-preview-SLN23615.html)",
    "facebookexternalhit/1.1",
    "Twitterbot/1.0",
    "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
    "ia_archiver",
    "Mozilla/5.0 (compatible; archive.org_bot +http://www.archive.org/details/archive.org_bot)",
    "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
    "Mozilla/5.0 (compatible; Qwantify/2.4w; +https://www.qwant.com/)/2.4w",
    "Mozilla/5.0 (compatible; MojeekBot/0.11; +https://www.mojeek.com/bot.html)",
    "Mozilla/5.0 (compatible; SeznamBot/4.0; +https://o-seznam.cz/napoveda/vyhledavani/en/seznambot-crawler/)",
    "Mozilla/5.0 (compatible; Linux x86_64; Mail.RU_Bot/2.0; +https://help.mail.ru/webmaster/indexing/robots)",
    "SiteCheck-sitecrawl by Siteimprove.com",
    "Google-Safety",
    "AdsBot-Google (+http://www.google.com/adsbot.html)",
    "Mozilla/5.0 (Linux; Android 5.0; SM-G920A) AppleWebKit (KHTML, like Gecko) Chrome Mobile Safari (compatible; AdsBot-Google-Mobile; "
    "+http://www.google.com/mobile/adsbot.html)",
    "Datadog Agent/7.59.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/110.0.5481.100 Safari/537.36 Datadog/Synthetics",
    "Mozilla/5.0 (compatible; Site24x7)",
    "Mozilla/5.0 (compatible; StatusCake)",
    "Better Uptime Bot Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/114.0.0.0 "
    "Safari/537.36",
    "W3C-checklink/5.0.0 libwww-perl/6.77",
    "HomeAssistant/2024.12.1 aiohttp/3.11.10 Python/3.13",
    "python-requests/2.32.3",
    "curl/8.5.0",
    "axios/1.7.2",
    "Go-http-client/2.0",
    "okhttp/4.12.0",
]
# nothing looked up in DNS (tests/gateway/test_rdns.py covers the names): a claimed crawler outside its ranges whose
# operator documents a name check is asked to come back later, one whose operator does not (DuckDuckBot) is a spoofer
NO_DNS = ClientsConfig(reverse_dns_timeout_s=0)


def req(target: str = "/", ua: str = CHROME, ip: str = "203.0.113.7", method: str = "GET",
        headers: list[tuple[str, str]] | None = None, body: bytes = b"", host: str = "shop.example", accept: str = "text/html") -> Features:
    hdrs = [("Host", host), ("User-Agent", ua), ("Accept", accept)] + (headers or [])
    return make_features(method, target, hdrs, client_ip=ip, body=body)


@pytest.fixture(scope="module")
def shipped() -> RuleTable:
    return load([str(SHIPPED / "default.yaml")], RuleOptions(), ClientState(NO_DNS))


def outcome(table: RuleTable, f: Features) -> tuple[str | None, str]:
    out = table.evaluate(f)
    if out is None:
        return None, "none"
    if isinstance(out, ScoreRequest):
        return out.rule, "score"
    return out.rule, out.action.value


# ----------------------------------------------------------------------------- the shipped rules

SHIPPED_CASES = [
    ("robots.txt for anyone", req("/robots.txt", ua="zgrab/0.x"), "allow-robots-txt", "forward"),
    ("acme challenge", req("/.well-known/acme-challenge/tok", ua="acme.sh"), "allow-well-known", "forward"),
    ("health check", req("/healthz", ua="kube-probe/1.29"), "allow-health-checks", "forward"),
    ("sitemap index", req("/sitemap-index.xml"), "allow-sitemaps", "forward"),
    ("env file", req("/.env"), "block-secret-files", "block"),
    ("env file nested", req("/app/config/.env.production"), "block-secret-files", "block"),
    ("env file percent-encoded", req("/%2e%65nv"), "block-secret-files", "block"),
    ("env file via dot segments", req("/static/../.env"), "block-secret-files", "block"),
    ("ssh key", req("/home/.ssh/id_rsa"), "block-secret-files", "block"),
    ("git config", req("/.git/config"), "block-vcs-folders", "block"),
    ("git folder itself", req("/.git"), "block-vcs-folders", "block"),
    ("svn entries", req("/sub/.svn/entries"), "block-vcs-folders", "block"),
    ("phpinfo", req("/phpinfo.php"), "block-server-info-probes", "block"),
    ("phpunit rce", req("/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php"), "block-exploit-probes", "block"),
    ("cgi-bin", req("/cgi-bin/luci"), "block-exploit-probes", "block"),
    ("log4shell in query", req("/?x=${jndi:ldap://a/b}"), "block-log4shell-probes", "block"),
    ("log4shell encoded", req("/?x=%24%7Bjndi:ldap://a/b%7D"), "block-log4shell-probes", "block"),
    ("log4shell in user agent", req("/", ua="${jndi:ldap://evil/a}"), "block-log4shell-probes", "block"),
    ("log4shell in referer", req("/", headers=[("Referer", "${JNDI:ldap://evil/a}")]), "block-log4shell-probes", "block"),
    ("overlong utf-8 in the path", req("/static/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd"), "block-encoding-evasions", "block"),
    ("overlong utf-8 double-encoded in the path", req("/a/%25C0%25AE%25C0%25AE/x"), "block-encoding-evasions", "block"),
    ("overlong utf-8 in the query", req("/download?file=..%c0%af..%c0%afetc%c0%afpasswd"), "block-encoding-evasions", "block"),
    ("overlong utf-8 double-encoded in the query", req("/d?f=%25c0%25ae%25c0%25ae%25c0%25afetc"), "block-encoding-evasions", "block"),
    ("three-byte overlong utf-8 double-encoded in the path", req("/a/%25e0%2580%25ae%25e0%2580%25ae/x"), "block-encoding-evasions", "block"),
    ("three-byte overlong utf-8", req("/d?f=%e0%80%ae%e0%80%ae%e0%80%afetc%e0%80%afpasswd"), "block-encoding-evasions", "block"),
    ("iis %u escapes of ascii", req("/search?q=%u003cscript%u003ealert(1)"), "block-encoding-evasions", "block"),
    ("iis %u escapes in a form", req("/comments", method="POST", headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                     body=b"text=1%u0027%u0020or%u00201=1"), "block-encoding-evasions", "block"),
    ("full-width dot-dot-slash", req("/files/%ef%bc%8e%ef%bc%8e%ef%bc%8fetc%ef%bc%8fpasswd"), "block-encoding-evasions", "block"),
    ("full-width dot-dot-slash as raw utf-8", req("/files/．．／．．／etc/passwd".encode().decode("latin-1")), "block-encoding-evasions", "block"),
    ("dot-dot and a division slash", req("/view?page=..%e2%88%95..%e2%88%95etc%e2%88%95passwd"), "block-encoding-evasions", "block"),
    ("full-width dots as %u escapes", req("/view?page=%uff0e%uff0e%uff0fwin.ini"), "block-encoding-evasions", "block"),
    ("latin-1 form text", req("/search?q=caf%E9+cr%E8me+%C0+la+carte"), "score-everything-else", "score"),
    ("utf-8 text", req("/search?q=%C3%A0+la+carte+%E2%80%A6"), "score-everything-else", "score"),
    ("japanese as raw utf-8", req("/search?q=東京／大阪（２０２５年）".encode().decode("latin-1")), "score-everything-else", "score"),
    ("japanese with full-width punctuation", req("/search?q=" + quote("東京／大阪（２０２５年）１．５倍、ｉＰｈｏｎｅ")), "score-everything-else", "score"),
    ("legacy escape() of cjk text", req("/search?q=%u6771%u4EAC%uFF08%uFF11%uFF09"), "score-everything-else", "score"),
    ("an ellipsis before a path", req("/search?q=" + quote("see… ／docs and ../lib")), "score-everything-else", "score"),
    ("wordpress login", req("/wp-login.php"), "wordpress-paths", "challenge"),
    ("wordpress nested", req("/blog/wp-admin/install.php"), "wordpress-paths", "challenge"),
    ("phpmyadmin", req("/phpMyAdmin/index.php"), "database-panel-paths", "challenge"),
    ("spring actuator", req("/actuator/env"), "block-java-admin-probes", "block"),
    ("actuator behind a segment parameter", req("/actuator;/env"), "block-java-admin-probes", "block"),
    ("tomcat manager through ..;", req("/app/..;/manager/html"), "block-java-admin-probes", "block"),
    ("a secret file with a parameter", req("/.env;.css"), "block-secret-files", "block"),
    ("a keystore", req("/certs/server.pfx"), "block-secret-files", "block"),
    ("a shell history", req("/.bash_history"), "block-secret-files", "block"),
    ("terraform state", req("/infra/terraform.tfstate.backup"), "block-secret-files", "block"),
    ("an editor's copy of php", req("/includes/config.php~"), "block-source-backups", "block"),
    ("a backup of a settings module", req("/app/settings.py.bak"), "block-source-backups", "block"),
    ("a vim swap file", req("/admin/.login.php.swp"), "block-source-backups", "block"),
    ("a copy of any file left by an editor", req("/plugins/servlet/oauth/users/icon-uri.bak"), "block-source-backups", "block"),
    ("an archive's backup", req("/admin/site-backup.zip.bak"), "block-source-backups", "block"),
    ("an old copy of a password file", req("/_vti_pvt/service.pwd.old"), "block-source-backups", "block"),
    ("a patch's leftover", req("/static/app.js.orig"), "block-source-backups", "block"),
    ("a swap file of a database", req("/v1/db.sqlite3.swp"), "block-source-backups", "block"),
    ("a page whose name ends in old", req("/blog/the-old"), "score-everything-else", "score"),
    ("a release folder named old", req("/releases/v1.old/"), "score-everything-else", "score"),
    ("a page named like a release", req("/docs/v2.1.old"), "score-everything-else", "score"),
    ("a windows backup in capitals", req("/web.config.BAK"), "block-source-backups", "block"),
    ("a php backup in capitals", req("/index.php.BAK"), "block-source-backups", "block"),
    ("an archived pages repository", req("/jdoe/jdoe.github.io.old"), "score-everything-else", "score"),
    ("a form posted to an address ending in save", req("/api/profile.save", method="POST"), "score-everything-else", "score"),
    ("a site archive", req("/public_html.tar.gz"), "block-site-dumps", "block"),
    ("a database dump", req("/db.sql"), "block-site-dumps", "block"),
    ("a compressed dump anywhere", req("/files/export/2024.sql.gz"), "block-site-dumps", "block"),
    ("compose file", req("/docker-compose.yml"), "block-deployment-files", "block"),
    ("java web-inf", req("/app/WEB-INF/web.xml"), "block-deployment-files", "block"),
    ("an ide folder", req("/.idea/workspace.xml"), "block-deployment-files", "block"),
    ("ignition rce", req("/_ignition/execute-solution", method="POST"), "block-exploit-probes", "block"),
    ("fortinet path", req("/remote/fgt_lang?lang=/../../../..//////////dev/cmdb/sslvpn_websession"), "block-exploit-probes", "block"),
    # the same names where a code host or a download page serves them to people
    ("a repository's compose file", req("/acme/shop/blob/main/docker-compose.yml"), "score-everything-else", "score"),
    ("a repository's workflow", req("/acme/shop/tree/main/.github/workflows"), "score-everything-else", "score"),
    ("a repository's php.dist", req("/acme/shop/blob/main/phpunit.xml.dist"), "score-everything-else", "score"),
    ("a download under its own name", req("/downloads/shop-export-2024.zip"), "score-everything-else", "score"),
    ("a page about backups", req("/docs/backup"), "score-everything-else", "score"),
    ("a public certificate", req("/certs/ca.pem"), "score-everything-else", "score"),
    ("googlebot from google", req("/p/1", ua=GOOGLEBOT, ip="66.249.66.1"), "allow-verified-googlebot", "forward"),
    ("googlebot over ipv6", req("/p/1", ua=GOOGLEBOT, ip="2001:4860:4801:10::1"), "allow-verified-googlebot", "forward"),
    ("bingbot from bing", req("/p/1", ua=BINGBOT, ip="157.55.39.20"), "allow-verified-bingbot", "forward"),
    ("applebot from apple", req("/p/1", ua="Mozilla/5.0 (Applebot/0.1)", ip="17.241.208.170"), "allow-verified-applebot", "forward"),
    ("duckduckbot", req("/p/1", ua="DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", ip="20.191.45.212"),
     "allow-verified-duckduckbot", "forward"),
    ("googlebot spoofer", req("/p/1", ua=GOOGLEBOT, ip="198.51.100.9"), "crawlers-unverified-come-back-later", "block"),
    ("bingbot with google's address", req("/p/1", ua=BINGBOT, ip="66.249.66.1"), "crawlers-unverified-come-back-later", "block"),
    ("duckduckbot spoofer", req("/p/1", ua=DUCKDUCKBOT, ip="198.51.100.9"), "block-crawler-spoofers", "block"),
    ("gptbot", req("/blog/post", ua=GPTBOT), "ai-training-crawlers", "challenge"),
    ("ccbot", req("/", ua="CCBot/2.0 (https://commoncrawl.org/faq/)"), "ai-training-crawlers", "challenge"),
    ("perplexitybot", req("/", ua="Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)"),
     "ai-training-crawlers", "challenge"),
    ("claudebot", req("/", ua="Mozilla/5.0 (compatible; ClaudeBot/1.0; +claudebot@anthropic.com)"), "ai-training-crawlers", "challenge"),
    ("a name of the ai list in any case", req("/", ua="gptbot/1.1"), "ai-training-crawlers", "challenge"),
    ("an ai search crawler", req("/", ua="Mozilla/5.0 (compatible; DeepSeekBot/1.0; +https://www.deepseek.com/bot)"), "ai-training-crawlers",
     "challenge"),
    ("an ai agent fetching for its user", req("/", ua="Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; "
                                               "+Claude-User@anthropic.com)"), "ai-training-crawlers", "challenge"),
    ("semrush's ai crawler before its seo crawler", req("/", ua="Mozilla/5.0 (compatible; SemrushBot-OCOB/1.0)"), "ai-training-crawlers",
     "challenge"),
    ("a robots.txt token claimed as a user agent", req("/", ua="Mozilla/5.0 (compatible; Google-Extended/1.0)"), "ai-training-crawlers",
     "challenge"),
    ("googleother from google, though the ai list names it", req("/p/1", ua="Mozilla/5.0 (compatible; GoogleOther)", ip="66.249.66.1"),
     "allow-verified-googlebot", "forward"),
    ("applebot-extended from apple is applebot", req("/p/1", ua="Mozilla/5.0 (Applebot-Extended/0.1)", ip="17.241.208.170"),
     "allow-verified-applebot", "forward"),
    ("applebot-extended from elsewhere", req("/p/1", ua="Mozilla/5.0 (Applebot-Extended/0.1)"), "crawlers-unverified-come-back-later", "block"),
    ("ahrefsbot", req("/", ua="Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)"), "seo-crawlers", "challenge"),
    ("a semrush variant", req("/", ua="Mozilla/5.0 (compatible; SemrushBot-SI/0.97; +http://www.semrush.com/bot.html)"), "seo-crawlers",
     "challenge"),
    ("mj12bot", req("/", ua="Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)"), "seo-crawlers", "challenge"),
    ("screaming frog", req("/", ua="Screaming Frog SEO Spider/20.4"), "seo-crawlers", "challenge"),
    ("sogou's spider is not the ai list's 'Spider'", req("/", ua="Sogou web spider/4.0(+http://www.sogou.com/docs/help/webmasters.htm#07)"),
     "score-everything-else", "score"),
    ("baiduspider names 'spider' only in its address", req("/", ua="Mozilla/5.0 (compatible; Baiduspider/2.0; "
                                                             "+http://www.baidu.com/search/spider.html)"), "score-everything-else", "score"),
    ("a link preview", req("/", ua="facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"), "score-everything-else",
     "score"),
    # bots that no list names, caught by what their user agent says they are for
    ("an unlisted backlink crawler", req("/", ua="Mozilla/5.0 (compatible; BacklinksExtendedBot)"), "seo-crawlers-by-description",
     "challenge"),
    ("an unlisted rank tracker", req("/", ua="Mozilla/5.0 (compatible; RankActiveLinkBot; +https://rankactive.com/resources/rankactive-linkbot)"),
     "seo-crawlers-by-description", "challenge"),
    ("an seo tool named in its address", req("/", ua="Mozilla/5.0 (compatible; RavenCrawler/2.0; +https://raventools.com/seo-website-auditor/)"),
     "seo-crawlers-by-description", "challenge"),
    ("a serp tool", req("/", ua="Mozilla/5.0 (compatible; SERPtimizerBot; +http://serptimizer.com/serptimizer-bot)"),
     "seo-crawlers-by-description", "challenge"),
    ("an unlisted ai bot", req("/", ua=FLYRIVER), "ai-crawlers-by-description", "challenge"),
    ("censys", req("/", ua="Mozilla/5.0 (compatible; CensysInspect/1.1; +https://about.censys.io/)"), "scanners-by-description", "challenge"),
    ("expanse", req("/", ua=EXPANSE), "scanners-by-description", "challenge"),
    ("internet measurement", req("/", ua="Mozilla/5.0 (compatible; InternetMeasurement/1.0; +https://internet-measurement.com/)"),
     "scanners-by-description", "challenge"),
    ("modat", req("/", ua="Mozilla/5.0 (compatible; ModatScanner/1.0; +https://modat.io/)"), "scanners-by-description", "challenge"),
    ("zgrab", req("/", ua="Mozilla/5.0 zgrab/0.x"), "scanners-by-description", "challenge"),
    ("netcraft", req("/", ua="Mozilla/5.0 (compatible; NetcraftSurveyAgent/1.0; +info@netcraft.com)"), "scanners-by-description", "challenge"),
    ("a research scanner", req("/", ua="Mozilla/5.0 (compatible; ResearchScan/1.0; +https://researchscan.comsys.rwth-aachen.de/)"),
     "scanners-by-description", "challenge"),
    ("a self-described scanner asking for a secret is blocked", req("/.env", ua="Mozilla/5.0 (compatible; ModatScanner/1.0; +https://modat.io/)"),
     "block-secret-files", "block"),
    ("a self-described scanner still reads robots.txt", req("/robots.txt", ua="Mozilla/5.0 zgrab/0.x"), "allow-robots-txt", "forward"),
    ("a listed seo crawler is decided by its list", req("/", ua="serpstatbot/2.1 (advanced backlink tracking bot; https://serpstatbot.com/; "
                                                                "abuse@serpstatbot.com)"), "seo-crawlers", "challenge"),
    ("a listed ai crawler is decided by its list", req("/", ua="cohere-training-data-crawler (+crawler@cohere.ai)"), "ai-training-crawlers",
     "challenge"),
    # good bots and programs that say what they are, and say none of it
    *((f"good bot or program {ua[:40]!r}", req("/", ua=ua), "score-everything-else", "score") for ua in GOOD_BOTS),
    ("an ai platform's link preview", req("/", ua="ArenaUnfurlBot/1.0 (Link preview bot for AI model comparison platform; +https://arena.ai) "
                                                  "Mozilla/5.0 (compatible)"), "score-everything-else", "score"),
    ("feed reader", req("/blog/feed", ua="FreshRSS/1.23 (Linux; https://freshrss.org)"), "allow-feed-readers", "forward"),
    ("atom feed", req("/news/atom.xml", ua="CommaFeed/4.0"), "allow-feed-readers", "forward"),
    ("git smart http", req("/org/repo.git/info/refs?service=git-upload-pack", ua="git/2.43.0"), "allow-git-clients", "forward"),
    ("git push", req("/org/repo/git-receive-pack", ua="git/2.43.0", method="POST"), "allow-git-clients", "forward"),
    ("git dumb http", req("/org/repo.git/objects/info/packs", ua="git/2.43.0"), "allow-git-clients", "forward"),
    ("api with bearer", req("/api/v1/items", ua="python-requests/2.32", headers=[("Authorization", "Bearer t")]),
     "allow-api-clients-with-credentials", "forward"),
    ("api with key", req("/v2/orders", ua="Go-http-client/1.1", headers=[("X-Api-Key", "k")]), "allow-api-clients-with-credentials",
     "forward"),
    ("a release fetched by curl", req("/org/tool/releases/download/v1.2.3/tool-1.2.3-linux-amd64.tar.gz", ua="curl/8.5.0", accept="*/*"),
     "score-downloads-on-payload", "score"),
    ("its checksum fetched by wget", req("/dist/v2.4.1/app-2.4.1.AppImage.sha256", ua="Wget/1.21.4", accept="*/*"),
     "score-downloads-on-payload", "score"),
    ("a package from a downloads folder", req("/downloads/linux/tool_1.2.3_amd64.deb", ua="Wget/1.21.4", accept="*/*"),
     "score-downloads-on-payload", "score"),
    ("an archive at the site's top is no download", req("/tool-1.2.3.tar.gz", ua="curl/8.5.0", accept="*/*"), "score-everything-else", "score"),
    ("a backup in a folder is no download", req("/wp-content/updraft/backup_2025-01-01_site.zip", ua="curl/8.5.0", accept="*/*"),
     "score-everything-else", "score"),
    ("a secret wrapped in an archive is no download", req("/old/.git.tar.gz", ua="python-requests/2.32", accept="*/*"),
     "score-everything-else", "score"),
    ("a browser downloading the same release", req("/org/tool/releases/download/v1.2.3/tool-1.2.3-linux-amd64.tar.gz"),
     "score-everything-else", "score"),
    ("a scanner naming itself on a download path", req("/dists/x.deb", ua="Nuclei - Open-source project (github.com/projectdiscovery/nuclei)"),
     "block-declared-scanners", "block"),
    ("the site's own archive, fetched by curl", req("/backup.tar.gz", ua="curl/8.5.0", accept="*/*"), "block-site-dumps", "block"),
    # every archive the download rule lets a command-line client fetch is a dump when named after the site
    *((f"the site's own archive as .{ext}, fetched by curl", req(f"/www.{ext}", ua="curl/8.5.0", accept="*/*"), "block-site-dumps", "block")
      for ext in ("tar.xz", "txz", "tar.zst", "tzst", "tar.lz", "tbz2", "xz", "zst", "lz", "lzma")),
    ("api without credentials", req("/api/v1/items", ua="python-requests/2.32"), "score-api-clients-on-payload", "score"),
    ("versioned api without credentials", req("/v2/orders?page=2", ua="Java/17.0.9"), "score-api-clients-on-payload", "score"),
    ("api without a user agent", req("/graphql", ua=""), "score-api-clients-on-payload", "score"),
    ("json asked of an api-like path", req("/shop/api/cart", ua="axios/1.7.2", accept="application/json, text/plain, */*"),
     "score-api-clients-on-payload", "score"),
    ("wordpress rest api asked for json", req("/wp-json/wp/v2/posts", ua="GuzzleHttp/7", accept="application/json"),
     "score-api-clients-on-payload", "score"),
    ("browser on an api path", req("/api/v1/items"), "score-everything-else", "score"),
    ("scanner naming itself on an api path", req("/api/v1/users", ua="sqlmap/1.8.6#stable (https://sqlmap.org)"), "block-declared-scanners",
     "block"),
    ("fuzzer naming itself on an api path", req("/api/v1/query?query=up", ua="Fuzz Faster U Fool v2.1.0"), "block-declared-scanners",
     "block"),
    ("nuclei on a page", req("/", ua="Nuclei - Open-source project (github.com/projectdiscovery/nuclei)"), "block-declared-scanners",
     "block"),
    ("nikto", req("/index.php", ua="Mozilla/5.00 (Nikto/2.5.0) (Evasions:None) (Test:000003)"), "block-declared-scanners", "block"),
    ("wpscan", req("/wp-content/plugins/", ua="WPScan v3.8.25 (https://wpscan.com/wordpress-security-scanner)"), "block-declared-scanners",
     "block"),
    ("a declared scanner still reads robots.txt", req("/robots.txt", ua="sqlmap/1.8.6#stable (https://sqlmap.org)"), "allow-robots-txt",
     "forward"),
    ("a word that holds a tool's name is not one", req("/docs/nucleic-acids", ua="Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0 nucleiapp"),
     "score-everything-else", "score"),
    ("browser asking an api-like path for json", req("/shop/api/cart", accept="application/json"), "score-everything-else",
     "score"),
    ("api-like path without json asked", req("/shop/api/cart", ua="node", accept="*/*"), "score-everything-else", "score"),
    ("json or a page asked of an api-like path", req("/shop/api/cart", ua="node", accept="application/json, text/html"),
     "score-everything-else", "score"),
    ("json asked of a page path", req("/products/42", ua="curl/8.5.0", accept="application/json"), "score-everything-else",
     "score"),
    ("a self-declared ai client that carries credentials", req("/api/v1/chat", ua="Acme-AI-Client/1.0 (+https://acme.example/bot)",
                                                               headers=[("Authorization", "Bearer t0k3n")], accept="application/json"),
     "allow-api-clients-with-credentials", "forward"),
    # an API of another shape: a data format asked for first, with a query to answer or a typed body to take
    ("an rpc method taking json", req("/billing.v1.InvoiceService/ListInvoices", ua="Apache-HttpClient/5.3 (Java/21)", method="POST",
                                     accept="application/json", headers=[("Content-Type", "application/json")], body=b"{}"),
     "score-api-clients-on-payload", "score"),
    ("a grpc-web call", req("/chat.v2.Rooms/List", ua="okhttp/4.12.0", method="POST", accept="application/grpc-web-text",
                             headers=[("Content-Type", "application/grpc-web-text")], body=b"AAAAAAA="),
     "score-api-clients-on-payload", "score"),
    ("json posted by a program that accepts anything", req("/batch/", ua="Go-http-client/1.1", method="POST", accept="*/*",
                                                          headers=[("Content-Type", "application/json")], body=b"{}"),
     "score-everything-else", "score"),
    ("a filtered resource asked for json", req("/items/pages?filter%5Bstatus%5D%5B_eq%5D=published", ua="Bun/1.1.30",
                                               accept="application/json"), "score-api-clients-on-payload", "score"),
    ("a vendor json type with a query", req("/org/repo/_apis/pullrequests?status=active", ua="python-httpx/0.27.0",
                                            accept="application/vnd.example.v3+json"), "score-api-clients-on-payload", "score"),
    ("json asked of a page with a query by a browser", req("/products?page=2", accept="application/json"), "score-everything-else",
     "score"),
    ("json asked after a page type", req("/products?page=2", ua="python-requests/2.32", accept="text/plain, application/json"),
     "score-everything-else", "score"),
    ("json or a page asked with a query", req("/products?page=2", ua="python-requests/2.32", accept="application/json, text/html"),
     "score-everything-else", "score"),
    ("a form posted by a program", req("/contact", ua="curl/8.5.0", method="POST", accept="*/*",
                                       headers=[("Content-Type", "application/x-www-form-urlencoded")], body=b"a=1"),
     "score-everything-else", "score"),
    ("a tag's feed asked for as a feed", req("/feed/by_tag/python.xml", ua="newsboat/2.36.0 (Linux x86_64)",
                                             accept="application/rss+xml, application/atom+xml, */*;q=0.1"), "allow-feed-readers",
     "forward"),
    ("an xml file asked for as a page", req("/exports/catalog.xml"), "score-everything-else", "score"),
    ("browser page", req("/products/42"), "score-everything-else", "score"),
    ("curl page", req("/products/42", ua="curl/8.5.0"), "score-everything-else", "score"),
    ("repo page is not a git path", req("/org/repo"), "score-everything-else", "score"),
    ("dotfile-like but legit", req("/docs/environment"), "score-everything-else", "score"),
]


@pytest.mark.parametrize("name,features,rule,action", SHIPPED_CASES, ids=[c[0] for c in SHIPPED_CASES])
def test_shipped_rules(shipped: RuleTable, name: str, features: Features, rule: str, action: str) -> None:
    assert outcome(shipped, features) == (rule, action)


def test_every_shipped_rule_explains_itself(shipped: RuleTable) -> None:
    for rule in shipped.rules:
        assert rule.description and len(rule.description) > 30, rule.label


@pytest.mark.parametrize("path", sorted(SHIPPED.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_file_loads_on_its_own(path: Path) -> None:
    table = load([str(path)], RuleOptions(lists_dir=str(SHIPPED / "lists")), ClientState())
    assert len(table) > 0


def test_shipped_rate_limit_turns_the_121st_request_into_429() -> None:
    now = [1000.0]
    state = ClientState(ClientsConfig())
    state.limiter.clock = lambda: now[0]
    table = load([str(SHIPPED / "default.yaml")], RuleOptions(), state)
    page = req("/products/42")
    results = [table.evaluate(page) for _ in range(121)]
    assert all(isinstance(r, ScoreRequest) for r in results[:120])
    last = results[120]
    assert isinstance(last, Verdict) and last.rule == "rate-limit-per-client" and last.status == 429
    # assets do not count, other clients are unaffected
    assert outcome(table, req("/static/app.css")) == ("score-everything-else", "score")
    assert outcome(table, req("/products/42", ip="203.0.113.8")) == ("score-everything-else", "score")
    # a client that slows down gets its budget back at the refill rate (2/s)
    now[0] += 0.5
    assert isinstance(table.evaluate(page), ScoreRequest)
    assert outcome(table, page) == ("rate-limit-per-client", "block")


def test_a_package_manager_s_burst_is_not_held_to_the_page_limit() -> None:
    """apt install of 150 packages from a mirror behind the gateway: its indexes and packages are files, as assets are;
    the same client's pages still count."""
    state = ClientState(ClientsConfig())
    state.limiter.clock = lambda: 1000.0
    table = load([str(SHIPPED / "default.yaml")], RuleOptions(), state)
    apt = "Debian APT-HTTP/1.3 (2.6.1)"
    burst = [req("/debian/dists/bookworm/InRelease", ua=apt, accept="*/*"),
             req("/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/0f1e2d", ua=apt, accept="*/*"),
             *(req(f"/debian/pool/main/p/pkg{i}/pkg{i}_1.{i}-1_amd64.deb", ua=apt, accept="*/*") for i in range(150)),
             req("/simple/requests/", ua="pip/24.0", accept="*/*"), req("/el9/repodata/repomd.xml", ua="libdnf (Rocky 9)", accept="*/*")]
    assert all(outcome(table, f)[0] != "rate-limit-per-client" for f in burst)
    pages = [outcome(table, req(f"/docs/page-{i}", ua=apt, accept="*/*"))[0] for i in range(121)]
    assert pages[:120].count("rate-limit-per-client") == 0 and pages[120] == "rate-limit-per-client"
    # a package manager has a limit of its own: 1200 of a repository's files a minute
    files = [outcome(table, req(f"/debian/pool/main/q/q{i}.deb", ua=apt, accept="*/*", ip="203.0.113.9"))[0] for i in range(1201)]
    assert files[:1200].count("rate-limit-package-managers") == 0 and files[1200] == "rate-limit-package-managers"
    # any other client on a repository's paths (or a page behind one: /index.php/dists/x) is held to the page limit
    scraper = [outcome(table, req(f"/index.php/dists/{i}", ua="python-requests/2.32.3", accept="*/*", ip="203.0.113.10"))[0]
               for i in range(121)]
    assert scraper[120] == "rate-limit-per-client"


def test_shipped_rate_limit_holds_an_ipv6_client_that_rotates_addresses_in_its_64() -> None:
    state = ClientState(ClientsConfig())
    state.limiter.clock = lambda: 1000.0
    table = load([str(SHIPPED / "default.yaml")], RuleOptions(), state)
    got = [outcome(table, req("/products/42", ip=f"2001:db8:7:9:{i >> 16:x}:{i & 0xFFFF:x}:0:1")) for i in range(130)]
    assert got[:120] == [("score-everything-else", "score")] * 120
    assert set(got[120:]) == {("rate-limit-per-client", "block")}
    # a neighbour in the next /64 has its own budget
    assert outcome(table, req("/products/42", ip="2001:db8:7:a::1")) == ("score-everything-else", "score")


def test_rules_disabled_and_action_overrides() -> None:
    opts = RuleOptions(disabled=["wordpress-paths"], actions={"ai-training-crawlers": "block", "block-crawler-spoofers": "challenge"})
    table = load([str(SHIPPED / "default.yaml")], opts, ClientState(NO_DNS))
    assert outcome(table, req("/wp-login.php")) == ("score-everything-else", "score")
    assert outcome(table, req("/", ua=GPTBOT)) == ("ai-training-crawlers", "block")
    spoof = table.evaluate(req("/", ua=DUCKDUCKBOT, ip="198.51.100.9"))
    assert isinstance(spoof, Verdict) and spoof.action is Action.CHALLENGE and spoof.difficulty == 16


def test_seo_crawlers_can_be_let_through() -> None:
    table = load([str(SHIPPED / "default.yaml")], RuleOptions(actions={"seo-crawlers": "allow"}), ClientState())
    assert outcome(table, req("/", ua="Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)")) == ("seo-crawlers", "forward")
    assert outcome(table, req("/", ua=GPTBOT)) == ("ai-training-crawlers", "challenge")


def test_crawler_lists_come_after_the_verified_crawlers_and_the_spoofers(shipped: RuleTable) -> None:
    order = [rule.label for rule in shipped.rules]
    ai = order.index("ai-training-crawlers")
    assert order[ai + 1] == "seo-crawlers"
    crawlers = [n for n in order if n.startswith("allow-verified-") or n.endswith("-by-reverse-dns")]
    assert max(order.index(n) for n in crawlers) < order.index("crawlers-unverified-come-back-later")
    assert order.index("crawlers-unverified-come-back-later") < order.index("block-crawler-spoofers") < ai


def _browser_agents() -> list[str]:
    """People's user agents the repository holds: the corpus's browsers, the browsers recorded here, the people cases."""
    agents = [entry["ua"] for entry in json.loads((ROOT / "models" / "corpus" / "data" / "browsers.json").read_text())["user_agents"]]
    for path in [*sorted((ROOT / "tests" / "data" / "browsers").glob("*.jsonl")), ROOT / "tests" / "data" / "people-cases.jsonl"]:
        for line in path.read_text().splitlines():
            if line.strip():
                agents += [v for k, v in json.loads(line)["headers"] if k.lower() == "user-agent"]
    return sorted(set(agents + EDITORS))


# desktop editors built on Electron: a person's own Markdown previews and embedded pages send these
EDITORS = ["Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Code/1.95.3 Chrome/128.0.6613.186 "
           "Electron/32.2.1 Safari/537.36",
           "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Cursor/0.42.5 Chrome/124.0.6367.243 "
           "Electron/30.4.0 Safari/537.36",
           "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Trae/1.0.9 Chrome/132.0.6834.210 Electron/34.3.2 "
           "Safari/537.36"]


@pytest.mark.parametrize("name", ["ai-crawlers", "seo-crawlers"])
def test_no_browser_matches_a_shipped_crawler_list(name: str) -> None:
    agents = _browser_agents()
    assert len(agents) > 300
    got = NamedLists(SHIPPED / "lists").agents(name)
    assert got is not None and got.problems == [] and len(got.tokens) > 20
    crawlers = AgentSet(got.tokens)
    assert [ua for ua in agents if crawlers.matches(ua.lower())] == []


BY_DESCRIPTION = ("ai-crawlers-by-description", "seo-crawlers-by-description", "scanners-by-description")


def test_no_browser_meets_a_rule_that_reads_a_bots_description(shipped: RuleTable) -> None:
    agents = _browser_agents()
    assert len(agents) > 300
    assert [ua for ua in agents if outcome(shipped, req("/", ua=ua))[0] in BY_DESCRIPTION] == []


@pytest.mark.parametrize("rule,ua", [
    ("ai-crawlers-by-description", GPTBOT),
    ("ai-crawlers-by-description", "cohere-training-data-crawler (+crawler@cohere.ai)"),
    ("ai-crawlers-by-description", "Mozilla/5.0 (compatible; Crawl4AI/0.4; +https://crawl4ai.com)"),
    ("ai-crawlers-by-description", "Mozilla/5.0 (compatible; KlaviyoAIBot/1.0; +https://www.klaviyo.com/)"),
    ("seo-crawlers-by-description", "Mozilla/5.0 (compatible; SiteAuditBot/0.97; +http://www.semrush.com/bot.html)"),
    ("seo-crawlers-by-description", "serpstatbot/2.1 (advanced backlink tracking bot; https://serpstatbot.com/; abuse@serpstatbot.com)"),
    ("seo-crawlers-by-description", "Mozilla/5.0 (compatible; DataForSeoBot/1.0; +https://dataforseo.com/dataforseo-bot)"),
    ("seo-crawlers-by-description", "Mozilla/5.0 (compatible; SERankingBacklinksBot/1.0; +https://seranking.com/backlinks-crawler)"),
    ("seo-crawlers-by-description", "SeobilityBot (SEO Tool; https://www.seobility.net/sites/bot.html)"),
    ("seo-crawlers-by-description", "Mozilla/5.0 (compatible; SEOkicks; +https://www.seokicks.de/robot.html)"),
])
def test_a_listed_bot_meets_its_description_rule_when_the_list_rule_is_off(rule: str, ua: str) -> None:
    """The description rules catch the listed bots' own words too: a list rule switched off leaves them to the next."""
    table = load([str(SHIPPED / "default.yaml")], RuleOptions(disabled=["ai-training-crawlers", "seo-crawlers"]), ClientState(NO_DNS))
    assert outcome(table, req("/", ua=ua)) == (rule, "challenge")


def test_description_rules_come_after_the_lists_and_take_overrides() -> None:
    table = load([str(SHIPPED / "default.yaml")], RuleOptions(actions={"scanners-by-description": "allow",
                                                                      "seo-crawlers-by-description": "block"}), ClientState(NO_DNS))
    order = [rule.label for rule in table.rules]
    assert order[order.index("seo-crawlers") + 1:order.index("seo-crawlers") + 4] == list(BY_DESCRIPTION)
    assert outcome(table, req("/", ua="Mozilla/5.0 zgrab/0.x")) == ("scanners-by-description", "forward")
    assert outcome(table, req("/", ua="Mozilla/5.0 (compatible; BacklinksExtendedBot)")) == ("seo-crawlers-by-description", "block")
    ai = table.evaluate(req("/", ua=FLYRIVER))
    assert isinstance(ai, Verdict) and (ai.rule, ai.action, ai.difficulty) == ("ai-crawlers-by-description", Action.CHALLENGE, 18)


def test_a_renamed_rule_is_still_reached_by_its_old_name(caplog: pytest.LogCaptureFixture) -> None:
    from gateway import config as configmod
    from gateway.rules import from_config

    raw = {"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"files": [str(SHIPPED / "default.yaml")],
           "disabled": ["block-wordpress-probes"], "actions": {"block-phpmyadmin-probes": "block"}}}
    with caplog.at_level("WARNING", logger="clefgate.rules"):
        table = from_config(configmod.validate(raw, "<test>"), ClientState())
    assert outcome(table, req("/wp-login.php")) == ("score-everything-else", "score")
    assert outcome(table, req("/phpmyadmin/index.php")) == ("database-panel-paths", "block")
    assert "block-wordpress-probes is now wordpress-paths" in caplog.text


def test_unknown_names_in_overrides_are_reported() -> None:
    opts = RuleOptions(disabled=["wordpres-paths"], actions={"ai-crawlers": "block", "seo-crawler": "allow", "allow-robots-txt": "route"})
    with pytest.raises(ConfigError) as err:
        load([str(SHIPPED / "default.yaml")], opts, ClientState())
    assert err.value.problems == [
        "rules.disabled: unknown rule 'wordpres-paths' (did you mean 'wordpress-paths'?)",
        "rules.actions: unknown rule 'ai-crawlers' ('ai-crawlers' is a named list; the rules using it: ai-training-crawlers)",
        "rules.actions: unknown rule 'seo-crawler' (did you mean 'seo-crawlers'?)",
        "rules.actions.allow-robots-txt: 'route' is not one of allow, block, challenge, score",
    ]


# ----------------------------------------------------------------------------- good and bad files


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_good_rule_files_load(path: Path) -> None:
    table = load([str(path)], OPTIONS, ClientState())
    assert len(table) >= 2
    assert all(rule.description or rule.label.startswith("#") or rule.action for rule in table.rules)


def expected_problems(path: Path) -> list[str]:
    return [m.group(1).replace("LISTS", str(LISTS)) for m in re.finditer(r"^# expect: (.*)$", path.read_text(), re.M)]


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_bad_rule_files_list_every_problem(path: Path) -> None:
    expected = expected_problems(path)
    assert expected, f"{path.name} has no '# expect:' lines"
    with pytest.raises(ConfigError) as err:
        load([str(path)], OPTIONS, ClientState())
    assert err.value.problems == expected
    assert err.value.source == str(path)


def test_a_score_rule_can_ignore_bot_likeness_and_an_override_drops_it(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n"
                    "  - {name: api, path: '/api/**', action: score, bot_likeness: ignore, policy: checkout}\n"
                    "  - {name: pages, path: '/p/**', action: score, bot_likeness: challenge}\n"
                    "  - {name: rest, action: score}\n")
    table = load([str(path)], OPTIONS, ClientState())
    api, pages, rest = (table.evaluate(req(t, ua="axios/1.7.2")) for t in ("/api/x", "/p/x", "/x"))
    assert isinstance(api, ScoreRequest) and api.ignore_bot_likeness and api.policy == "checkout" and "bot-likeness ignored" in api.reason
    assert isinstance(pages, ScoreRequest) and not pages.ignore_bot_likeness
    assert isinstance(rest, ScoreRequest) and not rest.ignore_bot_likeness
    # rules.actions: the override's defaults apply, so a rule turned into a plain score weighs the client's look again
    overridden = load([str(path)], RuleOptions(policies=["checkout"], actions={"api": "score"}), ClientState()).evaluate(req("/api/x"))
    assert isinstance(overridden, ScoreRequest) and not overridden.ignore_bot_likeness and overridden.policy is None
    allowed = load([str(path)], RuleOptions(policies=["checkout"], actions={"api": "allow"}), ClientState()).evaluate(req("/api/x"))
    assert isinstance(allowed, Verdict) and allowed.action is Action.FORWARD


@pytest.fixture(scope="module")
def every() -> RuleTable:
    clock = [5000.0]
    state = ClientState(ClientsConfig(window_s=60))
    state.limiter.clock = state.windows.clock = lambda: clock[0]
    return load([str(HERE / "good" / "every_condition.yaml")], OPTIONS, state)


EVERY_CASES = [
    ("route continues, later rule keeps the backend", req("/x", ip="198.51.100.5", headers=[("Cookie", "a=1; beta=1")]),
     ("office-by-list", "forward", "beta")),
    ("route stops", req("/api/v1/x", headers=[("X-Route-Stop", "yes")]), ("api-backend", "forward", "api")),
    ("route, then nothing matches", req("/nothing", headers=[("Cookie", "beta=1")]), (None, "forward", "beta")),
    ("text list v4", req("/", ip="198.51.100.77"), ("office-by-list", "forward", None)),
    ("text list v6", req("/", ip="2001:db8:42::9"), ("office-by-list", "forward", None)),
    ("json list", req("/", ip="203.0.113.100"), ("partners-by-json-list", "forward", None)),
    ("json list v6", req("/", ip="2001:db8:77:1::1"), ("partners-by-json-list", "forward", None)),
    ("inline address next to a list", req("/", ip="192.0.2.7"), ("partners-by-json-list", "forward", None)),
    ("ipv4-mapped ipv6 is ipv4", req("/", ip="::ffff:198.51.100.1"), ("office-by-list", "forward", None)),
    ("host glob and not-ip", req("/", host="Admin.Example:8443"), ("admin-host-only", "block", None)),
    ("not-ip excludes", req("/", host="admin.example", ip="192.0.2.9"), (None, "none", None)),
    ("method", req("/x", method="DELETE"), ("no-delete", "block", None)),
    ("body size over", req("/upload", method="POST", body=b"x" * (1024 * 1024 + 1)), ("big-uploads", "challenge", None)),
    ("body size under", req("/upload", method="POST", body=b"x" * 10), (None, "none", None)),
    ("query regex", req("/search?q=1%20UNION  SELECT+x&q=1 union   select"), ("search-injection", "block", None)),
    ("query regex other path", req("/find?q=1 union select"), (None, "none", None)),
    ("headers present and regex", req("/", headers=[("X-Forwarded-Host", "a"), ("X-Debug", "on")]), ("bad-header", "block", None)),
    ("header regex mismatch", req("/", headers=[("X-Forwarded-Host", "a"), ("X-Debug", "off")]), (None, "none", None)),
    ("header absent", make_features("GET", "/shop/cart", [("Host", "h"), ("User-Agent", "x")]), ("no-accept", "challenge", None)),
    ("path regex and ua regex", req("/api/v2/x", ua="curl/8.0"), ("curl-on-api", "score", None)),
    ("any: first group", req("/legacy/default.asp"), ("either", "block", None)),
    ("any: second group, case-insensitive literal", req("/", ua="Mozilla AncientCrawler/1"), ("either", "block", None)),
    ("any: glob * stays in one segment", req("/legacy/a/b.asp"), (None, "none", None)),
    ("user-agent list, any case", req("/", ua="Mozilla/5.0 (compatible; gptbot/1.2)"), ("bots-by-list", "challenge", None)),
    ("user-agent list, a token with spaces", req("/", ua="Screaming Frog SEO Spider/19.0"), ("bots-by-list", "challenge", None)),
    ("user-agent list, a token with a dot", req("/", ua="bigsur.ai/1.0"), ("bots-by-list", "challenge", None)),
    ("user-agent list: a longer name holding a token", req("/", ua="MyGPTBot/1.0"), (None, "none", None)),
    ("user-agent list: a token as a host name", req("/", ua="probe (+https://gptbot.example/)"), (None, "none", None)),
    ("user-agent list: a token in an address", req("/", ua="probe (gptbot@example.test)"), (None, "none", None)),
    ("a regex beside a user-agent list", req("/", ua="oldcrawler/2"), ("bots-by-list", "challenge", None)),
    ("inputs: form body, decoded", req("/comment", method="POST", body=b"text=%3CScript%3Ealert(1)",
                                       headers=[("Content-Type", "application/x-www-form-urlencoded")]), ("inputs-signature", "block", None)),
    ("inputs: json escapes undone", req("/api/x", method="POST", body=b'{"q": "1; DROP\\u0020TABLE users"}',
                                        headers=[("Content-Type", "application/json")]), ("inputs-signature", "block", None)),
    ("inputs: header value", req("/api/x", method="POST", headers=[("X-Note", "<script>")]), ("inputs-signature", "block", None)),
    ("inputs: other method", req("/comment?text=<script>"), (None, "none", None)),
]


@pytest.mark.parametrize("name,features,expected", EVERY_CASES, ids=[c[0] for c in EVERY_CASES])
def test_every_condition(every: RuleTable, name: str, features: Features, expected: tuple[str | None, str, str | None]) -> None:
    out = every.evaluate(features)
    if out is None:
        got: tuple[str | None, str, str | None] = (None, "none", None)
    elif isinstance(out, ScoreRequest):
        got = (out.rule, "score", out.backend)
        assert out.policy == "checkout"
    else:
        got = (out.rule, out.action.value, out.backend)
    assert got == expected


def test_client_window_condition_and_rate_keys(tmp_path: Path) -> None:
    clock = [100.0]
    state = ClientState(ClientsConfig(window_s=60, ipv4_prefix=24))
    state.limiter.clock = state.windows.clock = lambda: clock[0]
    table = load([str(HERE / "good" / "every_condition.yaml")], OPTIONS, state)
    ip = "192.0.2.200"
    client = state.key(req("/anything", ip=ip))  # the address and the browser's fingerprint
    for status in (404, 404, 404, 200):
        state.record(client, "/x", status)
    assert table.evaluate(req("/anything", ip=ip)) is None  # 4 requests: not yet
    state.record(client, "/y", 404)
    noisy = table.evaluate(req("/anything", ip=ip))
    assert isinstance(noisy, Verdict) and noisy.rule == "noisy-clients"
    # another browser behind the same address has its own window
    assert table.evaluate(req("/anything", ip=ip, ua=CHROME.replace("Chrome/", "Chrome/1"))) is None
    clock[0] += 61  # the window slid past every one of them
    assert table.evaluate(req("/anything", ip=ip)) is None

    # rate keyed by an API key: three per minute per key, whatever the address
    key = [("X-Api-Key", "secret-1")]
    got = [outcome(table, req("/api/x", ip=f"192.0.2.{i}", headers=key)) for i in range(1, 5)]
    assert got[:3] == [(None, "none")] * 3 and got[3] == ("api-key-rate", "block")
    assert outcome(table, req("/api/x", headers=[("X-Api-Key", "secret-2")])) == (None, "none")

    # rate keyed by client (the default key): a browser's budget is its own, not its address's
    pages = [outcome(table, req("/pages/x", ip="192.0.2.9")) for _ in range(3)]
    assert pages == [(None, "none"), (None, "none"), ("client-rate", "block")]
    other = req("/pages/x", ip="192.0.2.9", headers=[("Accept-Language", "de-DE")])  # another person behind the same NAT
    assert outcome(table, other) == (None, "none")
    assert outcome(table, req("/pages/x", ip="192.0.2.9")) == ("client-rate", "block")

    # rate keyed by /24: two logins per 10 s from the same network
    logins = [outcome(table, req("/login", method="POST", ip=f"203.0.113.{i}")) for i in (1, 2, 3)]
    assert logins == [(None, "none"), (None, "none"), ("prefix-rate", "challenge")]
    assert outcome(table, req("/login", method="POST", ip="203.0.114.1")) == (None, "none")


def test_rule_text_never_becomes_code(tmp_path: Path) -> None:
    nasty = "/x'), exec('raise SystemExit(1)')"
    rules = tmp_path / "r.yaml"
    rules.write_text(f"""
rules:
  - name: quoted
    path: "{nasty}"
    user_agent: "(?i)a\\"b|c'd"
    headers: {{"x-q": "'\\\\); import os #"}}
    action: block
""")
    table = load([str(rules)], OPTIONS, ClientState())
    assert "SystemExit" not in (table.evaluate.__doc__ or "")
    hit = req(nasty, ua="C'D", headers=[("X-Q", "'); import os #")])
    assert outcome(table, hit) == ("quoted", "block")
    assert outcome(table, req("/x")) == (None, "none")


def test_empty_rule_set_matches_nothing() -> None:
    assert load([], OPTIONS, ClientState()).evaluate(req("/")) is None


# ----------------------------------------------------------------------------- patterns


@pytest.mark.parametrize("raw,normal", [
    ("/a/b", "/a/b"), ("/a//b", "/a/b"), ("/a/./b", "/a/b"), ("/a/../b", "/b"), ("/../../etc/passwd", "/etc/passwd"),
    ("/%2e%2e/%2e%65nv", "/.env"), ("/a\\..\\.git\\config", "/.git/config"), ("/dir/", "/dir/"), ("/a/b/..", "/a/"),
    ("/%41", "/A"),
    # segment parameters, dropped as servlet containers drop them before mapping the path
    ("/actuator;/env", "/actuator/env"), ("/app/..;/manager/html", "/manager/html"), ("/.env;.css", "/.env"),
    ("/manager;jsessionid=0A1B/html", "/manager/html"), ("/;x/.git/config", "/.git/config"), ("/x/%2e%2e%3b/.env", "/.env"),
    ("/a/b/..;", "/a/"), ("/a;b", "/a"),
])
def test_normalize_path(raw: str, normal: str) -> None:
    assert normalize_path(raw) == normal


GLOBS = ["/**/.env", "/**/.git/**", "/cgi-bin/**", "/**/*.css", "/robots.txt", "/a/*/c", "/x?z", "/**/id_{rsa,dsa}",
         "/sitemap*.xml", "/[ab]cd", "/**/wp-admin", "/v[0-9]/**", "/**/vendor/phpunit/**"]
segment = st.sampled_from(["", ".env", ".git", "a", "b", "c", "cgi-bin", "x.css", "id_rsa", "id_dsa", "robots.txt", "sitemap-1.xml",
                           "wp-admin", "vendor", "phpunit", "xyz", "acd", "bcd", "v1", ".", ".."])


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(segment, min_size=1, max_size=5), trailing=st.booleans())
def test_glob_shapes_agree_with_the_regex_meaning(parts: list[str], trailing: bool) -> None:
    path = "/" + "/".join(parts) + ("/" if trailing else "")
    for glob in GLOBS:
        shapes = classify_path_globs([glob])
        fast = (path in shapes.exact or path.endswith(tuple(shapes.suffixes)) if shapes.suffixes else path in shapes.exact) \
            or (bool(shapes.prefixes) and path.startswith(tuple(shapes.prefixes))) or any(c in path for c in shapes.contains) \
            or any(re.fullmatch(glob_to_regex(g), path) for g in shapes.rest)
        assert fast == bool(re.fullmatch(glob_to_regex(glob), path)), (glob, path)


# ----------------------------------------------------------------------------- robustness

text = st.text(st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=60)
ips = st.one_of(st.ip_addresses().map(str), text, st.sampled_from(["", "::ffff:1.2.3.4", "66.249.66.1", "fe80::1%eth0", "1.2.3"]))


@st.composite
def any_features(draw: st.DrawFn) -> Features:
    headers = tuple(draw(st.lists(st.tuples(st.sampled_from(["Host", "User-Agent", "Cookie", "Authorization", "X-Api-Key", "Referer",
                                                              "Accept", "X-Debug", "x-forwarded-host", "X-Weird"]), text), max_size=6)))
    hmap = make_header_map(headers)
    return Features(method=draw(st.sampled_from(["GET", "POST", "HEAD", "DELETE", "PUT", "", "G\x00T"])),
                    path=draw(st.one_of(text, text.map(lambda s: "/" + s))), query=draw(text), headers=headers, header_map=hmap,
                    client_ip=draw(ips), host=draw(text), user_agent=draw(text),
                    content_length=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 40))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(f=any_features())
def test_evaluation_never_raises(shipped: RuleTable, every: RuleTable, f: Features) -> None:
    for table in (shipped, every):
        out = table.evaluate(f)
        assert out is None or isinstance(out, (Verdict, ScoreRequest))


def test_ai_training_crawlers_wait_longer_on_the_no_javascript_path(shipped: RuleTable) -> None:
    """The no-JavaScript path (a signed wait) is for people; the crawlers rule asks more work than the default, so a
    crawler that waits instead waits at least twice as long as a person's default challenge."""
    from gateway.challenge import ChallengeService, Signer
    from gateway.config import ChallengeConfig

    verdict = shipped.evaluate(req("/blog/post", ua=GPTBOT))
    assert isinstance(verdict, Verdict) and verdict.action is Action.CHALLENGE
    cfg = ChallengeConfig()
    svc = ChallengeService(cfg, Signer([("k", b"k" * 32)]))
    assert (svc.nojs_wait_s(verdict.difficulty or 0) or 0) >= 2 * (svc.nojs_wait_s(cfg.difficulty) or 0) > 0


def test_files_that_are_not_utf8_are_listed_problems(tmp_path: Path) -> None:
    """A rule file or an address list saved in another encoding is a problem in the list, not a traceback."""
    (tmp_path / "latin1.yaml").write_bytes("rules:\n  - name: caf\xe9\n    path: /x\n    action: block\n".encode("latin-1"))
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "office.txt").write_bytes("# bureau caf\xe9\n192.0.2.0/24\n".encode("latin-1"))
    (tmp_path / "uses_list.yaml").write_text("rules:\n  - name: office\n    ip: list:office\n    action: allow\n")
    with pytest.raises(ConfigError) as err:
        load([str(tmp_path / "latin1.yaml"), str(tmp_path / "uses_list.yaml")], RuleOptions(), ClientState())
    assert err.value.problems == ["latin1.yaml: not UTF-8 text (byte 20)",
                                  "uses_list.yaml:office: ip: list 'office': office.txt: not UTF-8 text (byte 12)"]


def test_signatures_are_read_by_the_reader_given_once_per_request(tmp_path: Path) -> None:
    """With ``RuleOptions.signatures``, a named block rule whose only condition is ``inputs`` matches when the reader
    names it (asked once per request, however many signatures are tried); any other ``inputs`` condition reads the text."""
    rules = tmp_path / "r.yaml"
    rules.write_text("rules:\n  - {name: sig-a, inputs: ['<script'], action: block}\n  - {name: sig-b, inputs: ['drop\\s+table'], action: block}\n"
                     "  - {name: posted, method: POST, inputs: ['<script'], action: block}\n"
                     "  - {name: sig-c, inputs: ['evil'], action: block}\n")
    asked: list[Features] = []
    said: set[str] = set()

    def reader(f: Features) -> set[str]:
        asked.append(f)
        return said

    table = load([str(rules)], RuleOptions(actions={"sig-c": "challenge"}, signatures=reader), ClientState())
    assert outcome(table, req("/x?q=<script>")) == (None, "none") and len(asked) == 1  # the reader, not the text, decides sig-a and sig-b
    said.add("sig-b")
    assert outcome(table, req("/x?q=<script>")) == ("sig-b", "block") and len(asked) == 2
    said.clear()
    assert outcome(table, req("/x", method="POST", body=b"<script>")) == ("posted", "block")  # another condition too: the text
    assert outcome(table, req("/x?q=evil")) == ("sig-c", "challenge")  # overridden to challenge: no longer a signature
    assert outcome(load([str(rules)], RuleOptions(), ClientState()), req("/x?q=<script>")) == ("sig-a", "block")  # no reader: the text


@pytest.mark.parametrize("pattern,agent,matches", [
    (r"(?i)\b(?:sqlmap|nikto)\b", "SQLMap/1.8 (https://sqlmap.org)", True),     # searched lower-cased, without IGNORECASE
    (r"(?i)\b(?:sqlmap|nikto)\b", "Mozilla/5.0 sqlmapper", False),
    (r"(?i)\bNikto\b", "Mozilla/5.00 (NIKTO/2.5.0)", True),                     # an upper-case letter: IGNORECASE kept
    (r"(?i)[A-Z]{3}bot/\d", "abcBOT/2", True),
    (r"(?i)\Sbot/", "Mozilla/5.0 (compatible; XBot/1.0)", True),
    (r"\bCurl/", "curl/8.5.0", False),                                         # case-sensitive as written
])
def test_a_case_insensitive_user_agent_regex_matches_whatever_the_case(tmp_path: Path, pattern: str, agent: str, matches: bool) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"rules": [{"name": "r", "user_agent": pattern, "action": "block"}]}))
    table = load([str(path)], OPTIONS, ClientState())
    assert (outcome(table, req(ua=agent))[0] == "r") is matches
