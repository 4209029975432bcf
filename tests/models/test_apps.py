"""Real-application shapes in the corpus: drawn per half, filled per site, carrying attacks where an attacker writes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from models.corpus import apps, generate, payloads, sites

SHAPES = {
    "a": {"source": "fixture-a", "half": "a", "from": "test", "licence": "MIT", "shapes": [
        {"app": "lambda", "group": "api", "method": "GET", "path": "/2015-03-31/functions/{word}/aliases/{id}",
         "query": [["Qualifier", "PROD"]], "body_kind": None, "body": None, "context": "xhr",
         "slots": [["query", "Qualifier"], ["path", "last"]]}]},
    "b": {"source": "fixture-b", "half": "b", "from": "test", "licence": "MIT", "shapes": [
        {"app": "sentry", "group": "telemetry", "method": "POST", "path": "/api/{id}/envelope/",
         "query": [["sentry_version", "7"]], "body_kind": "raw",
         "body": '{"event_id":"0a1b"}\n{"type":"event"}\n{"message":"cannot open ledger","level":"error"}\n',
         "content_type": "text/plain;charset=UTF-8", "context": "beacon",
         "slots": [["raw", "cannot open ledger"]]}]},
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    for half, doc in SHAPES.items():
        (tmp_path / f"apps-{half}.json").write_text(json.dumps(doc), encoding="utf-8")
    return tmp_path


def _site() -> sites.Site:
    return sites.make_site(random.Random(3), "shop", "a")


def test_a_half_draws_only_its_own_sources(data: Path) -> None:
    assert apps.half_sources("a", data) == ("fixture-a",) and apps.half_sources(None, data) == ("fixture-a", "fixture-b")
    for i in range(20):
        drawn = apps.request(random.Random(i), _site(), "b", data)
        assert drawn is not None and drawn[1] == "fixture-b"
    assert apps.request(random.Random(1), _site(), "c", data) is None


def test_placeholders_are_filled_per_request(data: Path) -> None:
    site = _site()
    paths = {apps.request(random.Random(i), site, "a", data)[0].path for i in range(10)}  # type: ignore[index]
    assert len(paths) > 1
    for path in paths:
        assert "{" not in path and path.startswith("/2015-03-31/functions/")
        assert path.split("/")[3] in site.words


def test_an_attack_in_a_raw_json_body_stays_json(data: Path) -> None:
    req, _ = apps.request(random.Random(1), _site(), "b", data)  # type: ignore[misc]
    text = "\"><script>alert(1)</script>"
    generate._place(random.Random(1), req, text, "raw", "cannot open ledger")
    body, ctype = generate._body(random.Random(1), req, None)
    assert ctype == "text/plain;charset=UTF-8" and body is not None
    last = json.loads(body.splitlines()[2])
    assert last["message"] == text
    assert SHAPES["b"]["shapes"][0]["body"] != body          # the shape itself is not changed


def test_a_raw_value_outside_json_is_replaced_as_it_is() -> None:
    body: dict[str, object] = {"text": "name=ledger&note=cannot open", "content_type": "application/x-www-form-urlencoded"}
    apps.place_raw(body, "cannot open", "1' OR '1'='1")
    assert body["text"] == "name=ledger&note=1' OR '1'='1"


def test_attacks_land_in_application_shapes(data: Path) -> None:
    site = _site()
    for i in range(30):
        req, _ = apps.request(random.Random(i), site, "a", data)  # type: ignore[misc]
        p = payloads.Payload("' OR 1=1--", "sqli", "fixture")
        req, _placed = generate.place_attack(random.Random(i), req, site, p)
        target = generate._target(req, random.Random(i))
        assert "OR" in target or "%27" in target or "'" in target, target


def test_attacks_go_where_the_payload_model_reads() -> None:
    """A value deep in a long body is beyond the payload model's window: attacks are placed where it reads, so no row
    teaches it that a benign opening is an attack (the detectors read the whole body)."""
    early = sites.Request("POST", "/api/1/envelope/", [], "telemetry", "beacon", body_kind="raw",
                          body={"text": '{"message":"short"}\n' + "x" * 400 + '{"note":"deep"}', "content_type": "text/plain"},
                          slots=[("raw", "short"), ("raw", "deep")])
    assert generate._visible_slots(early) == [("raw", "short")]
    nested = sites.Request("POST", "/posts", [], "post", "xhr-write", body_kind="json",
                           body={"title": "t", "content": "y" * 300, "status": "draft"},
                           slots=[("json", "title"), ("json", "status")])
    assert generate._visible_slots(nested) == [("json", "title")]
    site = _site()
    for i in range(20):
        req, _ = generate.place_attack(random.Random(i), sites.Request(
            "POST", "/api/1/envelope/", [], "telemetry", "beacon", body_kind="raw",
            body={"text": "z" * 300 + '"deep"', "content_type": "text/plain"}, slots=[("raw", "deep")]),
            site, payloads.Payload("<svg onload=alert(1)>", "xss", "fixture"))
        assert "onload" not in str(req.body["text"]) and any("onload" in v for _k, v in req.query)
