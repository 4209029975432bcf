"""The operator's console: its ring and per-minute counts, filters, lookup, overrides, sessions and CSRF (unit tests),
and the console app over HTTP (a real aiohttp server on a socket) with a stand-in for the gateway's control."""

from __future__ import annotations

import hashlib
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, CookieJar, web

from gateway import config as configmod
from gateway import console
from gateway.console import Filters, Override, Overrides, Recorder, csrf_of, merge_live, new_session, parse_override, session_ok
from gateway.pipeline import Pipeline
from gateway.verdict import Action, PayloadHit, Source, Verdict
from tests.conftest import make_features
from tests.harness import free_port

ROOT = Path(__file__).resolve().parents[2]
SECRET = "console-secret-" + "s" * 24


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


FORWARD = Verdict(Action.FORWARD, Source.RULE, "rule allow-assets", rule="allow-assets")
CHALLENGE = Verdict(Action.CHALLENGE, Source.MODEL, "default policy: P(bad_bot)+P(attack)=0.7 >= 0.5", difficulty=16,
                    probabilities={"class": {"human": 0.3, "bad_bot": 0.6, "attack": 0.1}}, policy="default", model="clef-flash@1.7.0")
BLOCK = Verdict(Action.BLOCK, Source.DETECTOR, "libinjection found sqli in query:id", rule="block-sql-injection",
                payload=(PayloadHit("libinjection", "sqli", "query:id", "1' OR '1'='1", "percent"),))
SHADOW = Verdict(Action.FORWARD, Source.SHADOW, "shadow mode; would block: x", shadow_action=Action.BLOCK, rule="r")


def traffic(rec: Recorder) -> None:
    rec.observe(make_features("GET", "/style.css", client_ip="203.0.113.1", request_id="r-1"), FORWARD, 200)
    rec.observe(make_features("GET", "/shop", client_ip="203.0.113.2", request_id="r-2"), CHALLENGE, 403)
    rec.observe(make_features("GET", "/item?id=1%27%20OR", client_ip="198.51.100.9", request_id="r-3"), BLOCK, 403)
    rec.observe(make_features("GET", "/admin", client_ip="198.51.100.9", request_id="r-4"), SHADOW, 200)


# ----------------------------------------------------------------------------- ring, counts, filters, lookup

def test_the_ring_keeps_the_newest_decisions_within_its_bound() -> None:
    rec = Recorder(size=3)
    for i in range(5):
        rec.observe(make_features("GET", f"/p{i}", request_id=f"r-{i}"), FORWARD, 200)
    assert [d["request_id"] for d in rec.decisions(Filters(), 10)["items"]] == ["r-4", "r-3", "r-2"]
    assert rec.lookup("r-1") is None and rec.lookup("r-3") is not None
    rec.resize(5)
    rec.observe(make_features("GET", "/p5", request_id="r-5"), FORWARD, 200)
    assert len(rec.ring) == 4 and rec.ring.maxlen == 5


@pytest.mark.parametrize(("filters", "expected"), [
    (Filters(), ["r-4", "r-3", "r-2", "r-1"]),
    (Filters(verdict="block"), ["r-4", "r-3"]),  # the shadow decision would have blocked: it is found too
    (Filters(verdict="challenge"), ["r-2"]),
    (Filters(source="detector"), ["r-3"]),
    (Filters(rule="SQL"), ["r-3"]),
    (Filters(client="198.51.100."), ["r-4", "r-3"]),
    (Filters(path="/shop"), ["r-2"]),
    (Filters(path="id=1"), ["r-3"]),
    (Filters(verdict="forward", client="203.0.113.1"), ["r-1"]),
    (Filters(verdict="block", path="/shop"), []),
])
def test_filters(filters: Filters, expected: list[str]) -> None:
    rec = Recorder()
    traffic(rec)
    assert [d["request_id"] for d in rec.decisions(filters, 100)["items"]] == expected


