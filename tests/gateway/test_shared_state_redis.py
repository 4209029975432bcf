"""Shared state through a real redis-server: rate limits, windows and challenge replay across replicas, and the fallback when Redis dies."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from gateway import clients
from gateway.challenge import ChallengeService, Signer, solve
from gateway.clients import ClientState, RateLimit
from gateway.config import ChallengeConfig, ClientsConfig, RedisConfig
from gateway.verdict import Action, LocalResponse, Source, Verdict
from tests.conftest import make_features
from tests.harness import free_port, wait_until

REDIS = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (.ci/system-deps installs it)")


class RedisServer:
    """A throwaway redis-server on a free port: no persistence, loopback only."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        assert REDIS is not None
        self.proc = subprocess.Popen([REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                      "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up() -> bool:
            import socket
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        wait_until(up, 10.0, what="redis-server")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    yield server
    server.stop()


def replica(server: RedisServer, **redis_kw: float) -> ClientState:
    """A worker's shared state on ``server``. Redis calls get a generous deadline unless a test sets one: on a busy machine
    a first connection can take longer than the production 0.25 s, and a timed-out call decides on local state (the
    fallback, which its own test covers) where these tests mean to check what the replicas share."""
    redis_kw.setdefault("timeout_s", 5.0)
    return ClientState(ClientsConfig(window_s=60), RedisConfig(url=server.url, key_prefix=f"t{server.port}:", **redis_kw))


async def test_replicas_share_rate_limits(redis_server: RedisServer) -> None:
    a, b = replica(redis_server), replica(redis_server)
    try:
        limit = RateLimit(10, 60.0)
        assert a.take("login", "198.51.100.7", limit) and await a.sync()
        assert b.take("login", "198.51.100.7", limit)   # b's first use: it does not know about a's
        assert await b.sync()                            # ... and takes the shared total as its baseline
        assert all(a.take("login", "198.51.100.7", limit) for _ in range(7))
        assert await a.sync()
        assert b.take("login", "198.51.100.7", limit)
        assert await b.sync()                            # now b knows a's seven since: 9 of 10 used
        assert b.take("login", "198.51.100.7", limit) is True
        assert b.take("login", "198.51.100.7", limit) is False
        assert await b.sync()
        assert a.take("login", "198.51.100.7", limit) is True  # a learns at its next sync
        assert await a.sync()
        assert a.take("login", "198.51.100.7", limit) is False
    finally:
        await a.close()
        await b.close()


async def test_replicas_share_windows(redis_server: RedisServer) -> None:
    a, b = replica(redis_server), replica(redis_server)
    try:
        for _ in range(5):
            a.record("203.0.113.50", "/missing", 404)
        assert await a.sync()
        b.record("203.0.113.50", "/x", 200)
        assert await b.sync()
        assert b.windows.counts("203.0.113.50") == (6, 5)
        assert b.stats("203.0.113.50").error_ratio == pytest.approx(5 / 6)
    finally:
        await a.close()
        await b.close()


async def test_sync_task_reconciles_in_the_background(redis_server: RedisServer) -> None:
    a, b = replica(redis_server, sync_interval_s=0.05), replica(redis_server, sync_interval_s=0.05)
    await a.start()
    await b.start()
    try:
        for _ in range(3):
            a.record("203.0.113.60", "/p", 200)
        b.record("203.0.113.60", "/q", 200)
        deadline = time.monotonic() + 5
        while b.windows.counts("203.0.113.60")[0] < 4 and time.monotonic() < deadline:
            b.record("203.0.113.60", "/q", 200)  # b keeps seeing the client, so it keeps syncing it
            await asyncio.sleep(0.05)
        assert b.windows.counts("203.0.113.60")[0] >= 4
    finally:
        await a.close()
        await b.close()


def _service(state: ClientState) -> ChallengeService:
    return ChallengeService(ChallengeConfig(), Signer([("k1", b"r" * 32)]), state)


async def _answer(svc: ChallengeService, token: str, counter: int) -> LocalResponse:
    body = urlencode({"token": token, "counter": str(counter)}).encode()
    out = svc.handle(make_features("POST", "/.clefgate/verify", body=body), body)
    assert not isinstance(out, LocalResponse)  # with Redis the claim is awaited
    return await out  # type: ignore[no-any-return, misc]


async def test_a_solved_challenge_cannot_be_replayed_on_another_replica(redis_server: RedisServer) -> None:
    a, b = replica(redis_server), replica(redis_server)
    svc_a, svc_b = _service(a), _service(b)
    try:
        html = svc_a.challenge(Verdict(Action.CHALLENGE, Source.RULE, "r", difficulty=6), make_features()).body.decode()
        token = re.search(r'name="token" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
        counter = solve(re.search(r'data-nonce="([^"]+)"', html).group(1), 6)  # type: ignore[union-attr]
        assert (await _answer(svc_a, token, counter)).status == 303
        replayed = await _answer(svc_b, token, counter)
        assert a.shared_up and b.shared_up  # both claims went to Redis, none fell back to local state
        assert replayed.status == 403 and b"replayed" in replayed.body
    finally:
        await a.close()
        await b.close()


async def test_when_redis_dies_local_state_decides_and_the_fallback_is_counted(redis_server: RedisServer) -> None:
    state = replica(redis_server, retry_s=0.0, timeout_s=0.2)
    svc = _service(state)
    try:
        limit = RateLimit(3, 60.0)
        assert state.take("r", "k", limit)
        assert await state.sync() and state.shared_up
        redis_server.stop()
        errors, fallbacks = clients.REDIS_ERRORS.get("sync"), clients.FALLBACKS.get("sync")
        assert [state.take("r", "k", limit) for _ in range(3)] == [True, True, False]  # the limit still holds
        assert await state.sync() is False
        assert clients.REDIS_ERRORS.get("sync") == errors + 1 and clients.FALLBACKS.get("sync") == fallbacks + 1
        assert clients.SHARED_UP.get() == 0.0

        # the challenge still works, with replay protection from the local store
        replays = clients.FALLBACKS.get("replay")
        html = svc.challenge(Verdict(Action.CHALLENGE, Source.RULE, "r", difficulty=6), make_features()).body.decode()
        token = re.search(r'name="token" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
        counter = solve(re.search(r'data-nonce="([^"]+)"', html).group(1), 6)  # type: ignore[union-attr]
        assert (await _answer(svc, token, counter)).status == 303
        assert (await _answer(svc, token, counter)).status == 403
        assert clients.FALLBACKS.get("replay") >= replays + 1

        redis_server.start()  # the same port: the replica reconnects on its next sync
        state.record("203.0.113.9", "/", 200)
        assert await state.sync() is True
        assert state.shared_up and clients.SHARED_UP.get() == 1.0
    finally:
        await state.close()


async def test_a_burst_of_claims_waits_for_connections_instead_of_failing(redis_server: RedisServer) -> None:
    state = replica(redis_server)
    try:
        errors = clients.REDIS_ERRORS.get("claim")
        got = await asyncio.gather(*[state.claim(f"nonce-{i}", 300, lambda: True) for i in range(300)])
        assert all(got) and state.shared_up
        assert clients.REDIS_ERRORS.get("claim") == errors
        assert await state.claim("nonce-7", 300, lambda: True) is False  # and each was claimed in Redis
    finally:
        await state.close()
