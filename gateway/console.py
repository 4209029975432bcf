"""The operator's console on the admin listener: what the gateway decides, why, and the few levers to change it.

Server-rendered HTML (``/console/``) with a little JavaScript and a vendored chart library
(``gateway/static/vendor/``), no build step. Views:

* **Live**: requests per second by verdict and source over the last hour (a per-minute ring
  fed by the pipeline observer that sees every answered request), the top rules, client
  keys and paths challenged or blocked, model and breaker state, the decision cache's hit
  ratio and the added latency's p50/p99 (from the gateway's own metrics);
* **Decisions**: a bounded ring of recent decisions per worker (``admin.console_decisions``)
  with filters (verdict, source, rule, client, path), each with its full explanation;
* **Lookup**: the reference a block or challenge page shows (its request id) to that decision;
* **What if**: shadow mode's counterfactual side by side, and "replay the last N decisions
  under this edited policy" through the pipeline ``clefgate replay`` builds;
* **Actions**: reload the config, swap the model version, and a temporary allow or block for
  a client address or CIDR with an expiry (:class:`Overrides`, consulted first by
  ``Pipeline.decide``). Every action is audited: a process log line, and a line in the
  decision log when one is configured.

With ``--workers N`` the supervisor serves the admin app: it asks every worker over its
pipe (``("console", op, *args)``, answered by :func:`answer`) and merges the answers, so the
rings, counters and lookups cover all workers; overrides are pushed to every worker.

Authentication (docs/console.md): the admin secret (``admin.token``) is posted once to a
login form and exchanged for a session cookie (HttpOnly, SameSite=Strict, an HMAC made
with a key derived from the secret, never the secret itself); views take the session or
``Authorization: Bearer <token>``. Actions are JSON POSTs carrying a CSRF token (an HMAC of
the session) in ``X-CSRF-Token``, and their ``Origin`` must be the console's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import hmac
import html
import ipaddress
import json
import logging
import math
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlencode, urlsplit

import yaml
from aiohttp import web

from gateway import __version__, metrics
from gateway import config as configmod
from gateway.config import Config, ConfigError
from gateway.features import Features
from gateway.verdict import Action, Source, Verdict, attack_probability, bot_probability

log = logging.getLogger("clefgate.console")

ACTIONS_TAKEN = metrics.counter("clefgate_console_actions_total", "Actions taken in the console, by kind and result (ok, refused, failed).",
                                ("kind", "result"))
OVERRIDE_HITS = metrics.counter("clefgate_console_override_hits_total", "Requests decided by a temporary console allow or block, by action.",
                                ("action",))

MINUTES = 60  # the Live view's window: one slot per minute
TOP_KEYS = 500  # distinct rules, clients or paths one minute's slot counts before it stops adding new ones
TOP_SHARED = 50  # the heaviest of them a worker reports (merged across workers, the top tables are of these)
# the most a worker's answer to one console question holds: answers cross the supervisor's pipe, whose buffer (64 KiB)
# a single message must stay well inside; longer lists come in pages
ANSWER_BYTES = 24 * 1024
SESSION_S = 12 * 3600
COOKIE = "clefgate_console"
_STATIC = resources.files("gateway") / "static"


# ------------------------------------------------------------------------------------------ temporary allow / block

@dataclass(frozen=True)
class Override:
    """A temporary allow or block of a client address or network, until ``expires`` (epoch seconds)."""

    id: str
    network: str
    action: str  # allow or block
    expires: float
    note: str = ""
    created: float = 0.0

    def verdict(self) -> Verdict:
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires))
        why = f"console: temporary {self.action} of {self.network} until {until}" + (f" ({self.note})" if self.note else "")
        return Verdict(Action.BLOCK if self.action == "block" else Action.FORWARD, Source.RULE, why, rule=f"console-{self.action}",
                       explanation=(why, f"override {self.id}, set {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.created))}"))


class Overrides:
    """The temporary allows and blocks in force in this process: ``match`` is the first stage of ``Pipeline.decide``.

    Empty (the common case) it costs one attribute read per request. The newest entry that
    covers the client decides; expired entries are ignored and dropped on the next change.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._entries: tuple[tuple[Override, ipaddress.IPv4Network | ipaddress.IPv6Network, Verdict], ...] = ()

    @property
    def entries(self) -> list[Override]:
        now = self.clock()
        return [o for o, _, _ in self._entries if o.expires > now]

    def replace(self, entries: Iterable[Override]) -> None:
        """Put exactly ``entries`` (the unexpired ones) in force, newest first."""
        now = self.clock()
        kept = sorted((o for o in entries if o.expires > now), key=lambda o: -o.created)
        self._entries = tuple((o, ipaddress.ip_network(o.network, strict=False), o.verdict()) for o in kept)
        _address.cache_clear()

    def match(self, features: Features) -> Verdict | None:
        """The verdict of the newest unexpired entry covering the client, or None."""
        entries = self._entries
        if not entries:
            return None
        address = _address(features.client_ip)
        if address is None:
            return None
        now = self.clock()
        for override, network, verdict in entries:
            if override.expires > now and address.version == network.version and address in network:
                OVERRIDE_HITS.inc(override.action)
                return verdict
        return None


@functools.lru_cache(maxsize=4096)
def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def parse_override(body: Mapping[str, Any], now: float) -> tuple[Override | None, list[str]]:
    """An Override from an action's JSON (``network``, ``action``, ``minutes``, ``note``), or the problems with it."""
    problems = []
    network = str(body.get("network", "")).strip()
    try:
        parsed = ipaddress.ip_network(network, strict=False)
    except ValueError:
        problems.append(f"network: {network!r} is not an address or CIDR (e.g. 203.0.113.7 or 203.0.113.0/24)")
        parsed = None
    action = body.get("action")
    if action not in ("allow", "block"):
        problems.append(f"action: {action!r} is not allow or block")
    try:
        minutes = float(body.get("minutes", 0))
    except (TypeError, ValueError):
        minutes = 0.0
    if not 0 < minutes <= 7 * 24 * 60:
        problems.append("minutes: give a number of minutes between 1 and 10080 (a week)")
    note = str(body.get("note", ""))[:200]
    if problems or parsed is None:
        return None, problems
    return Override(secrets.token_hex(4), str(parsed), str(action), now + minutes * 60, note, now), []


# ------------------------------------------------------------------------------------------ what each worker records

def reason_class(verdict: Verdict) -> str:
    """The plain reason class a block page names (``gateway.challenge.service.reason_class``)."""
    from gateway.challenge.service import reason_class as classify

    return classify(verdict)


def _bounded_headers(headers: Sequence[tuple[str, str]]) -> list[list[str]]:
    """The request's headers for the console: at most 64, each value cut to 1,000 characters, 12 KiB in all."""
    out, room = [], 12 * 1024
    for name, value in headers[:64]:
        value = value[:1000]
        room -= len(name) + len(value)
        if room < 0:
            break
        out.append([name, value])
    return out


