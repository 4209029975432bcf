"""Never block a person: the shipped rules and model behind a real gateway, a real origin and raw sockets.

The people cases (tests/data/people-cases.jsonl: Safari 18 on iOS and macOS, Safari 15 without
Sec-Fetch-*, Chrome 130 with ``Connection: close``) are sent exactly as recorded, header order
and spelling kept, through a trusted front proxy's X-Forwarded-For; they end forwarded or
challenged, never blocked. Strangers behind one address keep separate histories; a client that
ignores challenges, or showed attack evidence, earns its block.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness import ROOT, Gateway, config_for

pytestmark = pytest.mark.timeout(240)

PEOPLE = [json.loads(line) for line in (ROOT / "tests" / "data" / "people-cases.jsonl").read_text().splitlines() if line.strip()]
SQLI = "/search?q=1%27%20OR%20%271%27%3D%271--"
BOT_HEADERS = [("Host", "shop.example"), ("User-Agent", "python-requests/2.31.0"), ("Accept-Encoding", "gzip, deflate"), ("Accept", "*/*")]
PROBE = """rules:
  - name: challenge-probe
    description: A deterministic challenge, so the tests choose which requests are suspicious.
    path: "/probe/**"
    action: challenge
    difficulty: 12
"""


@pytest.fixture(scope="module")
def gateway(demo_origin: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("safe-policy")
    probe = tmp / "probe.yaml"
    probe.write_text(PROBE)
    cfg = config_for(demo_origin.url, rules={"files": [str(probe), str(ROOT / "rules" / "default.yaml")],
                                             "fallback_files": [str(ROOT / "rules" / "injections.yaml")]},
                     model={"enabled": True}, challenge={"dev_generate_secret": True},
                     logging={"level": "info", "access_log": "-", "debug_headers": True})
    gw = Gateway(tmp / "gw", cfg, ready_timeout=120)
    yield gw
    gw.stop()


def send(gw: Gateway, method: str, target: str, headers: list[tuple[str, str]], ip: str) -> tuple[int, dict[str, str]]:
    """One request as written (order and spelling of its headers kept), from ``ip`` via the trusted proxy: (status, head)."""
    lines = [f"{method} {target} HTTP/1.1", *(f"{n}: {v}" for n, v in headers), f"X-Forwarded-For: {ip}", "", ""]
    with socket.create_connection(("127.0.0.1", gw.port), timeout=60) as s:
        s.sendall("\r\n".join(lines).encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}
    return int(head[0].split()[1]), fields


@pytest.mark.parametrize("case", PEOPLE, ids=[f"{c['id']}-{c['subtype']}{c['path']}" for c in PEOPLE])
def test_people_are_forwarded_or_challenged_never_blocked(gateway: Gateway, case: dict[str, Any]) -> None:
    status, head = send(gateway, case["method"], case["path"], [(n, v) for n, v in case["headers"]], case["client_ip"])
    assert head.get("x-clefgate-verdict") in ("forward", "challenge"), (status, head)
    assert head.get("x-clefgate-source") != "client"


def browser(i: int) -> list[tuple[str, str]]:
    """The i-th of 200 people behind one address: each its own browser build and language."""
    ua = f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{100 + i % 40}.0.0.0 Safari/537.36"
    return [("Host", "shop.example"), ("User-Agent", ua), ("Accept", "text/html,application/xhtml+xml"),
            ("Accept-Language", f"en-GB,en;q=0.{1 + i // 40}"), ("Accept-Encoding", "gzip, deflate, br")]


def test_one_attacker_among_200_browsers_behind_one_address_blocks_nobody_else(gateway: Gateway) -> None:
    ip = "198.51.100.160"
    status, head = send(gateway, "GET", SQLI, BOT_HEADERS, ip)
    assert status == 403 and head["x-clefgate-verdict"] == "block" and "query:q" in head["x-clefgate-reason"], head
    # its next suspicious request is blocked on that evidence
    status, head = send(gateway, "GET", "/probe/a", BOT_HEADERS, ip)
    assert status == 403 and head["x-clefgate-source"] == "client" and "attack evidence" in head["x-clefgate-reason"], head
    outcomes = [send(gateway, "GET", "/probe/a" if i % 2 else "/shop", browser(i), ip)[1] for i in range(199)]
    assert [h["x-clefgate-verdict"] for h in outcomes if h["x-clefgate-verdict"] not in ("forward", "challenge")] == []
    metrics = {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in gateway.metrics().splitlines()
               if line.startswith(("clefgate_client_blocks_total", "clefgate_shared_addresses"))}
    assert metrics.get('clefgate_client_blocks_total{mode="enforce",why="attack_evidence"}') == 1.0, metrics
    assert metrics.get("clefgate_shared_addresses", 0) >= 1.0, metrics


def test_a_client_that_ignores_five_challenges_in_a_minute_is_then_blocked(gateway: Gateway) -> None:
    ip, headers = "198.51.100.170", browser(7)
    seen = []
    for _ in range(6):
        seen.append(send(gateway, "GET", "/probe/page", headers, ip)[1])
        time.sleep(1.1)  # separate encounters: challenges less than a second apart count once
    assert [h["x-clefgate-verdict"] for h in seen] == ["challenge"] * 5 + ["block"]
    assert seen[-1]["x-clefgate-source"] == "client"
    assert "challenged 5 times in 60 s without solving one" in seen[-1]["x-clefgate-reason"]
    # the same address, another browser: challenged, not blocked
    assert send(gateway, "GET", "/probe/page", browser(8), ip)[1]["x-clefgate-verdict"] == "challenge"
    # and the client is blocked only where it would be challenged: what the rules let through still goes through
    assert send(gateway, "GET", "/blog/feed", headers, ip)[1]["x-clefgate-verdict"] == "forward"


def test_the_people_cases_are_kept_as_test_data() -> None:
    assert {c["subtype"] for c in PEOPLE} >= {"safari18-ios", "safari18-mac", "safari15-ios", "chrome+connection-close"}
    assert all(c["label"] == "human" for c in PEOPLE) and Path(ROOT / "tests" / "data" / "people-cases.jsonl").stat().st_size > 0


# a character outside the BMP escaped as a UTF-16 pair, as Python's and Java's JSON writers put an emoji; a lone half of
# a pair, which JSON's grammar lets through; and the same in a query, a form and a header
HALVES = [
    ("application/json", r'{"body": "## \ud83d\ude4c want to contribute?", "draft": false}'),
    ("application/json", r'{"a": "\ud800", "\udc00": ["x\uDBFF"]}'),
    ("application/x-www-form-urlencoded", "comment=%ED%A0%80+%F0%9F%98%80+%ff"),
    ("text/plain", r"\ud800 as written"),
]


@pytest.mark.parametrize("ctype,body", HALVES, ids=[f"{c.split('/')[1]}-{i}" for i, (c, _) in enumerate(HALVES)])
def test_escaped_pairs_and_lone_halves_are_decided_not_failed(gateway: Gateway, ctype: str, body: str) -> None:
    data = body.encode()
    lines = ["POST /api/posts?q=%ED%A0%80 HTTP/1.1", "Host: shop.example", "User-Agent: python-requests/2.31.0",
             f"Content-Type: {ctype}", f"Content-Length: {len(data)}", "X-Data: \\ud800", "X-Forwarded-For: 198.51.100.77", "", ""]
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=60) as s:
        s.sendall("\r\n".join(lines).encode("latin-1") + data)
        head = s.recv(65536).split(b"\r\n\r\n", 1)[0].decode("latin-1")
    assert head.split()[1] != "500", head
    assert "x-clefgate-verdict:" in head.lower(), head
