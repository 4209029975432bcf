"""The admin listener's state changes: always a secret, only JSON, only from its own origin, names never paths."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.harness import Gateway, config_for, http_get

pytestmark = pytest.mark.timeout(120)

TOKEN = "admin-secret-for-tests"


def post(gw: Gateway, path: str, body: bytes = b"{}", headers: dict[str, str] | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(gw.admin_url + path, method="POST", data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_without_a_token_state_changes_are_refused_and_reads_still_work(demo_origin, start_gateway) -> None:
    gw = start_gateway(config_for(demo_origin.url, admin={"token": ""}))
    json_only = {"Content-Type": "application/json"}
    for path, body in (("/admin/reload", b"{}"), ("/admin/model", b'{"enabled": false}')):
        status, answer = post(gw, path, body, json_only)
        assert status == 403, (path, answer)
        assert "admin.token" in answer["how"] and "Authorization: Bearer" in answer["how"]
    status, answer = post(gw, "/admin/model", b'{"enabled": false}', {"Content-Type": "text/plain"})
    assert status == 403
    for path in ("/healthz", "/readyz", "/metrics", "/admin/config"):
        assert http_get(gw.admin_url + path)[0] == 200, path
    assert 'clefgate_admin_refused_total{reason="no_token"} 3' in gw.metrics()
    assert http_get(gw.url + "/shop")[0] == 200


REFUSED_CHANGES = [  # headers added to a good token -> status
    ({"Content-Type": "text/plain"}, 415),
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
    ({}, 415),
    ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403),
    ({"Content-Type": "application/json", "Origin": "null"}, 403),
    ({"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403),
    ({"Content-Type": "application/json", "Authorization": "Bearer wrong"}, 401),
]

PATH_NAMES = [
    {"name": "/tmp/x", "version": "1.7.0"},
    {"name": "../clef", "version": "1.7.0"},
    {"name": "clef-flash", "version": "../../etc"},
    {"name": "clef-flash", "version": "/abs"},
    {"name": "a/b"},
    {"name": ".."},
    {"version": 7},
    {"enabled": "no"},
]


def test_state_changes_take_only_json_from_the_admin_origin_and_names_never_paths(demo_origin, start_gateway, tmp_path: Path) -> None:
    (tmp_path / "x" / "1.7.0").mkdir(parents=True)
    gw = start_gateway(config_for(demo_origin.url, admin={"token": TOKEN}))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for headers, status in REFUSED_CHANGES:
        for path in ("/admin/model", "/admin/reload"):
            got, answer = post(gw, path, b'{"enabled": false}' if path == "/admin/model" else b"{}", {**auth, **headers})
            assert got == status, (path, headers, answer)
    for body in PATH_NAMES:
        got, answer = post(gw, "/admin/model", json.dumps(body).encode(), {**auth, "Content-Type": "application/json"})
        assert got == 400, (body, answer)
    assert json.loads(http_get(gw.admin_url + "/readyz")[1])["workers"][0]["generation"] == 1  # nothing changed
    for origin in (f"http://127.0.0.1:{gw.admin_port}", f"http://localhost:{gw.admin_port}", None):
        headers = {**auth, "Content-Type": "application/json; charset=utf-8", **({"Origin": origin} if origin else {})}
        got, answer = post(gw, "/admin/reload", b"{}", headers)
        assert got == 200 and answer["reloaded"] is True, (origin, answer)
    assert 'clefgate_admin_refused_total{reason="content_type"} 6' in gw.metrics()


def test_a_config_naming_a_model_by_path_is_refused() -> None:
    from gateway import config as configmod

    for model in ({"name": "/tmp/x"}, {"version": "../1.7.0"}, {"name": "a\\b"}):
        with pytest.raises(configmod.ConfigError, match="is not a repository name"):
            configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "model": model})
    for clef in ({"name": "/opt/clef"}, {"version": ".."}):
        with pytest.raises(configmod.ConfigError, match="is not a repository name"):
            configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "clef": clef})
    ok = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "model": {"name": "clef-flash", "version": "1.7.0"}})
    assert ok.model.version == "1.7.0"