def describe(when: float, features: Features, verdict: Verdict, status: int, worker: int, *, headers: bool = True) -> dict[str, Any]:
    """One decision with its full explanation, as plain data (picklable, JSON-able, bounded in size: it crosses the
    supervisor's pipe). ``headers`` adds the request's headers (the detail view and the What-if replay need them)."""
    client = features.client
    decided = verdict.shadow_action or verdict.action
    return {
        "request_id": features.request_id, "time": when, "worker": worker,
        "client_ip": features.client_ip, "client_key": str(getattr(features, "client_key", "") or "")[:200],
        "method": features.method, "host": features.host[:200], "target": features.target[:4096], "path": features.path[:2048],
        "user_agent": features.user_agent[:1000], "headers": _bounded_headers(features.headers) if headers else [],
        "verdict": verdict.action.value, "decided": decided.value, "source": verdict.source.value, "rule": verdict.rule or "",
        "reason": verdict.reason[:2000], "status": status, "difficulty": verdict.difficulty, "block_status": verdict.status,
        "probabilities": {q: dict(o) for q, o in verdict.probabilities.items()} if verdict.probabilities else None,
        "p_attack": attack_probability(verdict.probabilities) if verdict.probabilities else None,
        "p_bot": bot_probability(verdict.probabilities) if verdict.probabilities else None,
        "explanation": [x[:1000] for x in verdict.explanation[:20]],
        "payload": [{"detector": h.detector, "kind": h.kind, "location": h.location, "fragment": h.fragment, "decoding": h.decoding,
                     "text": h.describe()[:1000]} for h in verdict.payload[:20]],
        "policy": verdict.policy or "", "shadow_action": verdict.shadow_action.value if verdict.shadow_action else None,
        "model": verdict.model or "", "decision_ms": verdict.decision_ms, "backend": verdict.backend or "",
        "client_history": dataclasses.asdict(client) if client is not None else None,
        "reason_class": reason_class(verdict) if decided is Action.BLOCK else "",
    }


def record_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The request of a described decision as the record ``clefgate replay`` reads."""
    return {"method": entry["method"], "path": entry["target"], "http_version": "1.1", "headers": entry["headers"], "body": None,
            "client_ip": entry["client_ip"], "request_id": entry["request_id"]}


@dataclass
class Filters:
    """The Decisions view's filters: exact verdict and source, substrings of rule, client and path."""

    verdict: str = ""
    source: str = ""
    rule: str = ""
    client: str = ""
    path: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filters:
        return cls(**{f.name: str(query.get(f.name, "")).strip()[:200] for f in dataclasses.fields(cls)})

    def keep(self, features: Features, verdict: Verdict) -> bool:
        if self.verdict and self.verdict not in (verdict.action.value, verdict.shadow_action.value if verdict.shadow_action else ""):
            return False
        if self.source and self.source != verdict.source.value:
            return False
        if self.rule and self.rule.lower() not in (verdict.rule or "").lower():
            return False
        if self.client and self.client not in features.client_ip and self.client not in str(getattr(features, "client_key", "") or ""):
            return False
        return not (self.path and self.path not in features.target)

    def as_query(self) -> dict[str, str]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v}


