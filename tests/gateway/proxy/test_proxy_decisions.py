"""How the data path carries out decisions: forward (and where), challenge, block, async scoring,
body prefixes, gateway endpoints, observers and metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gateway import metrics
from gateway.features import Features
from gateway.pipeline import Pipeline
from gateway.verdict import Action, LocalResponse, ScoreRequest, Source, Verdict
from tests.origin import OriginProcess, pattern
from tests.proxy_support import RawClient, gateway, get, make_config, request, shared_origin, wait_for


@pytest.fixture(scope="module")
def origin_b() -> OriginProcess:
    return shared_origin("b")


BLOCK = Verdict(Action.BLOCK, Source.RULE, "scanner path", rule="no-scanners")
CHALLENGE = Verdict(Action.CHALLENGE, Source.RULE, "suspicious client", rule="challenge-odd", difficulty=12)
TO_B = Verdict(Action.FORWARD, Source.RULE, "route to b", rule="to-b", backend="other")
SCORE = ScoreRequest(rule="ask-model")


@dataclass
class PathRules:
    """A rule table keyed by path prefix; records what it saw."""

    table: dict[str, Verdict | ScoreRequest]
    seen: list[Features] = field(default_factory=list)
    inspected: frozenset[str] = frozenset()

    def evaluate(self, features: Features) -> Verdict | ScoreRequest | None:
        self.seen.append(features)
        for prefix, outcome in self.table.items():
            if features.path.startswith(prefix):
                return outcome
        return None


@dataclass
class SlowModel:
    """A ScoreStage that takes a while and scores by path."""

    delay: float = 0.05
    fail: bool = False

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("model exploded")
        bad = 0.9 if "bad" in features.path else 0.1
        action = Action.BLOCK if bad > 0.5 else Action.FORWARD
        return Verdict(action, Source.MODEL, "scored", probabilities={"class": {"bad_bot": bad, "human": 1 - bad}},
                       rule=request.rule)


class Pages:
    def challenge(self, verdict: Verdict, features: Features) -> LocalResponse:
        return LocalResponse(429, f"solve me ({verdict.difficulty} bits)".encode(), (("X-Page", "challenge"),))

    def block(self, verdict: Verdict, features: Features) -> LocalResponse:
        return LocalResponse(verdict.status or 403, b"go away", (("X-Page", "block"), ("X-Bad", "a\r\nb")))


@dataclass
class Local:
    prefix: str = "/.clefgate/"
    bodies: list[bytes] = field(default_factory=list)

    def handle(self, features: Features, body: bytes) -> LocalResponse | Awaitable[LocalResponse]:
        self.bodies.append(body)
        if features.path.endswith("/async"):
            async def later() -> LocalResponse:
                await asyncio.sleep(0.02)
                return LocalResponse(200, b"async ok", content_type="text/plain")
            return later()
        return LocalResponse(200, b"verified " + str(len(body)).encode(), content_type="text/plain")


def pipeline(rules: PathRules, **kw: object) -> Pipeline:
    return Pipeline(rules=rules, **kw)  # type: ignore[arg-type]


def two_backends(a: OriginProcess, b: OriginProcess, tmp: Path, **extra: object) -> object:
    return make_config({"app": [a.url], "other": [b.url]}, tmp, **extra)


def upstream_seen(resp_body: bytes) -> dict[str, str]:
    return {k.lower(): v for k, v in json.loads(resp_body)["headers"]}


def test_block_uses_the_builtin_page_and_never_reaches_the_origin(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/wp-admin": BLOCK})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules)) as g, RawClient(g.port) as c:
        c.send(get("/wp-admin/setup.php"))
        resp = c.response()
        assert resp.status == 403
        assert b"blocked" in resp.body and resp.header("x-request-id") in resp.body.decode()
        assert resp.header("x-origin") is None
        # the connection stays usable
        c.send(get("/identity"))
        assert c.response().body == b"a"
        line = g.wait_log(lambda r: r["path"] == "/wp-admin/setup.php")
        assert (line["action"], line["source"], line["rule"], line["backend"]) == ("block", "rule", "no-scanners", "")


def test_challenge_and_block_pages_from_the_renderer(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/odd": CHALLENGE, "/bad": BLOCK})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, pages=Pages())) as g:
        resp = request(g.port, get("/odd"))
        assert (resp.status, resp.body, resp.header("x-page")) == (429, b"solve me (12 bits)", "challenge")
        resp = request(g.port, get("/bad"))
        assert (resp.status, resp.body, resp.header("x-page")) == (403, b"go away", "block")
        assert resp.header("x-bad") is None  # a header with CR/LF is dropped, never written
        resp = request(g.port, b"HEAD /bad HTTP/1.1\r\nHost: x\r\n\r\n", head_request=True)
        assert resp.status == 403 and resp.header("content-length") == "7"


def test_verdict_backend_overrides_the_route(origin_a: OriginProcess, origin_b: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/special": TO_B})
    with gateway(two_backends(origin_a, origin_b, tmp_path), pipeline(rules)) as g:
        resp = request(g.port, get("/special/x"))
        assert resp.json()["origin"] == "b"
        seen = upstream_seen(resp.body)
        assert (seen["x-clefgate-verdict"], seen["x-clefgate-source"], seen["x-clefgate-rule"]) == ("forward", "rule", "to-b")
        assert request(g.port, get("/plain")).json()["origin"] == "a"


def test_headers_attached_to_a_verdict_reach_the_backend(origin_a: OriginProcess, tmp_path: Path) -> None:
    passed = Verdict(Action.FORWARD, Source.RULE, "challenge passed", rule="r",
                     headers=(("X-Clefgate-Pass", "difficulty=12"), ("Bad Name", "x"), ("X-Odd", "a\r\nInjected: 1")))
    with gateway(make_config([origin_a.url], tmp_path), pipeline(PathRules({"/": passed}))) as g:
        seen = upstream_seen(request(g.port, get("/x", extra="X-Clefgate-Pass: forged\r\n")).body)
    assert seen["x-clefgate-pass"] == "difficulty=12"  # the client's forged copy was dropped
    assert "bad name" not in seen and "injected" not in seen
    assert seen["x-odd"] == "a??Injected: 1"


def test_async_model_decision_forwards_with_the_score(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/": SCORE})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, scorer=SlowModel())) as g:
        resp = request(g.port, get("/fine"))
        seen = upstream_seen(resp.body)
        assert seen["x-clefgate-source"] == "model" and seen["x-clefgate-score"] == "0.100"
        assert request(g.port, get("/bad-bot")).status == 403


def test_pipelined_requests_stay_in_order_while_the_model_decides(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/scored": SCORE})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, scorer=SlowModel(0.1))) as g, RawClient(g.port) as c:
        c.send(get("/scored/1") + get("/plain/2") + get("/scored/bad/3") + get("/plain/4"))
        assert c.response().json()["target"] == "/scored/1"
        assert c.response().json()["target"] == "/plain/2"
        assert c.response().status == 403
        assert c.response().json()["target"] == "/plain/4"


def test_failing_model_is_503_with_the_request_id(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/": SCORE})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, scorer=SlowModel(fail=True))) as g:
        resp = request(g.port, get("/x"))
        assert resp.status == 503 and resp.header("x-request-id").encode() in resp.body


@pytest.mark.parametrize("chunked", [False, True])
def test_body_prefix_is_read_before_deciding_and_the_whole_body_is_forwarded(origin_a: OriginProcess, tmp_path: Path,
                                                                              chunked: bool) -> None:
    rules = PathRules({})
    body = pattern(300_000)
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, body_prefix_bytes=1000)) as g, RawClient(g.port) as c:
        if chunked:
            c.send(b"POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(body), 70_000):
                piece = body[i : i + 70_000]
                c.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
            c.send(b"0\r\n\r\n")
        else:
            c.send(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        import zlib

        assert c.response().json() == {"received": len(body), "crc32": zlib.crc32(body), "origin": "a"}
        # a short body is decided on when it ends
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nshort")
        assert c.response().json()["body"] == "short"
    assert rules.seen[0].body_prefix == body[:1000]
    assert rules.seen[1].body_prefix == b"short"


def test_body_prefix_with_expect_continue(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, body_prefix_bytes=10)) as g, RawClient(g.port) as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n")
        while b"\r\n\r\n" not in c.buf:
            c._fill()
        assert c.buf.startswith(b"HTTP/1.1 100 Continue")
        c.buf = c.buf.split(b"\r\n\r\n", 1)[1]
        c.send(b"0123456789abcdefghij")
        assert c.response().json()["body"] == "0123456789abcdefghij"
    assert rules.seen[0].body_prefix == b"0123456789"


def test_blocked_request_with_a_small_body_keeps_the_connection(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/bad": BLOCK})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules)) as g, RawClient(g.port) as c:
        c.send(b"POST /bad HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b"z" * 1000 + get("/identity"))
        assert c.response().status == 403
        assert c.response().body == b"a"


def test_blocked_request_with_a_large_body_closes_the_connection(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/bad": BLOCK})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules)) as g, RawClient(g.port) as c:
        c.send(b"POST /bad HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" + b"z" * 100_000)
        resp = c.response()
        assert resp.status == 403 and resp.header("connection") == "close"
        assert c.closed(10)


def test_blocked_request_waiting_for_100_continue_is_answered_without_it(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/bad": BLOCK})
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules)) as g, RawClient(g.port) as c:
        c.send(b"POST /bad HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
        resp = c.response()
        assert resp.status == 403 and resp.interim == []
        assert resp.header("connection") == "close"


def test_local_endpoints_answer_before_the_rules(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({"/": BLOCK})
    local = Local()
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, local=local)) as g, RawClient(g.port) as c:
        c.send(b"POST /.clefgate/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nnonce=12345")
        resp = c.response()
        assert (resp.status, resp.body) == (200, b"verified 11")
        c.send(get("/.clefgate/async"))
        assert c.response().body == b"async ok"
        c.send(b"POST /.clefgate/verify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
        assert c.response().body == b"verified 3"
        line = g.wait_log(lambda r: r["path"] == "/.clefgate/verify")
        assert (line["action"], line["source"]) == ("local", "gateway")
    assert local.bodies[0] == b"nonce=12345"
    assert rules.seen == []  # gateway endpoints are not subject to the rules


def test_local_endpoint_body_is_bounded(origin_a: OriginProcess, tmp_path: Path) -> None:
    local = Local()
    with gateway(make_config([origin_a.url], tmp_path), pipeline(PathRules({}), local=local)) as g:
        resp = request(g.port, b"POST /.clefgate/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n")
        assert resp.status == 413
        with RawClient(g.port) as c:
            c.send(b"POST /.clefgate/verify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(20):
                c.send(b"1000\r\n" + b"q" * 4096 + b"\r\n")
            assert c.response().status == 413
    assert local.bodies == []


def test_observers_and_metrics_see_every_response(origin_a: OriginProcess, tmp_path: Path) -> None:
    seen: list[tuple[str, str, int]] = []

    def observe(features: Features, verdict: Verdict, status: int) -> None:
        seen.append((features.path, verdict.action.value, status))

    rules = PathRules({"/bad": BLOCK})
    before_block = metrics.REQUESTS.get("403", "default", "", "block", "rule")
    before_ok = metrics.REQUESTS.get("200", "default", "app", "forward", "default")
    added_before = metrics.ADDED_LATENCY.count()
    with gateway(make_config([origin_a.url], tmp_path), pipeline(rules, observers=(observe,))) as g:
        request(g.port, get("/bad"))
        request(g.port, get("/identity"))
        g.wait_log(lambda r: r["path"] == "/identity")
    assert seen == [("/bad", "block", 403), ("/identity", "forward", 200)]
    assert metrics.REQUESTS.get("403", "default", "", "block", "rule") == before_block + 1
    assert metrics.REQUESTS.get("200", "default", "app", "forward", "default") == before_ok + 1
    assert metrics.ADDED_LATENCY.count() == added_before + 2
    assert metrics.UPSTREAM_LATENCY.count("app") >= 1


def test_features_describe_the_request(origin_a: OriginProcess, tmp_path: Path) -> None:
    rules = PathRules({})
    cfg = make_config([origin_a.url], tmp_path, trusted_proxies=["127.0.0.0/8"])
    with gateway(cfg, pipeline(rules)) as g:
        request(g.port, b"POST /p%2Fq?a=1&b=%2F HTTP/1.1\r\nHost: Shop.Example:8080\r\nUser-Agent: ua/1\r\n"
                        b"Cookie: a=1\r\nCookie: b=2\r\nX-Forwarded-For: 198.51.100.7\r\nX-Forwarded-Proto: https\r\n"
                        b"X-Request-Id: feat-1\r\nContent-Length: 2\r\n\r\nhi")
    f = rules.seen[0]
    assert (f.method, f.path, f.query, f.http_version) == ("POST", "/p%2Fq", "a=1&b=%2F", "1.1")
    assert (f.client_ip, f.peer_ip, f.scheme, f.host, f.user_agent) == ("198.51.100.7", "127.0.0.1", "https", "Shop.Example:8080", "ua/1")
    assert f.header("cookie") == "a=1; b=2"
    assert f.headers[0] == ("Host", "Shop.Example:8080")
    assert (f.content_length, f.chunked, f.request_id) == (2, False, "feat-1")
    assert f.received_at > 0


def test_a_page_answered_to_a_program_let_through_as_asking_for_data_is_noted_in_its_history(origin_a: OriginProcess,
                                                                                          tmp_path: Path) -> None:
    """A verdict that did not count the client's look (a score rule's bot_likeness: ignore) whose request the site answers
    with text/html: the client's history says so (its look counts again, gateway.pipeline); a JSON answer notes nothing."""
    from gateway.clients import ClientState

    data = Verdict(Action.FORWARD, Source.MODEL, "payload alone", rule="score-api", look_ignored=True)
    state = ClientState()
    rules = PathRules({"/page/": data, "/json": data, "/": Verdict(Action.FORWARD, Source.RULE, "plain", rule="other")})
    with gateway(make_config([origin_a.url], tmp_path, trusted_proxies=["127.0.0.1/32"]), pipeline(rules, state=state)) as g:
        head = "User-Agent: python-requests/2.32.3\r\nAccept: application/json\r\nX-Forwarded-For: {ip}\r\n"
        assert request(g.port, get("/json?x=1", extra=head.format(ip="198.51.100.1"))).status == 200
        assert request(g.port, get("/page/list?x=1", extra=head.format(ip="198.51.100.3"))).status == 200
        assert request(g.port, get("/page/other", extra=head.format(ip="198.51.100.4").replace("python-requests", "curl"))).status == 200
    keys = {f.client_ip: state.key(f) for f in rules.seen}
    assert not state.history.paged_within(keys["198.51.100.1"], 60)
    assert state.history.paged_within(keys["198.51.100.3"], 60) and state.history.paged_within(keys["198.51.100.4"], 60)



