"""The traffic simulator: runs a scenario's sessions against one target and records what happened.

Every simulated session is a coroutine with its own identity (address, user agent,
cookies, connection pool) and behaviour (``loadtest.behaviours``). They send real
HTTP/1.1 over loopback sockets to the target; the client address is simulated with
``X-Forwarded-For`` (the gateway trusts its local peer) and every request carries an
``X-Request-Id`` of the form ``sim.<kind>.<n>``, so the gateway's decision log can be
labelled with the simulator's ground truth afterwards.

What is recorded, per request: latency into HDR histograms (overall, per kind, per
phase), completions per second, and the *outcome* as the client saw it:

* ``forwarded`` — the origin's answer (through the gateway it carries ``Via: clefgate``);
* ``challenged`` — a proof-of-work page (``X-Clefgate-Challenge``);
* ``blocked`` — a page the gateway made instead of forwarding (403 and other 4xx);
* ``rate_limited`` — the gateway's 429;
* ``gateway_error`` — a gateway-made 5xx/400/408/413/431; ``error`` — no response at all
  (connect failure, reset, timeout) or a 5xx from a proxy without a verdict;
* ``verify_ok`` / ``verify_refused`` — the answers to a solved challenge.

Per session: people end as passed directly, passed after a challenge, stuck at a
challenge, or blocked; for every other kind the time and request count before the first
challenge or block (time to first stop) are kept.

A run is bounded twice: the scenario's phases (capped by ``max_duration_s``) and
``max_requests``; whichever comes first stops every session.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import multiprocessing
import random
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from loadtest.client import ConnectionPool, CookieJar, Headers, RequestFailed, Response
from loadtest.identities import AddressBook
from loadtest.scenario import ClientMix, Scenario

OUTCOMES = ("forwarded", "challenged", "blocked", "rate_limited", "gateway_error", "error", "verify_ok", "verify_refused")
STOPPED = frozenset({"challenged", "blocked", "rate_limited"})
_GATEWAY_ERRORS = frozenset({400, 408, 413, 431, 500, 502, 503, 504})

# HDR histograms in microseconds: 1 µs .. 120 s at 3 significant digits
_LOWEST, _HIGHEST, _DIGITS = 1, 120_000_000, 3
# percentiles at which the CDF is sampled for plots (denser towards the tail)
CDF_PERCENTILES = tuple([float(p) for p in range(0, 90)] + [100.0 - 10 ** (1 - j / 20) for j in range(0, 81)] + [100.0])


def new_histogram() -> HdrHistogram:
    return HdrHistogram(_LOWEST, _HIGHEST, _DIGITS)


def classify(response: Response | None, via_gateway: bool, purpose: str = "") -> str:
    """The outcome of one request as the client saw it (see the module docstring)."""
    if response is None:
        return "error"
    status = response.status
    if purpose == "verify":
        return "verify_ok" if status in (200, 302, 303) and response.set_cookies else "verify_refused"
    if not via_gateway:
        return "error" if status >= 500 else "forwarded"
    if "x-clefgate-challenge" in response.headers:
        return "challenged"
    if "clefgate" in response.headers.get("via", ""):
        return "error" if status in (502, 503, 504) and not response.body else "forwarded"
    if status == 429:
        return "rate_limited"
    if status in _GATEWAY_ERRORS:
        return "gateway_error"
    if status >= 400:
        return "blocked"
    return "forwarded"


def summarize(hist: HdrHistogram) -> dict[str, Any]:
    """Count, mean and percentiles (ms) of an HDR histogram, plus the sampled CDF for plots."""
    n = hist.get_total_count()
    if not n:
        return {"count": 0}
    ms = 1e-3
    return {
        "count": n,
        "mean_ms": hist.get_mean_value() * ms,
        "p50_ms": hist.get_value_at_percentile(50) * ms,
        "p90_ms": hist.get_value_at_percentile(90) * ms,
        "p95_ms": hist.get_value_at_percentile(95) * ms,
        "p99_ms": hist.get_value_at_percentile(99) * ms,
        "p999_ms": hist.get_value_at_percentile(99.9) * ms,
        "max_ms": hist.get_max_value() * ms,
        "cdf": [[hist.get_value_at_percentile(p) * ms, p / 100.0] for p in CDF_PERCENTILES],
        # the whole histogram (HdrHistogram's compressed encoding), so runs can be merged exactly later
        "hdr": hist.encode().decode("ascii"),
    }


def merge_latency(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One latency summary from several (their encoded HDR histograms added up)."""
    merged = new_histogram()
    for s in summaries:
        if s.get("hdr"):
            merged.add(HdrHistogram.decode(s["hdr"]))
    return summarize(merged)