def test_long_answers_come_in_pages_small_enough_for_the_workers_pipe() -> None:
    """A worker's answer crosses the supervisor's pipe (64 KiB buffer): lists come in pages under ANSWER_BYTES."""
    rec = Recorder(size=500)
    big = [("Host", "shop.example"), ("User-Agent", "x" * 5000), ("Cookie", "c" * 20000), *[(f"X-H{i}", "v" * 900) for i in range(80)]]
    for i in range(300):
        rec.observe(make_features("GET", f"/p{i}?" + "q" * 5000, big, request_id=f"r-{i}"), FORWARD, 200)
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        page = rec.decisions(Filters(), 250 - len(seen), before, headers=True)
        assert len(pickle.dumps(page)) < 40 * 1024
        seen += [d["request_id"] for d in page["items"]]
        pages += 1
        if not page["more"]:
            break
        before = page["items"][-1]["time"]
    assert pages > 1 and seen == [f"r-{i}" for i in range(299, 49, -1)]
    one = rec.lookup("r-7")
    assert one is not None and len(pickle.dumps(one)) < 40 * 1024 and one["headers"][0] == ["Host", "shop.example"]


def test_filters_from_a_query_ignore_unknown_keys_and_trim() -> None:
    f = Filters.of({"verdict": " block ", "client": "1.2.3.4", "other": "x"})
    assert f == Filters(verdict="block", client="1.2.3.4") and f.as_query() == {"verdict": "block", "client": "1.2.3.4"}


def test_a_looked_up_decision_carries_its_full_explanation() -> None:
    rec = Recorder()
    traffic(rec)
    d = rec.lookup("r-3")
    assert d is not None
    assert d["verdict"] == "block" and d["source"] == "detector" and d["rule"] == "block-sql-injection" and d["reason_class"] == "attack"
    assert d["payload"] == [{"detector": "libinjection", "kind": "sqli", "location": "query:id", "fragment": "1' OR '1'='1",
                             "decoding": "percent", "text": BLOCK.payload[0].describe()}]
    challenged = rec.lookup("r-2")
    assert challenged is not None and challenged["probabilities"] == {"class": {"human": 0.3, "bad_bot": 0.6, "attack": 0.1}}
    assert challenged["policy"] == "default" and challenged["difficulty"] == 16 and challenged["p_bot"] == pytest.approx(0.6)
    json.dumps(d)  # plain data: it crosses the supervisor's pipe and goes out as JSON


