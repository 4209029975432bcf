"""The Jev-compatible decision API against a running gateway with the shipped clef-flash and clef models."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.config import JevConfig
from gateway.decider import int8probe
from gateway.jev import _as_request_record, parse_item
from tests.harness import ROOT, Gateway, config_for

pytestmark = pytest.mark.timeout(300)

ATTACK_RECORD = {"method": "GET", "path": "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--",
                 "http_version": "1.1", "headers": [["Host", "shop.example"], ["User-Agent", "sqlmap/1.7.2#stable (https://sqlmap.org)"],
                                                    ["Accept", "*/*"]], "body": None, "client_ip": "198.51.100.9"}
BROWSER_RECORD = {"method": "GET", "path": "/shop/2", "http_version": "1.1",
                  "headers": [["Host", "shop.example"],
                              ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"],
                              ["Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],
                              ["Accept-Language", "en-GB,en;q=0.5"], ["Accept-Encoding", "gzip, deflate, br"],
                              ["Referer", "https://shop.example/shop"], ["Connection", "keep-alive"], ["Cookie", "sid=abc"],
                              ["Sec-Fetch-Dest", "document"], ["Sec-Fetch-Mode", "navigate"], ["Sec-Fetch-Site", "same-origin"]],
                  "body": None, "client_ip": "203.0.113.20"}
CLASS_Q = {"id": "class", "type": "choice", "options": ["human", "good_bot", "bad_bot", "attack"]}


@pytest.fixture(scope="module")
def api(demo_origin, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    cfg = config_for(demo_origin.url, model={"enabled": True}, clef={"enabled": True}, challenge={"dev_generate_secret": True},
                     jev={"api_keys": [{"id": "team-a", "key": "key-a-123456"}, {"id": "slow", "key": "key-slow-1", "rate": "3/min"}]})
    gw = Gateway(tmp_path_factory.mktemp("jev"), cfg, ready_timeout=120)
    yield gw
    gw.stop()


def post(gw: Gateway, body: object, key: str | None = "key-a-123456", **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(gw.admin_url + "/v1/decision", json=body, headers=headers, timeout=60, **kw)  # type: ignore[arg-type]


def test_questions_shape_routes_known_questions_to_clef_flash(api: Gateway) -> None:
    answer = post(api, {"model": "clef-flash", "state": ATTACK_RECORD, "questions": [CLASS_Q]}).json()
    (a,) = answer["answers"]
    assert a["id"] == "class" and a["model"].startswith("clef-flash@")
    assert a["top_option"] == "attack"
    assert abs(sum(a["probabilities"].values()) - 1) < 1e-6
    assert list(a["probabilities"]) == CLASS_Q["options"]
    assert answer["latency_ms"] >= 0
    benign = post(api, {"state": json.dumps(BROWSER_RECORD), "questions": [CLASS_Q]}).json()["answers"][0]
    assert benign["top_option"] == "human"


def test_raw_http_request_text_is_understood_as_a_request(api: Gateway) -> None:
    raw = "GET /../../etc/passwd HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n"
    a = post(api, {"state": raw, "questions": [CLASS_Q]}).json()["answers"][0]
    assert a["model"].startswith("clef-flash@")


def test_unknown_questions_go_to_clef_in_the_same_call(api: Gateway) -> None:
    body = {"model": "clef-flash", "state": ATTACK_RECORD, "questions": [
        CLASS_Q,
        {"id": "urgency", "type": "choice", "options": ["P0_Critical", "P1_High", "P2_Medium", "P3_Low"],
         "criteria": "how much of the system is unavailable"},
        {"id": "auto_mitigate", "type": "bool", "criteria": "may the read-replica scale-up script run"},
    ]}
    answers = {a["id"]: a for a in post(api, body).json()["answers"]}
    assert answers["class"]["model"].startswith("clef-flash@")
    assert answers["urgency"]["model"].startswith("clef@")
    assert answers["urgency"]["top_option"] in body["questions"][1]["options"]  # type: ignore[index]
    assert isinstance(answers["auto_mitigate"]["top_option"], bool)
    assert set(answers["auto_mitigate"]["probabilities"]) == {"true", "false"}
    for a in answers.values():
        assert abs(sum(a["probabilities"].values()) - 1) < 1e-6


def test_clef_questions_on_free_text(api: Gateway) -> None:
    state = "Hi, I would like to cancel my subscription and stop being charged every month. Please close my account."
    body = {"model": "clef", "state": state, "questions": [
        {"id": "intent", "type": "choice", "options": ["cancel_subscription", "upgrade_plan", "report_bug", "ask_for_refund"],
         "criteria": "what the customer wants"},
        {"id": "wants_to_leave", "type": "bool", "criteria": "the customer wants to stop using the service"}]}
    answers = {a["id"]: a for a in post(api, body).json()["answers"]}
    assert answers["intent"]["model"].startswith("clef@")
    assert answers["intent"]["top_option"] == "cancel_subscription"
    assert answers["wants_to_leave"]["top_option"] is True


def test_input_shape(api: Gateway) -> None:
    r = post(api, {"input": "five failed logins in a minute, then a sixth from an address in a high-risk range", "max_tokens": 128})
    assert r.status_code == 200
    decision = r.json()["decision"]
    assert decision["label"] in ("forward", "challenge", "block")
    assert 0 <= decision["confidence"] <= 1
    assert decision["feature"] and all(isinstance(f, str) for f in decision["feature"])


def test_candidates_shape(api: Gateway) -> None:
    r = post(api, {"task": "content_moderation", "features": {"text_length": 128, "has_url": True, "sender_reputation": 0.82},
                   "candidates": ["allow", "review", "block"]})
    assert r.status_code == 200
    out = r.json()
    assert out["decision"] in ("allow", "review", "block") and 0 <= out["confidence"] <= 1 and out["latency_ms"] >= 0


def test_batch_answers_in_order(api: Gateway) -> None:
    batch = [{"state": ATTACK_RECORD, "questions": [CLASS_Q]},
             {"input": "a new account posted the same link forty times"},
             {"task": "intent", "features": {"message": "I want to cancel my subscription"}, "candidates": ["cancel", "upgrade", "billing"]},
             {"state": BROWSER_RECORD, "questions": [CLASS_Q]}]
    out = post(api, batch).json()
    assert isinstance(out, list) and len(out) == 4
    assert out[0]["answers"][0]["top_option"] == "attack"
    assert "label" in out[1]["decision"]
    assert out[2]["decision"] in ("cancel", "upgrade", "billing")
    assert out[3]["answers"][0]["top_option"] == "human"


@pytest.mark.parametrize("body,field", [
    ({"questions": [CLASS_Q]}, "state"),
    ({"state": "x", "questions": []}, "questions"),
    ({"state": "x", "questions": [{"id": "q", "options": ["only-one"]}]}, "questions[0].options"),
    ({"state": "x", "questions": [{"id": "q", "type": "maybe", "options": ["a", "b"]}]}, "questions[0].type"),
    ({"state": "x", "questions": [{"id": "q", "options": ["a", "b"]}, {"id": "q", "options": ["a", "b"]}]}, "questions[1].id"),
    ({"state": "x", "model": "gpt", "questions": [CLASS_Q]}, "model"),
    ({"input": 42}, "input"),
    ({"input": "x", "max_tokens": 0}, "max_tokens"),
    ({"task": "t", "candidates": ["a"]}, "candidates"),
    ({"hello": "world"}, "body"),
    ([{"input": "ok"}, {"input": 1}], "[1].input"),
])
def test_schema_errors_name_the_field(api: Gateway, body: object, field: str) -> None:
    r = post(api, body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and err["message"].startswith(field) and err["request_id"]
    if field != "body":
        assert err["field"] == field


def test_invalid_json_and_sizes(api: Gateway) -> None:
    r = httpx.post(api.admin_url + "/v1/decision", content=b"{nope", headers={"Authorization": "Bearer key-a-123456"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = post(api, {"input": "x" * (70 * 1024)})
    assert r.status_code == 413, r.text and r.json()["error"]["code"] == "too_large" and r.json()["error"]["field"] == "input"
    r = post(api, {"state": "word " * 40000, "questions": [{"id": "q", "options": ["a", "b"]}]})
    assert r.status_code == 413, r.text
    # nested past what the JSON parser recurses into: a client error, not a 500
    r = httpx.post(api.admin_url + "/v1/decision", content=b"[" * 100_000, headers={"Authorization": "Bearer key-a-123456"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


def test_api_keys(api: Gateway) -> None:
    r = post(api, {"input": "hello"}, key=None)
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key" and "Bearer" in r.headers["WWW-Authenticate"]
    r = post(api, {"input": "hello"}, key="not-a-key")
    assert r.status_code == 403 and r.json()["error"]["code"] == "invalid_api_key"
    r = httpx.post(api.admin_url + "/v1/decision", json={"input": "hello"}, headers={"X-API-Key": "key-a-123456"}, timeout=30)
    assert r.status_code == 200
    # a key with bytes that are not UTF-8 is simply not a key
    r = httpx.post(api.admin_url + "/v1/decision", json={"input": "hello"}, headers={"X-API-Key": b"key-\xff\xfe"}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "invalid_api_key"


def test_rate_limit_per_key(api: Gateway) -> None:
    codes = [post(api, {"input": "hello"}, key="key-slow-1").status_code for _ in range(4)]
    assert codes[:3] == [200, 200, 200] and codes[3] == 429
    r = post(api, {"input": "hello"}, key="key-slow-1")
    assert r.json()["error"]["code"] == "rate_limited" and int(r.headers["Retry-After"]) >= 1
    assert post(api, {"input": "hello"}).status_code == 200  # other keys are not affected


def test_health_and_openapi(api: Gateway) -> None:
    for path in ("/health", "/v1/health"):
        h = httpx.get(api.admin_url + path, timeout=10).json()
        assert h["ready"] is True and {m["name"] for m in h["models"]} == {"clef-flash", "clef"}
        assert all(m["provider"] for m in h["models"])
        # int8 sessions on the CPU name their kernel: the exact one only where the probe finds the default wrong (this
        # CPU); a model on a GPU (fp16) has none
        kernel = "default" if int8probe.default_kernel_exact() else "x64quantprecision"
        for m in h["models"]:
            on_cpu_int8 = m["precision"] == "int8" and "cuda" not in str(m["provider"]).lower()
            assert m["int8_kernel"] == (kernel if on_cpu_int8 else None)
    doc = httpx.get(api.admin_url + "/v1/openapi.json", timeout=10).json()
    assert doc["openapi"].startswith("3.") and "/v1/decision" in doc["paths"]
    metrics = api.metrics()
    assert 'clefgate_jev_requests_total{shape="questions",status="200"}' in metrics
    assert "clefgate_clef_inference_seconds_bucket" in metrics


def test_schemathesis_conformance(demo_origin, tmp_path: Path) -> None:
    """Property-based run of the published OpenAPI document against the live API (no keys, no rate limit)."""
    cfg = config_for(demo_origin.url, model={"enabled": True}, clef={"enabled": True}, jev={"rate": "off"},
                     challenge={"dev_generate_secret": True})
    gw = Gateway(tmp_path / "st", cfg, ready_timeout=120)
    try:
        proc = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run", gw.admin_url + "/v1/openapi.json",
                               "--checks", "all", "--exclude-checks", "ignored_auth,positive_data_acceptance",
                               "--max-examples", "100", "--seed", "7", "--workers", "1", "--phases", "examples,coverage,fuzzing",
                               "--suppress-health-check", "all"],
                              cwd=ROOT, capture_output=True, text=True, timeout=240)
    finally:
        gw.stop()
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_request_record_detection() -> None:
    assert _as_request_record(ATTACK_RECORD)["method"] == "GET"  # type: ignore[index]
    assert _as_request_record(json.dumps(BROWSER_RECORD))["path"] == "/shop/2"  # type: ignore[index]
    raw = _as_request_record("POST /login HTTP/1.1\nHost: a\nContent-Type: application/x-www-form-urlencoded\n\nuser=a")
    assert raw is not None and raw["body"] == "user=a" and raw["headers"][0] == ["Host", "a"]
    assert _as_request_record("the database is down") is None
    assert _as_request_record({"message": "hi"}) is None
    assert _as_request_record("{\"a\": " * 100_000) is None  # too deep to read: not a request


def test_parse_item_shapes() -> None:
    cfg = JevConfig()
    assert parse_item({"input": "x"}, "", cfg).shape == "input"
    assert parse_item({"task": "t", "candidates": ["a", "b"]}, "", cfg).shape == "candidates"
    item = parse_item({"state": {"service": "db", "errors": 5}, "questions": [{"id": "ok", "type": "bool"}]}, "", cfg)
    assert item.shape == "questions" and "service" in item.state and item.record is None


def test_a_deep_small_state_is_refused_before_it_is_rendered_whole() -> None:
    """Each leaf's line repeats its key path, so 0.6 MB of deep JSON would render to ~50 MB on the event loop: the
    rendering stops at jev.max_state_bytes and the answer is a 413."""
    from gateway import config as configmod
    from gateway.jev import ApiError, parse_item

    cfg = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}}).jev
    inner = "{" + ",".join(f'"{i}":0' for i in range(60_000)) + "}"
    deep = json.loads('{"a":' * 400 + inner + "}" * 400)
    for body, field in (({"task": "t", "candidates": ["a", "b"], "features": deep}, "features"),
                        ({"questions": [{"id": "q", "options": ["a", "b"]}], "model": "clef", "state": deep}, "state")):
        with pytest.raises(ApiError) as err:
            parse_item(body, "", cfg)
        assert err.value.status == 413 and err.value.field == field
        assert "renders to more than" in str(err.value)  # stopped while rendering, not measured after the whole text


def test_a_state_nested_deeper_than_can_be_rendered_is_a_400() -> None:
    from gateway import config as configmod
    from gateway.jev import ApiError

    cfg = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}}).jev
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    for body, field in (({"task": "t", "candidates": ["a", "b"], "features": deep}, "features"),
                        ({"questions": [{"id": "q", "options": ["a", "b"]}], "model": "clef", "state": deep}, "state")):
        with pytest.raises(ApiError) as err:
            parse_item(body, "", cfg)
        assert err.value.status == 400 and err.value.code == "invalid_json" and err.value.field == field


BREAKER_BAIT = [b'{"input": "x\\ud800"}', b'{"input": "x", "max_tokens": NaN}', b'[[1,2,3]]',
                b'{"state": {"method": 5, "path": "/"}, "questions": [{"id": "class", "options": ["human", "good_bot", "bad_bot", "attack"]}]}',
                b'{"state": {"method": "GET", "path": "/", "headers": {"Host": "a"}}, "questions": [{"id": "class", "options": '
                b'["human", "good_bot", "bad_bot", "attack"]}]}']


def test_bad_input_never_opens_a_breaker(api: Gateway) -> None:
    """Ten of each bad body: 400 invalid_request with the field, and both breakers stay closed (health 200)."""
    failures_before = [ln for ln in api.metrics().splitlines() if ln.startswith("clefgate_model_failures_total{")]
    for raw in BREAKER_BAIT:
        for _ in range(10):
            r = httpx.post(api.admin_url + "/v1/decision", content=raw, timeout=60,
                           headers={"Authorization": "Bearer key-a-123456", "Content-Type": "application/json"})
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
            assert r.json()["error"].get("field") is not None and r.json()["error"]["request_id"]
    health = httpx.get(api.admin_url + "/health", timeout=10)
    assert health.status_code == 200 and all(m["breaker"] == "closed" for m in health.json()["models"]), health.text
    failures_after = [ln for ln in api.metrics().splitlines() if ln.startswith("clefgate_model_failures_total{")]
    assert failures_after == failures_before
