"""The real-application request shapes (models/corpus/data/apps-*.json) follow their format, and the extractor turns
an API description into the requests its protocol sends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from models.corpus import build_apps

DATA = Path(build_apps.__file__).resolve().parent / "data"
FILES = sorted(DATA.glob("apps-*.json"))
API_FILES = [DATA / "apps-botocore.json", DATA / "apps-github.json"]
KEYS = {"app", "group", "method", "path", "query", "body_kind", "body", "content_type", "context", "slots"}


def load(path: Path) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return obj


def test_the_api_files_are_committed() -> None:
    assert all(p in FILES for p in API_FILES)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_file_is_canonical_and_within_limits(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    obj = load(path)
    assert text == json.dumps(obj, indent=None, separators=(",", ":"), sort_keys=True) + "\n"
    assert set(obj) == {"source", "half", "from", "licence", "shapes"}
    assert path.name == f"apps-{obj['source']}.json" and obj["half"] in ("a", "b") and obj["from"] and obj["licence"]
    assert 300 <= len(obj["shapes"]) <= 4000
    assert len(text.encode()) <= 1_500_000


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_shape_follows_the_format(path: Path) -> None:
    for shape in load(path)["shapes"]:
        assert set(shape) <= KEYS and set(shape) >= KEYS - {"content_type"}, shape
        assert shape["group"] in ("api", "write", "telemetry", "post", "form", "search", "page")
        assert shape["method"] in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
        assert shape["context"] in ("xhr", "xhr-write", "nav", "nav-post", "beacon")
        assert shape["app"] and isinstance(shape["app"], str)
        assert shape["path"].startswith("/") and "?" not in shape["path"]
        assert not re.search(r"[{}]", re.sub(r"\{id\}|\{word\}", "", shape["path"])), shape["path"]
        assert all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in shape["query"])
        kind, body = shape["body_kind"], shape["body"]
        if kind is None:
            assert body is None
        elif kind == "json":
            assert isinstance(body, dict)
        elif kind == "form":
            assert isinstance(body, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in body.items())
        else:
            assert kind == "raw" and isinstance(body, str)
        assert ("content_type" in shape) == (kind == "raw")
        if body is not None:
            sent = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))   # a raw body is sent as it is
            assert len(sent.encode()) <= 6 * 1024 + 512
        names = {n for n, _ in shape["query"]}
        for where, what in shape["slots"]:
            if where == "query":
                assert what in names, (what, shape)
            elif where in ("json", "form"):
                assert kind == where and what in body, (what, shape)
            elif where == "raw":
                assert kind == "raw" and what and what in body
            else:
                assert (where, what) == ("path", "last") and shape["path"].rstrip("/").endswith(("{id}", "{word}"))


def test_halves_differ() -> None:
    halves = {p.name: load(p)["half"] for p in API_FILES}
    assert set(halves.values()) == {"a", "b"}
    sources = {load(p)["from"] for p in API_FILES}
    assert len(sources) == len(API_FILES)


def test_api_files_cover_many_services_and_both_kinds_of_request() -> None:
    boto = load(DATA / "apps-botocore.json")["shapes"]
    assert len({s["app"] for s in boto}) > 200
    assert {s["body_kind"] for s in boto} >= {None, "json", "form"}
    github = load(DATA / "apps-github.json")["shapes"]
    assert {s["group"] for s in github} >= {"api", "write"} and sum(s["body_kind"] == "json" for s in github) > 300
    for shapes in (boto, github):
        assert sum(bool(s["slots"]) for s in shapes) > len(shapes) // 2


def test_validator_rejects_what_the_format_forbids() -> None:
    good = {"app": "x", "group": "api", "method": "GET", "path": "/a/{id}", "query": [["q", "v"]], "body_kind": None,
            "body": None, "context": "xhr", "slots": [["query", "q"], ["path", "last"]]}
    assert build_apps.shape_problems(good) == []
    for change in ({"path": "/a/{owner}"}, {"slots": [["json", "q"]]}, {"body_kind": "form", "body": {"a": 1}},
                   {"group": "other"}, {"slots": [["path", "last"]], "path": "/a"}, {"extra": 1}):
        assert build_apps.shape_problems({**good, **change}), change


# ---------------------------------------------------------------------------------------------- the extractor

WIDGETS = {
    "metadata": {"protocol": "rest-json", "protocols": ["rest-json"], "apiVersion": "2020-01-01", "endpointPrefix": "widgets"},
    "operations": {
        "GetWidget": {"name": "GetWidget", "http": {"method": "GET", "requestUri": "/2020-01-01/widgets/{WidgetId}"},
                      "input": {"shape": "GetWidgetRequest"}},
        "CreateWidget": {"name": "CreateWidget", "http": {"method": "POST", "requestUri": "/2020-01-01/widgets"},
                         "input": {"shape": "CreateWidgetRequest"}},
    },
    "shapes": {
        "GetWidgetRequest": {"type": "structure", "required": ["WidgetId", "View", "Trace"], "members": {
            "WidgetId": {"shape": "String", "location": "uri", "locationName": "WidgetId"},
            "View": {"shape": "View", "location": "querystring", "locationName": "view"},
            "Trace": {"shape": "String", "location": "header", "locationName": "X-Trace"}}},
        "CreateWidgetRequest": {"type": "structure", "required": ["Name", "Size", "Colour", "Parts"], "members": {
            "Name": {"shape": "Name"}, "Size": {"shape": "Size"}, "Colour": {"shape": "Colour"},
            "Parts": {"shape": "Parts"}}},
        "String": {"type": "string"},
        "Name": {"type": "string", "min": 3, "max": 8},
        "Size": {"type": "integer", "min": 4, "max": 4},
        "View": {"type": "string", "enum": ["FULL"]},
        "Colour": {"type": "string", "enum": ["RED"]},
        "Parts": {"type": "list", "member": {"shape": "Colour"}},
    },
}

QUEUES = {
    "metadata": {"protocol": "query", "apiVersion": "2012-11-05", "endpointPrefix": "queues"},
    "operations": {"SendThing": {"name": "SendThing", "http": {"method": "POST", "requestUri": "/"},
                                 "input": {"shape": "SendThingRequest"}}},
    "shapes": {
        "SendThingRequest": {"type": "structure", "required": ["QueueUrl", "Labels"], "members": {
            "QueueUrl": {"shape": "String"}, "Labels": {"shape": "Labels"}}},
        "Labels": {"type": "list", "member": {"shape": "Colour"}},
        "Colour": {"type": "string", "enum": ["RED"]},
        "String": {"type": "string"},
    },
}


def test_botocore_rest_json_fixture_gives_the_requests_the_sdk_sends() -> None:
    shapes = build_apps.botocore_shapes({"widgets": WIDGETS}, ["alpha", "beta"], seed=1)
    by_method = {s["method"]: s for s in shapes}
    assert len(shapes) == 2 and set(by_method) == {"GET", "POST"}
    assert by_method["GET"] == {
        "app": "widgets", "group": "api", "method": "GET", "path": "/2020-01-01/widgets/{id}",
        "query": [["view", "FULL"]], "body_kind": None, "body": None, "context": "xhr",
        "slots": [["query", "view"], ["path", "last"]]}
    post = by_method["POST"]
    assert {k: v for k, v in post.items() if k != "body"} == {
        "app": "widgets", "group": "write", "method": "POST", "path": "/2020-01-01/widgets", "query": [],
        "body_kind": "json", "context": "xhr-write", "slots": [["json", "Name"], ["json", "Colour"]]}
    body = post["body"]
    assert list(body) == ["Name", "Size", "Colour", "Parts"]
    assert body["Size"] == 4 and body["Colour"] == "RED" and 3 <= len(body["Name"]) <= 8
    assert 1 <= len(body["Parts"]) <= 3 and set(body["Parts"]) == {"RED"}
    assert shapes == build_apps.botocore_shapes({"widgets": WIDGETS}, ["alpha", "beta"], seed=1)


def test_botocore_query_fixture_is_a_flattened_form() -> None:
    (shape,) = build_apps.botocore_shapes({"queues": QUEUES}, ["alpha"], seed=3)
    body = shape["body"]
    assert shape["method"] == "POST" and shape["path"] == "/" and shape["body_kind"] == "form"
    assert body["Action"] == "SendThing" and body["Version"] == "2012-11-05" and body["Labels.member.1"] == "RED"
    assert set(body) <= {"Action", "Version", "QueueUrl", "Labels.member.1", "Labels.member.2", "Labels.member.3"}
    assert ["form", "QueueUrl"] in shape["slots"] and ["form", "Action"] not in shape["slots"]


def test_openapi_fixture_takes_examples_enums_and_path_placeholders() -> None:
    spec = {"paths": {"/repos/{owner}/{repo}/issues/{issue_number}": {
        "parameters": [{"$ref": "#/components/parameters/owner"}],
        "patch": {"parameters": [{"name": "repo", "in": "path", "schema": {"type": "string"}},
                                 {"name": "issue_number", "in": "path", "schema": {"type": "integer"}},
                                 {"name": "state", "in": "query", "required": True, "schema": {"enum": ["open"]}}],
                  "requestBody": {"content": {"application/json": {
                      "schema": {"type": "object", "properties": {"title": {"type": "string"}}},
                      "examples": {"default": {"value": {"title": "Found a bug", "labels": ["bug"]}}}}}}}}},
        "components": {"parameters": {"owner": {"name": "owner", "in": "path", "schema": {"type": "string"}}}}}
    shapes = build_apps.github_shapes(spec, ["alpha"], variants=2)
    example = [s for s in shapes if s["body"] == {"title": "Found a bug", "labels": ["bug"]}]
    assert len(example) == 1
    assert example[0]["path"] == "/repos/{word}/{word}/issues/{id}" and example[0]["query"] == [["state", "open"]]
    assert example[0]["group"] == "write" and example[0]["method"] == "PATCH"
    assert example[0]["slots"] == [["query", "state"], ["json", "title"], ["path", "last"]]