def test_the_pages_a_real_site_serves_are_learnt_from_its_answers_to_forwarded_requests(origin_a: OriginProcess, tmp_path: Path) -> None:
    """A GET or HEAD forwarded and answered 2xx (or 304) teaches its page (gateway.served); a 404, a 5xx, a POST, a
    challenged or blocked request, and the gateway's own endpoints teach nothing."""
    from gateway.clients import ClientState
    from gateway.pipeline import client_recorder

    state = ClientState()
    rules = PathRules({"/page/held": CHALLENGE, "/page/bad": BLOCK, "/": Verdict(Action.FORWARD, Source.RULE, "plain", rule="other")})
    p = pipeline(rules, state=state, pages=Pages(), observers=(client_recorder(state),))
    with gateway(make_config([origin_a.url], tmp_path), p) as g:
        assert request(g.port, get("/page/guide", host="Shop.Example:8080")).status == 200
        assert request(g.port, b"HEAD /page/head HTTP/1.1\r\nHost: shop.example\r\n\r\n", head_request=True).status == 200
        assert request(g.port, get("/status/404", host="shop.example")).status == 404
        assert request(g.port, get("/status/503", host="shop.example")).status == 503
        assert request(g.port, b"POST /page/posted HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 0\r\n\r\n").status in (200, 405)
        assert request(g.port, get("/page/held", host="shop.example")).status == 429
        assert request(g.port, get("/page/bad", host="shop.example")).status == 403
        wait_for(lambda: len(state.pages) == 2, what="two pages learnt")
    learnt = {(f.method, f.path): state.pages.serves(dataclasses.replace(f, method="GET")) for f in rules.seen}
    assert learnt == {("GET", "/page/guide"): True, ("HEAD", "/page/head"): True, ("GET", "/status/404"): False,
                      ("GET", "/status/503"): False, ("POST", "/page/posted"): False, ("GET", "/page/held"): False,
                      ("GET", "/page/bad"): False}
    assert len(state.pages) == 2