class Recorder:
    """This worker's recent decisions and per-minute counts: a pipeline observer, cheap enough for every request.

    ``observe`` appends a reference (no copy, no formatting) to a bounded ring and adds to the
    current minute's counters; everything else happens when the console asks.
    """

    def __init__(self, size: int = 2000, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.worker = 0
        self.state: Any = None  # the running pipeline's ClientState (gateway.clients), for a looked-up client's window now
        self.ring: deque[tuple[float, Features, Verdict, int]] = deque(maxlen=size)
        self._stamp = [-1] * MINUTES
        self._counts: list[dict[tuple[str, str], int]] = [{} for _ in range(MINUTES)]
        # per minute: kind (rule, client, path) -> key -> [challenges, blocks]
        self._refused: list[dict[str, dict[str, list[int]]]] = [{} for _ in range(MINUTES)]

    def resize(self, size: int) -> None:
        if size != self.ring.maxlen:
            self.ring = deque(self.ring, maxlen=size)

    def observe(self, features: Features, verdict: Verdict, status: int) -> None:
        now = self.clock()
        self.ring.append((now, features, verdict, status))
        minute = int(now // 60)
        i = minute % MINUTES
        if self._stamp[i] != minute:
            self._stamp[i] = minute
            self._counts[i] = {}
            self._refused[i] = {}
        counts = self._counts[i]
        key = (verdict.action._value_, verdict.source._value_)
        counts[key] = counts.get(key, 0) + 1
        decided = verdict.shadow_action or verdict.action
        if decided is not Action.FORWARD:
            col = 1 if decided is Action.BLOCK else 0
            refused = self._refused[i]
            for kind, name in (("rule", verdict.rule or f"({verdict.source._value_})"), ("client", features.client_ip),
                               ("path", features.path)):
                table = refused.setdefault(kind, {})
                row = table.get(name)
                if row is None:
                    if len(table) >= TOP_KEYS:
                        continue
                    row = table[name] = [0, 0]
                row[col] += 1

    # ---- what the console asks (each answer is plain data, merged across workers by the caller)

    def live(self) -> dict[str, Any]:
        """The last hour's counts per minute, and the ``TOP_SHARED`` heaviest rules, clients and paths refused."""
        now_minute = int(self.clock() // 60)
        minutes = []
        refused: dict[str, dict[str, list[int]]] = {}
        for i in range(MINUTES):
            stamp = self._stamp[i]
            if stamp < 0 or now_minute - stamp >= MINUTES:
                continue
            minutes.append([stamp, {f"{a}/{s}": n for (a, s), n in self._counts[i].items()}])
            for kind, table in self._refused[i].items():
                into = refused.setdefault(kind, {})
                for name, (c, b) in table.items():
                    row = into.setdefault(name, [0, 0])
                    row[0] += c
                    row[1] += b
        shared = {kind: {name[:300]: [c, b] for name, c, b in top(table, TOP_SHARED)} for kind, table in refused.items()}
        return {"minutes": minutes, "refused": shared, "ring": len(self.ring), "ring_size": self.ring.maxlen, "worker": self.worker}

    def decisions(self, filters: Filters, limit: int, before: float | None = None, *, headers: bool = False) -> dict[str, Any]:
        """Up to ``limit`` decisions older than ``before`` (newest first) that pass ``filters``, within ``ANSWER_BYTES``:
        ``{"items": [...], "more": bool}`` (more: ask again with the last item's time as ``before``)."""
        items: list[dict[str, Any]] = []
        size = 0
        for when, features, verdict, status in reversed(self.ring):
            if before is not None and when >= before:
                continue
            if not filters.keep(features, verdict):
                continue
            if len(items) >= limit:
                return {"items": items, "more": False}
            item = describe(when, features, verdict, status, self.worker, headers=headers)
            size += len(json.dumps(item))
            if items and size > ANSWER_BYTES:
                return {"items": items, "more": True}
            items.append(item)
        return {"items": items, "more": False}

    def lookup(self, request_id: str) -> dict[str, Any] | None:
        """The decision with this request id, with the client's window as it is now (when this worker keeps one)."""
        for when, features, verdict, status in reversed(self.ring):
            if features.request_id == request_id:
                found = describe(when, features, verdict, status, self.worker)
                if self.state is not None:
                    found["client_now"] = dataclasses.asdict(self.state.stats(features.client_ip))
                return found
        return None


RECORDER = Recorder()
OVERRIDES = Overrides()


def answer(op: str, *args: Any) -> Any:
    """A worker's answer to the console's question ``op`` (over the supervisor's pipe, or in-process)."""
    if op == "live":
        return RECORDER.live()
    if op == "decisions":
        return RECORDER.decisions(Filters(**args[0]), int(args[1]), args[2], headers=bool(args[3]))
    if op == "lookup":
        return RECORDER.lookup(str(args[0]))
    if op == "overrides":
        OVERRIDES.replace(Override(**o) for o in args[0])
        return len(OVERRIDES.entries)
    raise ValueError(f"unknown console question {op!r}")


def merge_live(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several workers' ``live`` answers as one: counts per minute and top tables summed."""
    minutes: dict[int, dict[str, int]] = {}
    refused: dict[str, dict[str, list[int]]] = {}
    for a in answers:
        for stamp, counts in a["minutes"]:
            slot = minutes.setdefault(int(stamp), {})
            for key, n in counts.items():
                slot[key] = slot.get(key, 0) + n
        for kind, table in a["refused"].items():
            into = refused.setdefault(kind, {})
            for name, (c, b) in table.items():
                row = into.setdefault(name, [0, 0])
                row[0] += c
                row[1] += b
    return {"minutes": sorted(minutes.items()), "refused": refused, "ring": sum(a["ring"] for a in answers),
            "ring_size": sum(a["ring_size"] or 0 for a in answers), "workers": len(answers)}


def top(table: Mapping[str, Sequence[int]], n: int = 10) -> list[tuple[str, int, int]]:
    """The ``n`` keys with the most challenges + blocks: (key, challenges, blocks)."""
    rows = sorted(table.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))[:n]
    return [(k, int(v[0]), int(v[1])) for k, v in rows]


def series(live: Mapping[str, Any], now_minute: int) -> dict[str, Any]:
    """Requests per second per minute for the last hour, one series per verdict/source seen (zeros filled in)."""
    minutes = dict(live["minutes"])
    xs = list(range(now_minute - MINUTES + 1, now_minute + 1))
    keys = sorted({k for counts in minutes.values() for k in counts})
    return {"x": [m * 60 for m in xs], "series": {k: [round(minutes.get(m, {}).get(k, 0) / 60.0, 3) for m in xs] for k in keys}}


# ------------------------------------------------------------------------------------------ metrics the Live view reads

def metric_summary(snapshots: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Cache hit ratio, added latency p50/p99 and the breaker state, from the (merged) metrics snapshots."""
    def merged(name: str) -> dict[tuple[str, ...], Any]:
        inst = metrics.REGISTRY.instruments.get(name)
        if inst is None:
            return {}
        return metrics.merge([(i, s.get(name, {})) for i, s in enumerate(snapshots)], inst)

    cache = merged("clefgate_decision_cache_requests_total")
    hits = sum(v for k, v in cache.items() if k and k[0] in ("hit", "coalesced"))
    lookups = sum(cache.values())
    latency = merged(metrics.ADDED_LATENCY.name).get(())
    p50 = p99 = None
    if latency:
        hist = metrics.Histogram("tmp", "", buckets=metrics.ADDED_LATENCY.buckets)
        hist.values[()] = latency
        p50, p99 = hist.quantile(0.5), hist.quantile(0.99)
    breaker = {k[0] if k else "": v for k, v in merged("clefgate_breaker_state").items()}
    return {"cache_hit_ratio": hits / lookups if lookups else None, "cache_lookups": lookups, "added_p50_s": p50, "added_p99_s": p99,
            "latency_count": sum(latency[:-1]) if latency else 0, "breaker": breaker}


# ------------------------------------------------------------------------------------------ sessions and CSRF

def _key(secret: str) -> bytes:
    """The console's signing key, derived from the admin secret (rotating the secret ends every session)."""
    return hmac.new(secret.encode("utf-8", "surrogatepass"), b"clefgate console session v1", hashlib.sha256).digest()


def new_session(secret: str, now: float) -> str:
    body = f"{int(now + SESSION_S)}.{secrets.token_urlsafe(12)}"
    return f"{body}.{hmac.new(_key(secret), body.encode(), hashlib.sha256).hexdigest()}"


def session_ok(secret: str, value: str, now: float) -> bool:
    parts = value.split(".")
    if len(parts) != 3 or not parts[0].isdigit():
        return False
    body = f"{parts[0]}.{parts[1]}"
    expected = hmac.new(_key(secret), body.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts[2]) and int(parts[0]) > now


def csrf_of(secret: str, session: str) -> str:
    return hmac.new(_key(secret), f"csrf:{session}".encode(), hashlib.sha256).hexdigest()


def same_origin(request: web.Request) -> bool:
    """The request's Origin (or, without one, its Referer) is this console's own scheme://host."""
    mine = f"{request.scheme}://{request.host}".lower()
    origin = request.headers.get("Origin")
    if origin is not None:
        return origin.lower() == mine
    referer = request.headers.get("Referer", "")
    if not referer:
        return False
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}".lower() == mine


# ------------------------------------------------------------------------------------------ the console app

class Console:
    """The console's routes over the admin app's ``Control`` (one worker in-process, or the supervisor)."""

    def __init__(self, control: Any, clock: Callable[[], float] = time.time) -> None:
        self.control = control
        self.clock = clock
        # with no admin.token the console is open like /admin/*, and CSRF tokens are signed with a key of this process
        self._open_secret = secrets.token_urlsafe(32)
        self._overrides: list[Override] = []

    # ---- asking the workers

    async def ask(self, op: str, *args: Any) -> list[Any]:
        """Every worker's answer to ``op``: the supervisor's pipes, or this process."""
        handles = getattr(self.control, "workers", None)
        if handles is None:
            return [answer(op, *args)]
        got = await asyncio.gather(*(w.ask("console", op, *args, wait_s=5.0) for w in handles), return_exceptions=True)
        for w, g in zip(handles, got, strict=True):
            if isinstance(g, BaseException):
                log.warning("a worker did not answer the console", extra={"fields": {"worker": w.index, "op": op, "error": repr(g)}})
        return [g for g in got if not isinstance(g, BaseException)]

    async def snapshots(self) -> list[dict[str, Any]]:
        refresh = getattr(self.control, "refresh_snapshots", None)
        if refresh is not None:
            await refresh()
        remote = metrics.REGISTRY.remote
        return remote() if remote is not None else [metrics.REGISTRY.snapshot()]

    def supervised(self) -> bool:
        return getattr(self.control, "workers", None) is not None

    # ---- auth

    def secret(self) -> tuple[str | None, bool]:
        """(the secret sessions are signed with, whether the admin token is configured); None when it cannot be read."""
        cfg: Config = self.control.config()
        if not cfg.admin.token:
            return self._open_secret, False
        token = configmod.resolve_secret(cfg.admin.token)
        return (token or None), True

    def session(self, request: web.Request) -> str | None:
        """The request's valid session, or "bearer" for a valid Authorization header; None otherwise."""
        secret, _ = self.secret()
        if secret is None:
            return None
        value = request.cookies.get(COOKIE, "")
        if value and session_ok(secret, value, self.clock()):
            return value
        cfg: Config = self.control.config()
        given = request.headers.get("Authorization", "")
        if cfg.admin.token and given and hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                                                             f"Bearer {secret}".encode("utf-8", "surrogatepass")):
            return "bearer"
        return None

    def _cookie(self, response: web.StreamResponse, request: web.Request, value: str, max_age: int) -> None:
        response.set_cookie(COOKIE, value, max_age=max_age, path="/console", httponly=True, samesite="Strict",
                            secure=request.scheme == "https")

    async def _guard(self, request: web.Request) -> tuple[str | None, web.StreamResponse | None]:
        """(session, None) when a view may be shown; otherwise the answer (the login page, or a new session when open)."""
        secret, configured = self.secret()
        if secret is None:
            return None, web.Response(status=503, text="admin.token cannot be read; the console is closed", content_type="text/plain")
        session = self.session(request)
        if session is not None:
            return session, None
        if not configured:  # no admin.token: open, like /admin/*; the session only carries the CSRF token
            fresh = new_session(secret, self.clock())
            raise_to = _redirect(request.path_qs)
            self._cookie(raise_to, request, fresh, SESSION_S)
            return None, raise_to
        return None, self._login_page(request, "")

    def _action_refused(self, request: web.Request) -> web.Response | None:
        """Why a POST may not act: no session, no JSON, a foreign Origin, or a missing/wrong CSRF token."""
        secret, configured = self.secret()
        if not configured:  # state changes always need the admin secret, as POST /admin/* do
            return web.json_response({"error": "actions need admin.token: set admin.token (env:NAME or file:PATH) and sign in"},
                                     status=403)
        session = self.session(request)
        if secret is None or session is None:
            return web.json_response({"error": "sign in to the console first"}, status=401)
        if request.content_type != "application/json":
            return web.json_response({"error": "actions are JSON: Content-Type: application/json"}, status=415)
        if session != "bearer":
            if not same_origin(request):
                return web.json_response({"error": "the request's Origin is not this console's"}, status=403)
            if not hmac.compare_digest(request.headers.get("X-CSRF-Token", ""), csrf_of(secret, session)):
                return web.json_response({"error": "missing or wrong CSRF token (reload the page)"}, status=403)
        return None

    # ---- routes

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/console", self.to_console)
        r.add_get("/console/", self.live_view)
        r.add_get("/console/login", self.login_view)
        r.add_post("/console/login", self.login)
        r.add_post("/console/logout", self.logout)
        r.add_get("/console/decisions", self.decisions_view)
        r.add_get("/console/lookup", self.lookup_view)
        r.add_get("/console/decision/{rid}", self.decision_view)
        r.add_get("/console/whatif", self.whatif_view)
        r.add_get("/console/actions", self.actions_view)
        r.add_get("/console/api/live", self.live_api)
        r.add_get("/console/api/decisions", self.decisions_api)
        r.add_post("/console/api/replay", self.replay_api)
        r.add_post("/console/api/reload", self.reload_api)
        r.add_post("/console/api/model", self.model_api)
        r.add_post("/console/api/override", self.override_api)
        r.add_post("/console/api/override/remove", self.override_remove_api)
        r.add_get("/console/static/{name}", self.static)

    async def to_console(self, _: web.Request) -> web.StreamResponse:
        return _redirect("/console/")

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        files = {"console.css": ("console/console.css", "text/css"), "console.js": ("console/console.js", "application/javascript"),
                 "uPlot.min.css": ("vendor/uPlot.min.css", "text/css"), "uPlot.iife.min.js": ("vendor/uPlot.iife.min.js", "application/javascript")}
        if name not in files:
            raise web.HTTPNotFound()
        path, kind = files[name]
        return web.Response(body=_STATIC.joinpath(path).read_bytes(), content_type=kind,
                            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})

    async def login_view(self, request: web.Request) -> web.StreamResponse:
        return self._login_page(request, "")

    async def login(self, request: web.Request) -> web.StreamResponse:
        secret, configured = self.secret()
        if secret is None:
            return web.Response(status=503, text="admin.token cannot be read; the console is closed", content_type="text/plain")
        if not same_origin(request):
            ACTIONS_TAKEN.inc("login", "refused")
            return self._login_page(request, "This sign-in did not come from the console's own page.", status=403)
        as_json = request.content_type == "application/json"  # the page's script signs in with JSON; a form post also works
        if as_json:
            try:
                body = await request.json()
            except ValueError:
                body = None
            form: Mapping[str, Any] = body if isinstance(body, dict) else {}
        else:
            form = await request.post()
        given = str(form.get("token", ""))
        if configured and not hmac.compare_digest(given.encode("utf-8", "surrogatepass"), secret.encode("utf-8", "surrogatepass")):
            ACTIONS_TAKEN.inc("login", "refused")
            log.warning("console sign-in refused", extra={"fields": {"remote": request.remote}})
            if as_json:
                return web.json_response({"error": "That is not the admin secret."}, status=401)
            return self._login_page(request, "That is not the admin secret.", status=401)
        ACTIONS_TAKEN.inc("login", "ok")
        log.info("console sign-in", extra={"fields": {"remote": request.remote}})
        back = str(form.get("next", "/console/"))
        back = back if back.startswith("/console/") and not back.startswith("//") else "/console/"
        response = web.json_response({"next": back}) if as_json else _redirect(back, 303)
        self._cookie(response, request, new_session(secret, self.clock()), SESSION_S)
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        if not same_origin(request):
            return web.json_response({"error": "the request's Origin is not this console's"}, status=403)
        response = web.json_response({"next": "/console/login"}) if request.content_type == "application/json" \
            else _redirect("/console/login", 303)
        self._cookie(response, request, "", 0)
        return response

    def _login_page(self, request: web.Request, problem: str, status: int = 200) -> web.Response:
        nxt = request.path_qs if request.path.startswith("/console/") and request.method == "GET" and request.path != "/console/login" \
            else "/console/"
        body = (f"<h1>clefgate console</h1><form method=post action=/console/login class=login id=login>"
                f"{f'<p class=problem role=alert>{_e(problem)}</p>' if problem else ''}"
                "<label for=token>Admin secret (<code>admin.token</code>)</label>"
                "<input id=token name=token type=password autocomplete=current-password required autofocus>"
                f"<input type=hidden name=next value=\"{_e(nxt)}\"><button>Sign in</button>"
                "<p class=muted>The secret is exchanged for a session cookie (12 hours); it is not stored in the browser.</p></form>")
        return _html(_layout("Sign in", "", body, csrf="", nav=False), status)

    async def _page(self, request: web.Request, title: str, current: str, build: Callable[[], Awaitable[str]]) -> web.StreamResponse:
        session, refused = await self._guard(request)
        if refused is not None:
            return refused
        secret, configured = self.secret()
        assert secret is not None and session is not None
        body = await build()
        if not configured:
            body = ('<p class=warn role=alert>admin.token is not set: anyone who reaches this port can read the console (its actions are refused until it is set) and '
                    "the admin API. Set it before exposing the admin listener.</p>") + body
        csrf = csrf_of(secret, session) if session != "bearer" else ""
        return _html(_layout(title, current, body, csrf=csrf))

    # ---- Live

    async def live_data(self) -> dict[str, Any]:
        live = merge_live(await self.ask("live"))
        statuses = await self.control.statuses()
        now_minute = int(self.clock() // 60)
        summary = metric_summary(await self.snapshots())
        return {"live": live, "series": series(live, now_minute), "summary": summary, "statuses": statuses}

    async def live_api(self, request: web.Request) -> web.StreamResponse:
        if self.session(request) is None:
            return web.json_response({"error": "sign in to the console first"}, status=401)
        data = await self.live_data()
        return web.json_response({"series": data["series"], "summary": data["summary"], "workers": data["live"]["workers"]})

    async def live_view(self, request: web.Request) -> web.StreamResponse:
        async def build() -> str:
            data = await self.live_data()
            live, summary, statuses = data["live"], data["summary"], data["statuses"]
            totals: dict[str, int] = {}
            for _, counts in live["minutes"]:
                for k, n in counts.items():
                    totals[k] = totals.get(k, 0) + n
            total = sum(totals.values())
            tiles = [
                ("Requests, last hour", f"{total:,}"),
                ("Challenged", f"{sum(n for k, n in totals.items() if k.startswith('challenge/')):,}"),
                ("Blocked", f"{sum(n for k, n in totals.items() if k.startswith('block/')):,}"),
                ("Shadow: would refuse", f"{totals.get('forward/shadow', 0):,}"),
                ("Cache hit ratio", "–" if summary["cache_hit_ratio"] is None else f"{summary['cache_hit_ratio']:.0%}"),
                ("Added latency p50 / p99", _latency(summary["added_p50_s"]) + " / " + _latency(summary["added_p99_s"])),
            ]
            parts = ['<section class=tiles>' + "".join(f"<div class=tile><span>{_e(k)}</span><b>{_e(v)}</b></div>" for k, v in tiles)
                     + "</section>"]
            parts.append('<section><h2>Requests per second by verdict and source (last hour)</h2>'
                         f'<div id=chart class=chart role=img aria-label="requests per second by verdict and source"></div>'
                         f'<script type="application/json" id=live-data>{_json_script(data["series"])}</script>'
                         + _series_table(data["series"]) + "</section>")
            refused = live["refused"]
            grid = []
            for kind, title, link in (("rule", "Top rules", "rule"), ("client", "Top client keys", "client"), ("path", "Top paths", "path")):
                rows = "".join(f'<tr><td><a href="/console/decisions?{_e(urlencode({link: name, "verdict": ""}))}">{_e(name)}</a></td>'
                               f"<td class=num>{c:,}</td><td class=num>{b:,}</td></tr>" for name, c, b in top(refused.get(kind, {})))
                grid.append(f"<div><h2>{title} challenged or blocked</h2><table><thead><tr><th scope=col>{_e(kind)}</th>"
                            f"<th scope=col class=num>challenged</th><th scope=col class=num>blocked</th></tr></thead>"
                            f"<tbody>{rows or '<tr><td colspan=3 class=muted>none in the last hour</td></tr>'}</tbody></table></div>")
            parts.append("<section class=grid3>" + "".join(grid) + "</section>")
            models = []
            for st in statuses:
                model = st.get("model") or {}
                models.append(f"<tr><td>{st.get('worker')}</td><td>{'ready' if st.get('ready') else 'not ready'}</td>"
                              f"<td>{st.get('generation')}</td><td>{_e(str(model.get('model', 'no model')))}</td>"
                              f"<td>{_e(str(model.get('provider', '')))} {_e(str(model.get('precision', '')))}</td>"
                              f"<td>{_e(str(model.get('breaker', '–')))}</td><td class=num>{_e(str(model.get('queue', '')))}</td>"
                              f"<td class=num>{_e(str(model.get('cache_entries', '')))}</td></tr>")
            parts.append("<section><h2>Model and breaker</h2><table><thead><tr><th scope=col>worker</th><th scope=col>state</th>"
                         "<th scope=col>config generation</th><th scope=col>model</th><th scope=col>runtime</th><th scope=col>breaker</th>"
                         "<th scope=col class=num>queue</th><th scope=col class=num>cache entries</th></tr></thead><tbody>"
                         + "".join(models) + "</tbody></table>"
                         f"<p class=muted>{_e(_workers_note(live['workers'], self.supervised()))} Latency quantiles are bucket "
                         f"upper bounds over {int(summary['latency_count']):,} requests since start; the cache ratio counts "
                         f"{int(summary['cache_lookups']):,} lookups since start.</p></section>")
            return "".join(parts)
        return await self._page(request, "Live", "live", build)

    # ---- Decisions and Lookup

    async def find(self, request_id: str) -> dict[str, Any] | None:
        for found in await self.ask("lookup", request_id):
            if found is not None:
                return found  # type: ignore[no-any-return]
        return self._from_decision_log(request_id)

    def _from_decision_log(self, request_id: str) -> dict[str, Any] | None:
        """A decision no worker's ring still holds, from the decision log (the newest file, read from its end)."""
        cfg: Config = self.control.config()
        path = cfg.decision_log.path
        if not path or not request_id:
            return None
        needle = json.dumps(request_id)
        try:
            with open(path, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - (64 << 20)))
                data = fh.read()
        except OSError:
            return None
        for raw in reversed(data.splitlines()):
            if needle.encode() not in raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if line.get("request_id") == request_id:
                return _from_log_line(line)
        return None

    async def decisions_data(self, filters: Filters, limit: int, *, headers: bool = False) -> list[dict[str, Any]]:
        """The newest ``limit`` decisions passing ``filters`` across all workers (each asked page by page)."""
        wanted = dataclasses.asdict(filters)
        handles = getattr(self.control, "workers", None)

        async def pages(ask: Callable[..., Awaitable[Any]]) -> list[dict[str, Any]]:
            got: list[dict[str, Any]] = []
            before = None
            while len(got) < limit:
                page = await ask("console", "decisions", wanted, limit - len(got), before, headers)
                got += page["items"]
                if not page["more"] or not page["items"]:
                    break
                before = page["items"][-1]["time"]
            return got

        if handles is None:
            async def local(_: str, *args: Any) -> Any:
                return answer(*args)
            found = await pages(local)
        else:
            async def one(w: Any) -> list[dict[str, Any]]:
                async def remote(*msg: Any) -> Any:
                    return await w.ask(*msg, wait_s=5.0)
                try:
                    return await pages(remote)
                except (TimeoutError, EOFError, OSError) as exc:
                    log.warning("a worker did not answer the console", extra={"fields": {"worker": w.index, "error": repr(exc)}})
                    return []
            found = [d for part in await asyncio.gather(*(one(w) for w in handles)) for d in part]
        found.sort(key=lambda d: -d["time"])
        return found[:limit]

    async def decisions_api(self, request: web.Request) -> web.StreamResponse:
        if self.session(request) is None:
            return web.json_response({"error": "sign in to the console first"}, status=401)
        filters = Filters.of(request.query)
        limit = _int(request.query.get("limit"), 100, 1, 1000)
        return web.json_response({"decisions": await self.decisions_data(filters, limit)})

    async def decisions_view(self, request: web.Request) -> web.StreamResponse:
        filters = Filters.of(request.query)
        limit = _int(request.query.get("limit"), 200, 1, 1000)

        async def build() -> str:
            rows = await self.decisions_data(filters, limit)
            fields = (f"<label>verdict <select name=verdict>{_options(('', 'forward', 'challenge', 'block'), filters.verdict)}</select></label>"
                      f"<label>source <select name=source>{_options(('', *(s.value for s in Source)), filters.source)}</select></label>"
                      + "".join(f'<label>{name} <input name={name} value="{_e(getattr(filters, name))}" placeholder="{hint}"></label>'
                                for name, hint in (("rule", "rule name"), ("client", "address"), ("path", "/path"))))
            form = f'<form method=get class=filters id=filters>{fields}<button>Filter</button> <a href="/console/decisions">clear</a></form>'
            body = "".join(_decision_row(d) for d in rows)
            table = ("<table class=decisions><thead><tr><th scope=col>time</th><th scope=col>verdict</th><th scope=col>source</th>"
                     "<th scope=col>rule</th><th scope=col>client</th><th scope=col>request</th><th scope=col class=num>status</th>"
                     "<th scope=col>reason</th></tr></thead><tbody>"
                     + (body or "<tr><td colspan=8 class=muted>no decision matches</td></tr>") + "</tbody></table>")
            note = _workers_note(len(await self.ask("live")), self.supervised())
            return (f"<h1>Decisions</h1>{form}<p class=muted>{len(rows)} shown, newest first. {_e(note)} "
                    "Click a reference for the full explanation.</p>" + table)
        return await self._page(request, "Decisions", "decisions", build)

    async def lookup_view(self, request: web.Request) -> web.StreamResponse:
        ref = request.query.get("ref", "").strip()
        if ref:
            _, refused = await self._guard(request)
            if refused is not None:
                return refused
            return _redirect("/console/decision/" + _quote(ref))

        async def build() -> str:
            return ("<h1>Lookup</h1><p>Paste the reference a visitor saw on a block or challenge page (its request id).</p>"
                    "<form method=get action=/console/lookup class=filters><label for=ref>Reference</label>"
                    "<input id=ref name=ref required placeholder=\"e.g. fbu54z3j-1c\"><button>Look up</button></form>")
        return await self._page(request, "Lookup", "lookup", build)

    async def decision_view(self, request: web.Request) -> web.StreamResponse:
        rid = request.match_info["rid"]

        async def build() -> str:
            found = await self.find(rid)
            if found is None:
                return (f"<h1>Reference <code>{_e(rid)}</code></h1><p class=problem role=alert>No decision with this reference is in "
                        "the workers' recent decisions or the decision log. References are kept for the last "
                        f"{_e(str(self.control.config().admin.console_decisions))} decisions per worker "
                        "(<code>admin.console_decisions</code>), and in the decision log when <code>decision_log.path</code> is set.</p>"
                        "<p><a href=/console/lookup>Look up another</a></p>")
            return _decision_detail(found)
        return await self._page(request, f"Decision {rid}", "lookup", build)

    # ---- What if

    async def whatif_view(self, request: web.Request) -> web.StreamResponse:
        async def build() -> str:
            rows = await self.decisions_data(Filters(), 2000)
            shadowed = [d for d in rows if d["shadow_action"]]
            matrix: dict[tuple[str, str], int] = {}
            for d in rows:
                key = (d["verdict"], d["decided"])
                matrix[key] = matrix.get(key, 0) + 1
            side = "".join(f"<tr><td>{_e(a)}</td><td>{_e(b)}</td><td class=num>{n:,}</td></tr>" for (a, b), n in sorted(matrix.items()))
            shadow_rows = "".join(
                f'<tr><td><a href="/console/decision/{_quote(d["request_id"])}"><code>{_e(d["request_id"])}</code></a></td>'
                f'<td>{_e(d["verdict"])}</td><td class="v-{_e(d["decided"])}">{_e(d["decided"])}</td><td>{_e(d["client_ip"])}</td>'
                f'<td>{_e(d["method"])} {_e(_cut(d["target"], 60))}</td><td>{_e(_cut(d["reason"], 120))}</td></tr>' for d in shadowed[:100])
            cfg: Config = self.control.config()
            policy_yaml = yaml.safe_dump(configmod.redacted(cfg.policy), sort_keys=False)
            return (
                "<h1>What if</h1><section><h2>Enforced against decided (shadow mode and rollout)</h2>"
                "<p>What the gateway did (enforced) beside what its rules and policy decided; they differ where shadow mode or a "
                "rollout kept a decision from being enforced.</p><table><thead><tr><th scope=col>enforced</th><th scope=col>decided"
                f"</th><th scope=col class=num>requests</th></tr></thead><tbody>{side or '<tr><td colspan=3 class=muted>no decisions yet</td></tr>'}"
                "</tbody></table>"
                f"<table><thead><tr><th scope=col>reference</th><th scope=col>enforced</th><th scope=col>would have</th><th scope=col>client</th>"
                f"<th scope=col>request</th><th scope=col>reason</th></tr></thead><tbody>"
                f"{shadow_rows or '<tr><td colspan=6 class=muted>no shadow-only decisions among the recent ones</td></tr>'}</tbody></table></section>"
                "<section><h2>Replay the last decisions under an edited policy</h2>"
                "<p>The requests are decided again by the pipeline <code>clefgate replay</code> builds (rules, the running model, "
                "this policy), offline: nothing live changes. Edit the <code>policy:</code> section below.</p>"
                "<form id=replay class=stack><label for=policy>policy (YAML)</label>"
                f"<textarea id=policy name=policy rows=14 spellcheck=false>{_e(policy_yaml)}</textarea>"
                "<label for=count>decisions to replay (newest)</label><input id=count name=count type=number min=1 max=5000 value=500>"
                "<button>Replay</button></form><div id=replay-result aria-live=polite></div></section>")
        return await self._page(request, "What if", "whatif", build)

    async def replay_api(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._action_refused(request)) is not None:
            return refused
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "body must be JSON: {\"policy\": \"...yaml...\", \"count\": 500}"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "body must be a JSON object"}, status=400)
        count = _int(body.get("count"), 500, 1, 5000)
        try:
            policy = yaml.safe_load(str(body.get("policy", ""))) or {}
        except yaml.YAMLError as exc:
            return web.json_response({"error": f"policy: not YAML: {exc}"}, status=422)
        if not isinstance(policy, dict):
            return web.json_response({"error": "policy: must be a mapping (the policy: section)"}, status=422)
        entries = sorted(await self.decisions_data(Filters(), count, headers=True), key=lambda d: d["time"])
        cfg: Config = self.control.config()
        model = self._running_model()
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(None, replay_under, cfg, policy, entries, model)
        except ConfigError as exc:
            return web.json_response({"error": "the edited policy is refused", "problems": exc.problems}, status=422)
        return web.json_response(result)

    def _running_model(self) -> Any:
        worker = getattr(self.control, "worker", None)
        if worker is not None and worker.ref is not None and worker.runtime.decider is not None:
            return worker.runtime.decider.model
        flash = getattr(self.control, "flash", None)
        return flash.model if flash is not None else None

    # ---- Actions

    async def actions_view(self, request: web.Request) -> web.StreamResponse:
        async def build() -> str:
            cfg: Config = self.control.config()
            statuses = await self.control.statuses()
            model = (statuses[0].get("model") or {}).get("model", "no model") if statuses else "?"
            now = self.clock()
            rows = "".join(
                f"<tr><td><code>{_e(o.network)}</code></td><td class=\"v-{'block' if o.action == 'block' else 'forward'}\">{_e(o.action)}</td>"
                f"<td>{_e(_when(o.expires))} ({math.ceil((o.expires - now) / 60)} min left)</td><td>{_e(o.note)}</td>"
                f"<td><button class=secondary data-remove=\"{_e(o.id)}\">remove</button></td></tr>" for o in self.current_overrides())
            return (
                "<h1>Actions</h1><p>Each action is written to the process log and, when <code>decision_log.path</code> is set, "
                "as an audit line in the decision log.</p><div id=action-result aria-live=polite></div>"
                "<section><h2>Temporary allow or block</h2><form id=override class=filters>"
                "<label for=network>address or CIDR</label><input id=network name=network required placeholder=\"203.0.113.7 or 203.0.113.0/24\">"
                "<label for=action>action</label><select id=action name=action><option value=block>block</option>"
                "<option value=allow>allow (skips rules and the model)</option></select>"
                "<label for=minutes>minutes</label><input id=minutes name=minutes type=number min=1 max=10080 value=60>"
                "<label for=note>note</label><input id=note name=note maxlength=200 placeholder=\"why (goes to the audit line)\">"
                "<button>Apply</button></form>"
                "<table><thead><tr><th scope=col>network</th><th scope=col>action</th><th scope=col>expires</th><th scope=col>note</th>"
                f"<th scope=col></th></tr></thead><tbody>{rows or '<tr><td colspan=5 class=muted>none in force</td></tr>'}</tbody></table>"
                f"<p class=muted>{_e(self._override_note())}</p></section>"
                "<section><h2>Reload the config</h2><p>Reads <code>" + _e(cfg.source or "(no file)") + "</code> again and swaps it in "
                "whole; if anything is wrong, the running config stays and the problems are listed.</p>"
                "<form id=reload><button>Reload config</button></form></section>"
                "<section><h2>Swap the model version</h2><p>Running: <code>" + _e(str(model)) + "</code>. The new version loads "
                "and warms beside the running one, then takes over.</p><form id=model class=filters><label for=version>version"
                "</label><input id=version name=version required placeholder=\"e.g. 1.7.0 or latest\"><button>Swap</button></form></section>")
        return await self._page(request, "Actions", "actions", build)

    def current_overrides(self) -> list[Override]:
        now = self.clock()
        self._overrides = [o for o in self._overrides if o.expires > now]
        return list(self._overrides)

    def _override_note(self) -> str:
        if self.supervised():
            return ("Pushed to every worker. A worker that restarts (after a crash) gets them again with the next change made "
                    "here; the list lives in the supervisor and ends with the process.")
        return "Held in this process's memory: they end when it stops (a reload keeps them)."

    async def audit(self, kind: str, detail: dict[str, Any], result: str, request: web.Request) -> None:
        """One audit record: the process log, and a decision-log line (``{"audit": ...}``) when the log is configured."""
        line = {"audit": {"kind": kind, "result": result, "remote": request.remote or "", **detail}, "time": _when(self.clock(), millis=True)}
        ACTIONS_TAKEN.inc(kind, result)
        log.info("console action", extra={"fields": line["audit"]})
        worker = getattr(self.control, "worker", None)
        if worker is not None:
            decision_log = worker.runtime.decision_log
            if decision_log is not None:
                decision_log.audit(line)
            return
        handles = getattr(self.control, "workers", None) or []
        for w in handles[:1]:  # one line, written by the first worker's log writer (every worker writes the same file)
            try:
                await w.ask("console_audit", line, wait_s=5.0)
            except (TimeoutError, EOFError, OSError):
                log.error("console action: the audit line could not reach a worker", extra={"fields": line["audit"]})

    async def _json_body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "body must be a JSON object"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "body must be a JSON object"}, status=400)
        return body

    async def reload_api(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._action_refused(request)) is not None:
            return refused
        problems = await self.control.reload()
        await self.audit("reload", {"problems": problems[:20]}, "failed" if problems else "ok", request)
        if problems:
            return web.json_response({"reloaded": False, "problems": problems}, status=422)
        return web.json_response({"reloaded": True, "generation": (await self.control.statuses())[0]["generation"]})

    async def model_api(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._action_refused(request)) is not None:
            return refused
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body
        version = str(body.get("version", "")).strip()
        if not version:
            return web.json_response({"error": "give a version, e.g. {\"version\": \"1.7.0\"}"}, status=400)
        problems = await self.control.swap_model({"version": version})
        await self.audit("model", {"version": version, "problems": problems[:20]}, "failed" if problems else "ok", request)
        if problems:
            return web.json_response({"swapped": False, "problems": problems}, status=422)
        statuses = await self.control.statuses()
        return web.json_response({"swapped": True, "model": statuses[0].get("model")})

    async def override_api(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._action_refused(request)) is not None:
            return refused
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body
        override, problems = parse_override(body, self.clock())
        if override is None:
            return web.json_response({"error": "the action is refused", "problems": problems}, status=422)
        self._overrides = [*self.current_overrides(), override]
        await self._push()
        await self.audit("override", dataclasses.asdict(override), "ok", request)
        return web.json_response({"override": dataclasses.asdict(override)})

    async def override_remove_api(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._action_refused(request)) is not None:
            return refused
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body
        oid = str(body.get("id", ""))
        kept = [o for o in self.current_overrides() if o.id != oid]
        if len(kept) == len(self._overrides):
            return web.json_response({"error": f"no override {oid!r} in force"}, status=404)
        self._overrides = kept
        await self._push()
        await self.audit("override_removed", {"id": oid}, "ok", request)
        return web.json_response({"removed": oid})

    async def _push(self) -> None:
        await self.ask("overrides", [dataclasses.asdict(o) for o in self._overrides])


