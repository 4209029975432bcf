"""The model on the request path: a real gateway, the shipped rules and model, a real origin and client."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from gateway import config as configmod
from gateway import decider as decidermod
from gateway import features as feat
from gateway.decider.scoring import BreakerOpen
from tests.conftest import make_features
from tests.harness import ROOT, Gateway, config_for, wait_until

pytestmark = pytest.mark.timeout(180)

# Chrome's own order for a navigation (httpx sends Host and Connection first, then these as given): the model knows
# a browser by its head, and a browser user agent over another client's order is how spoofing scrapers look.
BROWSER = {"Sec-Ch-Ua": '"Chromium";v="126", "Google Chrome";v="126", "Not-A.Brand";v="99"', "Sec-Ch-Ua-Mobile": "?0",
           "Sec-Ch-Ua-Platform": '"Windows"', "Upgrade-Insecure-Requests": "1",
           "User-Agent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
           "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8",
           "Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-User": "?1", "Sec-Fetch-Dest": "document",
           "Accept-Encoding": "gzip, deflate, br, zstd", "Accept-Language": "en-US,en;q=0.9"}
SQLI = "/search?q=1%27%20OR%20%271%27%3D%271--"


SHIPPED_RULES = {"files": [str(ROOT / "rules" / "default.yaml")]}


def model_config(upstream: str, tmp: Path, rules: dict[str, object] = SHIPPED_RULES, model: dict[str, object] | None = None,
                 **extra: object) -> dict[str, object]:
    # the model's own path (scores, cache, corroboration): the payload detectors in front of it are tests/gateway/test_payload.py's
    extra.setdefault("payload", {"enabled": False})
    return config_for(upstream, rules=rules, model=model or {"enabled": True},
                      challenge={"dev_generate_secret": True}, logging={"level": "info", "access_log": "-", "debug_headers": True},
                      decision_log={"path": str(tmp / "decisions.jsonl")}, **extra)


@pytest.fixture(scope="module")
def gateway(demo_origin, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("decider-e2e")
    gw = Gateway(tmp / "gw", model_config(demo_origin.url, tmp), ready_timeout=120)
    gw.tmp = tmp  # type: ignore[attr-defined]
    yield gw
    gw.stop()


def get(gw: Gateway, target: str, headers: dict[str, str] | None = None, ip: str = "203.0.113.50") -> httpx.Response:
    return httpx.get(gw.url + target, headers={**(headers or BROWSER), "X-Forwarded-For": ip}, timeout=30)


def test_a_browser_is_forwarded_by_the_model(gateway: Gateway) -> None:
    r = get(gateway, "/shop")
    assert r.status_code == 200 and b"Walnut desk" in r.content
    assert r.headers["X-Clefgate-Verdict"] == "forward"
    assert r.headers["X-Clefgate-Source"] in ("model", "cache")
    assert r.headers.get("X-Clefgate-Score") is not None


def test_an_injection_is_blocked_and_repeats_come_from_the_cache(gateway: Gateway) -> None:
    first = get(gateway, SQLI, {**BROWSER, "User-Agent": "python-requests/2.31.0"}, ip="198.51.100.77")
    assert first.status_code == 403
    assert first.headers["X-Clefgate-Verdict"] == "block" and first.headers["X-Clefgate-Source"] == "model"
    again = get(gateway, SQLI, {**BROWSER, "User-Agent": "python-requests/2.31.0"}, ip="198.51.100.77")
    assert again.status_code == 403 and again.headers["X-Clefgate-Source"] == "cache"
    metrics = gateway.metrics()
    assert 'clefgate_decision_cache_requests_total{result="hit"}' in metrics
    assert "clefgate_model_batch_size_bucket" in metrics
    assert 'clefgate_breaker_state{model="clef-flash@' in metrics


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
@pytest.mark.parametrize("target,header", [("/static/%c0%ae%c0%ae/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", None),
                                           ("/files/%EF%BC%8E%EF%BC%8E%EF%BC%8F%EF%BC%8E%EF%BC%8E%EF%BC%8Fetc%EF%BC%8Fpasswd", None),
                                           ("/view?page=%u002e%u002e%u002f%u002e%u002e%u002fwin.ini", None),
                                           ("/download", "X-File: ．．／．．／windows／win.ini")])  # a header's UTF-8, unescaped
def test_encoding_evasions_are_blocked_before_the_model(gateway: Gateway, target: str, header: str | None) -> None:
    """curl sends the target as written (--path-as-is): a browser's headers, and an encoding no browser writes."""
    args = ["curl", "-sS", "--path-as-is", "-o", "/dev/null", "-D", "-", "-H", "X-Forwarded-For: 198.51.100.80"]
    for name, value in [*BROWSER.items(), *([header.split(": ", 1)] if header else [])]:
        args += ["-H", f"{name}: {value}"]
    out = subprocess.run([*args, gateway.url + target], capture_output=True, text=True, timeout=30, check=True).stdout.lower()
    assert out.startswith("http/1.1 403"), out
    assert "x-clefgate-rule: block-encoding-evasions" in out and "x-clefgate-source: rule" in out and "x-request-id:" in out


