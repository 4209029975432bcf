"""Per-client windows, token buckets, bounds, and reconciliation through a shared backend (in-process)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gateway import clients
from gateway.clients import (
    ClientState,
    ClientWindows,
    MemoryBackend,
    RateLimit,
    RateLimiter,
    network_of,
    parse_ip,
    rate_key,
)
from gateway.config import ClientsConfig, RedisConfig


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("text,parsed", [
    ("203.0.113.7", (4, 0xCB007107)), ("::ffff:203.0.113.7", (4, 0xCB007107)), ("2001:db8::1", (6, 0x20010DB8 << 96 | 1)),
    ("fe80::1%eth0", (6, 0xFE80 << 112 | 1)), ("", None), ("1.2.3", None), ("not an ip", None), ("1.2.3.4.5", None), ("ü", None),
])
def test_parse_ip(text: str, parsed: tuple[int, int] | None) -> None:
    assert parse_ip(text) == parsed


def test_network_of_groups_by_prefix() -> None:
    assert network_of("203.0.113.7", 24, 64) == network_of("203.0.113.200", 24, 64)
    assert network_of("203.0.113.7", 24, 64) != network_of("203.0.114.7", 24, 64)
    assert network_of("2001:db8:1:2::1", 24, 64) == network_of("2001:db8:1:2:ffff::9", 24, 64)
    assert network_of("2001:db8:1:3::1", 24, 64) != network_of("2001:db8:1:2::1", 24, 64)
    assert network_of("203.0.113.7", 0, 0) == network_of("198.51.100.1", 0, 0)
    assert network_of("garbage", 24, 64) == "garbage"


def test_rate_keys() -> None:
    cfg = ClientsConfig(ipv4_prefix=24)
    assert rate_key("ip", "203.0.113.7", "", cfg) == "203.0.113.7"
    assert rate_key("prefix", "203.0.113.7", "", cfg) == rate_key("prefix", "203.0.113.99", "", cfg)
    hashed = rate_key("header:X-Api-Key", "203.0.113.7", "sk-secret", cfg)
    assert hashed.startswith("h:") and "secret" not in hashed
    assert hashed == rate_key("header:X-Api-Key", "198.51.100.1", "sk-secret", cfg)  # same key, any address
    assert rate_key("header:X-Api-Key", "203.0.113.7", "", cfg) == "203.0.113.7"  # no header: the address


def test_window_slides_and_measures() -> None:
    clock = Clock()
    w = ClientWindows(window_s=60, max_clients=10, clock=clock)
    assert w.stats("a").requests == 0
    for i, status in enumerate([200, 404, 200, 403, 500, 200]):
        clock.t += 2.0
        w.record("a", f"/p/{i % 3}", status)
    s = w.stats("a")
    assert s.requests == 6
    assert s.rate_per_min == pytest.approx(6.0)
    assert s.error_ratio == pytest.approx(2 / 6)  # 404 and 403; a 500 is not the client's fault
    assert s.path_diversity == pytest.approx(3 / 6)
    assert s.mean_gap_s == pytest.approx(2.0)
    assert w.counts("a") == (6, 2)
    clock.t += 50  # the first slot (10 s) has slid out
    assert w.stats("a").requests < 6
    clock.t += 70
    assert w.counts("a") == (0, 0)
    w.passed("a")
    assert w.stats("a").challenges_passed == 1


def test_windows_are_bounded_and_evictions_counted() -> None:
    w = ClientWindows(window_s=60, max_clients=3, clock=Clock())
    before = clients.EVICTIONS.get("windows")
    for name in "abcde":
        w.record(name, "/", 200)
    assert len(w) == 3
    assert clients.EVICTIONS.get("windows") - before == 2
    w.record("c", "/", 200)  # recently used: survives the next eviction
    w.record("f", "/", 200)
    assert w.counts("c") == (2, 0) and w.counts("d") == (0, 0)


def test_token_bucket_is_exact() -> None:
    clock = Clock()
    limiter = RateLimiter(max_buckets=10, clock=clock)
    limit = RateLimit(120, 60.0)
    assert all(limiter.take("r", "k", limit) for _ in range(120))
    assert limiter.take("r", "k", limit) is False          # the 121st within the same instant
    assert limiter.take("r", "other", limit) is True        # other keys have their own bucket
    clock.t += 0.49
    assert limiter.take("r", "k", limit) is False          # 0.98 tokens refilled: not yet
    clock.t += 0.02
    assert limiter.take("r", "k", limit) is True           # 2 per second
    assert limiter.take("r", "k", limit) is False
    clock.t += 3600
    assert sum(limiter.take("r", "k", limit) for _ in range(200)) == 120  # refilled to the burst, no more


def test_token_bucket_burst_and_bounds() -> None:
    clock = Clock()
    limiter = RateLimiter(max_buckets=2, clock=clock)
    limit = RateLimit(10, 1.0, burst=3)
    assert [limiter.take("r", "a", limit) for _ in range(4)] == [True, True, True, False]
    before = clients.EVICTIONS.get("rate_buckets")
    limiter.take("r", "b", limit)
    limiter.take("r", "c", limit)
    assert len(limiter) == 2 and clients.EVICTIONS.get("rate_buckets") - before == 1
    assert limit.describe() == "10/s by ip, burst 3"
    assert RateLimit(120, 60.0, "prefix").describe() == "120/min by prefix"


def test_size_gauges_report_every_live_state() -> None:
    state = ClientState(ClientsConfig(max_clients=50))
    for i in range(7):
        state.record(f"10.0.0.{i}", "/", 200)
    sizes = dict(clients.ENTRIES.snapshot())
    assert sizes[("windows",)] >= 7
    assert dict(clients.ENTRY_BYTES.snapshot())[("windows",)] >= 7 * state.windows.entry_bytes


# ----------------------------------------------------------------------------- shared state (in-process backend)


def _replicas(clock: Clock) -> tuple[ClientState, ClientState, MemoryBackend]:
    shared = MemoryBackend(clock=clock)
    cfg = ClientsConfig(window_s=60)
    a = ClientState(cfg, RedisConfig(), backend=shared, clock=clock)
    b = ClientState(cfg, RedisConfig(), backend=shared, clock=clock)
    return a, b, shared


async def test_replicas_share_rate_limits_after_a_sync() -> None:
    clock = Clock()
    a, b, _ = _replicas(clock)
    limit = RateLimit(10, 60.0)
    assert all(a.take("r", "1.2.3.4", limit) for _ in range(6))
    assert b.take("r", "1.2.3.4", limit)  # b has not heard of a's six yet
    assert await a.sync() and await b.sync()
    # b now knows the client used 7 of 10 in total: three left
    assert [b.take("r", "1.2.3.4", limit) for _ in range(4)] == [True, True, True, False]
    await b.sync()
    # a learns of b's use at its own next sync after it used the bucket (at most one interval late)
    assert a.take("r", "1.2.3.4", limit) is True
    await a.sync()
    assert a.take("r", "1.2.3.4", limit) is False
    assert a.limiter.tokens("r", "1.2.3.4") is not None and a.limiter.tokens("r", "1.2.3.4") < 1


async def test_replicas_share_windows_including_history() -> None:
    clock = Clock()
    a, b, _ = _replicas(clock)
    for _ in range(4):
        a.record("9.9.9.9", "/x", 404)
    await a.sync()
    clock.t += 15  # a new slot: b first sees the client now, and pulls the older slot too
    b.record("9.9.9.9", "/y", 200)
    await b.sync()
    assert b.windows.counts("9.9.9.9") == (5, 4)
    await a.sync()
    a.record("9.9.9.9", "/z", 200)
    await a.sync()
    assert a.windows.counts("9.9.9.9") == (6, 4)


async def test_counts_made_just_before_a_slot_boundary_are_shared_after_it() -> None:
    """A burst counted in the last sync interval of a slot is pushed at the next sync, in the next slot."""
    clock = Clock()
    a, b, _ = _replicas(clock)  # windows of 60 s: slots of 10 s
    clock.t = 9.8
    for _ in range(50):
        a.record("203.0.113.7", "/login", 401)
    clock.t = 10.1  # a's next sync falls in the next slot
    await a.sync()
    clock.t = 10.5
    b.record("203.0.113.7", "/login", 401)  # the client moves to b
    await b.sync()
    assert b.windows.counts("203.0.113.7") == (51, 51)
    await a.sync()
    a.record("203.0.113.7", "/login", 401)
    await a.sync()
    assert a.windows.counts("203.0.113.7") == (52, 52)  # and nothing is counted twice


async def test_claims_are_shared_and_remembered_locally() -> None:
    clock = Clock()
    a, b, _ = _replicas(clock)
    seen_a: set[str] = set()
    seen_b: set[str] = set()

    def local(seen: set[str], key: str) -> bool:
        first = key not in seen
        seen.add(key)
        return first

    assert await a.claim("n1", 60, lambda: local(seen_a, "n1")) is True
    assert await b.claim("n1", 60, lambda: local(seen_b, "n1")) is False
    assert await a.claim("n1", 60, lambda: local(seen_a, "n1")) is False


class FailingBackend(MemoryBackend):
    """A backend that fails on demand (Redis down)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.down = False

    async def add(self, items: Sequence[tuple[str, str, int, float]]) -> list[int]:
        if self.down:
            raise ConnectionError("connection refused")
        return await super().add(items)

    async def claim(self, key: str, ttl_s: float) -> bool:
        if self.down:
            raise ConnectionError("connection refused")
        return await super().claim(key, ttl_s)