def test_per_minute_counts_cover_the_last_hour_only() -> None:
    clock = Clock()
    rec = Recorder(clock=clock)
    traffic(rec)
    clock.t += 60
    rec.observe(make_features("GET", "/a", request_id="r-9"), FORWARD, 200)
    live = rec.live()
    assert sorted(sum(c.values()) for _, c in live["minutes"]) == [1, 4]
    assert live["refused"]["rule"] == {"(model)": [1, 0], "block-sql-injection": [0, 1], "r": [0, 1]}
    assert live["refused"]["client"]["198.51.100.9"] == [0, 2]
    clock.t += 59 * 60  # the first minute is an hour old now
    live = rec.live()
    assert [sum(c.values()) for _, c in live["minutes"]] == [1] and "client" not in live["refused"]
    data = console.series(live, int(clock.t // 60))
    assert len(data["x"]) == 60 and data["series"]["forward/rule"][0] == pytest.approx(1 / 60, abs=1e-3)


def test_workers_answers_merge() -> None:
    a, b = Recorder(), Recorder()
    traffic(a)
    traffic(b)
    merged = merge_live([a.live(), b.live()])
    assert sum(sum(c.values()) for _, c in merged["minutes"]) == 8 and merged["workers"] == 2
    assert merged["refused"]["client"]["198.51.100.9"] == [0, 4]
    assert console.top(merged["refused"]["client"])[0] == ("198.51.100.9", 0, 4)


# ----------------------------------------------------------------------------- temporary allow / block

def test_overrides_match_by_network_newest_first_until_they_expire() -> None:
    clock = Clock()
    ov = Overrides(clock)
    assert ov.match(make_features(client_ip="203.0.113.7")) is None
    ov.replace([Override("a", "203.0.113.0/24", "block", clock.t + 60, "scraper", clock.t),
                Override("b", "203.0.113.7/32", "allow", clock.t + 600, "the customer who called", clock.t + 1)])
    allowed = ov.match(make_features(client_ip="203.0.113.7"))
    assert allowed is not None and allowed.action is Action.FORWARD and allowed.rule == "console-allow"
    blocked = ov.match(make_features(client_ip="::ffff:203.0.113.8"))
    assert blocked is not None and blocked.action is Action.BLOCK and "scraper" in blocked.reason
    assert ov.match(make_features(client_ip="2001:db8::1")) is None and ov.match(make_features(client_ip="not-an-ip")) is None
    clock.t += 61
    assert ov.match(make_features(client_ip="203.0.113.8")) is None
    assert [o.id for o in ov.entries] == ["b"]


@pytest.mark.parametrize(("body", "problem"), [
    ({"network": "203.0.113.0/33", "action": "block", "minutes": 5}, "network"),
    ({"network": "203.0.113.9", "action": "ban", "minutes": 5}, "action"),
    ({"network": "203.0.113.9", "action": "block", "minutes": 0}, "minutes"),
    ({"network": "203.0.113.9", "action": "block", "minutes": "soon"}, "minutes"),
    ({"network": "203.0.113.9", "action": "block", "minutes": 20000}, "minutes"),
])
def test_a_bad_override_is_refused_with_its_problem(body: dict[str, Any], problem: str) -> None:
    override, problems = parse_override(body, 0.0)
    assert override is None and problems and problems[0].startswith(problem)


def test_pipeline_consults_the_overrides_before_its_rules() -> None:
    class BlockAll:
        inspected: frozenset[str] = frozenset()

        def evaluate(self, features: Any) -> Verdict:
            return Verdict(Action.BLOCK, Source.RULE, "rule block-all", rule="block-all")

    clock = Clock()
    ov = Overrides(clock)
    pipeline = Pipeline(rules=BlockAll(), overrides=ov)
    assert pipeline.decide(make_features(client_ip="192.0.2.1")).rule == "block-all"  # type: ignore[union-attr]
    ov.replace([Override("x", "192.0.2.0/28", "allow", clock.t + 60, "", clock.t)])
    assert pipeline.decide(make_features(client_ip="192.0.2.1")).action is Action.FORWARD  # type: ignore[union-attr]
    assert pipeline.decide(make_features(client_ip="192.0.2.99")).rule == "block-all"  # type: ignore[union-attr]


def test_answer_puts_the_pushed_overrides_in_force() -> None:
    entry = {"id": "q", "network": "198.51.100.0/24", "action": "block", "expires": 4e9, "note": "", "created": 1.0}
    try:
        assert console.answer("overrides", [entry]) == 1
        assert console.OVERRIDES.match(make_features(client_ip="198.51.100.3")) is not None
    finally:
        console.answer("overrides", [])
    with pytest.raises(ValueError):
        console.answer("nonsense")


# ----------------------------------------------------------------------------- sessions and CSRF

def test_sessions_are_signed_expire_and_never_carry_the_secret() -> None:
    now = 1_800_000_000.0
    s = new_session(SECRET, now)
    assert SECRET not in s and session_ok(SECRET, s, now)
    assert not session_ok(SECRET, s, now + console.SESSION_S + 1)
    assert not session_ok("another-secret-" + "x" * 20, s, now)  # a rotated secret ends every session
    expiry, nonce, sig = s.split(".")
    assert not session_ok(SECRET, f"{int(expiry) + 99999}.{nonce}.{sig}", now)  # a longer life cannot be forged
    assert not session_ok(SECRET, "garbage", now) and not session_ok(SECRET, "", now)
    assert csrf_of(SECRET, s) != csrf_of(SECRET, new_session(SECRET, now)) and len(csrf_of(SECRET, s)) == 64


def test_vendored_chart_library_matches_its_pinned_hashes() -> None:
    vendor = ROOT / "gateway" / "static" / "vendor"
    readme = (vendor / "README.md").read_text()
    pinned = dict((name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M))
    assert set(pinned) == {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE"}
    for name, digest in pinned.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
    assert "MIT" in (vendor / "uPlot.LICENSE").read_text()


# ----------------------------------------------------------------------------- the console over HTTP

class FakeControl:
    """The admin app's control, as far as the console asks: one in-process worker, no model."""

    def __init__(self, token: str = SECRET) -> None:
        self.cfg = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "admin": {"token": token}})
        self.reloads = 0

    def config(self) -> configmod.Config:
        return self.cfg

    async def statuses(self) -> list[dict[str, Any]]:
        return [{"worker": 0, "ready": True, "generation": 1 + self.reloads, "model": None}]

    async def reload(self) -> list[str]:
        self.reloads += 1
        return []

    async def swap_model(self, swap: dict[str, Any]) -> list[str]:
        return [f"model: version {swap['version']} is not in the repository"]


@pytest.fixture
async def served() -> Any:
    console.RECORDER.ring.clear()
    traffic(console.RECORDER)
    control = FakeControl()
    app = web.Application()
    console.register(app, control)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}", control
    await runner.cleanup()
    console.answer("overrides", [])


