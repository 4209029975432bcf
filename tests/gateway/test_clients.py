"""Per-client windows, token buckets, bounds, and reconciliation through a shared backend (in-process)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

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
    # IPv6: one /64 is one key (a host picks any source address in its /64); the next /64 is another
    assert rate_key("ip", "2001:db8:1:2::1", "", cfg) == rate_key("ip", "2001:db8:1:2:dead:beef:0:7", "", cfg)
    assert rate_key("ip", "2001:db8:1:2::1", "", cfg) != rate_key("ip", "2001:db8:1:3::1", "", cfg)
    assert rate_key("ip", "::ffff:203.0.113.7", "", cfg) != rate_key("ip", "::ffff:203.0.113.8", "", cfg)
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
    assert limit.describe() == "10/s by client, burst 3"
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
    assert all(a.take("r", "1.2.3.4", limit) for _ in range(2))
    assert await a.sync()
    assert b.take("r", "1.2.3.4", limit)
    assert await b.sync()  # b's first sync of the bucket: a baseline, a's two before it are not charged
    assert all(a.take("r", "1.2.3.4", limit) for _ in range(5))  # a: 7 of 10 used
    assert await a.sync()
    assert b.take("r", "1.2.3.4", limit)
    assert await b.sync()
    # b now knows a took five since: 1 + 1 + 5 of 10 used, three left
    assert [b.take("r", "1.2.3.4", limit) for _ in range(4)] == [True, True, True, False]
    await b.sync()
    # a learns of b's use at its own next sync after it used the bucket (at most one interval late)
    assert a.take("r", "1.2.3.4", limit) is True
    await a.sync()
    assert a.take("r", "1.2.3.4", limit) is False
    assert a.limiter.tokens("r", "1.2.3.4") is not None and a.limiter.tokens("r", "1.2.3.4") < 1


async def test_a_replica_new_to_a_client_does_not_charge_its_whole_history() -> None:
    """The shared counter is a running total: a replica (restarted, scaled out, or whose bucket was evicted) that
    meets a client takes it as a baseline instead of charging everything the client ever did elsewhere."""
    clock = Clock()
    a, b, _ = _replicas(clock)
    limit = RateLimit(120, 60.0)
    for _ in range(600):  # ten minutes at half the limit on a
        assert a.take("r", "203.0.113.77", limit)
        clock.t += 1.0
        assert await a.sync()
    got = []
    for _ in range(70):  # the client moves to b, same pace
        got.append(b.take("r", "203.0.113.77", limit))
        clock.t += 1.0
        assert await b.sync()
    assert all(got)
    # and from then on b charges what a takes
    assert all(a.take("r", "203.0.113.77", limit) for _ in range(30))
    assert await a.sync() and b.take("r", "203.0.113.77", limit) and await b.sync()
    assert b.limiter.tokens("r", "203.0.113.77") == pytest.approx(120 - 1 - 30)  # full (1 s after its last), b's own, a's


async def test_replicas_on_hosts_booted_at_different_times_share_windows() -> None:
    """Slot numbers are on the shared wall clock, not on each host's monotonic clock (counted from its boot)."""
    wall = Clock(1_700_000_000.25)
    shared = MemoryBackend(clock=wall)
    cfg = ClientsConfig(window_s=60)
    a = ClientState(cfg, RedisConfig(), backend=shared, clock=lambda: wall.t - 1_699_990_000.0, wall=wall)
    b = ClientState(cfg, RedisConfig(), backend=shared, clock=lambda: wall.t - 1_699_000_000.5, wall=wall)
    assert a.windows.slot(a.windows.clock()) == b.windows.slot(b.windows.clock()) == int(wall.t // 10)
    for _ in range(30):
        a.record("203.0.113.50", "/missing", 404)
    assert await a.sync()
    wall.t += 12  # the next slot: b pulls a's as history
    b.record("203.0.113.50", "/x", 200)
    assert await b.sync()
    assert b.windows.counts("203.0.113.50") == (31, 30)
    # counts_since takes a moment of the windows' own clock and covers whole shared slots after it
    since = b.windows.clock() - 12
    assert b.windows.counts_since("203.0.113.50", since) == (1, 0, pytest.approx(wall.t - 1_700_000_010.0))


def test_only_shared_windows_move_onto_wall_time() -> None:
    local = ClientWindows(window_s=60)
    shared = ClientWindows(window_s=60, shared=True)
    assert local.offset == 0.0 and local.dirty is None
    wall_minus_monotonic = time.time() - time.monotonic()  # shared windows are kept on the wall clock, which replicas share
    assert shared.offset == pytest.approx(wall_minus_monotonic, abs=0.5) and shared.dirty == set()
    assert ClientWindows(window_s=60, clock=Clock(), shared=True).offset == 0.0  # an injected clock keeps its slots
    assert shared.entry_bytes > local.entry_bytes  # the sync array is measured too


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
        self.read_down = False

    async def add(self, items: Sequence[tuple[str, str, int, float]]) -> list[int]:
        if self.down:
            raise ConnectionError("connection refused")
        return await super().add(items)

    async def read(self, items: Sequence[tuple[str, str]]) -> list[int]:
        if self.down or self.read_down:
            raise ConnectionError("connection refused")
        return await super().read(items)

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
        await asyncio.sleep(0.01)
    assert not state.windows.dirty  # the task pushed the change
    await state.close()
    assert state._task is None


def test_without_a_backend_nothing_is_tracked_for_sync() -> None:
    state = ClientState()
    assert state.backend is None and state.windows.dirty is None and state.limiter.dirty is None
    assert state.compatible(ClientsConfig(), RedisConfig())
    assert not state.compatible(ClientsConfig(window_s=30), RedisConfig())


async def test_a_failed_sync_gives_its_deltas_back() -> None:
    clock = Clock()
    backend = FailingBackend(clock)
    a = ClientState(ClientsConfig(), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    b = ClientState(ClientsConfig(), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    limit = RateLimit(10, 3600.0)
    assert a.take("login", "198.51.100.7", limit) and await a.sync()
    assert b.take("login", "198.51.100.7", limit)
    b.record("198.51.100.7", "/x", 200)
    assert await b.sync()
    assert all(a.take("login", "198.51.100.7", limit) for _ in range(7))
    for _ in range(5):
        a.record("198.51.100.7", "/wp-login.php", 404)
    backend.down = True
    assert await a.sync() is False  # Redis stalls: nothing of this round reaches it
    backend.down = False
    assert await a.sync() is True   # ... and it all goes now
    assert b.take("login", "198.51.100.7", limit)
    b.record("198.51.100.7", "/x", 200)
    assert await b.sync()
    assert [b.take("login", "198.51.100.7", limit) for _ in range(2)] == [True, False]  # 1 + 1 + 7 + 1 of 10
    assert b.windows.counts("198.51.100.7") == (7, 5)


async def test_a_failed_history_pull_is_made_again() -> None:
    clock = Clock()
    backend = FailingBackend(clock)
    a = ClientState(ClientsConfig(window_s=60), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    b = ClientState(ClientsConfig(window_s=60), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    for _ in range(4):
        a.record("9.9.9.9", "/x", 404)
    assert await a.sync()
    clock.t += 15
    b.record("9.9.9.9", "/y", 200)
    backend.read_down = True
    assert await b.sync() is False  # the push went, the pull of the older slot did not
    backend.read_down = False
    assert await b.sync() is True
    assert b.windows.counts("9.9.9.9") == (5, 4)


async def test_a_sync_goes_in_chunks_and_a_failed_chunk_is_given_back() -> None:
    clock = Clock()

    class Chunked(FailingBackend):
        calls: list[int] = []
        fail_at = -1

        async def add(self, items: Sequence[tuple[str, str, int, float]]) -> list[int]:
            self.calls.append(len(items))
            if len(self.calls) == self.fail_at:
                raise TimeoutError
            return await super().add(items)

    backend = Chunked(clock)
    state = ClientState(ClientsConfig(), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    peer = ClientState(ClientsConfig(), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    ips = [f"10.0.{i >> 8}.{i & 255}" for i in range(600)]
    for ip in ips:
        state.record(ip, "/", 200)
    backend.fail_at = 2
    assert await state.sync() is False
    assert backend.calls == [clients._CHUNK, clients._CHUNK]  # 250 clients (two counters each) a call
    # the 350 not pushed are given back, and the 250 pushed still have their history to pull
    assert len(state.windows.dirty or ()) == 600
    assert await state.sync() is True
    assert backend.calls[2:] == [clients._CHUNK, clients._CHUNK, 200]
    for ip in ips:
        peer.record(ip, "/", 200)
    assert await peer.sync()
    assert all(peer.windows.counts(ip) == (2, 0) for ip in ips)  # each counted once


async def test_the_up_gauge_follows_the_state_in_force_and_recovers_with_nothing_to_push() -> None:
    clock = Clock()
    backend = FailingBackend(clock)
    backend.down = True
    state = ClientState(ClientsConfig(), RedisConfig(retry_s=0.0), backend=backend, clock=clock)
    assert await state.claim("n1", 60, lambda: True) is True  # a failed claim marks it down
    assert not state.shared_up and clients.SHARED_UP.get() == 0.0
    assert await state.sync() is False  # nothing to push, still down: the probe fails
    backend.down = False
    assert await state.sync() is True  # nothing to push, but the probe answers
    assert state.shared_up and clients.SHARED_UP.get() == 1.0
    backend.down = True
    state.record("1.1.1.1", "/", 200)
    assert await state.sync() is False and clients.SHARED_UP.get() == 0.0
    ClientState(ClientsConfig(), RedisConfig(), backend=MemoryBackend(clock=clock), clock=clock)  # a reload's new state
    assert clients.SHARED_UP.get() == 1.0
    clients.SHARED_UP.set(0.0)
    ClientState()  # or Redis no longer configured
    assert clients.SHARED_UP.get() == 1.0


async def test_claims_ask_the_local_store_first() -> None:
    clock = Clock()
    backend = FailingBackend(clock)
    state = ClientState(ClientsConfig(), RedisConfig(), backend=backend, clock=clock)
    backend.down = True
    errors = clients.REDIS_ERRORS.get("claim")
    assert await state.claim("n1", 60, lambda: False) is False  # used here already: no round trip
    assert clients.REDIS_ERRORS.get("claim") == errors and state.shared_up


async def test_evicted_clients_leave_the_dirty_sets() -> None:
    clock = Clock()
    backend = FailingBackend(clock)
    backend.down = True
    state = ClientState(ClientsConfig(max_clients=3, max_buckets=3), RedisConfig(retry_s=30.0), backend=backend, clock=clock)
    state.record("x", "/", 200)
    assert await state.sync() is False
    for i in range(50):
        state.record(f"10.0.0.{i}", "/", 200)
        state.take("r", f"10.0.0.{i}", RateLimit(10, 1.0))
    assert state.windows.dirty is not None and len(state.windows.dirty) <= 3
    assert state.limiter.dirty is not None and len(state.limiter.dirty) <= 3


def test_each_rate_condition_of_a_rule_has_its_own_bucket(tmp_path: Path) -> None:
    from gateway.rules import RuleOptions, load
    from tests.conftest import make_features

    (tmp_path / "two.yaml").write_text("""rules:
  - name: login-limits
    path: /login
    any:
      - rate: {limit: 5/s, key: ip}
      - rate: {limit: 1000/h, key: ip}
    action: block
    status: 429
""")
    clock = Clock()
    state = ClientState(ClientsConfig())
    state.limiter.clock = clock
    table = load([str(tmp_path / "two.yaml")], RuleOptions(), state)
    f = make_features("POST", "/login", [("Host", "x"), ("User-Agent", "ua")], client_ip="203.0.113.7")
    limited = clients.RATE_LIMITED.get("login-limits")
    assert [table.evaluate(f) is None for _ in range(6)] == [True] * 5 + [False]  # the 5/s burst, each request once
    assert clients.RATE_LIMITED.get("login-limits") == limited + 1  # counted under the rule's name
    assert state.limiter.tokens("login-limits", "203.0.113.7") == pytest.approx(0.0)
    assert state.limiter.tokens("login-limits#2", "203.0.113.7") == pytest.approx(995.0)


# ----------------------------------------------------------------------------- client keys: address + fingerprint

SAFARI_IOS = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
CHROME_130 = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36"


@pytest.mark.parametrize("ua,family", [
    (SAFARI_IOS, "safari 18"), (CHROME_130, "chrome 130"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 Edg/130.0.2849.56",
     "edge 130"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "firefox 128"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.3 Safari/605.1.15", "safari 16"),
    ("curl/8.5.0", "curl 8"), ("python-requests/2.31.0", "python-requests 2"), ("", "-"),
])
def test_user_agent_family_and_major_version(ua: str, family: str) -> None:
    assert clients.user_agent_family(ua) == family


def _head(*pairs: tuple[str, str]) -> dict[str, str]:
    from gateway.features import make_header_map

    return make_header_map(tuple(pairs))


NAV = (("Host", "shop.example"), ("User-Agent", SAFARI_IOS), ("Accept", "text/html"), ("Accept-Language", "en-GB,en;q=0.9"),
       ("Accept-Encoding", "gzip, deflate, br"))


def test_one_browser_keeps_one_key_across_navigations_posts_and_revalidations() -> None:
    first = clients.client_key("192.0.2.1", _head(*NAV))
    # a form post from a link on the site: Referer, Origin, Content-Type/-Length, Cookie and If-* depend on the request
    post = _head(*NAV[:3], ("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", "12"), ("Origin", "https://shop.example"),
                 ("Referer", "https://shop.example/cart"), NAV[3], NAV[4], ("Cookie", "sid=abc"), ("If-None-Match", '"x"'))
    assert clients.client_key("192.0.2.1", post) == first
    assert first.startswith("192.0.2.1#") and len(first.rpartition("#")[2]) == 16


@pytest.mark.parametrize("other", [
    tuple((n, CHROME_130) if n == "User-Agent" else (n, v) for n, v in NAV),                          # another browser
    tuple((n, SAFARI_IOS.replace("Version/18.1", "Version/17.6")) if n == "User-Agent" else (n, v) for n, v in NAV),  # another version
    tuple((n, "de-DE,de;q=0.9") if n == "Accept-Language" else (n, v) for n, v in NAV),               # another language
    (NAV[0], NAV[1], NAV[3], NAV[2], NAV[4]),                                                          # another header order
    (*NAV, ("DNT", "1")),                                                                              # another header set
])
def test_strangers_behind_one_address_get_their_own_keys(other: tuple[tuple[str, str], ...]) -> None:
    assert clients.client_key("192.0.2.1", _head(*other)) != clients.client_key("192.0.2.1", _head(*NAV))


def test_a_pass_cookie_names_its_browser_and_addresses_stay_apart() -> None:
    bare = clients.client_key("192.0.2.1", _head(*NAV))
    holding = clients.client_key("192.0.2.1", _head(*NAV, ("Cookie", "theme=dark; clefgate_pass=k1.AAAA.BBBB")))
    assert holding != bare
    # the pass decides, not the header set: a fetch from the same browser with the same pass is the same client
    fetch = _head(NAV[0], ("Accept", "*/*"), NAV[1], ("Sec-Fetch-Mode", "cors"), ("Cookie", "clefgate_pass=k1.AAAA.BBBB"))
    assert clients.client_key("192.0.2.1", fetch) == holding
    # the verify endpoint names the client as it will be from its next request on
    assert clients.client_key("192.0.2.1", _head(*NAV), pass_value="k1.AAAA.BBBB") == holding
    assert clients.client_key("192.0.2.1", _head(*NAV, ("Cookie", "x_clefgate_pass=k1.AAAA.BBBB"))) == bare  # not our cookie
    assert clients.client_key("192.0.2.2", _head(*NAV)) != bare
    # an IPv6 client's /64 is one address
    assert clients.client_key("2001:db8::1", _head(*NAV)) == clients.client_key("2001:db8::2", _head(*NAV))


def test_shared_addresses_are_counted_once_and_bounded() -> None:
    table = clients.AddressTable(max_addresses=2, threshold=3)
    for fp in ("a", "b", "a", "c", "d"):
        table.see(f"192.0.2.1#{fp}")
    assert table.shared == 1 and table.fingerprints("192.0.2.1") == 3  # counted up to the threshold
    table.see("192.0.2.2#a")
    before = clients.EVICTIONS.get("addresses")
    table.see("192.0.2.3#a")  # the least recently seen address goes, and its share with it
    assert len(table) == 2 and table.shared == 0 and clients.EVICTIONS.get("addresses") == before + 1
    state = ClientState(ClientsConfig(shared_address_fingerprints=2))
    state.addresses.see("198.51.100.1#a")
    state.addresses.see("198.51.100.1#b")
    assert clients.SHARED_ADDRESSES.get() >= 1


def test_client_history_counts_unsolved_challenges_per_encounter_and_remembers_evidence() -> None:
    clock = Clock()
    history = clients.ClientHistory(max_clients=10, clock=clock)
    for _ in range(3):  # a page's parallel requests: one encounter
        history.challenged("k")
    assert history.unsolved("k", 60) == 1
    for _ in range(4):
        clock.t += 2
        history.challenged("k")
    assert history.unsolved("k", 60) == 5 and history.unsolved("other", 60) == 0
    clock.t += 55
    assert history.unsolved("k", 60) == 3  # the window slides
    history.solved("k")
    assert history.unsolved("k", 60) == 0
    history.attacked("k", "sqli in query:id, model")
    clock.t += 30
    assert history.attack("k", 600) == (30.0, "sqli in query:id, model")
    clock.t += 600
    assert history.attack("k", 600) is None
