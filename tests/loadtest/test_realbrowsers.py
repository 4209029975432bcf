"""tests/data/browsers/: what real browsers sent, recorded server-side by loadtest/realbrowsers.py.

These tests check that the recordings are well-formed test data (they parse through
``gateway.features.from_record``, carry the site's Host, keep the wire order and case, come from the
browser their file names, cover every kind of request a shop visitor makes), and that the recorder
itself writes what arrives on a real socket. They assert no gateway verdicts: the people tests do.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.features import from_record
from loadtest import realbrowsers

DATA = Path(__file__).resolve().parents[1] / "data" / "browsers"
FILES = sorted(DATA.glob("*.jsonl"))
KEYS = ("id", "label", "subtype", "method", "path", "http_version", "headers", "body", "client_ip")
# every walk makes each of these; a recording that lacks one is incomplete
KINDS = ("navigate", "link", "form-get", "form-post", "redirect", "script-nav", "reload", "css", "js", "image",
         "font", "fetch-get", "fetch-post", "xhr")
USER_AGENTS = {
    "chromium": re.compile(r"^Mozilla/5\.0 \(X11; Linux x86_64\) AppleWebKit/537\.36 \(KHTML, like Gecko\) "
                           r"Chrome/\d+\.0\.0\.0 Safari/537\.36$"),
    "firefox": re.compile(r"^Mozilla/5\.0 \(X11; Linux x86_64; rv:\d+\.0\) Gecko/20100101 Firefox/\d+\.0$"),
    "epiphany": re.compile(r"^Mozilla/5\.0 \(X11; Linux x86_64\) AppleWebKit/605\.1\.15 \(KHTML, like Gecko\) "
                           r"Version/[\d.]+ Safari/605\.1\.15$"),
}


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _browser(path: Path) -> str:
    return path.stem.split("-")[0]


def test_every_browser_is_recorded_directly_and_one_through_the_h2_front() -> None:
    names = {p.stem for p in FILES}
    assert {"chromium", "firefox", "epiphany"} <= names
    assert any(name.endswith("-via-nginx-h2") for name in names)


def test_ids_are_unique_across_files() -> None:
    ids = [r["id"] for p in FILES for r in _records(p)]
    assert ids and len(ids) == len(set(ids))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_records_parse_and_are_well_formed(path: Path) -> None:
    browser = _browser(path)
    via_front = path.stem.endswith("-via-nginx-h2")
    records = _records(path)
    assert records
    for record in records:
        where = f"{path.name} {record.get('id')}"
        assert all(key in record for key in KEYS), where
        assert record["label"] == "human", where
        assert record["subtype"].startswith(f"{browser}-"), where
        assert record["subtype"].endswith("-via-nginx-h2") == via_front, where
        assert record["http_version"] == "HTTP/1.1", where
        assert record["client_ip"].startswith("198.51.100."), where
        assert all(isinstance(h, list) and len(h) == 2 for h in record["headers"]), where
        features = from_record(record)
        assert features.host == realbrowsers.HOST, where
        # wire order and case survive: the parsed headers are the recorded list, pair for pair
        assert [list(h) for h in features.headers] == record["headers"], where
        assert USER_AGENTS[browser].match(features.user_agent), (where, features.user_agent)
        assert features.method == record["method"], where
        if record["body"] is not None:
            assert features.content_length == len(record["body"].encode("utf-8")), where
        names = [n for n, _ in record["headers"]]
        assert len({n.lower() for n in names}) == len(names), (where, names)  # no header twice
        if via_front:
            assert names[0] == "Host", where  # nginx writes its own Host line first
            assert features.header_map.get("x-forwarded-for") == record["client_ip"], where
            assert "connection" not in features.header_map, where  # proxy_set_header Connection ""
        else:
            assert any(n[0].isupper() for n in names if n.lower() == "host"), where


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_recordings_cover_a_whole_visit(path: Path) -> None:
    records = _records(path)
    suffix = "-via-nginx-h2" if path.stem.endswith("-via-nginx-h2") else ""
    kinds = {re.sub(r"^[a-z]+-\d+-", "", r["subtype"]).removesuffix(suffix) for r in records}
    assert set(KINDS) <= kinds, sorted(set(KINDS) - kinds)
    posts = {r["path"]: r for r in records if r["method"] == "POST"}
    assert posts["/api/cart"]["body"].startswith("{"), "fetch() POST carries JSON"
    assert "email=" in posts["/login"]["body"], "form POST carries urlencoded fields"
    cookies = [dict(r["headers"]).get("Cookie") or dict(r["headers"]).get("cookie") or "" for r in records]
    assert any("sid=" in c and "consent=" in c for c in cookies), "cookies set by the server and by script return"


def test_recorder_keeps_what_arrives_on_the_socket() -> None:
    async def scenario() -> tuple[realbrowsers.Session, bytes]:
        session = realbrowsers.Session("firefox", "Mozilla Firefox 153.0esr", "fr_FR.UTF-8", "direct", "198.51.100.9")
        session.step = "form-post"
        server = await asyncio.start_server(realbrowsers.serve(session), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        body = b"email=a%40b.example&password=x"
        raw = (b"POST /login HTTP/1.1\r\nhost: shop.example.test\r\nUser-Agent: UA\r\nx-odd-Case:  v \r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(raw)
        await writer.drain()
        reply = await reader.read(65536)
        writer.close()
        server.close()
        await server.wait_closed()
        return session, reply

    session, reply = asyncio.run(scenario())
    assert reply.startswith(b"HTTP/1.1 303 See Other\r\n")
    assert b"Location: /account" in reply
    (record,) = session.records
    assert record["headers"] == [["host", "shop.example.test"], ["User-Agent", "UA"], ["x-odd-Case", "v"],
                                 ["Content-Length", "30"], ["Connection", "close"]]
    assert record["body"] == "email=a%40b.example&password=x"
    assert record["subtype"] == "firefox-153-form-post"
    assert record["path"] == "/login" and record["http_version"] == "HTTP/1.1"
    assert "/account" in session.redirects


@pytest.mark.parametrize(("target", "kind", "status"), [
    ("/", "page", 200), ("/static/shop.css", "css", 200), ("/favicon.ico", "favicon", 200),
    ("/api/cart", "fetch-get", 200), ("/api/stock?sku=12", "xhr", 200), ("/nope", "other", 404),
])
def test_shop_answers(target: str, kind: str, status: int) -> None:
    response, got = realbrowsers.answer("GET", target, [["Host", realbrowsers.HOST]], b"")
    assert (got, response.status) == (kind, status)


def test_shop_revalidates_assets_with_their_etag() -> None:
    first, _ = realbrowsers.answer("GET", "/static/shop.js", [], b"")
    etag = dict(first.headers)["ETag"]
    again, kind = realbrowsers.answer("GET", "/static/shop.js", [["If-None-Match", etag]], b"")
    assert (again.status, kind, again.body) == (304, "js", b"")
