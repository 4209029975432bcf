"""Deterministic payload detection (gateway/payload.py): locations, decodings, benign look-alikes, bounds,
and the pipeline's use of it end to end, with the model off and with the shipped model on."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from gateway import config as configmod
from gateway import decisionlog
from gateway.features import from_record
from gateway.payload import TRUNCATED, PayloadInspector, signatures_for, variants
from gateway.pipeline import build
from gateway.verdict import Action, Source, Verdict
from tests.harness import ROOT, Gateway, config_for

RULES = {"files": [str(ROOT / "rules" / "default.yaml")], "fallback_files": [str(ROOT / "rules" / "injections.yaml")]}
SQLI = "1' OR '1'='1' --"
XSS = "<img src=x onerror=alert(1)>"
FORM = "application/x-www-form-urlencoded"
BOUNDARY = "----clefgateTestBoundary"


def config(**extra: Any) -> configmod.Config:
    raw = {"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "rules": RULES, "challenge": {"dev_generate_secret": True}, **extra}
    return configmod.validate(raw, str(ROOT / "clefgate.yaml"))


@pytest.fixture(scope="module")
def inspector() -> PayloadInspector:
    cfg = config()
    return PayloadInspector(cfg, signatures_for(cfg))


def record(target: str = "/", *, headers: list[list[str]] | None = None, body: str | None = None, method: str = "GET") -> dict[str, Any]:
    return {"method": method, "path": target, "headers": [["Host", "shop.example"], *(headers or [])], "body": body,
            "client_ip": "203.0.113.9"}


def multipart(fields: list[tuple[str, str, str | None]]) -> str:
    """A multipart/form-data body: (name, value, filename or None) per part."""
    parts = []
    for name, value, filename in fields:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        parts.append(f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n{value}\r\n")
    return "".join(parts) + f"--{BOUNDARY}--\r\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def quote_plus_form(text: str) -> str:
    return quote(text, safe="")


# ---------------------------------------------------------------------------------------------------- locations × decodings

CASES = [
    # (request record, location, decoding)
    (record("/search?q=" + quote(SQLI)), "query:q", "percent"),
    (record("/search?q=" + quote(quote(SQLI))), "query:q", "percent2"),
    (record("/search?q=" + SQLI.replace(" ", "+")), "query:q", "plus"),
    (record("/search?q=" + quote(SQLI.replace("'", "&#39;"))), "query:q", "percent, html"),
    (record("/search?q=" + b64("<script>alert(document.cookie)</script>")), "query:q", "base64"),
    (record("/search?" + quote(SQLI) + "=1"), "query:1' OR '1'='1' -- (name)", "percent"),
    (record("/item/" + quote(SQLI)), "path", "percent"),
    (record("/p", method="POST", headers=[["Content-Type", FORM]], body="name=Ann&comment=" + quote_plus_form(SQLI)), "form:comment", "percent"),
    (record("/p", method="POST", headers=[["Content-Type", FORM]], body="comment=" + XSS.replace(" ", "+")), "form:comment", "plus"),
    (record("/api", method="POST", headers=[["Content-Type", "application/json"]],
            body=json.dumps({"user": {"tags": ["ok", SQLI]}})), "json:$.user.tags[1]", "raw"),
    (record("/api", method="POST", headers=[["Content-Type", "application/json"]],
            body='{"bio": "\\u003cimg src=x onerror=alert(1)\\u003e"}'), "json:$.bio", "json"),
    (record("/api", method="POST", headers=[["Content-Type", "application/json"]],
            body='{"a": "fine", "b": "' + SQLI.replace("'", "\\u0027") + '", "c": "cut sho'), "json:#3", "json"),
    (record("/up", method="POST", headers=[["Content-Type", f"multipart/form-data; boundary={BOUNDARY}"]],
            body=multipart([("title", "Holiday", None), ("caption", XSS, None)])), "multipart:caption", "raw"),
    (record("/up", method="POST", headers=[["Content-Type", f"multipart/form-data; boundary={BOUNDARY}"]],
            body=multipart([("photo", "GIF89a...", SQLI + ".gif")])), "multipart:photo (filename)", "raw"),
    (record("/", headers=[["Cookie", "theme=dark; sid=" + quote(SQLI)]]), "cookie:sid", "percent"),
    (record("/", headers=[["Cookie", "prefs=" + b64('{"q": "' + SQLI + '"}')]]), "cookie:prefs", "base64"),
    (record("/", headers=[["Referer", "https://shop.example/?q=" + quote(XSS)]]), "header:referer", "percent"),
    (record("/", headers=[["User-Agent", "Mozilla/5.0 " + SQLI]]), "header:user-agent", "raw"),
    (record("/", headers=[["X-Forwarded-For", "198.51.100.4, " + SQLI]]), "header:x-forwarded-for", "raw"),
    (record("/", headers=[["X-Api-Version", "2' AND 1=1 UNION SELECT password FROM users--"]]), "header:x-api-version", "raw"),
]


@pytest.mark.parametrize("rec,location,decoding", CASES, ids=[f"{c[1]}-{c[2]}" for c in CASES])
def test_each_location_and_decoding_is_found(inspector: PayloadInspector, rec: dict[str, Any], location: str, decoding: str) -> None:
    hits = inspector.inspect(from_record(rec))
    assert hits, f"nothing found in {rec}"
    hit = hits[0]
    assert (hit.location, hit.decoding) == (location, decoding), hit
    assert hit.detector in ("libinjection", "signatures") and hit.kind
    assert len(hit.fragment) <= 80
    assert hit.location in hit.describe()


BENIGN = [
    record("/search?q=O%27Brien"),
    record("/search?q=select+a+size"),
    record("/search?q=javascript%3Avoid(0)+meaning"),
    record("/search?q=" + quote("we came at 2 or 3 = late")),
    record("/search?q=" + quote("drop table saw review")),
    record("/search?q=" + quote('floating point number using the "abs()" function if appropriate')),
    record("/api", method="POST", headers=[["Content-Type", "application/json"]],
           body=json.dumps({"body": "Use <code>&lt;script defer&gt;</code> so the page renders first."})),
    record("/p", method="POST", headers=[["Content-Type", FORM]],
           body="comment=" + quote("I <b>loved</b> it, 5 stars.\r\nWould buy again -- Ann")),
    record("/p", method="POST", headers=[["Content-Type", FORM]],
           body="comment=" + quote("Here is my config:\r\n<div class=\"x\" style=\"width: 10px\">\r\n  <img src=\"a.png\">\r\n</div>")),
    record("/api", method="POST", headers=[["Content-Type", "application/json"]],
           body=json.dumps({"name": "Seán O'Brien", "note": "Call me at 5; or later", "qty": 3})),
    record("/up", method="POST", headers=[["Content-Type", f"multipart/form-data; boundary={BOUNDARY}"]],
           body=multipart([("name", "D'Arcy", None), ("cv", "SELECT * FROM t -- a file's content", "cv.txt")])),
    record("/", headers=[["Cookie", "clefgate_pass=1' OR '1'='1; session=" + b64("x" * 3 + "\x00\x01\x02" * 8)]]),
    record("/", headers=[["User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36"],
                         ["Referer", "https://www.google.com/search?q=o%27brien+bakery"], ["X-Forwarded-For", "198.51.100.4, [2001:db8::1]:443, unknown"]]),
]


# a name mentioned among words, as people ask about it, is not its use
MENTIONS = ["what is document.cookie", "how do I read document.cookie in react", "information_schema.tables best practice",
            "replace SUBSTRING() with <iframe>", "how to embed an <iframe> in a page"]
BENIGN += [record("/search?q=" + quote(text)) for text in MENTIONS]
BENIGN += [record("/api", method="PATCH", headers=[["Content-Type", "application/json"]], body=json.dumps({"note": text})) for text in MENTIONS]
# a phrase quoted inside the value is no breakout: query languages and searches write one before AND / OR and a comparison
QUERY_LANGUAGES = ['text ~ "pro jacket" AND type = Bug', '"In Progress" = status AND project = ENG', '"quick fox" AND lang = en',
                   '"status" = "open" and priority > 2', '"foo bar" OR id = 7']
BENIGN += [record("/rest/api/3/search?jql=" + quote(text)) for text in QUERY_LANGUAGES]
# a tag quoted as Markdown's inline code in a post is shown, not run; a template literal glued to a call still runs
INLINE_CODE = ['Adding `<link rel="preload">` before the fonts fixed it', 'Wrap it in `<meta name="robots">` and `noindex`']
BENIGN += [record("/p", method="POST", headers=[["Content-Type", FORM]], body="comment=" + quote(text)) for text in INLINE_CODE]
BENIGN += [record("/blog/xp_cmdshell-ping"), record("/search?q=" + quote("http://metadata.google.internal/computeMetadata/v1/ returns 403"))]
# ... and the same names used, or alone where a value belongs, still are
USES = ["document.cookie", "<iframe>", "alert(document.cookie) what is this", "x=document.cookie how are you today",
        "please show me how <iframe src=//evil.example> works", "see <iframe>x</iframe> here", "';document.cookie",
        "1 union select table_name from information_schema.tables--", "what is it' union select * from information_schema.tables--",
        "\" onmouseover=\"alert(1)", "x onfocus=alert`1`",
        # a string the value closes without opening it is a breakout; a quoted phrase before a tautology or a union still hits
        "<iframe>alert`1`</iframe>", "<SPAN DATASRC=#I DATAFLD=C DATAFORMATAS=HTML></SPAN>",
        "admin'--", "' or ''='",
        # where the value sits unquoted, a quoted start followed by a function, keyword, comment or statement is SQL
        "'' rlike sleep(5)--", "'1' having 1=1--", "'x' into outfile '/var/www/html/s.php'--", "'';select 1--", "'x' div 0--",
        "('x') order by sleep(5)--", "\" or 1=1 --", "\"x\" and 1=1", "'hi' or 'x'='x';", "'x' union select 1,2--",
        # what joins a name into one token is part of it, not words around it: a URL's scheme and path, an identifier's rest
        "http://metadata.google.internal/computeMetadata/v1/", "http://metadata.google.internal/computeMetadata/v1/service-accounts/default/token",
        "x.smarty_internal_write_file.php"]


@pytest.mark.parametrize("text", USES)
def test_a_name_used_or_alone_is_still_a_hit(inspector: PayloadInspector, text: str) -> None:
    hits = inspector.inspect(from_record(record("/search?q=" + quote(text))))
    assert hits and hits[0].location == "query:q", text


@pytest.mark.parametrize("rec", BENIGN, ids=range(len(BENIGN)))
def test_benign_look_alikes_are_not_hits(inspector: PayloadInspector, rec: dict[str, Any]) -> None:
    assert inspector.inspect(from_record(rec)) == ()


@pytest.mark.parametrize("value,plus,expected", [
    ("plain", False, [("plain", "raw")]),
    ("a%2527b", False, [("a%2527b", "raw"), ("a'b", "percent2")]),
    ("a+b", True, [("a+b", "raw"), ("a b", "plus")]),
    ("a+b", False, [("a+b", "raw")]),
    ("&#60;b&#62;", False, [("&#60;b&#62;", "raw"), ("<b>", "html")]),
    (b64("hello there"), False, [(b64("hello there"), "raw"), ("hello there", "base64")]),
    (base64.b64encode(bytes(range(200, 240))).decode(), False, [(base64.b64encode(bytes(range(200, 240))).decode(), "raw")]),
    ("abcd" * 4, False, [("abcd" * 4, "raw")]),  # base64 alphabet, but decodes to bytes that are not text
])
def test_variants(value: str, plus: bool, expected: list[tuple[str, str]]) -> None:
    assert variants(value, plus=plus) == expected


XXE = '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>'
# values the detectors leave to the rules and the model, which the fallback rules read: an uploaded file, a body no
# parser reads (XML sent as text; JSON sent as text/plain), a header not in payload.headers
UNPARSED = [
    (record("/upload", method="POST", headers=[["Content-Type", f"multipart/form-data; boundary={BOUNDARY}"]],
            body=multipart([("note", "hello", None), ("file", XXE, "a.xml")])), "block-xml-external-entities"),
    (record("/note", method="POST", headers=[["Content-Type", "text/plain"]], body="see the attached request: " + XXE), "block-xml-external-entities"),
    (record("/beacon", method="POST", headers=[["Content-Type", "text/plain;charset=UTF-8"]],
            body=json.dumps({"note": "see our notes on contributing, reporting issues and asking questions in the forum", "path": "../../../../etc/passwd"})),
     "block-path-traversal"),
    (record("/", headers=[["X-Note", "<script>alert(1)</script>"]]), "block-xss"),
]


@pytest.mark.parametrize("rec,rule", UNPARSED, ids=range(len(UNPARSED)))
def test_the_fallback_reading_takes_every_value_the_request_holds(inspector: PayloadInspector, rec: dict[str, Any], rule: str) -> None:
    cfg = config()
    reader = PayloadInspector(cfg, signatures_for(cfg, cfg.rules.fallback_files), fallback=True)
    f = from_record(rec)
    assert inspector.inspect(f) == ()
    assert rule in reader.matched(f)


def test_the_fallback_reading_judges_each_value_as_the_detectors_do(inspector: PayloadInspector) -> None:
    cfg = config(payload={"enabled": False, "detectors": ["libinjection-sqli"], "max_values": 1, "max_value_bytes": 16})
    reader = PayloadInspector(cfg, signatures_for(cfg, cfg.rules.fallback_files), fallback=True)
    for rec in BENIGN:
        assert reader.matched(from_record(rec)) == frozenset(), rec
    # whatever payload switches off or caps: a late value, a long one
    late = from_record(record("/search?a=1&b=2&q=" + quote("x " * 40 + "' union select password from users--")))
    assert reader.matched(late) == {"block-sql-injection"}
    assert inspector.matched(late) == {"block-sql-injection"} and reader.matched(from_record(record("/search?q=union+select+meaning"))) == frozenset()


# ---------------------------------------------------------------------------------------------------- bounds and config

def test_a_value_is_inspected_up_to_its_cap() -> None:
    cfg = config(payload={"max_value_bytes": 64})
    inspector = PayloadInspector(cfg, signatures_for(cfg))
    early = record("/search?q=" + quote(SQLI + " " + "x" * 200))
    late = record("/search?q=" + quote("x " * 100 + SQLI))
    assert inspector.inspect(from_record(early))
    assert inspector.inspect(from_record(late)) == ()


def test_values_past_the_count_cap_are_skipped() -> None:
    cfg = config(payload={"max_values": 3})
    inspector = PayloadInspector(cfg, signatures_for(cfg))
    assert inspector.inspect(from_record(record("/?a=1&b=2&q=" + quote(SQLI))))
    assert inspector.inspect(from_record(record("/?a=1&b=2&c=3&q=" + quote(SQLI)))) == ()


def test_a_body_is_inspected_on_its_prefix_and_a_longer_one_is_counted() -> None:
    cfg = config(payload={"max_body_bytes": "1KiB"})
    inspector = PayloadInspector(cfg, signatures_for(cfg))
    within = "comment=" + quote(SQLI) + "&pad=" + "x" * 3000
    beyond = "pad=" + "x" * 3000 + "&comment=" + quote(SQLI)
    before = TRUNCATED.get()
    assert inspector.inspect(from_record(record("/p", method="POST", headers=[["Content-Type", FORM]], body=within)))
    assert inspector.inspect(from_record(record("/p", method="POST", headers=[["Content-Type", FORM]], body=beyond))) == ()
    assert TRUNCATED.get() == before + 2


@pytest.mark.parametrize("payload,message", [
    ({"max_body_bytes": "1MiB"}, "payload.max_body_bytes: must be between 0 and 65536 (got 1048576)"),
    ({"detectors": ["libinjection-sqli", "regex"]}, "payload.detectors: 'regex' is not one of libinjection-sqli, libinjection-xss, signatures"),
    ({"headers": ["Referer"]}, "payload.headers: 'Referer' is not a lower-case header name (a trailing * matches a prefix, e.g. x-api-*)"),
    ({"max_values": 0}, "payload.max_values: must be > 0 (got 0)"),
])
def test_bad_payload_config_is_rejected_with_every_problem(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(configmod.ConfigError) as exc:
        config(payload=payload)
    assert message in exc.value.problems


@pytest.mark.parametrize("detectors,location", [(["libinjection-sqli"], "query:q"), (["signatures"], "query:q"), (["libinjection-xss"], None)])
def test_detectors_can_be_switched_off(detectors: list[str], location: str | None) -> None:
    cfg = config(payload={"detectors": detectors})
    hits = PayloadInspector(cfg, signatures_for(cfg)).inspect(from_record(record("/s?q=" + quote(SQLI))))
    assert [h.location for h in hits[:1]] == ([location] if location else [])
    assert all(h.detector == ("signatures" if detectors == ["signatures"] else "libinjection") for h in hits)


# ---------------------------------------------------------------------------------------------------- the pipeline

def test_the_pipeline_reads_the_larger_body_prefix_and_blocks_without_a_model() -> None:
    pipeline = build(config())
    assert pipeline.body_prefix_bytes == 16 * 1024 and pipeline.inspector is not None
    verdict = pipeline.decide(from_record(record("/p", method="POST", headers=[["Content-Type", FORM]], body="c=" + quote(SQLI))))
    assert isinstance(verdict, Verdict)
    assert (verdict.action, verdict.source, verdict.status) == (Action.BLOCK, Source.DETECTOR, 403)
    assert verdict.payload and verdict.payload[0].location == "form:c"
    assert verdict.explanation == tuple(h.describe() for h in verdict.payload)
    # nothing reads a body: no detectors, no form kept, no login watch
    assert build(config(payload={"enabled": False}, challenge={"dev_generate_secret": True, "keep_form_bytes": 0},
                        clients={"logins": {"enabled": False}})).body_prefix_bytes == 0
    # the login watch alone reads a login form's fields
    assert build(config(payload={"enabled": False}, challenge={"dev_generate_secret": True, "keep_form_bytes": 0})).body_prefix_bytes == 4096


@pytest.mark.parametrize("inspected", [False, True])
def test_an_allow_rule_wins_unless_it_says_inspect_true(tmp_path: Path, inspected: bool) -> None:
    allow = tmp_path / "allow.yaml"
    allow.write_text("rules:\n  - name: allow-admin-tools\n    path: /admin/**\n    action: allow\n" + ("    inspect: true\n" if inspected else ""))
    pipeline = build(config(rules={"files": [str(allow)]}))
    plain = pipeline.decide(from_record(record("/admin/sql?q=orders")))
    assert isinstance(plain, Verdict) and plain.action is Action.FORWARD and plain.rule == "allow-admin-tools"
    allowed = pipeline.decide(from_record(record("/admin/sql?q=" + quote(SQLI))))
    assert isinstance(allowed, Verdict)
    if inspected:  # the path is a claim anyone can make: what it lets through is read
        assert allowed.action is Action.BLOCK and allowed.source is Source.DETECTOR and allowed.payload[0].location == "query:q"
    else:  # an SQL console's callers, trusted with any payload: the operator's allow wins
        assert allowed.action is Action.FORWARD and allowed.rule == "allow-admin-tools"
    other = pipeline.decide(from_record(record("/shop?q=" + quote(SQLI))))
    assert isinstance(other, Verdict) and other.source is Source.DETECTOR


def test_shadow_mode_forwards_and_keeps_the_evidence() -> None:
    pipeline = build(config(policy={"shadow": True}))
    features = from_record(record("/s?q=" + quote(SQLI)))
    verdict = pipeline.decide(features)
    assert isinstance(verdict, Verdict)
    assert (verdict.action, verdict.source, verdict.shadow_action) == (Action.FORWARD, Source.SHADOW, Action.BLOCK)
    assert verdict.payload and verdict.payload[0].location == "query:q"
    line = json.loads(decisionlog.encode_line(features, verdict, 200, 0.0))
    assert line == json.loads(json.dumps(decisionlog.line_of(features, verdict, 200, 0.0)))
    assert line["payload"][0] == {"detector": verdict.payload[0].detector, "kind": verdict.payload[0].kind, "location": "query:q",
                                  "fragment": verdict.payload[0].fragment, "decoding": "percent"}
    assert line["shadow_action"] == "block"


def test_replay_decides_with_the_detectors_and_tallies_them_by_detector() -> None:
    from gateway.tools.replay import LogRequest, Replayer

    replayer = Replayer(config(model={"enabled": False}), use_model=False)
    for i, target in enumerate(["/search?q=" + quote(SQLI), "/search?q=" + quote("1' or '2'='2' --"), "/search?q=shoes"]):
        replayer.feed(LogRequest(record(target), float(i), 200, "record"))
    replayer.flush()
    assert replayer.tally.by_rule["payload detector: libinjection sqli"]["block"] == 2
    assert replayer.tally.sources["detector"] == 2


def test_eval_decides_with_the_detectors_as_the_pipeline_does(tmp_path: Path) -> None:
    from gateway.tools import evaluate as ev
    from tests.gateway.test_evaluate import FakeScorer  # answers "human" for /page

    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: score-the-rest\n    action: score\n")
    attack = {**record("/page/9", method="POST", headers=[["Content-Type", FORM]], body="comment=" + quote(SQLI)), "label": "attack"}
    person = {**record("/page/9", method="POST", headers=[["Content-Type", FORM]], body="comment=" + quote("O'Brien -- select a size")),
              "label": "human"}
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in (attack, person)) + "\n")
    cfg = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"files": [str(rules)]}}, str(tmp_path / "c.yaml"))
    out = ev.evaluate(ev.read_rows(data, ev.Skipped()), cfg, FakeScorer())
    assert out["payload_hits"] == {"libinjection/sqli": 1}
    for system in ("rules_model", "rules_only"):
        assert out["systems"][system]["matrix"]["attack"]["block"] == 1
        assert out["systems"][system]["matrix"]["human"]["block"] == 0
    assert out["systems"]["model"]["matrix"]["attack"]["block"] == 0  # the model alone is not asked the detectors' question


# ---------------------------------------------------------------------------------------------------- end to end

def _gateway_config(upstream: str, tmp: Path, *, model: bool, **extra: Any) -> dict[str, Any]:
    return config_for(upstream, rules=RULES, model={"enabled": model}, challenge={"dev_generate_secret": True},
                      logging={"level": "info", "access_log": "-", "debug_headers": True},
                      decision_log={"path": str(tmp / "decisions.jsonl")}, **extra)


@pytest.fixture(scope="module", params=[False, True], ids=["model-off", "model-on"])
def gw(request: pytest.FixtureRequest, origin_a: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("payload-e2e")
    gateway = Gateway(tmp / "gw", _gateway_config(origin_a.url, tmp, model=request.param), ready_timeout=120)
    try:
        yield gateway
    finally:
        gateway.stop()


BROWSER = {"User-Agent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
           "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "Accept-Language": "en-US,en;q=0.9",
           "Accept-Encoding": "gzip, deflate, br", "X-Forwarded-For": "203.0.113.77"}
ATTACKS = [
    ("form-sqli", {"Content-Type": FORM}, "name=Ann&comment=" + quote(SQLI), "form:comment"),
    ("form-xss", {"Content-Type": FORM}, "name=Ann&comment=" + quote(XSS), "form:comment"),
    ("json-sqli", {"Content-Type": "application/json"}, json.dumps({"order": {"note": SQLI}}), "json:$.order.note"),
    ("json-xss", {"Content-Type": "application/json"}, json.dumps({"bio": XSS}), "json:$.bio"),
    ("multipart-sqli", {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}, multipart([("q", SQLI, None)]), "multipart:q"),
    ("multipart-xss", {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}, multipart([("caption", XSS, None)]), "multipart:caption"),
    ("cookie-sqli", {"Cookie": "theme=dark; sid=" + quote(SQLI)}, None, "cookie:sid"),
    ("cookie-xss", {"Cookie": "theme=" + quote(XSS)}, None, "cookie:theme"),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name,headers,body,location", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_a_payload_in_a_body_or_cookie_is_blocked(gw: Gateway, name: str, headers: dict[str, str], body: str | None, location: str) -> None:
    r = httpx.request("POST" if body is not None else "GET", gw.url + "/account", headers={**BROWSER, **headers},
                      content=body.encode() if body is not None else None, timeout=30)
    assert r.status_code == 403, r.text[:300]
    assert r.headers["X-Clefgate-Verdict"] == "block" and r.headers["X-Clefgate-Source"] == "detector"
    assert location in r.headers["X-Clefgate-Reason"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("headers,body", [
    ({"Content-Type": FORM}, "name=" + quote("Seán O'Brien") + "&comment=" + quote("Please select a size -- the blue one")),
    ({"Content-Type": "application/json"}, json.dumps({"name": "D'Arcy", "note": "leave it at the door; or ring twice"})),
    ({"Cookie": "theme=dark; last=O%27Brien"}, None),
], ids=["form", "json", "cookie"])
def test_benign_look_alikes_are_forwarded(gw: Gateway, headers: dict[str, str], body: str | None) -> None:
    r = httpx.request("POST" if body is not None else "GET", gw.url + "/account", headers={**BROWSER, **headers},
                      content=body.encode() if body is not None else None, timeout=30)
    assert r.headers["X-Clefgate-Source"] != "detector", r.headers.get("X-Clefgate-Reason")


@pytest.mark.timeout(240)
def test_a_body_past_the_limit_is_streamed_on_not_buffered(gw: Gateway) -> None:
    size = 200 * 1024
    # the payload sits past the first 16 KiB: the gateway decides on the prefix and streams the rest unread
    body = ("pad=" + "x" * (20 * 1024) + "&comment=" + quote(SQLI)).ljust(size, "y").encode()
    before = _metric(gw, "clefgate_payload_body_truncated_total")
    r = httpx.post(gw.url + "/sink", headers={**BROWSER, "Content-Type": FORM}, content=body, timeout=30)
    assert r.headers["X-Clefgate-Source"] != "detector", r.headers.get("X-Clefgate-Reason")
    if r.headers["X-Clefgate-Source"] != "model":  # the model judges such a body on its own; without it, it reaches the origin whole
        assert r.status_code == 200 and r.json()["received"] == size
    assert _metric(gw, "clefgate_payload_body_truncated_total") == before + 1


def test_shadow_mode_forwards_and_logs_the_hit(origin_a: Any, tmp_path: Path) -> None:
    with_shadow = _gateway_config(origin_a.url, tmp_path, model=False, policy={"shadow": True})
    gateway = Gateway(tmp_path / "gw", with_shadow)
    try:
        r = httpx.get(gateway.url + "/search?q=" + quote(SQLI), headers=BROWSER, timeout=30)
        assert r.status_code == 200 and r.headers["X-Clefgate-Verdict"] == "forward"
        assert r.headers["X-Clefgate-Source"] == "shadow"
    finally:
        gateway.stop()
    lines = [json.loads(line) for line in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    logged = [line for line in lines if line.get("payload")]
    assert logged and logged[0]["shadow_action"] == "block"
    assert logged[0]["payload"][0]["location"] == "query:q" and logged[0]["payload"][0]["decoding"] == "percent"


def _metric(gw: Gateway, name: str) -> float:
    for line in gw.metrics().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_json_values_keep_escaped_pairs_whole_and_mark_lone_halves() -> None:
    from gateway.payload.locations import json_values
    from gateway.rules.inputs import inputs_text
    from tests.conftest import make_features
    got = {where: value for where, value, *_ in json_values(rb'{"a": "\ud83d\ude4c ok", "b": "x\ud800", "\udc00": 1}')}
    assert got == {"json:$.a": "\U0001f64c ok", "json:$.b": "x\ufffd", 'json:$["\\udc00"] (key)': "\ufffd"}
    body = rb'{"q": "\ud83d\ude4c \u0027 or 1=1--", "r": "\uDBFF"}'
    text = inputs_text(make_features(method="POST", body=body, headers=[("Host", "a"), ("Content-Type", "application/json")]))
    assert "\U0001f64c ' or 1=1--" in text and "\ufffd" in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


JSON_TYPE = [["Content-Type", "application/json"]]
FORM_TYPE = [["Content-Type", "application/x-www-form-urlencoded"]]
STRUTS = ("%{(#_='multipart/form-data').(#dm=@ognl.OgnlContext@DEFAULT_MEMBER_ACCESS).(#_memberAccess?(#_memberAccess=#dm):"
          "((#container=#context['com.opensymphony.xwork2.ActionContext.container'])))}")
XML_DECODER = ('<soapenv:Envelope><soapenv:Header><work:WorkContext><java version="1.8" class="java.beans.XMLDecoder">'
               '<void class="java.lang.ProcessBuilder"><array class="java.lang.String" length="1"><void index="0"><string>id</string>'
               '</void></array><void method="start"/></void></java></work:WorkContext></soapenv:Header></soapenv:Envelope>')
# where well-known exploits put their payload: an XML or YAML document (what its parser acts on), a name or key that walks
# the application's object graph, a JSON key that is a query operator, the Content-Type a framework parses
WHERE_EXPLOITS_LIVE = [
    ("XXE in an XML body", record("/api/orders", method="POST", headers=[["Content-Type", "application/xml"]], body=XXE),
     "xml-external-entities", "xml"),
    ("XXE in a SOAP body", record("/ws", method="POST", headers=[["Content-Type", "application/soap+xml; charset=utf-8"]],
                                  body=XXE.replace("<r>", "<soap:Envelope>")), "xml-external-entities", "xml"),
    ("an XMLDecoder document", record("/wls-wsat/CoordinatorPortType", method="POST", headers=[["Content-Type", "text/xml"]],
                                      body=XML_DECODER), "code-injection", "xml"),
    ("a YAML deserialisation tag", record("/api/config", method="POST", headers=[["Content-Type", "application/x-yaml"]],
                                          body="!!python/object/apply:os.system ['id']"), "code-injection", "yaml"),
    ("a query operator for a password", record("/login", method="POST", headers=JSON_TYPE,
                                                body='{"username": "admin", "password": {"$ne": null}}'),
     "nosql-injection", 'json:$.password["$ne"] (key)'),
    ("server-side JavaScript in JSON", record("/api/find", method="POST", headers=JSON_TYPE, body='{"$where": "sleep(5000) || true"}'),
     "nosql-injection", 'json:$["$where"] (key)'),
    ("prototype pollution in JSON", record("/api/merge", method="POST", headers=JSON_TYPE, body='{"__proto__": {"isAdmin": true}}'),
     "code-injection", "json:$.__proto__ (key)"),
    ("constructor.prototype in JSON", record("/api/merge", method="POST", headers=JSON_TYPE,
                                             body='{"constructor": {"prototype": {"isAdmin": true}}}'),
     "code-injection", "json:$.constructor.prototype (key)"),
    ("prototype pollution in a query name", record("/?__proto__.isAdmin=true"), "code-injection", "query:__proto__.isAdmin (name)"),
    ("Spring4Shell's form names", record("/greeting", method="POST", headers=FORM_TYPE,
                                         body="class.module.classLoader.resources.context.parent.pipeline.first.suffix=.jsp"),
     "code-injection", "form:class.module.classLoader.resources.context.parent.pipeline.first (name)"),  # a name is shown cut
    ("OGNL in a Content-Type", record("/upload.action", method="POST", headers=[["Content-Type", STRUTS]], body="a=1"),
     "template-injection", "header:content-type"),
    ("XXE whatever the type says", record("/api/orders", method="POST", headers=[["Content-Type", "text/plain"]], body=XXE),
     "xml-external-entities", "xml"),
    ("XXE under an upper-case type", record("/ws", method="POST", headers=[["Content-Type", "Application/XML"]], body=XXE),
     "xml-external-entities", "xml"),
    ("XXE in UTF-16", {**record("/ws", method="POST", headers=[["Content-Type", "application/xml"]]),
                       "body_bytes": XXE.encode("utf-16")}, "xml-external-entities", "xml"),
    ("XXE after a long comment", record("/ws", method="POST", headers=[["Content-Type", "application/xml"]],
                                        body='<?xml version="1.0"?><!--' + "x" * 6000 + "-->" + XXE[21:]), "xml-external-entities", "xml"),
    ("XXE in UTF-16 without a byte-order mark", {**record("/ws", method="POST", headers=[["Content-Type", "application/xml"]]),
                                                 "body_bytes": XXE.encode("utf-16-le")}, "xml-external-entities", "xml"),
    ("XXE after a comment, sent as text", record("/ws", method="POST", headers=[["Content-Type", "text/plain"]],
                                                 body="<!-- order -->" + XXE[21:]), "xml-external-entities", "xml"),
    ("an entity with a name not in ASCII", record("/ws", method="POST", headers=[["Content-Type", "application/xml"]],
                                                  body='<!DOCTYPE r [<!ENTITY \u00e9 SYSTEM "file:///etc/passwd">]><r>&\u00e9;</r>'),
     "xml-external-entities", "xml"),
    ("XInclude under another prefix", record("/ws", method="POST", headers=[["Content-Type", "application/xml"]],
                                             body='<r><x:include xmlns:x="http://www.w3.org/2001/XInclude" href="file:///etc/passwd" '
                                                  'parse="text"/></r>'), "xml-external-entities", "xml"),
    ("a class spelt with character references", record("/wls-wsat/x", method="POST", headers=[["Content-Type", "text/xml"]],
                                                        body='<java><object class="java.lang.&#80;rocessBuilder"><void method="&#115;tart"/>'
                                                             '</object></java>'), "code-injection", "xml"),
    ("an XStream gadget", record("/struts2-rest-showcase/orders/3", method="POST", headers=[["Content-Type", "application/xml"]],
                                 body="<map><entry><jdk.nashorn.internal.objects.NativeString><flags>0</flags></jdk.nashorn.internal.objects"
                                      ".NativeString></entry></map>"), "code-injection", "xml"),
    ("a YAML tag written out", record("/api/config", method="POST", headers=[["Content-Type", "application/yaml"]],
                                      body="!<tag:yaml.org,2002:python/object/apply:os.system> ['id']"), "code-injection", "yaml"),
    ("a YAML tag percent-escaped", record("/api/config", method="POST", headers=[["Content-Type", "application/yaml"]],
                                          body="!!python%2Fobject/apply:os.system ['id']"), "code-injection", "yaml"),
    ("a YAML tag directive", record("/api/config", method="POST", headers=[["Content-Type", "application/yaml"]],
                                    body="%TAG !p! tag:yaml.org,2002:\n---\n!p!python/object/apply:os.system ['id']"), "code-injection", "yaml"),
    ("a Java class as a YAML tag", record("/api/config", method="POST", headers=[["Content-Type", "application/yaml"]],
                                          body="!<tag:yaml.org,2002:com.sun.rowset.JdbcRowSetImpl>\ndataSourceName: ldap://x/a"),
     "code-injection", "yaml"),
    ("a template expression in YAML", record("/api/config", method="POST", headers=[["Content-Type", "application/yaml"]],
                                             body='x: "{{ config.__class__.__init__.__globals__ }}"'), "template-injection", "yaml"),
    ("Spring4Shell's multipart names", record("/greeting", method="POST",
                                              headers=[["Content-Type", f"multipart/form-data; boundary={BOUNDARY}"]],
                                              body=multipart([("class.module.classLoader.resources.context.parent.pipeline.first.suffix",
                                                               ".jsp", None)])),
     "code-injection", "multipart:class.module.classLoader.resources.context.parent.pipeline.first (name)"),
]


@pytest.mark.parametrize("name,rec,kind,location", WHERE_EXPLOITS_LIVE, ids=[c[0] for c in WHERE_EXPLOITS_LIVE])
def test_the_detectors_read_where_well_known_exploits_put_their_payload(inspector: PayloadInspector, name: str, rec: dict[str, Any],
                                                                        kind: str, location: str) -> None:
    rec = dict(rec)
    raw = rec.pop("body_bytes", None)
    f = from_record(rec)
    if raw is not None:
        f = dataclasses.replace(f, body_prefix=raw, content_length=len(raw))
    hits = inspector.inspect(f)
    assert (hits[0].kind, hits[0].location) == (kind, location), hits


# the same places holding what applications send every day: read, and nothing found
DOCUMENTS_AND_NAMES = [
    ("a SOAP call", "application/soap+xml", '<?xml version="1.0"?><soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope">'
     '<soap:Body><m:GetPrice><m:Item>Apples -- fresh, "organic" and cheap</m:Item></m:GetPrice></soap:Body></soap:Envelope>'),
    ("an SVG with its DTD", "image/svg+xml", '<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
     '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd"><svg xmlns="http://www.w3.org/2000/svg"><text>He said "yes" and left '
     '<!-- a note --></text></svg>'),
    ("a feed about code", "application/rss+xml", "<rss><channel><title>Q&amp;A: SELECT * FROM t where a = '1' -- why</title>"
     "<item><title>Runtime.exec() and ProcessBuilder in Java</title><description>&lt;!ENTITY explained</description></item></channel></rss>"),
    ("a YAML config", "application/yaml", 'name: demo\nversion: 2\ndeps:\n  - redis\n  - {name: pg, tag: "16"}\n'),
    ("JSON Schema keys", "application/json", '{"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "$ref": "#/$defs/a"}'),
    ("MongoDB extended JSON", "application/json", '{"_id": {"$oid": "5f1d7f0e2c"}, "at": {"$date": "2024-01-01T00:00:00Z"}}'),
    ("keys named like objects", "application/json", '{"constructor": "Ferrari", "prototype": "SF-24", "class": "F1"}'),
    ("form names with dots", "application/x-www-form-urlencoded", "class=economy&classroom=3&user.name=ana&address.city=Lyon"),
    ("a Jenkins job", "application/xml", "<flow-definition><definition><script>node { def p = Runtime.getRuntime() }</script>"
     "</definition></flow-definition>"),
    ("a Spring context", "application/xml", '<beans><bean id="ds"><property name="url" value="jdbc:postgresql://db:5432/app"/></bean></beans>'),
    ("a Helm values file", "application/yaml", 'image: "{{ .Values.image.repository }}"\nsecret: {{ lookup "v1" "Secret" "ns" "x" }}\n'),
    ("DocBook with XInclude declared", "application/xml", '<book xmlns:xi="http://www.w3.org/2001/XInclude"><title>A</title></book>'),
    ("an XHTML page with internal entities", "application/xhtml+xml", '<!DOCTYPE html [<!ENTITY nbsp "&#160;">]><html><p>a&nbsp;b</p></html>'),
    ("an Illustrator SVG", "image/svg+xml", '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd" '
     '[<!ENTITY ns_svg "http://www.w3.org/2000/svg">]><svg xmlns="&ns_svg;"/>'),
    ("a feed quoting PHP", "application/rss+xml", "<rss><item><description>read php://stdin in a CLI script</description></item></rss>"),
    ("a purchase order with its DTD", "text/xml", '<?xml version="1.0"?><!DOCTYPE cXML SYSTEM '
     '"http://xml.cxml.org/schemas/cXML/1.2.014/cXML.dtd"><cXML><Request/></cXML>'),
    ("a property list", "application/xml", '<!DOCTYPE plist SYSTEM "file://localhost/System/Library/DTDs/PropertyList.dtd"><plist/>'),
    ("a project file", "application/xml", '<Project><ItemGroup><PackageReference Include="System.Diagnostics.Process" '
     'Version="4.3.0"/></ItemGroup></Project>'),
    ("DocBook that includes its chapters", "application/xml", '<book xmlns:xi="http://www.w3.org/2001/XInclude">'
     '<xi:include href="ch1.xml"/></book>'),
    ("a feed quoting markup", "application/atom+xml", '<entry><content type="text">&lt;!ENTITY x SYSTEM "file:///etc/passwd"&gt; '
     'explained</content><link href="/s?x=%3Cxi%3Ainclude"/></entry>'),
    ("hyperparameters as PyYAML dumps them", "application/yaml", "lr: 0.01\nbetas: !!python/tuple\n- 0.9\n- 0.999\n"),
    ("a CouchDB query", "application/json", '{"selector": {"year": {"$gt": 2010}, "$or": [{"a": 1}, {"b": {"$exists": true}}]}}'),
    ("a Parse query", "application/json", '{"where": {"score": {"$gte": 1000}, "name": {"$regex": "^a"}}, "_method": "GET"}'),
    ("filters on fields named like secrets' neighbours", "application/json",
     '{"shipping": {"$gt": 10}, "tokens": {"$gt": 100}, "spin": {"$lt": 3}, "email": {"$regex": "^a"}}'),
    ("Strapi filters", "application/x-www-form-urlencoded", "filters[title][$eq]=hello&filters[price][$gt]=10&pagination[page]=1"),
]


@pytest.mark.parametrize("name,ctype,body", DOCUMENTS_AND_NAMES, ids=[c[0] for c in DOCUMENTS_AND_NAMES])
def test_documents_keys_and_names_of_everyday_requests_hold_no_evidence(inspector: PayloadInspector, name: str, ctype: str,
                                                                        body: str) -> None:
    f = from_record(record("/api/things", method="POST", headers=[["Content-Type", ctype]], body=body))
    assert inspector.inspect(f) == ()
    # the same Content-Types, read as a header, are no evidence either
    assert inspector.inspect(from_record(record("/x", method="POST", headers=[["Content-Type", ctype + "; charset=UTF-8"]], body="a"))) == ()



def test_a_documents_reading_is_never_remembered_for_a_value_of_the_same_text() -> None:
    """Documents are read by their own signatures only: a short XML body must not teach the value detectors' memory
    that its text is harmless (the same text in a JSON value is SQL injection)."""
    cfg = config()
    fresh = PayloadInspector(cfg, signatures_for(cfg))
    sql = "1' OR '1'='1' --"
    assert fresh.inspect(from_record(record("/x", method="POST", headers=[["Content-Type", "text/xml"]], body=sql))) == ()
    hits = fresh.inspect(from_record(record("/x", method="POST", headers=JSON_TYPE, body=json.dumps({"q": sql}))))
    assert hits and hits[0].kind == "sqli" and hits[0].location == "json:$.q"


def test_a_text_upload_in_utf16_is_not_taken_for_a_document(inspector: PayloadInspector) -> None:
    text = "Use System.Diagnostics.Process to start a program; see <Process> in the docs.".encode("utf-16")
    f = dataclasses.replace(from_record(record("/upload", method="POST", headers=[["Content-Type", "application/octet-stream"]])),
                            body_prefix=text, content_length=len(text))
    assert inspector.inspect(f) == ()


@pytest.mark.parametrize("name,rec", [
    ("a query operator for a password", record("/login", method="POST", headers=JSON_TYPE, body='{"userPassword": {"$ne": null}}')),
    ("a hashed password", record("/login", method="POST", headers=JSON_TYPE, body='{"password_hash": {"$gt": ""}}')),
    ("a reset token", record("/reset", method="POST", headers=JSON_TYPE, body='{"resetToken": {"$ne": null}}')),
    ("an operator type", record("/login", method="POST", headers=JSON_TYPE, body='{"password": {"$type": "string"}}')),
    ("a PIN by remainder", record("/verify", method="POST", headers=JSON_TYPE, body='{"user_pin": {"$mod": [2, 0]}}')),
    ("a form's brackets", record("/login", method="POST", headers=FORM_TYPE, body="username%5B%24ne%5D=x&password%5B%24ne%5D=x")),
    ("a nested form's brackets", record("/login", method="POST", headers=FORM_TYPE, body="user[password][$regex]=.*")),
    ("server-side JavaScript", record("/api/find?q[$where]=sleep(100)")),
])
def test_nosql_injection_is_an_operator_in_place_of_a_secret_or_server_side_javascript(inspector: PayloadInspector, name: str,
                                                                                      rec: dict[str, Any]) -> None:
    hits = inspector.inspect(from_record(rec))
    assert hits and hits[0].kind == "nosql-injection", hits