async def test_backend_failure_falls_back_to_local_state_and_is_counted() -> None:
    clock = Clock()
    backend = FailingBackend(clock)
    state = ClientState(ClientsConfig(), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    limit = RateLimit(3, 60.0)
    backend.down = True
    errors = clients.REDIS_ERRORS.get("sync")
    fallbacks = clients.FALLBACKS.get("sync")
    assert [state.take("r", "k", limit) for _ in range(4)] == [True, True, True, False]  # decisions go on locally
    assert await state.sync() is False
    assert clients.REDIS_ERRORS.get("sync") == errors + 1
    assert clients.FALLBACKS.get("sync") == fallbacks + 1
    assert state.shared_up is False and clients.SHARED_UP.get() == 0.0
    claims = clients.FALLBACKS.get("replay")
    assert await state.claim("n", 60, lambda: True) is True
    assert clients.FALLBACKS.get("replay") == claims + 1
    backend.down = False
    state.record("1.1.1.1", "/", 200)
    assert await state.sync() is True
    assert state.shared_up is True and clients.SHARED_UP.get() == 1.0


async def test_sync_task_starts_and_stops() -> None:
    clock = Clock()
    backend = MemoryBackend(clock=clock)
    state = ClientState(ClientsConfig(), RedisConfig(sync_interval_s=0.01), backend=backend, clock=clock)
    state.record("1.1.1.1", "/", 200)
    await state.start()
    assert state._task is not None
    for _ in range(100):
        if not state.windows.dirty:
            break
        import asyncio
        await asyncio.sleep(0.01)
    assert not state.windows.dirty  # the task pushed the change
    await state.close()
    assert state._task is None


def test_without_a_backend_nothing_is_tracked_for_sync() -> None:
    state = ClientState()
    assert state.backend is None and state.windows.dirty is None and state.limiter.dirty is None
    assert state.compatible(ClientsConfig(), RedisConfig())
    assert not state.compatible(ClientsConfig(window_s=30), RedisConfig())