def test_decision_log_is_the_training_feed(gateway: Gateway) -> None:
    get(gateway, "/forum", ip="203.0.113.51")
    path = gateway.tmp / "decisions.jsonl"  # type: ignore[attr-defined]
    # lines reach the file in batches (the writer wakes at most every few ms): wait for this request's
    wait_until(lambda: path.exists() and any('"source":"model"' in ln and '"path":"/forum"' in ln for ln in path.read_text().splitlines()),
               10, what="the /forum model line in the decision log")
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    scored = [ln for ln in lines if ln["source"] in ("model", "cache")]
    assert scored
    line = next(ln for ln in scored if ln["record"]["path"] == "/forum")
    assert {q: set(o) for q, o in line["probabilities"].items()} == {
        "payload": {"benign", "attack"}, "attack_kind": {"sqli", "xss", "traversal", "cmdi", "probe", "other"},
        "client": {"human", "good_bot", "bad_bot"},
        "familiarity": {"familiar", "unfamiliar"}}      # how near the payload lies to what the model learnt from
    assert line["input"]["client_text"] and len(line["input"]["client_numeric"]) == len(feat.split.CLIENT_NUMERIC_NAMES)
    assert line["input"]["feature_version"] and line["input"]["text"] and line["model"].startswith("clef-flash@")
    assert line["record"]["headers"] and line["latency_ms"] >= 0
    blocked = [ln for ln in lines if ln["verdict"] == "block" and ln["source"] == "model"]
    assert blocked and blocked[-1]["explanation"]


def test_model_hot_swap(gateway: Gateway) -> None:
    bad = httpx.post(gateway.admin_url + "/admin/model", json={"version": "does-not-exist"}, headers=gateway.admin_headers(), timeout=60)
    assert bad.status_code == 422 and bad.json()["swapped"] is False
    assert get(gateway, "/shop").status_code == 200
    version = httpx.get(gateway.admin_url + "/readyz", timeout=10).json()["workers"][0]["model"]["model"].split("@")[1]
    good = httpx.post(gateway.admin_url + "/admin/model", json={"version": version}, headers=gateway.admin_headers(), timeout=60)
    assert good.status_code == 200 and good.json()["swapped"] is True
    assert good.json()["model"]["model"] == f"clef-flash@{version}"
    assert httpx.post(gateway.admin_url + "/admin/model", json={"colour": "blue"}, headers=gateway.admin_headers(), timeout=10).status_code == 400


def test_shadow_mode_enforces_nothing_and_logs_what_would_have_happened(demo_origin, tmp_path: Path) -> None:
    gw = Gateway(tmp_path / "gw", model_config(demo_origin.url, tmp_path, policy={"shadow": True}), ready_timeout=120)
    try:
        r = get(gw, SQLI, {**BROWSER, "User-Agent": "python-requests/2.31.0"}, ip="198.51.100.78")
        assert r.status_code == 200  # the origin answered: nothing enforced
        assert r.headers["X-Clefgate-Source"] == "shadow"
        path = tmp_path / "decisions.jsonl"
        wait_until(lambda: path.exists() and '"shadow_action":"block"' in path.read_text(), 10, what="a shadow line")
    finally:
        gw.stop()


def test_a_signature_corroborates_what_the_model_leans_to_block(demo_origin, tmp_path: Path) -> None:
    """1.7.0 gives this time-based SQL payload in a query from a browser P(attack) about 0.6: under the
    0.95 bar, so without the fallback rules it would only be challenged. (2.0.0 gives it more than 0.95 alone.)"""
    rules = {**SHIPPED_RULES, "fallback_files": [str(ROOT / "rules" / "injections.yaml")]}
    gw = Gateway(tmp_path / "gw", model_config(demo_origin.url, tmp_path, rules=rules, model={"enabled": True, "version": "1.7.0"}),
                 ready_timeout=120)
    target = "/docs?page=1%20AND%20SLEEP(5)"
    try:
        first = get(gw, target, ip="203.0.113.90")
        assert first.status_code == 403 and first.headers["X-Clefgate-Source"] == "model", first.headers
        attack = float(first.headers["X-Clefgate-Reason"].split("P(attack)=")[1].split(" ")[0])
        assert 0.4 <= attack < 0.95  # the premise: the model alone would not block it
        assert first.headers["X-Clefgate-Reason"].endswith("and fallback rule block-sql-injection matched")
        again = get(gw, target, ip="203.0.113.91")
        assert again.status_code == 403 and again.headers["X-Clefgate-Source"] == "cache"  # a cached answer is corroborated too
        assert get(gw, "/shop", ip="203.0.113.92").status_code == 200
        metrics = gw.metrics()
        assert 'clefgate_corroborated_blocks_total{mode="enforce",policy="default",rule="block-sql-injection"} 2' in metrics
        path = tmp_path / "decisions.jsonl"
        wait_until(lambda: path.exists() and path.read_text().count('"rule":"block-sql-injection"') >= 2, 10, what="two decision lines")
    finally:
        gw.stop()


async def test_real_sessions_through_the_layers() -> None:
    """The shipped model behind batching, breaker and cache, many concurrent callers, then an open breaker."""
    cfg = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:1"]}}, "model": {"enabled": True},
                              "decider": {"max_batch": 16, "max_wait_us": 1000}})
    decider = decidermod.load(cfg)
    assert decider is not None
    try:
        items = [decider.model.model_input(make_features(target=f"/shop/{i % 7}")) for i in range(64)]
        results = await asyncio.gather(*(decider.scorer.score(item) for item in items))
        assert len(results) == 64 and all(abs(sum(options.values()) - 1) < 1e-5 for r in results for options in r.probabilities.values())
        assert decider.cache is not None and len(decider.cache) == 7
        for _ in range(cfg.decider.failure_threshold):
            decider.breaker.failure()
        with pytest.raises(BreakerOpen):
            await decider.scorer.score(decider.model.model_input(make_features(target="/not-cached")))
    finally:
        decider.close()