def register(app: web.Application, control: Any) -> None:
    """Add the console's routes to the admin app (``admin.console``)."""
    if control.config().admin.console:
        Console(control).routes(app)


# ------------------------------------------------------------------------------------------ What-if replay

def replay_under(cfg: Config, policy: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], model: Any) -> dict[str, Any]:
    """``entries`` (described decisions) decided again by ``clefgate replay``'s pipeline under ``policy``.

    The config is the running one (redacted of secrets, which replay does not need) with the
    ``policy:`` section replaced; the model is the running one when there is one (else replay
    loads the configured version). Raises ConfigError for a policy the config refuses.
    """
    from gateway.tools import replay

    raw = configmod.redacted(cfg)
    raw["policy"] = dict(policy)
    raw["challenge"] = {**raw.get("challenge", {}), "keys": [], "dev_generate_secret": True}
    raw["redis"] = {}
    raw.pop("decision_log", None)
    raw["admin"] = {**raw.get("admin", {}), "token": ""}
    raw["jev"] = {**raw.get("jev", {}), "api_keys": []}
    edited = configmod.validate(raw, cfg.source or "<console>")
    outcomes: list[tuple[Mapping[str, Any], Verdict]] = []

    class Collecting(replay.Replayer):
        def _done(self, item: replay.LogRequest, features: Features, verdict: Verdict) -> None:
            super()._done(item, features, verdict)
            outcomes.append((item.record, verdict))

    loader = (lambda _: model) if model is not None else None
    replayer = Collecting(edited, model_loader=loader)
    by_id = {e["request_id"]: e for e in entries}
    for e in entries:
        replayer.feed(replay.LogRequest(record_of(e), float(e["time"]), int(e.get("status") or 0), "decision_log"))
    replayer.flush()
    changed = []
    matrix: dict[str, int] = {}
    for record, verdict in outcomes:
        before = by_id.get(str(record.get("request_id", "")), {})
        was = str(before.get("decided", ""))
        now = (verdict.shadow_action or verdict.action).value
        matrix[f"{was}→{now}"] = matrix.get(f"{was}→{now}", 0) + 1
        if was != now:
            changed.append({"request_id": before.get("request_id"), "client_ip": before.get("client_ip"),
                            "request": f"{before.get('method')} {before.get('target')}", "was": was, "now": now,
                            "was_reason": before.get("reason"), "now_reason": verdict.reason})
    return {"replayed": len(outcomes), "model": replayer.model.label if replayer.model is not None else None,
            "model_error": replayer.model_error, "matrix": matrix, "changed": changed[:200], "changed_count": len(changed),
            "actions": dict(replayer.tally.actions)}