def merge_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several runs of one scenario as one result of the same shape: counts summed, latency histograms
    merged, per-second counts averaged second by second; ``rounds`` keeps how many there were."""
    if len(runs) == 1:
        return {**runs[0], "rounds": 1, "wall_starts": [runs[0]["wall_start"]]}
    first = runs[0]
    kinds: dict[str, Any] = {}
    for name in sorted({k for r in runs for k in r["kinds"]}):
        parts = [r["kinds"][name] for r in runs if name in r["kinds"]]
        outcomes: collections.Counter[str] = collections.Counter()
        statuses: collections.Counter[str] = collections.Counter()
        failures: collections.Counter[str] = collections.Counter()
        for p in parts:
            outcomes.update(p["outcomes"])
            statuses.update(p["statuses"])
            failures.update(p["failures"])
        kinds[name] = {"latency": merge_latency([p["latency"] for p in parts]), "outcomes": dict(outcomes), "statuses": dict(statuses),
                       "failures": dict(failures), "sessions": [s for p in parts for s in p["sessions"]],
                       "skipped_sessions": sum(p["skipped_sessions"] for p in parts)}
    seconds = max(len(r["per_second"]) for r in runs)
    per_second = []
    for i in range(seconds):
        total: collections.Counter[str] = collections.Counter()
        for r in runs:
            if i < len(r["per_second"]):
                total.update(r["per_second"][i])
        per_second.append({k: v / len(runs) for k, v in total.items()})
    return {
        "clock_start": first["clock_start"], "wall_start": first["wall_start"], "wall_starts": [r["wall_start"] for r in runs],
        "duration_s": sum(r["duration_s"] for r in runs) / len(runs),
        "requests": sum(r["requests"] for r in runs), "errors": sum(r["errors"] for r in runs),
        "latency": merge_latency([r["latency"] for r in runs]),
        "latency_by_phase": {p: merge_latency([r["latency_by_phase"].get(p, {}) for r in runs]) for p in first["latency_by_phase"]},
        "per_second": per_second, "phases": first["phases"], "kinds": kinds, "rounds": len(runs),
    }


@dataclass
class SessionResult:
    """What one session did and met."""

    kind: str
    started_s: float
    requests: int = 0
    challenged: int = 0
    solved: int = 0
    blocked: int = 0
    forwarded: int = 0
    errors: int = 0
    first_stop_s: float | None = None
    first_stop_request: int | None = None
    first_block_s: float | None = None
    outcome: str = ""


@dataclass
class KindRecord:
    """Everything recorded for one client kind."""

    latency: HdrHistogram = field(default_factory=new_histogram)
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    sessions: list[SessionResult] = field(default_factory=list)
    skipped_sessions: int = 0


class Recorder:
    """Latency histograms, per-second counts, outcomes and session results of one run."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.start = time.perf_counter()
        self.wall_start = time.time()  # decision-log lines carry wall-clock times
        self.total = new_histogram()
        self.by_phase: dict[str, HdrHistogram] = {p.name: new_histogram() for p in scenario.phases}
        self.kinds: dict[str, KindRecord] = collections.defaultdict(KindRecord)
        self.per_second: list[collections.Counter[str]] = []
        self.requests = 0
        self.errors = 0
        # what ends the run unless the request budget does first ("max_requests"): the last phase, or the duration cap
        self.stopped_by = "max_duration_s" if scenario.cut_phases() else "phases"
        self.end: float | None = None

    def now(self) -> float:
        return time.perf_counter() - self.start

    def record(self, kind: str, outcome: str, response: Response | None, latency_s: float | None, failure: str = "") -> None:
        t = self.now()
        second = int(t)
        while len(self.per_second) <= second:
            self.per_second.append(collections.Counter())
        self.per_second[second][outcome] += 1
        self.requests += 1
        rec = self.kinds[kind]
        rec.outcomes[outcome] += 1
        if response is not None:
            rec.statuses[response.status] += 1
        if failure:
            rec.failures[failure] += 1
        if outcome in ("error", "gateway_error"):
            self.errors += 1
        if latency_s is not None:
            us = max(_LOWEST, min(_HIGHEST, int(latency_s * 1e6)))
            self.total.record_value(us)
            rec.latency.record_value(us)
            self.by_phase[self.scenario.phase_at(t)].record_value(us)

    def finish(self) -> None:
        self.end = self.now()

    def to_json(self) -> dict[str, Any]:
        """All results as plain data (what the report reads)."""
        duration = self.end if self.end is not None else self.now()
        kinds = {}
        for kind, rec in sorted(self.kinds.items()):
            kinds[kind] = {
                "latency": summarize(rec.latency),
                "outcomes": dict(rec.outcomes),
                "statuses": {str(k): v for k, v in sorted(rec.statuses.items())},
                "failures": dict(rec.failures),
                "sessions": [vars(s) for s in rec.sessions],
                "skipped_sessions": rec.skipped_sessions,
            }
        return {
            "clock_start": self.start,
            "wall_start": self.wall_start,
            "duration_s": duration,
            "stopped_by": self.stopped_by,
            "requests": self.requests,
            "errors": self.errors,
            "latency": summarize(self.total),
            "latency_by_phase": {name: summarize(h) for name, h in self.by_phase.items()},
            "per_second": [dict(c) for c in self.per_second],
            "phases": [{"name": p.name, "start_s": s, "end_s": e, "flood": p.flood} for p, s, e in self.scenario.phase_bounds()],
            "kinds": kinds,
        }


