"""Backends: named pools of upstream servers, routes to them, health and selection.

Backends choose a server and know nothing of connections: the proxy keeps a
connection pool per server (:mod:`gateway.proxy.pools`), and this module imports
nothing of the proxy.

A :class:`BackendSet` is compiled from one config and swapped whole on reload;
servers whose URL did not change are the same objects in the new set, with their
health state (``BackendSet.build(cfg, previous)``), so a reload does not forget
that a server is down, and the proxy keeps their connection pools.

Health has two sources. *Active* checks (an aiohttp client, one session per
backend) probe ``health_check.path`` every ``interval_s`` and flip a server after
``unhealthy_threshold`` failures or ``healthy_threshold`` successes. *Passive*
ejection takes a server out for ``eject_s`` after ``eject_after_failures``
consecutive connection failures seen by real requests. A server gets traffic
only when both agree.

Selection is smooth weighted round-robin (each server gets its weight's share,
interleaved rather than in bursts) or least-outstanding (fewest in-flight
requests relative to weight). A retry excludes the servers already tried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp

from gateway import metrics
from gateway.rules.patterns import normalize_path

if TYPE_CHECKING:
    from gateway.config import BackendConfig, Config, HealthCheckConfig, RouteConfig

log = logging.getLogger("clefgate.backends")


def _status_set(spec: str) -> frozenset[int]:
    """'200-399' / '200,204' -> the set of accepted status codes."""
    codes: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        codes.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(codes)


class Server:
    """One upstream server of a backend: where it is, and its health and selection state."""

    __slots__ = (
        "backend", "check_failures", "check_successes", "ejected_until", "failures", "healthy", "host", "hostport",
        "outstanding", "path_prefix", "port", "rr_weight", "tls", "url", "weight",
    )

    def __init__(self, backend: str, url: str, weight: int) -> None:
        parts = urlsplit(url)
        self.backend = backend
        self.url = url
        self.weight = weight
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        self.hostport = parts.netloc
        # forwarded paths are prefix + raw target; a bare "/" adds nothing
        self.path_prefix = parts.path.rstrip("/").encode("latin-1")
        # active health (optimistic start: a new server gets traffic until a probe fails)
        self.healthy = True
        self.check_failures = 0
        self.check_successes = 0
        # passive health
        self.failures = 0
        self.ejected_until = 0.0
        self.outstanding = 0
        self.rr_weight = 0  # smooth weighted round-robin state

    def available(self, now: float) -> bool:
        """True when the server may take a request (``now`` from time.monotonic)."""
        return self.healthy and self.ejected_until <= now

    def connect_failed(self, now: float, eject_after: int, eject_s: float) -> bool:
        """Count a connection failure of a real request; True when it ejects the server."""
        self.failures += 1
        if self.failures >= eject_after and self.ejected_until <= now:
            self.ejected_until = now + eject_s
            self.failures = 0
            EJECTIONS.inc(self.backend, self.url)
            log.warning("server %s of backend %s ejected for %.1fs after %d connection failures",
                        self.url, self.backend, eject_s, eject_after)
            return True
        return False

    def connect_succeeded(self) -> None:
        """A request reached the server: the failure streak ends."""
        self.failures = 0

    def __repr__(self) -> str:
        return f"Server({self.backend}:{self.url})"


class Backend:
    """A named pool of servers and how to choose among them."""

    def __init__(self, name: str, cfg: BackendConfig, servers: list[Server]) -> None:
        self.name = name
        self.cfg = cfg
        self.servers = servers
        self.retries = cfg.retries
        self.eject_after = cfg.eject_after_failures
        self.eject_s = cfg.eject_s
        self.least_outstanding = cfg.balance == "least_outstanding"
        self._turn = 0
        self.session: aiohttp.ClientSession | None = None

    def select(self, now: float, exclude: Iterable[Server] = ()) -> Server | None:
        """The server for the next request, or None when none is available."""
        servers = self.servers
        if len(servers) == 1:
            only = servers[0]
            return only if only.available(now) and only not in exclude else None
        candidates = [s for s in servers if s.available(now) and s not in exclude]
        if not candidates:
            return None
        if self.least_outstanding:
            # rotate the start so that ties (all idle, the common case) spread evenly
            self._turn += 1
            k = self._turn % len(candidates)
            return min(candidates[k:] + candidates[:k], key=lambda s: s.outstanding / s.weight)
        # smooth weighted round-robin: add each weight, pick the largest, subtract the total
        total = 0
        best = candidates[0]
        for s in candidates:
            s.rr_weight += s.weight
            total += s.weight
            if s.rr_weight > best.rr_weight:
                best = s
        best.rr_weight -= total
        return best

    @property
    def healthy(self) -> bool:
        """True when at least one server can take traffic now."""
        now = time.monotonic()
        return any(s.available(now) for s in self.servers)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request goes: the route's name (metrics, logs), its backend, and the named policy that scores it."""

    name: str
    backend: str
    policy: str | None = None