def browser_session() -> ClientSession:
    """A client that keeps cookies for an address host, as a browser does (aiohttp's jar refuses them by default)."""
    return ClientSession(cookie_jar=CookieJar(unsafe=True))


async def _signed_in(base: str) -> tuple[ClientSession, str]:
    session = browser_session()
    resp = await session.post(base + "/console/login", data={"token": SECRET, "next": "/console/decisions"},
                              headers={"Origin": base}, allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"] == "/console/decisions"
    page = await (await session.get(base + "/console/actions")).text()
    csrf = re.search(r'<meta name=csrf-token content="([0-9a-f]{64})">', page)
    assert csrf, page[:400]
    return session, csrf.group(1)


async def test_views_need_a_session_or_the_bearer_token(served: tuple[str, FakeControl]) -> None:
    base, _ = served
    async with ClientSession() as anon:
        page = await anon.get(base + "/console/decisions")
        assert page.status == 200 and "Admin secret" in await page.text() and "r-3" not in await page.text()
        api = await anon.get(base + "/console/api/decisions")
        assert api.status == 401
        bearer = await anon.get(base + "/console/api/decisions?verdict=block", headers={"Authorization": f"Bearer {SECRET}"})
        assert bearer.status == 200 and [d["request_id"] for d in (await bearer.json())["decisions"]] == ["r-4", "r-3"]
        wrong = await anon.get(base + "/console/api/decisions", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401


async def test_login_sets_a_strict_httponly_session_cookie_not_the_secret(served: tuple[str, FakeControl]) -> None:
    base, _ = served
    async with browser_session() as s:
        bad = await s.post(base + "/console/login", data={"token": "wrong"}, headers={"Origin": base}, allow_redirects=False)
        assert bad.status == 401 and "Set-Cookie" not in bad.headers
        foreign = await s.post(base + "/console/login", data={"token": SECRET}, headers={"Origin": "https://evil.example"},
                               allow_redirects=False)
        assert foreign.status == 403 and "Set-Cookie" not in foreign.headers
        none = await s.post(base + "/console/login", data={"token": SECRET}, allow_redirects=False)
        assert none.status == 403  # neither Origin nor Referer: refused
        ok = await s.post(base + "/console/login", data={"token": SECRET, "next": "//evil.example/"}, headers={"Origin": base},
                          allow_redirects=False)
        assert ok.status == 303 and ok.headers["Location"] == "/console/"
        cookie = ok.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie and SECRET not in cookie
        as_json = await s.post(base + "/console/login", json={"token": SECRET, "next": "/console/lookup"}, headers={"Origin": base})
        assert as_json.status == 200 and (await as_json.json()) == {"next": "/console/lookup"} and "HttpOnly" in as_json.headers["Set-Cookie"]
        wrong_json = await s.post(base + "/console/login", json={"token": "nope"}, headers={"Origin": base})
        assert wrong_json.status == 401 and "Set-Cookie" not in wrong_json.headers
        page = await s.get(base + "/console/decisions?verdict=block")
        text = await page.text()
        assert page.status == 200 and "r-3" in text and "r-2" not in text
        assert "default-src 'none'" in page.headers["Content-Security-Policy"]


async def test_actions_need_json_the_csrf_token_and_the_consoles_origin(served: tuple[str, FakeControl]) -> None:
    base, control = served
    session, csrf = await _signed_in(base)
    async with session:
        good = {"Origin": base, "X-CSRF-Token": csrf}
        body = {"network": "203.0.113.50", "action": "block", "minutes": 5, "note": "test"}
        cases = [
            ({"Origin": base}, body, "json", 403),  # no CSRF token
            ({"Origin": base, "X-CSRF-Token": "0" * 64}, body, "json", 403),  # a wrong one
            ({"Origin": "https://evil.example", "X-CSRF-Token": csrf}, body, "json", 403),  # another site's page
            ({"X-CSRF-Token": csrf}, body, "json", 403),  # no Origin, no Referer
            (good, body, "form", 415),  # not JSON
        ]
        for headers, payload, kind, status in cases:
            resp = await (session.post(base + "/console/api/override", json=payload, headers=headers) if kind == "json"
                          else session.post(base + "/console/api/override", data=payload, headers=headers))
            assert resp.status == status, (headers, kind, await resp.text())
        assert console.OVERRIDES.match(make_features(client_ip="203.0.113.50")) is None
        resp = await session.post(base + "/console/api/override", json=body, headers=good)
        assert resp.status == 200, await resp.text()
        oid = (await resp.json())["override"]["id"]
        held = console.OVERRIDES.match(make_features(client_ip="203.0.113.50"))
        assert held is not None and held.action is Action.BLOCK
        assert "203.0.113.50/32" in await (await session.get(base + "/console/actions")).text()
        refused = await session.post(base + "/console/api/override", json={**body, "network": "nope"}, headers=good)
        assert refused.status == 422 and "network" in (await refused.json())["problems"][0]
        gone = await session.post(base + "/console/api/override/remove", json={"id": oid}, headers=good)
        assert gone.status == 200 and console.OVERRIDES.match(make_features(client_ip="203.0.113.50")) is None
        reload = await session.post(base + "/console/api/reload", json={}, headers=good)
        assert reload.status == 200 and control.reloads == 1
        swap = await session.post(base + "/console/api/model", json={"version": "9.9.9"}, headers=good)
        assert swap.status == 422 and "9.9.9" in (await swap.json())["problems"][0]
    async with ClientSession() as anon:  # the bearer token acts without a session (an API client, not a browser)
        resp = await anon.post(base + "/console/api/reload", json={}, headers={"Authorization": f"Bearer {SECRET}"})
        assert resp.status == 200 and control.reloads == 2
        resp = await anon.post(base + "/console/api/reload", json={})
        assert resp.status == 401


async def test_lookup_and_the_decision_page(served: tuple[str, FakeControl]) -> None:
    base, _ = served
    session, _ = await _signed_in(base)
    async with session:
        resp = await session.get(base + "/console/lookup?ref=r-3", allow_redirects=False)
        assert resp.status == 302 and resp.headers["Location"] == "/console/decision/r-3"
        text = await (await session.get(base + "/console/decision/r-3")).text()
        for part in ("block-sql-injection", "libinjection", "query:id", "1&#x27; OR &#x27;1&#x27;=&#x27;1", "looked like an attack",
                     "198.51.100.9"):
            assert part in text, part
        missing = await (await session.get(base + "/console/decision/no-such-ref")).text()
        assert "No decision with this reference" in missing
        live = await (await session.get(base + "/console/")).text()
        assert "Requests, last hour" in live and "block-sql-injection" in live and 'id=live-data' in live
        whatif = await (await session.get(base + "/console/whatif")).text()
        assert "shadow" in whatif and "r-4" in whatif


async def test_without_an_admin_secret_the_console_reads_but_never_acts() -> None:
    """State changes always need admin.token, from the console as from POST /admin/*."""
    control = FakeControl(token="")
    app = web.Application()
    console.register(app, control)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    base = f"http://127.0.0.1:{port}"
    try:
        async with browser_session() as session:
            page = await session.get(base + "/console/actions")
            assert page.status == 200 and "admin.token is not set" in await page.text()
            resp = await session.post(base + "/console/api/override", json={"network": "203.0.113.51", "action": "block", "minutes": 5},
                                      headers={"Origin": base})
            assert resp.status == 403 and "admin.token" in (await resp.json())["error"]
            assert console.OVERRIDES.match(make_features(client_ip="203.0.113.51")) is None
    finally:
        await runner.cleanup()