# ------------------------------------------------------------------------------------------ proof of work

def solve_pow(nonce: str, difficulty: int) -> int:
    """The counter a browser's worker finds: SHA-256("<nonce>:<counter>") with ``difficulty`` leading zero bits."""
    base = hashlib.sha256(f"{nonce}:".encode())
    shift = 256 - difficulty
    counter = 0
    while True:
        h = base.copy()
        h.update(str(counter).encode())
        if int.from_bytes(h.digest(), "big") >> shift == 0:
            return counter
        counter += 1


class PowSolver:
    """Solves challenges off the event loop, in a worker process (the browser's own CPU time)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    async def solve(self, nonce: str, difficulty: int) -> int:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, solve_pow, nonce, difficulty)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


# ------------------------------------------------------------------------------------------ sessions

class Stopped(Exception):
    """The run is over (time or request budget); the session ends quietly."""


class Session:
    """One simulated client: identity, cookies, connections, and what it met."""

    def __init__(self, sim: Simulation, kind: str, address: str, *, max_connections: int = 2, reuse: bool = True,
                 rng: random.Random | None = None) -> None:
        self.sim = sim
        self.kind = kind
        self.address = address
        self.rng = rng or random.Random(sim.rng.random())
        self.pool = ConnectionPool(sim.host, sim.port, max_connections=max_connections, reuse=reuse)
        self.jar = CookieJar()
        self.keeps_cookies = True
        # kind-specific facts a behaviour keeps for the whole session (crawler name, tool head...)
        self.traits: dict[str, Any] = {}
        self.result = SessionResult(kind, sim.recorder.now())

    @property
    def host(self) -> str:
        return self.sim.scenario.host

    @property
    def origin(self) -> str:
        return f"http://{self.sim.scenario.host}"

    def url(self, target: str) -> str:
        return self.origin + target

    async def send(self, method: str, target: str, headers: Headers, body: bytes = b"", *, purpose: str = "",
                   address: str | None = None) -> tuple[Response | None, str]:
        """One request: returns (response or None, outcome), recorded; raises Stopped when the run is over."""
        sim = self.sim
        if not sim.running:
            raise Stopped
        sim.seq += 1
        full = [*headers, ("X-Forwarded-For", address or self.address), ("X-Request-Id", f"sim.{self.kind}.{sim.seq}")]
        response: Response | None = None
        failure = ""
        try:
            response = await self.pool.request(method, target, full, body, timeout_s=sim.scenario.request_timeout_s)
        except RequestFailed as exc:
            failure = exc.kind
        outcome = classify(response, sim.via_gateway, purpose)
        sim.recorder.record(self.kind, outcome, response, response.latency_s if response is not None else None, failure)
        sim.count_request()
        r = self.result
        r.requests += 1
        if outcome == "forwarded":
            r.forwarded += 1
        elif outcome in ("error", "gateway_error"):
            r.errors += 1
        elif outcome in STOPPED:
            t = sim.recorder.now() - r.started_s
            if outcome == "challenged":
                r.challenged += 1
            else:
                r.blocked += 1
                if r.first_block_s is None:
                    r.first_block_s = t
            if r.first_stop_s is None:
                r.first_stop_s, r.first_stop_request = t, r.requests
        if response is not None and response.set_cookies and self.keeps_cookies:
            self.jar.store(response.set_cookies)
        return response, outcome

    async def pause(self, low: float, high: float) -> None:
        """Think time / crawl delay, cut short when the run ends."""
        delay = self.rng.uniform(low, high) if high > low else low
        if delay > 0:
            await self.sim.sleep(delay)
        elif not self.sim.running:
            raise Stopped

    def close(self) -> None:
        self.pool.close()


Behaviour = Callable[[Session, ClientMix], Awaitable[None]]


class Simulation:
    """Runs one scenario against one target (host:port) and fills a Recorder."""

    def __init__(self, scenario: Scenario, host: str, port: int, *, via_gateway: bool, progress: Callable[[str], None] | None = None,
                 label: str = "", solver: PowSolver | None = None) -> None:
        self.scenario = scenario
        self.host = host
        self.port = port
        self.via_gateway = via_gateway
        self.label = label
        self.rng = random.Random(scenario.seed)
        self.addresses = AddressBook.build(random.Random(scenario.seed + 1))
        self.recorder = Recorder(scenario)
        self.progress = progress
        self.solver = solver or PowSolver()
        self._own_solver = solver is None
        self.seq = 0
        self.running = True
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- bounds
    def count_request(self) -> None:
        if self.recorder.requests >= self.scenario.max_requests:
            self.recorder.stopped_by = "max_requests"
            self.stop()

    def stop(self) -> None:
        self.running = False
        self._stop.set()

    async def sleep(self, seconds: float) -> None:
        """Sleep, or raise Stopped as soon as the run ends."""
        try:
            async with asyncio.timeout(seconds):
                await self._stop.wait()
        except TimeoutError:
            return
        raise Stopped

    # ---- sessions
    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _session(self, mix: ClientMix, behaviour: Behaviour, active: collections.Counter[str]) -> None:
        from loadtest.behaviours import KINDS

        info = KINDS[mix.kind]
        session = info.make_session(self)
        active[mix.kind] += 1
        try:
            await behaviour(session, mix)
        except Stopped:
            pass
        finally:
            active[mix.kind] -= 1
            session.close()
            if not session.result.outcome:
                session.result.outcome = info.session_outcome(session.result)
            self.recorder.kinds[mix.kind].sessions.append(session.result)

    async def _arrivals(self, mix: ClientMix, behaviour: Behaviour, active: collections.Counter[str]) -> None:
        rng = random.Random(self.rng.random())
        bounds = self.scenario.phase_bounds()
        while self.running:
            t = self.recorder.now()
            current = next(((p, s, e) for p, s, e in bounds if s <= t < e), None)
            if current is None:
                return
            phase, _, end = current
            if not mix.active_in(phase.name):
                await self.sleep(max(0.01, end - t))
                continue
            if mix.concurrency:
                # closed-loop workers for the whole phase
                for _ in range(mix.concurrency):
                    self._spawn(self._worker(mix, behaviour, active, end))
                await self.sleep(max(0.01, end - t))
                continue
            await self.sleep(rng.expovariate(mix.sessions_per_s))
            if active[mix.kind] >= mix.max_sessions:
                self.recorder.kinds[mix.kind].skipped_sessions += 1
                continue
            self._spawn(self._session(mix, behaviour, active))

    async def _worker(self, mix: ClientMix, behaviour: Behaviour, active: collections.Counter[str], until: float) -> None:
        """A closed-loop worker: sessions back to back until its phase ends."""
        while self.running and self.recorder.now() < until:
            task = asyncio.ensure_future(self._session(mix, behaviour, active))
            remaining = until - self.recorder.now()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=max(0.01, remaining))
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                return

    async def _reporter(self) -> None:
        last_n, last_t = 0, 0.0
        while self.running:
            try:
                await self.sleep(2.0)
            except Stopped:
                return
            rec = self.recorder
            t = rec.now()
            rate = (rec.requests - last_n) / max(1e-9, t - last_t)
            last_n, last_t = rec.requests, t
            p99 = rec.total.get_value_at_percentile(99) / 1000.0 if rec.total.get_total_count() else 0.0
            sessions = sum(1 for task in self._tasks if not task.done())
            if self.progress is not None:
                self.progress(f"[{self.label}] {t:5.1f}s {self.scenario.phase_at(t):<8} requests {rec.requests:>7} ({rate:7.0f}/s) "
                              f"p99 {p99:7.2f} ms  errors {rec.errors:>5}  sessions {sessions:>4}")

    async def run(self) -> Recorder:
        """Run the scenario to its end (or its request budget); return the recorder."""
        from loadtest.behaviours import KINDS

        active: collections.Counter[str] = collections.Counter()
        self.recorder = Recorder(self.scenario)
        deadline = self.scenario.duration_s
        drivers = [asyncio.ensure_future(self._arrivals(mix, KINDS[mix.kind].behaviour, active)) for mix in self.scenario.clients]
        reporter = asyncio.ensure_future(self._reporter())
        try:
            await self.sleep(deadline)
        except Stopped:
            pass
        self.stop()
        self.recorder.finish()
        for task in [*drivers, reporter, *self._tasks]:
            task.cancel()
        await asyncio.gather(*drivers, reporter, *list(self._tasks), return_exceptions=True)
        if self._own_solver:
            self.solver.close()
        return self.recorder


def run_scenario(scenario: Scenario, host: str, port: int, *, via_gateway: bool, label: str = "",
                 progress: Callable[[str], None] | None = None, solver: PowSolver | None = None) -> dict[str, Any]:
    """Run a scenario on a fresh uvloop event loop and return the results as plain data."""
    import uvloop

    sim = Simulation(scenario, host, port, via_gateway=via_gateway, progress=progress, label=label, solver=solver)
    recorder = uvloop.run(sim.run())
    return recorder.to_json()


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