@dataclass(frozen=True, slots=True)
class CompiledRoute:
    host: str  # "" any, "*.x.com" suffix, else exact
    prefix: str
    route: Route

    def matches(self, host: str, path: str) -> bool:
        """Host equal (or under a ``*.`` wildcard, or any), path equal or below the prefix by whole segments."""
        h = self.host
        if h and h != host and not (h.startswith("*.") and host.endswith(h[1:])):
            return False
        p = self.prefix
        if p == "/" or path == p:
            return True
        return path.startswith(p if p.endswith("/") else p + "/")


def compile_routes(routes: list[RouteConfig]) -> tuple[CompiledRoute, ...]:
    """``cfg.routes`` in matching order. The backend and the policy of a request both come from
    :func:`match_route` over this, so a request is never scored under another route's policy."""
    compiled = [
        CompiledRoute(r.host.lower(), r.path_prefix, Route(r.name or r.backend, r.backend, r.policy or None)) for r in routes
    ]
    # longest prefix first; for equal prefixes an exact host beats a wildcard beats any host
    compiled.sort(key=lambda r: (-len(r.prefix), 0 if r.host and not r.host.startswith("*.") else 1 if r.host else 2))
    return tuple(compiled)


def split_host(host: str) -> str:
    """Lower-case host name without the port (IPv6 brackets kept)."""
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1].lower() if end > 0 else host.lower()
    return host.partition(":")[0].lower()


def match_route(routes: tuple[CompiledRoute, ...], host: str, path: str) -> Route | None:
    """The first route for ``host`` as received (case and port are ignored) and ``path``; None when none.

    The path is read as the rules read it (percent-decoded, ``;`` parameters dropped, dot segments resolved):
    the origin resolves ``/%63heckout/pay`` or ``/static/../checkout/pay`` to ``/checkout/pay``, so the route
    (its backend and its stricter policy) must not be escaped by writing the path another way.
    """
    host, path = split_host(host), normalize_path(path)
    for r in routes:
        if r.matches(host, path):
            return r.route
    return None


