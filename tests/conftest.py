"""Shared fixtures: real origins and real gateway processes (see tests/harness.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.features import Features, make_header_map
from tests.harness import Gateway, Origin

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# tests/config/good/full.yaml reads its admin token from this variable (an unreadable secret is an error)
os.environ.setdefault("CLEFGATE_ADMIN_TOKEN", "test-admin-token")


@pytest.fixture(scope="session")
def demo_origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Origin]:
    """The bundled demo site, running for the whole session."""
    origin = Origin(tmp_path_factory.mktemp("demo-origin"), "demo")
    yield origin
    origin.stop()


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    """Start `clefgate serve` processes with a config dict; all are stopped at teardown."""
    started: list[Gateway] = []

    def start(config: dict[str, Any], name: str = "gw", **kw: Any) -> Gateway:
        gw = Gateway(tmp_path / f"{name}-{len(started)}", config, **kw)
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()


def make_features(method: str = "GET", target: str = "/", headers: list[tuple[str, str]] | None = None,
                  client_ip: str = "203.0.113.7", body: bytes = b"", http_version: str = "1.1", **kw: Any) -> Features:
    """A Features factory for unit tests (browser-like headers unless given)."""
    if headers is None:
        headers = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
                   ("Accept", "text/html,application/xhtml+xml"), ("Accept-Language", "en-GB,en;q=0.5")]
    path, _, query = target.partition("?")
    hdrs = tuple(headers)
    hmap = make_header_map(hdrs)
    return Features(method=method, path=path, query=query, http_version=http_version, headers=hdrs, header_map=hmap,
                    client_ip=client_ip, peer_ip=kw.pop("peer_ip", client_ip), host=hmap.get("host", ""),
                    user_agent=hmap.get("user-agent", ""), body_prefix=body,
                    content_length=len(body) if body else None, **kw)


@pytest.fixture
def features_factory() -> Callable[..., Features]:
    return make_features


# ---- the data-path suites (tests/gateway/proxy/, tests/gateway/test_backends.py) share these origins and gateway

@pytest.fixture(scope="module")
def origin_a() -> Any:
    """The aiohttp test origin "a" (tests/origin.py), shared by the module."""
    from tests.proxy_support import shared_origin

    return shared_origin("a")


@pytest.fixture(scope="module")
def raw_origin() -> Any:
    """The scripted raw origin that answers with broken or unusual responses."""
    from tests.proxy_support import shared_origin

    return shared_origin("raw", raw=True)


@pytest.fixture(scope="module")
def gw(origin_a: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An in-process gateway (allow-all) in front of origin "a"."""
    from tests.proxy_support import gateway, make_config

    with gateway(make_config([origin_a.url], tmp_path_factory.mktemp("gw"))) as g:
        yield g


def checked_snippets(module: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``models.data.<module>.snippets()``, checked: the same in two fresh interpreters with other hash seeds (so the
    text, and any data drawn from it, does not depend on set or dict order) and in this one, every search one line of
    8-300 characters with a space, every post 40-1,500 characters. Returns (lines, posts)."""
    import importlib

    code = (f"import hashlib, json; from models.data import {module}; l, p = {module}.snippets(); "
            "print(json.dumps([len(l), len(p), hashlib.sha256(repr((l, p)).encode()).hexdigest()]))")
    root = Path(__file__).resolve().parents[1]
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], cwd=root, env={"PYTHONHASHSEED": seed, "PATH": ""},
                                      capture_output=True, text=True, check=True).stdout) for seed in ("1", "2")]
    assert runs[0] == runs[1]
    lines, posts = importlib.import_module(f"models.data.{module}").snippets()
    assert runs[0][:2] == [len(lines), len(posts)]
    assert all(8 <= len(x) <= 300 and " " in x and "\n" not in x for x in lines)
    assert all(40 <= len(x) <= 1500 for x in posts)
    return lines, posts


async def longest_pause(work: Callable[[], Awaitable[object]]) -> float:
    """The longest the event loop went without running a 10 ms heartbeat while ``work()`` was awaited (seconds)."""
    import asyncio
    import itertools
    import time

    ticks: list[float] = []

    async def heartbeat() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.01)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.05)
    await work()
    beat.cancel()
    return max(b - a for a, b in itertools.pairwise(ticks))