# ------------------------------------------------------------------------------------------ HTML

def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _int(value: Any, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value)))
    except (TypeError, ValueError):
        return default


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _when(epoch: float, millis: bool = False) -> str:
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))
    return text + (f".{int((epoch % 1) * 1000):03d}Z" if millis else "Z")


def _latency(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds == float("inf"):
        return "> 30 s"
    return f"≤ {seconds * 1e6:.0f} µs" if seconds < 0.001 else f"≤ {seconds * 1e3:.1f} ms"


def _json_script(data: Any) -> str:
    """JSON safe inside a <script type="application/json"> element."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _options(values: Iterable[str], chosen: str) -> str:
    return "".join(f'<option value="{_e(v)}"{" selected" if v == chosen else ""}>{_e(v or "any")}</option>' for v in values)


def _workers_note(workers: int, supervised: bool) -> str:
    if supervised:
        return f"Merged from {workers} workers."
    return "One worker."


def _series_table(data: Mapping[str, Any]) -> str:
    """The chart's numbers as a table (for screen readers and for browsers without JavaScript): totals per series."""
    rows = "".join(f"<tr><td>{_e(k)}</td><td class=num>{sum(v) * 60:,.0f}</td><td class=num>{max(v) if v else 0:g}</td></tr>"
                   for k, v in data["series"].items())
    return ("<details><summary>The chart as a table</summary><table><thead><tr><th scope=col>verdict/source</th>"
            "<th scope=col class=num>requests, last hour</th><th scope=col class=num>peak req/s (minute mean)</th></tr></thead>"
            f"<tbody>{rows or '<tr><td colspan=3 class=muted>no requests yet</td></tr>'}</tbody></table></details>")


def _decision_row(d: Mapping[str, Any]) -> str:
    decided = d["decided"]
    shown = decided if d["verdict"] == decided else f"{d['verdict']} (would {decided})"
    return (f"<tr><td>{_e(_when(d['time']))}</td><td class=\"v-{_e(decided)}\">{_e(shown)}</td><td>{_e(d['source'])}</td>"
            f"<td>{_e(d['rule'])}</td><td>{_e(d['client_ip'])}</td>"
            f"<td><a href=\"/console/decision/{_quote(d['request_id'])}\"><code>{_e(d['request_id'])}</code></a> "
            f"{_e(d['method'])} {_e(_cut(d['target'], 80))}</td><td class=num>{_e(d['status'])}</td><td>{_e(_cut(d['reason'], 140))}</td></tr>")


def _decision_detail(d: Mapping[str, Any]) -> str:
    decided = d["decided"]
    facts = [("Reference", f"<code>{_e(d['request_id'])}</code>"), ("Time", _e(_when(d["time"], millis=True))),
             ("Verdict", f"<span class=\"v-{_e(decided)}\">{_e(d['verdict'])}</span>"
                         + (f" — decided <b>{_e(decided)}</b>, not enforced (shadow mode or rollout)" if d["shadow_action"] else "")),
             ("Source", _e(d["source"])), ("Rule", _e(d["rule"] or "–")),
             ("Policy", _e(d["policy"] or "–")), ("Reason", _e(d["reason"])),
             ("Status sent", _e(d["status"])), ("Client", _e(d["client_ip"]) + (f" — key {_e(d['client_key'])}" if d["client_key"] else "")),
             ("Request", f"{_e(d['method'])} <code>{_e(d['host'])}{_e(d['target'])}</code>"), ("User agent", _e(d["user_agent"] or "–"))]
    if d.get("reason_class"):
        from gateway.challenge.strings import STRINGS

        facts.append(("Block page said", _e(STRINGS["en"].get("reason_" + d["reason_class"], d["reason_class"]))))
    if d.get("difficulty"):
        facts.append(("Challenge difficulty", _e(d["difficulty"])))
    if d.get("model"):
        facts.append(("Model", f"{_e(d['model'])}" + (f" — {d['decision_ms']:.2f} ms" if d.get("decision_ms") is not None else "")))
    if d.get("backend"):
        facts.append(("Backend", _e(d["backend"])))
    if d.get("worker") is not None:
        facts.append(("Worker", _e(d["worker"])))
    parts = [f"<h1>Decision <code>{_e(d['request_id'])}</code></h1><dl class=facts>"
             + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"]
    if d.get("probabilities"):
        rows = "".join(f"<tr><th scope=row>{_e(q)}</th>" + "".join(f"<td>{_e(o)} <b>{p:.3f}</b></td>" for o, p in sorted(opts.items()))
                       + "</tr>" for q, opts in d["probabilities"].items())
        parts.append(f"<h2>Probabilities per class</h2><table class=probs><tbody>{rows}</tbody></table>")
    if d.get("payload"):
        rows = "".join(f"<tr><td>{_e(h['detector'])}</td><td>{_e(h['kind'])}</td><td><code>{_e(h['location'])}</code></td>"
                       f"<td>{_e(h['decoding'])}</td><td><code>{_e(h['fragment'])}</code></td></tr>" for h in d["payload"])
        parts.append("<h2>Payload evidence</h2><table><thead><tr><th scope=col>detector</th><th scope=col>kind</th><th scope=col>where"
                     f"</th><th scope=col>decoding</th><th scope=col>fragment</th></tr></thead><tbody>{rows}</tbody></table>")
    if d.get("explanation"):
        parts.append("<h2>Explanation</h2><ol>" + "".join(f"<li>{_e(x)}</li>" for x in d["explanation"]) + "</ol>")
    history, now = d.get("client_history"), d.get("client_now")
    parts.append("<h2>Client history</h2>")
    for title, stats in (("when it was decided", history), ("now", now)):
        if stats:
            parts.append(f"<h3>{title}</h3><dl class=facts>" + "".join(f"<dt>{_e(k.replace('_', ' '))}</dt><dd>{_e(_num(v))}</dd>"
                                                                      for k, v in stats.items()) + "</dl>")
    if not history:
        parts.append("<p class=muted>The window as the decision read it is not kept with this decision"
                     + (" (its model input's client features are in the explanation above)" if d.get("model") else "")
                     + "; <b>now</b> is the client's window at this moment.</p>")
    if d.get("headers"):
        parts.append("<details><summary>Request headers (as sent, in order)</summary><table><tbody>"
                     + "".join(f"<tr><th scope=row>{_e(n)}</th><td><code>{_e(_cut(v, 300))}</code></td></tr>" for n, v in d["headers"])
                     + "</tbody></table></details>")
    client = d["client_ip"]
    parts.append(f'<p><a href="/console/decisions?{_e(urlencode({"client": client}))}">Other decisions for this client</a> · '
                 f'<a href="/console/actions?network={_e(_quote(client))}">Allow or block this client for a while</a></p>')
    return "".join(parts)


def _num(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _from_log_line(line: Mapping[str, Any]) -> dict[str, Any]:
    """A decision-log line in the shape of :func:`describe` (what the log keeps of it)."""
    record = line.get("record") or {}
    headers = record.get("headers") or []
    hmap = {str(n).lower(): str(v) for n, v in headers if isinstance(n, str)}
    target = str(record.get("path", ""))
    when = 0.0
    try:
        when = time.mktime(time.strptime(str(line.get("time", ""))[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    except ValueError:
        pass
    probabilities = line.get("probabilities")
    verdict = str(line.get("verdict", ""))
    decided = str(line.get("shadow_action") or verdict)
    return {"request_id": line.get("request_id", ""), "time": when, "worker": None, "client_ip": line.get("client", ""), "client_key": "",
            "method": record.get("method", ""), "host": hmap.get("host", ""), "target": target, "path": target.split("?", 1)[0],
            "user_agent": hmap.get("user-agent", ""), "headers": headers, "verdict": verdict, "decided": decided,
            "source": line.get("source", ""), "rule": line.get("rule") or "", "reason": line.get("reason", ""), "status": line.get("status"),
            "difficulty": None, "block_status": None, "probabilities": probabilities,
            "p_attack": None, "p_bot": None, "explanation": list(line.get("explanation") or []), "payload": list(line.get("payload") or []),
            "policy": "", "shadow_action": line.get("shadow_action"), "model": line.get("model", ""),
            "decision_ms": line.get("latency_ms"), "backend": line.get("backend", ""), "client_history": None, "reason_class": ""}


_NAV = (("live", "/console/", "Live"), ("decisions", "/console/decisions", "Decisions"), ("lookup", "/console/lookup", "Lookup"),
        ("whatif", "/console/whatif", "What if"), ("actions", "/console/actions", "Actions"))
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")


def _layout(title: str, current: str, body: str, *, csrf: str, nav: bool = True) -> str:
    links = "".join(f'<a href="{href}"{" aria-current=page" if key == current else ""}>{label}</a>' for key, href, label in _NAV)
    header = (f"<header><a class=brand href=/console/>clefgate <small>{_e(__version__)}</small></a><nav aria-label=console>{links}</nav>"
              "<form method=post action=/console/logout class=logout><button class=secondary>Sign out</button></form></header>") if nav \
        else "<header><span class=brand>clefgate</span></header>"
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content=\"width=device-width,initial-scale=1\">"
            f"<meta name=robots content=noindex><meta name=csrf-token content=\"{_e(csrf)}\"><title>{_e(title)} · clefgate console</title>"
            "<link rel=stylesheet href=/console/static/uPlot.min.css><link rel=stylesheet href=/console/static/console.css>"
            "<script src=/console/static/uPlot.iife.min.js defer></script><script src=/console/static/console.js defer></script>"
            f"</head><body>{header}<main>{body}</main></body></html>")


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8",
                        headers={"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                                 "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY"})


def _redirect(location: str, status: int = 302) -> web.Response:
    return web.Response(status=status, headers={"Location": location, "Cache-Control": "no-store"})
