"""Backends: routing, selection, passive ejection, active health checks, failover and retries."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway import metrics
from gateway.backends import EJECTIONS, UP, BackendSet, Route, split_host
from gateway.proxy.pools import IDLE_CONNECTIONS, UpstreamPools
from tests.origin import OriginProcess
from tests.proxy_support import (
    RawClient,
    closed_port,
    gateway,
    get,
    make_config,
    request,
    shared_origin,
    wait_for,
)


@pytest.fixture(scope="module")
def origin_b() -> OriginProcess:
    return shared_origin("b")




# ---------------------------------------------------------------------------- routing (unit)


def routed() -> BackendSet:
    cfg = make_config({"web": ["http://127.0.0.1:1"], "api": ["http://127.0.0.1:2"], "v2": ["http://127.0.0.1:3"],
                       "shop": ["http://127.0.0.1:4"], "any": ["http://127.0.0.1:5"]},
                      default_backend="web",
                      routes=[{"path_prefix": "/api", "backend": "api"},
                              {"name": "api-v2", "path_prefix": "/api/v2/", "backend": "v2"},
                              {"host": "shop.example", "path_prefix": "/api", "backend": "shop"},
                              {"host": "*.example.org", "path_prefix": "/", "backend": "any"}])
    return BackendSet.build(cfg)


def test_split_host() -> None:
    assert split_host("Example.COM:8080") == "example.com"
    assert split_host("[2001:DB8::1]:443") == "[2001:db8::1]"


@pytest.mark.parametrize(("host", "path", "route"), [
    ("x.example", "/", Route("default", "web")),
    ("x.example", "/api", Route("api", "api")),
    ("x.example", "/api/users", Route("api", "api")),
    ("x.example", "/apiary", Route("default", "web")),  # prefixes match whole path segments
    ("x.example", "/api/v2/items", Route("api-v2", "v2")),  # the longest prefix wins
    ("x.example", "/api/v2", Route("api", "api")),  # "/api/v2/" needs the slash
    ("shop.example", "/api/cart", Route("shop", "shop")),  # a host-specific route beats any-host at equal length
    ("shop.example", "/api/v2/x", Route("api-v2", "v2")),  # ... but not a longer prefix
    ("www.example.org", "/anything", Route("any", "any")),  # wildcard host
    ("example.org", "/anything", Route("default", "web")),  # the wildcard needs a subdomain
    # the path as the origin will resolve it: another spelling does not escape the route
    ("x.example", "/%61pi/v2/items", Route("api-v2", "v2")),
    ("x.example", "/static/../api/users", Route("api", "api")),
    ("x.example", "/api;jsessionid=1/v2/x", Route("api-v2", "v2")),
    ("x.example", "/api/v2/..", Route("api", "api")),
])
def test_route_longest_prefix_then_most_specific_host(host: str, path: str, route: Route) -> None:
    assert routed().route(host, path) == route


def test_default_backend_is_the_first_when_unset() -> None:
    cfg = make_config({"one": ["http://127.0.0.1:1"], "two": ["http://127.0.0.1:2"]})
    assert BackendSet.build(cfg).route("h", "/x") == Route("default", "one")


# ---------------------------------------------------------------------------- selection (unit)


def pool(balance: str = "round_robin", weights: tuple[int, ...] = (1, 1)) -> BackendSet:
    servers = [{"url": f"http://127.0.0.1:{1000 + i}", "weight": w} for i, w in enumerate(weights)]
    return BackendSet.build(make_config({"app": []}, backends={"app": {"servers": servers, "balance": balance}}))


def test_weighted_round_robin_shares_and_interleaves() -> None:
    backend = pool(weights=(3, 1)).backends["app"]
    picks = [backend.select(0.0) for _ in range(400)]
    counts = Counter(s.weight for s in picks if s)
    assert counts == {3: 300, 1: 100}
    # smooth: the light server never waits more than 4 picks
    light = [i for i, s in enumerate(picks) if s and s.weight == 1]
    assert max(b - a for a, b in itertools.pairwise(light)) == 4


def test_least_outstanding_prefers_the_idle_server() -> None:
    backend = pool("least_outstanding").backends["app"]
    first, second = backend.servers
    first.outstanding = 3
    assert backend.select(0.0) is second
    second.outstanding = 5
    assert backend.select(0.0) is first
    # ties rotate instead of piling onto the first server
    first.outstanding = second.outstanding = 0
    assert {backend.select(0.0) for _ in range(4)} == {first, second}


def test_selection_skips_unhealthy_ejected_and_tried_servers() -> None:
    backend = pool(weights=(1, 1, 1)).backends["app"]
    a, b, c = backend.servers
    a.healthy = False
    b.ejected_until = 100.0
    assert {backend.select(50.0) for _ in range(5)} == {c}
    assert backend.select(50.0, exclude=[c]) is None
    assert backend.select(150.0, exclude=[c]) is b  # the ejection has expired


def test_passive_ejection_after_consecutive_failures() -> None:
    backend = pool().backends["app"]
    server = backend.servers[0]
    assert not server.connect_failed(10.0, 3, 5.0)
    server.connect_succeeded()  # a success resets the streak
    assert not server.connect_failed(10.0, 3, 5.0)
    assert not server.connect_failed(10.0, 3, 5.0)
    assert server.connect_failed(10.0, 3, 5.0)
    assert not server.available(12.0) and server.available(15.0)


def test_build_adopts_unchanged_servers() -> None:
    old = pool(weights=(1, 1))
    kept, dropped = old.backends["app"].servers
    kept.healthy = False
    cfg = make_config({"app": []}, backends={"app": {"servers": [{"url": kept.url, "weight": 5}, "http://127.0.0.1:2999"]}})
    new = BackendSet.build(cfg, old)
    assert new.backends["app"].servers[0] is kept  # same object: health state survives
    assert kept.weight == 5 and not kept.healthy
    assert dropped not in set(new.servers())


# ---------------------------------------------------------------------------- connection pools across reloads (unit)


def test_pools_follow_the_servers_a_reload_keeps_and_close_with_the_last_runtime_holding_them() -> None:
    old = pool(weights=(1, 1))
    old_pools = UpstreamPools(old)
    kept, dropped = old.backends["app"].servers
    kept_pool, dropped_pool = old_pools.by_server[kept], old_pools.by_server[dropped]
    assert kept_pool is not dropped_pool and (kept_pool.port, dropped_pool.port) == (kept.port, dropped.port)
    cfg = make_config({"app": []}, backends={"app": {"servers": [kept.url, "http://127.0.0.1:2999"],
                                                     "max_idle_connections": 3, "max_connections": 7}})
    new = BackendSet.build(cfg, old)
    new_pools = UpstreamPools(new, old_pools)
    assert new_pools.by_server[kept] is kept_pool  # taken over, with the new limits
    assert (kept_pool.max_idle, kept_pool.max_connections) == (3, 7)
    added = new.backends["app"].servers[1]
    assert new_pools.by_server[added] not in (kept_pool, dropped_pool) and dropped not in new_pools.by_server
    # the old runtime still carries requests until it is retired: the removed server's pool lives until then
    assert not dropped_pool.closed
    old_pools.close()
    assert dropped_pool.closed and not kept_pool.closed
    old_pools.close()  # closing twice releases nothing twice
    assert not kept_pool.closed
    new_pools.close()
    assert kept_pool.closed and new_pools.by_server[added].closed


def test_a_pool_stays_open_while_an_older_runtime_still_holds_it() -> None:
    # a -> b -> c, where c drops a server that a and b have: b is retired first (a shorter drain), and the
    # requests a still carries keep the server's pool until a is retired too
    a = pool(weights=(1, 1))
    a_pools = UpstreamPools(a)
    s, other = a.backends["app"].servers
    b = BackendSet.build(make_config({"app": [s.url, other.url]}), a)
    b_pools = UpstreamPools(b, a_pools)
    c = BackendSet.build(make_config({"app": [other.url]}), b)
    c_pools = UpstreamPools(c, b_pools)
    target = a_pools.by_server[s]
    assert b_pools.by_server[s] is target and s not in c_pools.by_server
    b_pools.close()
    assert not target.closed
    a_pools.close()
    assert target.closed and not c_pools.by_server[other].closed
    # a server configured again after its pool closed gets a new one
    d = BackendSet.build(make_config({"app": [s.url, other.url]}), c)
    d_pools = UpstreamPools(d, c_pools)
    assert d_pools.by_server[d.backends["app"].servers[0]] is not target
    assert d_pools.by_server[other] is c_pools.by_server[other]


def test_healthy_summary() -> None:
    backends = pool()
    assert backends.healthy == {"app": True}
    for s in backends.backends["app"].servers:
        s.healthy = False
    assert backends.healthy == {"app": False}


# ---------------------------------------------------------------------------- end to end


def origins_seen(port: int, n: int) -> Counter[str]:
    seen: Counter[str] = Counter()
    for _ in range(n):
        resp = request(port, get("/identity"))
        assert resp.status == 200, resp.body
        seen[resp.body.decode()] += 1
    return seen


def test_round_robin_across_two_origins(origin_a: OriginProcess, origin_b: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([origin_a.url, origin_b.url], tmp_path)) as g:
        assert origins_seen(g.port, 10) == {"a": 5, "b": 5}


def test_failover_retries_idempotent_requests_and_ejects_the_dead_server(origin_a: OriginProcess, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    cfg = make_config([dead, origin_a.url], tmp_path, backends={"app": {"eject_after_failures": 2, "eject_s": 60}})
    before = EJECTIONS.get("app", dead)
    with gateway(cfg) as g:
        # every GET succeeds: a connect failure is retried on the other server
        assert origins_seen(g.port, 6) == {"a": 6}
        dead_server = g.runtime.backends.backends["app"].servers[0]
        available = g.call(lambda: dead_server.available(time.monotonic()))  # ejected as of now
        assert available is False
        line = g.wait_log(lambda r: r["path"] == "/identity")
        assert line["server"] == origin_a.url
    assert EJECTIONS.get("app", dead) == before + 1
    assert metrics.UPSTREAM_ERRORS.get("app", "connect") >= 2


def test_a_retry_picks_its_server_once(origin_a: OriginProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.backends import Backend

    picks: list[str] = []
    select = Backend.select

    def counted(self: Backend, now: float, tried: list[Any]) -> Any:
        server = select(self, now, tried)
        picks.append(server.url if server is not None else "none")
        return server

    monkeypatch.setattr(Backend, "select", counted)
    dead = f"http://127.0.0.1:{closed_port()}"
    with gateway(make_config([dead, origin_a.url], tmp_path, backends={"app": {"eject_after_failures": 100}})) as g:
        assert request(g.port, get("/identity")).body == b"a"
    # the dead server first (smooth round-robin starts with it), then the retry's one pick: a second pick for the
    # same retry would spend another turn of the round-robin
    assert picks == [dead, origin_a.url]


def test_non_idempotent_request_is_not_retried(origin_a: OriginProcess, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    with gateway(make_config([dead, origin_a.url], tmp_path)) as g:
        # smooth round-robin with equal weights starts with the first server: the dead one
        resp = request(g.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        assert resp.status == 502
        assert request(g.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi").status == 200


def test_retries_zero_means_one_try(origin_a: OriginProcess, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    with gateway(make_config([dead, origin_a.url], tmp_path, backends={"app": {"retries": 0}})) as g:
        assert request(g.port, get("/identity")).status == 502


def test_stale_pooled_connection_is_retried_on_a_fresh_one(raw_origin: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([raw_origin.url], tmp_path)) as g, RawClient(g.port) as c:
        for _ in range(3):
            c.send(get("/stale"))
            assert c.response().body == b"ok"
        # a POST on the stale connection cannot be retried safely
        c.send(b"POST /stale HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert c.response().status == 502


def test_health_checks_take_a_server_out_and_back(origin_a: OriginProcess, tmp_path: Path) -> None:
    # a private origin: its health is toggled by this test
    from tests.origin import start_origin

    flaky = start_origin("flaky")
    try:
        hc = {"path": "/healthz", "interval_s": 0.1, "timeout_s": 1.0, "unhealthy_threshold": 2, "healthy_threshold": 2}
        cfg = make_config([origin_a.url, flaky.url], tmp_path, backends={"app": {"health_check": {"enabled": True, **hc}}})
        with gateway(cfg) as g:
            wait_for(lambda: g.call(lambda: g.runtime.backends.healthy) == {"app": True}, what="healthy")
            assert set(origins_seen(g.port, 4)) == {"a", "flaky"}
            httpx.get(f"{flaky.url}/control/health?ok=0")
            flaky_server = g.runtime.backends.backends["app"].servers[1]
            wait_for(lambda: not g.call(lambda: flaky_server.healthy), what="flaky marked down")
            assert origins_seen(g.port, 6) == {"a": 6}
            assert g.call(lambda: UP.get("app", flaky.url)) == 0.0
            httpx.get(f"{flaky.url}/control/health?ok=1")
            wait_for(lambda: g.call(lambda: flaky_server.healthy), what="flaky back")
            assert set(origins_seen(g.port, 4)) == {"a", "flaky"}
    finally:
        flaky.stop()


def test_no_healthy_server_is_503(tmp_path: Path) -> None:
    from tests.origin import start_origin

    down = start_origin("down")
    try:
        httpx.get(f"{down.url}/control/health?ok=0")
        hc = {"path": "/healthz", "interval_s": 0.1, "unhealthy_threshold": 1}
        cfg = make_config([down.url], tmp_path, backends={"app": {"health_check": {"enabled": True, **hc}}})
        with gateway(cfg) as g:
            wait_for(lambda: g.call(lambda: g.runtime.backends.healthy) == {"app": False}, what="down")
            resp = request(g.port, get("/identity"))
            assert resp.status == 503
            rid = resp.header("x-request-id")
            assert rid and f"request id: {rid}".encode() in resp.body
            assert g.wait_log(lambda r: r["request_id"] == rid)["status"] == 503
    finally:
        down.stop()


def test_least_outstanding_routes_around_a_busy_server(origin_a: OriginProcess, origin_b: OriginProcess,
                                                       tmp_path: Path) -> None:
    cfg = make_config([origin_a.url, origin_b.url], tmp_path, backends={"app": {"balance": "least_outstanding"}})
    with gateway(cfg) as g:
        slow = RawClient(g.port)
        slow.send(get("/delay/1.0"))
        wait_for(lambda: g.call(lambda: sum(s.outstanding for s in g.runtime.backends.servers())) == 1, what="in flight")
        busy = next(s for s in g.runtime.backends.servers() if s.outstanding)
        idle_name = "b" if busy.url == origin_a.url else "a"
        assert origins_seen(g.port, 4) == {idle_name: 4}
        assert slow.response().status == 200
        slow.close()


def test_reload_keeps_pools_of_unchanged_servers(origin_a: OriginProcess, origin_b: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config([origin_a.url], tmp_path)) as g:
        origins_seen(g.port, 2)
        server = next(g.runtime.backends.servers())
        warm = g.call(lambda: g.runtime.pools.by_server[server])
        idle = g.call(lambda: list(warm.idle))
        assert idle and g.call(lambda: warm.open) == len(idle)
        served = g.call(lambda: [c.requests for c in idle])
        g.reload(make_config({"app": [origin_a.url], "other": [origin_b.url]}, tmp_path,
                             routes=[{"path_prefix": "/other", "backend": "other"}]))
        assert next(g.runtime.backends.servers()) is server
        assert g.call(lambda: g.runtime.pools.by_server[server]) is warm and not warm.closed
        assert g.call(lambda: warm.idle) == idle  # the same connections, still idle
        # the next request to the kept server goes over a connection opened before the reload
        assert request(g.port, get("/identity")).body == b"a"
        assert g.call(lambda: warm.open) == len(idle)
        assert g.call(lambda: sum(c.requests for c in idle)) == sum(served) + 1
        assert request(g.port, get("/other/identity")).json()["origin"] == "b"


def test_reload_closes_the_pool_of_a_removed_server(origin_a: OriginProcess, origin_b: OriginProcess, tmp_path: Path) -> None:
    with gateway(make_config({"app": [origin_a.url], "other": [origin_b.url]}, tmp_path,
                             routes=[{"path_prefix": "/other", "backend": "other"}])) as g:
        assert request(g.port, get("/other/identity")).json()["origin"] == "b"
        removed = g.call(lambda: next(s for s in g.runtime.backends.servers() if s.url == origin_b.url))
        gone = g.call(lambda: g.runtime.pools.by_server[removed])
        idle = g.call(lambda: list(gone.idle))
        assert idle and g.call(lambda: dict(IDLE_CONNECTIONS.snapshot())).get(("other", origin_b.url)) == len(idle)
        g.reload(make_config([origin_a.url], tmp_path))  # the old runtime is retired at once
        assert g.call(lambda: removed not in g.runtime.pools.by_server)
        assert g.call(lambda: gone.closed and not gone.idle)
        assert g.call(lambda: all(c.transport is None or c.transport.is_closing() for c in idle))
        wait_for(lambda: g.call(lambda: gone.open) == 0, what="the removed server's connections closed")
        assert ("other", origin_b.url) not in g.call(lambda: dict(IDLE_CONNECTIONS.snapshot()))
        assert request(g.port, get("/identity")).body == b"a"


def test_connection_limit_queues_then_answers_503(origin_a: OriginProcess, tmp_path: Path) -> None:
    cfg = make_config([origin_a.url], tmp_path, backends={"app": {"max_connections": 1}},
                      timeouts={"upstream_connect_s": 0.3})
    with gateway(cfg) as g:
        slow = RawClient(g.port)
        slow.send(get("/delay/1.0"))
        wait_for(lambda: g.call(lambda: sum(s.outstanding for s in g.runtime.backends.servers())) == 1, what="in flight")
        resp = request(g.port, get("/identity"))
        assert resp.status == 503 and b"busy" in resp.body
        assert slow.response().status == 200
        slow.close()
        # once the connection is free again it is reused
        assert request(g.port, get("/identity")).body == b"a"


def test_a_reload_that_fixes_or_drops_health_checks_takes_effect(origin_a: OriginProcess, tmp_path: Path) -> None:
    wrong = {"path": "/status/404", "interval_s": 0.1, "timeout_s": 1.0, "unhealthy_threshold": 1, "healthy_threshold": 2}
    drain = {"drain_s": 30.0}  # the old config's connections may drain for this long: its probes must not
    cfg = make_config([origin_a.url], tmp_path, backends={"app": {"health_check": {"enabled": True, **wrong}}}, timeouts=drain)
    with gateway(cfg) as g:
        wait_for(lambda: g.call(lambda: g.runtime.backends.healthy) == {"app": False}, what="down on a wrong path")
        assert request(g.port, get("/identity")).status == 503
        # the operator fixes the path: the server is back within the new checks' threshold, not after the drain
        fixed = {**wrong, "path": "/healthz"}
        g.reload(make_config([origin_a.url], tmp_path, backends={"app": {"health_check": {"enabled": True, **fixed}}}, timeouts=drain))
        wait_for(lambda: g.call(lambda: g.runtime.backends.healthy) == {"app": True}, timeout=3.0, what="healthy under the fixed check")
        assert request(g.port, get("/identity")).status == 200
        # back to the wrong path, then checks switched off altogether: nothing is left to mark it down, so it is up
        g.reload(make_config([origin_a.url], tmp_path, backends={"app": {"health_check": {"enabled": True, **wrong}}}, timeouts=drain))
        wait_for(lambda: g.call(lambda: g.runtime.backends.healthy) == {"app": False}, what="down again")
        g.reload(make_config([origin_a.url], tmp_path, backends={"app": {"health_check": {"enabled": False}}}, timeouts=drain))
        assert g.call(lambda: g.runtime.backends.healthy) == {"app": True}
        assert request(g.port, get("/identity")).status == 200