class BackendSet:
    """Every backend and route of one config.

    ``route(host, path)`` picks the route; ``backends[name].select(now)`` the server.
    """

    def __init__(self, backends: dict[str, Backend], routes: tuple[CompiledRoute, ...], default: Route) -> None:
        self.backends = backends
        self._routes = routes
        self.default_route = default
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    @classmethod
    def build(cls, cfg: Config, previous: BackendSet | None = None) -> BackendSet:
        """Compile the backends of ``cfg``, adopting unchanged servers of ``previous``."""
        old: dict[tuple[str, str], Server] = {}
        checks: dict[str, HealthCheckConfig] = {}
        if previous is not None:
            old = {(s.backend, s.url): s for s in previous.servers()}
            checks = {name: b.cfg.health_check for name, b in previous.backends.items()}
        backends: dict[str, Backend] = {}
        for name, bcfg in cfg.backends.items():
            servers = []
            for scfg in bcfg.servers:
                server = old.pop((name, scfg.url), None)
                if server is None:
                    server = Server(name, scfg.url, scfg.weight)
                else:
                    server.weight = scfg.weight
                    if checks.get(name) != bcfg.health_check:
                        # the old checks' verdict and counts mean nothing under new checks; with none, nothing could
                        # ever mark the server healthy again, so it starts healthy (as a new server does)
                        server.check_failures = server.check_successes = 0
                        if not bcfg.health_check.enabled:
                            server.healthy = True
                servers.append(server)
            backends[name] = Backend(name, bcfg, servers)
        default = Route("default", cfg.default_backend or next(iter(cfg.backends), ""))
        return cls(backends, compile_routes(cfg.routes), default)

    def servers(self) -> Iterator[Server]:
        """Every server of every backend."""
        for backend in self.backends.values():
            yield from backend.servers

    def route(self, host: str, path: str) -> Route:
        """The route for a request: ``host`` as received (case and port are ignored), ``path`` as sent (see :func:`match_route`)."""
        if not self._routes:
            return self.default_route
        return match_route(self._routes, host, path) or self.default_route

    @property
    def healthy(self) -> dict[str, bool]:
        """Backend name -> whether any of its servers can take traffic (for /readyz)."""
        return {name: b.healthy for name, b in self.backends.items()}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start one health-check task per server whose backend has checks enabled."""
        global _CURRENT
        previous, _CURRENT = _CURRENT, self
        if previous is not None and previous is not self:
            # the set this one replaces probes with the old settings into the same servers: it stops now, not when
            # its connections have drained (close() still awaits its tasks)
            for task in previous._tasks:
                task.cancel()
        for backend in self.backends.values():
            hc = backend.cfg.health_check
            if not hc.enabled:
                continue
            backend.session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=hc.timeout_s),
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
                headers={"User-Agent": "clefgate-health-check"},
            )
            accept = _status_set(hc.expect_status)
            for server in backend.servers:
                task = asyncio.create_task(self._probe_loop(backend.session, server, hc, accept),
                                           name=f"health:{backend.name}:{server.url}")
                self._tasks.append(task)

    async def close(self) -> None:
        """Stop health checks and close their sessions (the servers' connection pools are the proxy's)."""
        global _CURRENT
        if self._closed:
            return
        self._closed = True
        if _CURRENT is self:
            _CURRENT = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for backend in self.backends.values():
            if backend.session is not None:
                await backend.session.close()
                backend.session = None

    async def _probe_loop(self, session: aiohttp.ClientSession, server: Server, hc: HealthCheckConfig,
                          accept: frozenset[int]) -> None:
        url = server.url.rstrip("/") + "/" + hc.path.lstrip("/")
        while True:
            ok, why = await _probe(session, url, accept)
            CHECKS.inc(server.backend, server.url, "ok" if ok else "fail")
            if ok:
                server.check_failures = 0
                server.check_successes += 1
                if not server.healthy and server.check_successes >= hc.healthy_threshold:
                    server.healthy = True
                    log.info("server %s of backend %s is healthy again", server.url, server.backend)
            else:
                server.check_successes = 0
                server.check_failures += 1
                if server.healthy and server.check_failures >= hc.unhealthy_threshold:
                    server.healthy = False
                    log.warning("server %s of backend %s marked unhealthy: %s", server.url, server.backend, why)
            await asyncio.sleep(hc.interval_s)


async def _probe(session: aiohttp.ClientSession, url: str, accept: frozenset[int]) -> tuple[bool, str]:
    """One health probe: (healthy?, why not)."""
    try:
        async with session.get(url, allow_redirects=False) as resp:
            await resp.read()
            if resp.status in accept:
                return True, ""
            return False, f"status {resp.status}"
    except TimeoutError:
        return False, "timeout"
    except (aiohttp.ClientError, OSError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------- metrics

_CURRENT: BackendSet | None = None


def _up() -> Iterator[tuple[tuple[str, ...], float]]:
    current = _CURRENT
    if current is None:
        return
    now = time.monotonic()
    for s in current.servers():
        yield (s.backend, s.url), 1.0 if s.available(now) else 0.0


def _outstanding() -> Iterator[tuple[tuple[str, ...], float]]:
    current = _CURRENT
    if current is None:
        return
    for s in current.servers():
        yield (s.backend, s.url), float(s.outstanding)


UP = metrics.gauge("clefgate_backend_up", "1 when a server takes traffic (active health check passing and not ejected), else 0.",
                   ("backend", "server"), callback=_up, merge="min")
OUTSTANDING = metrics.gauge("clefgate_backend_outstanding_requests", "Requests in flight to each server.",
                            ("backend", "server"), callback=_outstanding)
CHECKS = metrics.counter("clefgate_health_checks_total", "Active health probes by result (ok, fail).", ("backend", "server", "result"))
EJECTIONS = metrics.counter("clefgate_backend_ejections_total", "Servers ejected by passive health checking.", ("backend", "server"))
