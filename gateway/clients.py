"""Per-client state: sliding windows, token-bucket rate limits, and their sync through Redis.

Who a client is: its **key**, the address *and* a stable fingerprint of the client software
(:func:`fingerprint`), so people sharing one address (a NAT, a carrier's CGNAT, a corporate
proxy) keep separate histories and one abuser's record never becomes theirs. The things kept
per client:

* :class:`ClientWindows` — per-client sliding-window statistics (request rate, share of
  4xx answers, path diversity, timing) that become ``features.ClientStats``;
* :class:`RateLimiter` — token buckets keyed by client key, IP, IP prefix or a header value,
  read by the ``rate:`` rule condition;
* challenges left unsolved and attack evidence (:class:`ClientState`), read by the policy
  to block a client that earned it;
* :class:`ClientState` — owns them all, bounds them (least recently used entries go first,
  counted), exports their size, and optionally reconciles them with a shared backend
  (:class:`RedisBackend`) so that several gateway replicas see one another's traffic.

Rules are evaluated synchronously on the hot path, so nothing here ever waits for
Redis: decisions use the local windows and buckets, and a background task pushes the
local deltas every ``redis.sync_interval_s`` and folds the other replicas' deltas back
in. The shared view is approximate:

* a replica learns what the others counted for a client at its first sync after it
  sees that client itself (so within about one sync interval of the client's traffic
  reaching it), and a window's older slots are pulled once, when the replica first
  reports the client;
* a rate bucket's shared counter is a running total, not recent use: a replica that
  meets a client (new, restarted, or after an eviction) takes the total as its baseline
  and charges only what the others take from then on;
* window slots are numbered on wall-clock time (read once, then followed on the
  monotonic clock), so replicas on different hosts share them only as far as their
  clocks agree;
* a sync whose call fails gives its deltas back to the next one; a call that timed
  out may still have reached Redis, and is then counted twice rather than lost.

When Redis is down, the local state decides alone; every failed call is counted in
``clefgate_redis_errors_total`` and every round served locally in
``clefgate_shared_state_fallback_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import re
import socket
import sys
import time
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway import metrics
from gateway.config import ClientsConfig, RedisConfig, resolve_secret
from gateway.features import INFRA_HEADERS, ClientStats, Features
from gateway.logins import LoginWatch
from gateway.rdns import ReverseNames
from gateway.served import ServedPages

log = logging.getLogger("clefgate.clients")

Clock = Callable[[], float]
# the window of a client never seen (frozen, so one object serves every new client of a flood)
_NO_HISTORY = ClientStats()

# ----------------------------------------------------------------------------- client identity


def parse_ip(text: str) -> tuple[int, int] | None:
    """``"203.0.113.7"`` -> (4, int); ``"2001:db8::1"`` -> (6, int); anything else -> None.

    socket.inet_pton is several times faster than ``ipaddress.ip_address`` and this runs
    once or twice per request. An IPv4-mapped IPv6 address counts as IPv4.
    """
    try:
        if ":" in text:
            value = int.from_bytes(socket.inet_pton(socket.AF_INET6, text.split("%", 1)[0]), "big")
            if value >> 32 == 0xFFFF:
                return 4, value & 0xFFFFFFFF
            return 6, value
        return 4, int.from_bytes(socket.inet_pton(socket.AF_INET, text), "big")
    except (OSError, ValueError, UnicodeEncodeError):
        return None


def network_of(ip: str, v4_prefix: int, v6_prefix: int) -> str:
    """The client's network as a short stable string (``"4:203.0.113.0/24"``); the text itself when not an IP."""
    parsed = parse_ip(ip)
    if parsed is None:
        return ip
    version, value = parsed
    bits, plen = (32, v4_prefix) if version == 4 else (128, v6_prefix)
    return f"{version}:{value >> (bits - plen) if plen else 0:x}/{plen}"


def address_key(client_ip: str) -> str:
    """The rate key ``ip``: an IPv4 address, or an IPv6 address's /64.

    A single subscriber or host is given a whole IPv6 /64 and can pick a new source
    address in it for every request, so a per-address limit would never bind (and the
    churn would evict everyone else's buckets).
    """
    return client_ip if ":" not in client_ip else network_of(client_ip, 32, 64)


# Header names whose presence depends on the request, not on the client software (a form post, a revalidation, a
# navigation from a link, what a front proxy adds): kept out of the fingerprint, so one browser keeps one key
# across its navigations, posts and reloads.
_REQUEST_HEADERS = frozenset({
    "cookie", "referer", "origin", "authorization", "proxy-authorization", "content-type", "content-length",
    "content-encoding", "transfer-encoding", "expect", "if-none-match", "if-modified-since", "if-match",
    "if-unmodified-since", "if-range", "range", "cache-control", "pragma", "sec-fetch-user", "upgrade-insecure-requests",
    "priority", "x-requested-with", "host", "purpose", "sec-purpose",
}) | INFRA_HEADERS

# browser families by the token that names them, most specific first (Edge and Opera also say Chrome, Chrome says Safari)
_FAMILIES = tuple((name, re.compile(pattern)) for name, pattern in (
    ("edge", r"\bEdg(?:e|A|iOS)?/(\d+)"), ("opera", r"\bOPR/(\d+)"), ("samsung", r"\bSamsungBrowser/(\d+)"),
    ("firefox", r"\b(?:Firefox|FxiOS)/(\d+)"), ("chrome", r"\b(?:Chrome|CriOS|Chromium)/(\d+)"),
    ("safari", r"\bVersion/(\d+)[^ ]* (?:Mobile/\S+ )?Safari/"),
))
_PRODUCT = re.compile(r"([A-Za-z][\w.+-]{0,40})(?:/v?(\d+))?")
_FAMILY_CACHE: dict[str, str] = {}
_FINGERPRINT_CACHE: dict[tuple[str, str, str], str] = {}
_CACHE_MAX = 4096


def user_agent_family(user_agent: str) -> str:
    """The client software's family and major version: ``"safari 18"``, ``"chrome 130"``, ``"curl 8"``, ``"-"`` when none."""
    hit = _FAMILY_CACHE.get(user_agent)
    if hit is not None:
        return hit
    family = ""
    for name, pattern in _FAMILIES:
        m = pattern.search(user_agent)
        if m is not None:
            family = f"{name} {m.group(1)}"
            break
    else:
        m = _PRODUCT.match(user_agent.strip())
        family = f"{m.group(1).lower()} {m.group(2) or ''}".strip() if m is not None else "-"
    if len(_FAMILY_CACHE) >= _CACHE_MAX:
        _FAMILY_CACHE.clear()
    _FAMILY_CACHE[user_agent] = family
    return family


def cookie_value(cookie_header: str, name: str) -> str:
    """The value of cookie ``name`` in a Cookie header ("" when absent)."""
    marker = name + "="
    at = cookie_header.find(marker)
    while at >= 0:
        if at == 0 or cookie_header[at - 1] in " ;":
            end = cookie_header.find(";", at)
            return (cookie_header[at + len(marker):] if end < 0 else cookie_header[at + len(marker):end]).strip().strip('"')
        at = cookie_header.find(marker, at + 1)
    return ""


def fingerprint(header_map: Mapping[str, str], pass_cookie: str = "clefgate_pass", pass_value: str | None = None) -> str:
    """A stable fingerprint of the client software behind a request (16 hex digits).

    It hashes the user agent's family and major version, the names of the headers that
    describe the client in the order sent (lower case; ``header_map`` keeps wire order), and
    Accept-Language. A client holding a pass cookie (``pass_value``, else read from the
    Cookie header) is its user agent family and that cookie alone: the cookie names one
    browser, whose header set differs between a navigation and a fetch. Two people behind
    one address with different browsers, versions, languages or passes get different keys.
    """
    ua = header_map.get("user-agent", "")
    if pass_value is None:
        cookie = header_map.get("cookie")
        # the substring test first: most Cookie headers hold no pass, and it costs a tenth of parsing one
        pass_value = cookie_value(cookie, pass_cookie) if cookie is not None and pass_cookie in cookie else ""
    if pass_value:
        text = f"{user_agent_family(ua)}\x00pass\x00{pass_value}"
        return hashlib.blake2b(text.encode("latin-1", "replace"), digest_size=8).hexdigest()
    names = "\n".join(header_map)
    lang = header_map.get("accept-language", "")
    k = (names, ua, lang)
    hit = _FINGERPRINT_CACHE.get(k)
    if hit is not None:
        return hit
    shown = "\n".join(n for n in header_map if n not in _REQUEST_HEADERS)
    text = f"{user_agent_family(ua)}\x00{shown}\x00{lang}"
    fp = hashlib.blake2b(text.encode("latin-1", "replace"), digest_size=8).hexdigest()
    if len(_FINGERPRINT_CACHE) >= _CACHE_MAX:
        _FINGERPRINT_CACHE.clear()
    _FINGERPRINT_CACHE[k] = fp
    return fp


def client_key(client_ip: str, header_map: Mapping[str, str], pass_cookie: str = "clefgate_pass", pass_value: str | None = None) -> str:
    """The per-client history key: ``"<address>#<fingerprint>"`` (the address as the ``ip`` rate key has it)."""
    return f"{address_key(client_ip)}#{fingerprint(header_map, pass_cookie, pass_value)}"


def address_of(key: str) -> str:
    """The history key of the address a client key (``"<address>#<fingerprint>"``) belongs to: every fingerprint
    seen at that address together (what a client rotating its fingerprint cannot shed)."""
    return "@" + key.partition("#")[0]


def rate_key(spec: str, client_ip: str, header_value: str, cfg: ClientsConfig) -> str:
    """The bucket key of a request for a rate condition keyed by ``spec`` (ip, prefix, header:NAME)."""
    if spec == "ip":
        return address_key(client_ip)
    if spec == "prefix":
        return network_of(client_ip, cfg.ipv4_prefix, cfg.ipv6_prefix)
    if header_value:
        # Header values (API keys, tokens) are hashed: bounded memory, and no secret in Redis.
        return "h:" + hashlib.blake2b(header_value.encode("latin-1", "replace"), digest_size=8).hexdigest()
    return client_ip  # no such header: the client IP is the key


# ----------------------------------------------------------------------------- metrics

_LIVE: weakref.WeakSet[ClientState] = weakref.WeakSet()


def _sizes() -> Iterable[tuple[tuple[str, ...], float]]:
    windows = sum(len(s.windows) for s in _LIVE)
    buckets = sum(len(s.limiter) for s in _LIVE)
    addresses = sum(len(s.addresses) for s in _LIVE)
    history = sum(len(s.history) for s in _LIVE)
    return [(("windows",), float(windows)), (("rate_buckets",), float(buckets)), (("addresses",), float(addresses)),
            (("history",), float(history))]


def _bytes() -> Iterable[tuple[tuple[str, ...], float]]:
    windows = sum(len(s.windows) * s.windows.entry_bytes for s in _LIVE)
    buckets = sum(len(s.limiter) * s.limiter.entry_bytes for s in _LIVE)
    return [(("windows",), float(windows)), (("rate_buckets",), float(buckets))]


ENTRIES = metrics.gauge("clefgate_client_state_entries", "Entries in the per-client tables (windows, rate_buckets, addresses, history) of this worker.",
                        ("table",), callback=_sizes)
ENTRY_BYTES = metrics.gauge("clefgate_client_state_bytes", "Estimated memory of the per-client tables (entries x measured entry size).",
                            ("table",), callback=_bytes)
EVICTIONS = metrics.counter("clefgate_client_state_evictions_total",
                            "Least recently used entries dropped because a per-client table was full.", ("table",))
RATE_LIMITED = metrics.counter("clefgate_rate_limited_total", "Requests over a rate limit, by rule.", ("rule",))
REDIS_ERRORS = metrics.counter("clefgate_redis_errors_total", "Failed or timed-out Redis calls, by operation (sync, claim).", ("op",))
FALLBACKS = metrics.counter("clefgate_shared_state_fallback_total",
                            "Operations served from local state because Redis was unavailable, by kind (sync, replay).", ("kind",))
SHARED_UP = metrics.gauge("clefgate_shared_state_up",
                          "0 while the configured shared-state backend (Redis) fails and local state decides alone; 1 otherwise.", merge="min")
SHARED_UP.set(1.0)


def _shared() -> Iterable[tuple[tuple[str, ...], float]]:
    return [((), float(sum(s.addresses.shared for s in _LIVE)))]


SHARED_ADDRESSES = metrics.gauge("clefgate_shared_addresses",
                                 "Addresses seen with at least clients.shared_address_fingerprints client fingerprints (NATs, CGNATs, "
                                 "proxies) among those tracked; their clients keep separate histories.", callback=_shared)


# ----------------------------------------------------------------------------- windows

_SLOTS = 6  # a window is six slots: it slides in steps of window_s / 6
_PATHS = 16  # recent paths kept per client for path diversity


class _Window:
    """One client's counters, packed in small arrays (about 600 bytes a client, table included).

    ``c`` holds, per ring position ``pos`` of the six slots: the absolute slot number at
    ``pos``, requests at ``6+pos`` and 4xx answers at ``12+pos``. ``sync`` exists only
    with a shared backend: pushed requests/errors at ``pos``/``6+pos`` and the global
    totals last read at ``12+pos``/``18+pos``.
    """

    __slots__ = ("c", "gap", "last", "passed", "paths", "pn", "sync", "synced")

    def __init__(self, shared: bool) -> None:
        self.c = array("q", _EMPTY_SLOTS)
        self.sync = array("q", bytes(8 * 4 * _SLOTS)) if shared else None
        self.paths = array("I", bytes(4 * _PATHS))  # hashes of the most recent paths (a ring)
        self.pn = 0                                 # paths recorded so far
        self.last = 0.0
        self.gap = 0.0                              # exponentially weighted mean gap between requests
        self.passed = 0
        self.synced = False                         # older slots pulled from the shared backend once

    def reset(self, pos: int, slot: int) -> None:
        c = self.c
        c[pos], c[_SLOTS + pos], c[2 * _SLOTS + pos] = slot, 0, 0
        if self.sync is not None:
            for k in range(4):
                self.sync[k * _SLOTS + pos] = 0


_EMPTY_SLOTS = [-1] * _SLOTS + [0] * (2 * _SLOTS)


class ClientWindows:
    """Sliding-window statistics per client, at most ``max_clients`` of them (LRU)."""

    def __init__(self, window_s: float = 60.0, max_clients: int = 100_000, clock: Clock = time.monotonic, *,
                 shared: bool = False, wall: Clock | None = None) -> None:
        self.window_s = window_s
        self.slot_s = window_s / _SLOTS
        self.max_clients = max_clients
        self.clock = clock
        # Slot numbers name windows in the shared backend, so replicas on other hosts must agree on them: ``clock``
        # (monotonic, counted from this host's boot) times local intervals, and ``offset`` moves it onto wall time,
        # read once here. Without a backend slot numbers never leave the process: no offset. An injected clock
        # gets one only from an injected ``wall`` clock.
        self.offset = 0.0
        if shared and (wall is not None or clock is time.monotonic):
            self.offset = (wall or time.time)() - clock()
        self._table: OrderedDict[str, _Window] = OrderedDict()
        # clients with local changes not yet pushed to the shared backend (None: not shared)
        self.dirty: set[str] | None = set() if shared else None
        self.entry_bytes = _measure_window(shared)

    def __len__(self) -> int:
        return len(self._table)

    def _get(self, client: str) -> _Window:
        table = self._table
        w = table.get(client)
        if w is None:
            if len(table) >= self.max_clients:
                old, _ = table.popitem(last=False)
                EVICTIONS.inc("windows")
                if self.dirty is not None:  # its unsent counts go with it: the dirty set stays bounded too
                    self.dirty.discard(old)
            w = table[client] = _Window(self.dirty is not None)
        else:
            table.move_to_end(client)
        return w

    def slot(self, t: float) -> int:
        """The shared slot number of ``t`` (this clock): the one place clock time becomes a slot."""
        return int((t + self.offset) // self.slot_s)

    def _position(self, w: _Window, now: float) -> int:
        slot = self.slot(now)
        pos = slot % _SLOTS
        if w.c[pos] != slot:
            w.reset(pos, slot)
        return pos

    def record(self, client: str, path: str, status: int) -> None:
        """Count one answered request of ``client`` (``status`` as sent)."""
        now = self.clock()
        w = self._get(client)
        pos = self._position(w, now)
        c = w.c
        c[_SLOTS + pos] += 1
        if 400 <= status < 500:
            c[2 * _SLOTS + pos] += 1
        w.paths[w.pn % _PATHS] = hash(path) & 0xFFFFFFFF
        w.pn += 1
        if w.last:
            w.gap = (now - w.last) if w.gap == 0.0 else 0.8 * w.gap + 0.2 * (now - w.last)
        w.last = now
        if self.dirty is not None:
            self.dirty.add(client)

    def passed(self, client: str) -> None:
        """Count a solved challenge for ``client``."""
        self._get(client).passed += 1

    def counts(self, client: str) -> tuple[int, int]:
        """(requests, 4xx answers) in the client's window; (0, 0) for an unknown client."""
        return self._sum(client, self.slot(self.clock()) - _SLOTS + 1)

    def counts_since(self, client: str, since: float) -> tuple[int, int, float]:
        """(requests, 4xx answers, seconds covered) in the slots after the one ``since`` (this clock) falls in:
        what a client did after a moment, without the slot that moment shares with what came before it."""
        now = self.clock()
        first = max(self.slot(now) - _SLOTS + 1, self.slot(since) + 1)
        return (*self._sum(client, first), max(0.0, now + self.offset - first * self.slot_s))

    def _sum(self, client: str, first: int) -> tuple[int, int]:
        """(requests, 4xx answers) in the client's slots numbered ``first`` or later."""
        w = self._table.get(client)
        if w is None:
            return 0, 0
        c = w.c
        requests = errors = 0
        for pos in range(_SLOTS):
            if c[pos] >= first:
                requests += c[_SLOTS + pos]
                errors += c[2 * _SLOTS + pos]
        return requests, errors

    def stats(self, client: str) -> ClientStats:
        """The client's window as ``ClientStats`` (zeros for an unknown client)."""
        w = self._table.get(client)
        if w is None:
            return _NO_HISTORY
        requests, errors = self.counts(client)
        recent = min(w.pn, _PATHS)
        return ClientStats(
            requests=requests,
            rate_per_min=requests * 60.0 / self.window_s,
            error_ratio=errors / requests if requests else 0.0,
            path_diversity=len(set(w.paths[:recent])) / recent if recent else 0.0,
            mean_gap_s=w.gap,
            challenges_passed=w.passed,
        )

    # -- shared-backend reconciliation (see ClientState.sync)

    def pending(self) -> list[tuple[str, int, int, int, bool]]:
        """(client, slot, new requests, new errors, needs older slots) for every changed client; marks them sent."""
        out: list[tuple[str, int, int, int, bool]] = []
        if not self.dirty:
            return out
        now_slot = self.slot(self.clock())
        oldest = now_slot - _SLOTS + 1
        for client in self.dirty:
            w = self._table.get(client)
            if w is None or w.sync is None:
                continue
            c, sync = w.c, w.sync
            # every slot still in the window with counts not yet sent, not only the current one: what was
            # counted just before a slot boundary is pushed after it (the current slot goes too, for others' counts)
            entries = []
            for pos in sorted(range(_SLOTS), key=c.__getitem__):
                slot = c[pos]
                if slot < oldest:
                    continue
                dr, de = c[_SLOTS + pos] - sync[pos], c[2 * _SLOTS + pos] - sync[_SLOTS + pos]
                if dr or de or slot == now_slot:
                    sync[pos], sync[_SLOTS + pos] = c[_SLOTS + pos], c[2 * _SLOTS + pos]
                    entries.append((client, slot, dr, de, False))
            if entries and not w.synced:  # the newest pushed slot also pulls the older ones once
                entries[-1] = (*entries[-1][:4], True)
                w.synced = True
            out.extend(entries)
        self.dirty.clear()
        return out

    def fold(self, client: str, slot: int, total_req: int, total_err: int, own_req: int, own_err: int) -> None:
        """Add what other replicas counted in ``slot`` since the last sync (global totals minus own pushes)."""
        w = self._table.get(client)
        pos = slot % _SLOTS
        if w is None or w.sync is None or (w.c[pos] != slot and slot < self.slot(self.clock()) - _SLOTS + 1):
            return
        if w.c[pos] != slot:  # an older slot this replica never saw: adopt it
            w.reset(pos, slot)
        c, sync = w.c, w.sync
        others_req = max(0, total_req - sync[2 * _SLOTS + pos] - own_req)
        others_err = max(0, total_err - sync[3 * _SLOTS + pos] - own_err)
        c[_SLOTS + pos] += others_req
        c[2 * _SLOTS + pos] += others_err
        sync[pos] += others_req  # folded-in counts are not ours to push again
        sync[_SLOTS + pos] += others_err
        sync[2 * _SLOTS + pos], sync[3 * _SLOTS + pos] = total_req, total_err


    def restore(self, entries: Iterable[tuple[str, int, int, int, bool]], pushed: bool = False) -> None:
        """Give back what ``pending()`` took for a push that failed: its counts (unless ``pushed``) go again at the
        next sync, and a history pull it carried is made again."""
        for client, slot, dr, de, needs_history in entries:
            w = self._table.get(client)
            if w is None or w.sync is None or (pushed and not needs_history):
                continue
            pos = slot % _SLOTS
            if not pushed and w.c[pos] == slot:
                w.sync[pos] -= dr
                w.sync[_SLOTS + pos] -= de
            if needs_history:
                w.synced = False
            if self.dirty is not None:
                self.dirty.add(client)


def _measure_window(shared: bool) -> int:
    w = _Window(shared)
    size = sys.getsizeof(w) + sum(sys.getsizeof(getattr(w, name)) for name in ("c", "paths", "sync") if getattr(w, name) is not None)
    return size + 250  # the table's node and key string, measured with tracemalloc at 100k clients


# ----------------------------------------------------------------------------- rate limits


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A token bucket: ``burst`` tokens, refilled at ``per_second``; keyed by ``key`` (client, ip, prefix, header:NAME)."""

    limit: int
    period_s: float
    key: str = "client"
    burst: int = 0

    @property
    def per_second(self) -> float:
        return self.limit / self.period_s

    @property
    def capacity(self) -> float:
        return float(self.burst or self.limit)

    def describe(self) -> str:
        unit = {1.0: "s", 60.0: "min", 3600.0: "h", 86400.0: "day"}.get(self.period_s, f"{self.period_s:g}s")
        return f"{self.limit}/{unit} by {self.key}" + (f", burst {self.burst}" if self.burst else "")


class RateLimiter:
    """Token buckets, at most ``max_buckets`` of them (LRU).

    A request takes one token; it is over the limit when none is left, and then takes
    nothing, so a client that stops gets its budget back at the refill rate (a blocked
    client's retries do not keep it blocked forever).
    """

    def __init__(self, max_buckets: int = 100_000, clock: Clock = time.monotonic) -> None:
        self.max_buckets = max_buckets
        self.clock = clock
        # (rule, key) -> [tokens, last refill time, taken since last sync, last global total (-1: none read yet),
        #                 capacity, full-refill seconds]
        self._buckets: OrderedDict[tuple[str, str], array[float]] = OrderedDict()
        self.dirty: set[tuple[str, str]] | None = None
        self.entry_bytes = sys.getsizeof(array("d", bytes(48))) + 220  # + the table node and (rule, key) tuple, measured

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, rule: str, key: str, limit: RateLimit, label: str | None = None) -> bool:
        """Take a token from the bucket of ``(rule, key)``: True when allowed, False when over the limit.

        ``label`` names the rule in ``clefgate_rate_limited_total`` when ``rule`` is not its name (a rule with
        several rate conditions has a bucket family for each)."""
        now = self.clock()
        buckets = self._buckets
        k = (rule, key)
        b = buckets.get(k)
        capacity = limit.capacity
        if b is None:
            if len(buckets) >= self.max_buckets:
                old, _ = buckets.popitem(last=False)
                EVICTIONS.inc("rate_buckets")
                if self.dirty is not None:
                    self.dirty.discard(old)
            buckets[k] = array("d", (capacity - 1.0, now, 1.0, -1.0, capacity, capacity / limit.per_second))
            if self.dirty is not None:
                self.dirty.add(k)
            return True
        buckets.move_to_end(k)
        tokens = b[0] + (now - b[1]) * limit.per_second
        if tokens > capacity:
            tokens = capacity
        b[1] = now
        if tokens >= 1.0:
            b[0] = tokens - 1.0
            b[2] += 1.0
            if self.dirty is not None:
                self.dirty.add(k)
            return True
        b[0] = tokens
        RATE_LIMITED.inc(rule if label is None else label)
        return False

    def tokens(self, rule: str, key: str) -> float | None:
        """Tokens left in a bucket as of its last use (None when there is no bucket)."""
        b = self._buckets.get((rule, key))
        return None if b is None else b[0]

    def pending(self) -> list[tuple[str, str, int, float]]:
        """(rule, key, tokens taken since the last sync, full-refill seconds) for every changed bucket; marks them sent."""
        out: list[tuple[str, str, int, float]] = []
        if not self.dirty:
            return out
        for k in self.dirty:
            b = self._buckets.get(k)
            if b is not None and b[2]:
                out.append((k[0], k[1], int(b[2]), b[5]))
                b[2] = 0.0
        self.dirty.clear()
        return out

    def restore(self, items: Iterable[tuple[str, str, int, float]]) -> None:
        """Give back the tokens ``pending()`` took for a push that failed: they go again at the next sync."""
        for rule, key, taken, _ in items:
            b = self._buckets.get((rule, key))
            if b is not None:
                b[2] += taken
                if self.dirty is not None:
                    self.dirty.add((rule, key))

    def fold(self, rule: str, key: str, total: int, own: int) -> None:
        """Charge this bucket for the tokens other replicas took (global total minus own pushes) since its last fold.

        The shared counter is a running total over the key's whole life, not recent use: the first fold of a
        bucket (new here, or rebuilt after an eviction) only takes it as the baseline and charges nothing.
        """
        b = self._buckets.get((rule, key))
        if b is None:
            return
        others = total - int(b[3]) - own
        first = b[3] < 0
        b[3] = float(total)
        if others > 0 and not first:
            # never below -capacity: a bucket drained elsewhere still refills within one period
            b[0] = max(-b[4], b[0] - others)


# ----------------------------------------------------------------------------- shared backends


class SharedBackend(Protocol):
    """Where replicas meet: counters with a TTL and one-time claims (replay protection)."""

    async def add(self, items: Sequence[tuple[str, str, int, float]]) -> list[int]:
        """For each (key, field, delta, ttl_s): add delta to the hash field, refresh the TTL; return the new totals."""
        ...

    async def read(self, items: Sequence[tuple[str, str]]) -> list[int]:
        """Current value of each (key, field) (0 when absent)."""
        ...

    async def claim(self, key: str, ttl_s: float) -> bool:
        """True the first time ``key`` is claimed within ``ttl_s``; False afterwards."""
        ...

    async def close(self) -> None: ...


class MemoryBackend:
    """An in-process SharedBackend: the semantics of the Redis one without Redis (tests, one process)."""

    def __init__(self, clock: Clock = time.monotonic, max_keys: int = 1_000_000) -> None:
        self.clock = clock
        self.max_keys = max_keys
        self._data: OrderedDict[str, tuple[float, dict[str, int]]] = OrderedDict()

    def _live(self, key: str) -> dict[str, int] | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        if entry[0] <= self.clock():
            del self._data[key]
            return None
        return entry[1]

    async def add(self, items: Sequence[tuple[str, str, int, float]]) -> list[int]:
        out = []
        for key, fld, delta, ttl in items:
            fields = self._live(key) or {}
            fields[fld] = fields.get(fld, 0) + delta
            self._data[key] = (self.clock() + ttl, fields)
            self._data.move_to_end(key)
            out.append(fields[fld])
        while len(self._data) > self.max_keys:
            self._data.popitem(last=False)
        return out

    async def read(self, items: Sequence[tuple[str, str]]) -> list[int]:
        return [(self._live(key) or {}).get(fld, 0) for key, fld in items]

    async def claim(self, key: str, ttl_s: float) -> bool:
        if self._live(key) is not None:
            return False
        self._data[key] = (self.clock() + ttl_s, {})
        while len(self._data) > self.max_keys:
            self._data.popitem(last=False)
        return True

    async def close(self) -> None:
        self._data.clear()


_MAX_CONNECTIONS = 64  # per worker: the sync task needs one, claims the rest
_CHUNK = 500  # counters per backend call in a sync (1,000 Redis commands): the event loop runs between chunks


class RedisBackend:
    """SharedBackend on Redis (``redis.asyncio``): hash counters with TTLs, ``SET NX PX`` claims.

    Every call has a deadline (``redis.timeout_s``); callers treat any exception as
    "Redis unavailable" and fall back to local state. Connections come from a blocking
    pool: a burst of claims waits (within its deadline) for one of ``_MAX_CONNECTIONS``
    instead of failing at once.
    """

    def __init__(self, cfg: RedisConfig) -> None:
        import redis.asyncio as aioredis  # imported here: serving without Redis never loads it

        password = resolve_secret(cfg.password) if cfg.password else None
        self.prefix = cfg.key_prefix
        self.timeout_s = cfg.timeout_s
        pool = aioredis.BlockingConnectionPool.from_url(cfg.url, max_connections=_MAX_CONNECTIONS, timeout=cfg.timeout_s,
                                                        password=password or None, socket_timeout=cfg.timeout_s,
                                                        socket_connect_timeout=cfg.timeout_s, decode_responses=False)
        self.client: Any = aioredis.Redis.from_pool(pool)  # closing the client closes the pool

    async def add(self, items: Sequence[tuple[str, str, int, float]]) -> list[int]:
        pipe = self.client.pipeline(transaction=False)
        for key, fld, delta, ttl in items:
            pipe.hincrby(self.prefix + key, fld, delta)
            pipe.pexpire(self.prefix + key, max(1, int(ttl * 1000)))
        replies = await asyncio.wait_for(pipe.execute(), self.timeout_s * 4)
        return [int(v) for v in replies[0::2]]

    async def read(self, items: Sequence[tuple[str, str]]) -> list[int]:
        pipe = self.client.pipeline(transaction=False)
        for key, fld in items:
            pipe.hget(self.prefix + key, fld)
        replies = await asyncio.wait_for(pipe.execute(), self.timeout_s * 4)
        return [int(v) if v is not None else 0 for v in replies]

    async def claim(self, key: str, ttl_s: float) -> bool:
        # a deadline for the wait for a pooled connection, and one for the command
        reply = await asyncio.wait_for(self.client.set(self.prefix + key, b"1", nx=True, px=max(1, int(ttl_s * 1000))),
                                       self.timeout_s * 2)
        return bool(reply)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.client.aclose()


# ----------------------------------------------------------------------------- shared addresses and earned blocks


class AddressTable:
    """Distinct client fingerprints per address (at most ``threshold`` kept each; ``max_addresses`` addresses, LRU).

    ``shared`` is how many tracked addresses reached ``threshold`` fingerprints: NATs, carrier CGNATs and
    proxies, whose people the client key keeps apart.
    """

    def __init__(self, max_addresses: int = 100_000, threshold: int = 8) -> None:
        self.max_addresses = max_addresses
        self.threshold = threshold
        self.shared = 0
        self._table: OrderedDict[str, set[str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._table)

    def see(self, key: str) -> None:
        """Note the client key ``"<address>#<fingerprint>"`` of an answered request."""
        address, _, fp = key.rpartition("#")
        table = self._table
        seen = table.get(address)
        if seen is None:
            if len(table) >= self.max_addresses:
                _, old = table.popitem(last=False)
                EVICTIONS.inc("addresses")
                if len(old) >= self.threshold:
                    self.shared -= 1
            seen = table[address] = set()
        else:
            table.move_to_end(address)
        if len(seen) < self.threshold and fp not in seen:
            seen.add(fp)
            if len(seen) == self.threshold:
                self.shared += 1

    def fingerprints(self, address: str) -> int:
        """Distinct fingerprints seen at ``address`` (counted up to the threshold)."""
        return len(self._table.get(address, ()))


class _Record:
    __slots__ = ("attack_at", "attack_what", "challenges", "paged_at")

    def __init__(self) -> None:
        self.challenges: list[float] = []  # when each counted challenge was served (this clock), oldest first
        self.attack_at = -1.0
        self.attack_what = ""
        self.paged_at = -1.0  # when the site last answered it a page where it asked for data (ClientHistory.paged)


_MAX_CHALLENGES = 64  # counted challenges remembered per client (policy.block_ignored_challenges is at most this)
_ONE_ENCOUNTER_S = 1.0  # challenges closer than this are one encounter (a page's parallel requests)


class ClientHistory:
    """What a client did that can earn it a block: challenges served and not solved, and attack evidence; and
    whether the site answered it pages where it claimed to ask for data.

    Bounded like the windows (``max_clients``, least recently touched first); only clients that were
    challenged or showed attack evidence have an entry.
    """

    def __init__(self, max_clients: int = 100_000, clock: Clock = time.monotonic) -> None:
        self.max_clients = max_clients
        self.clock = clock
        self._table: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._table)

    def _get(self, client: str) -> _Record:
        table = self._table
        r = table.get(client)
        if r is None:
            if len(table) >= self.max_clients:
                table.popitem(last=False)
                EVICTIONS.inc("history")
            r = table[client] = _Record()
        else:
            table.move_to_end(client)
        return r

    def challenged(self, client: str) -> None:
        """A challenge page was served to ``client``."""
        now = self.clock()
        times = self._get(client).challenges
        if times and now - times[-1] < _ONE_ENCOUNTER_S:
            return
        times.append(now)
        if len(times) > _MAX_CHALLENGES:
            del times[0]

    def solved(self, client: str) -> None:
        """``client`` solved a challenge: the ones it was served are no longer unsolved."""
        r = self._table.get(client)
        if r is not None:
            r.challenges.clear()

    def attacked(self, client: str, what: str) -> None:
        """``client`` showed attack evidence (``what`` says which, for the reason of a later block)."""
        r = self._get(client)
        r.attack_at = self.clock()
        r.attack_what = what

    def unsolved(self, client: str, window_s: float) -> int:
        """Challenges served to ``client`` in the last ``window_s`` seconds and not solved since."""
        r = self._table.get(client)
        if r is None or not r.challenges:
            return 0
        since = self.clock() - window_s
        return sum(1 for t in r.challenges if t >= since)

    def paged(self, client: str) -> None:
        """``client``, let through as a program that asks for data (a score rule's ``bot_likeness: ignore``), was answered
        with a page: what it claimed to ask for is not what it fetches."""
        self._get(client).paged_at = self.clock()

    def paged_within(self, client: str, within_s: float) -> bool:
        """Whether ``client`` was answered a page where it asked for data in the last ``within_s`` seconds."""
        r = self._table.get(client)
        return r is not None and r.paged_at >= 0 and self.clock() - r.paged_at <= within_s

    def attack(self, client: str, within_s: float) -> tuple[float, str] | None:
        """(seconds ago, what) of ``client``'s last attack evidence within ``within_s`` seconds, else None."""
        r = self._table.get(client)
        if r is None or r.attack_at < 0:
            return None
        age = self.clock() - r.attack_at
        return (age, r.attack_what) if age <= within_s else None


# ----------------------------------------------------------------------------- client state


class ClientState:
    """Windows + rate buckets of this worker, optionally reconciled with a shared backend.

    Survives config reloads (``pipeline.build(..., previous=...)`` hands it over) so a
    reload neither forgets who was rate limited nor resets the windows. ``start()``
    launches the sync task when a backend is configured; ``close()`` stops it.
    """

    def __init__(self, cfg: ClientsConfig | None = None, redis: RedisConfig | None = None, *,
                 backend: SharedBackend | None = None, clock: Clock = time.monotonic, wall: Clock | None = None) -> None:
        self.cfg = cfg or ClientsConfig()
        self.redis_cfg = redis or RedisConfig()
        if backend is None and self.redis_cfg.url:
            backend = RedisBackend(self.redis_cfg)
        self.backend = backend
        self.windows = ClientWindows(self.cfg.window_s, self.cfg.max_clients, clock, shared=backend is not None, wall=wall)
        self.limiter = RateLimiter(self.cfg.max_buckets, clock)
        if backend is not None:
            self.limiter.dirty = set()
        self.clock = clock
        self.addresses = AddressTable(self.cfg.max_clients, self.cfg.shared_address_fingerprints)
        self.history = ClientHistory(self.cfg.max_clients, clock)
        # credential submissions per login endpoint (rules' login_surge condition)
        self.logins = LoginWatch(self.cfg.logins, clock)
        # the pages the site serves (the policy does not suspect a bare request to one of probing)
        self.pages = ServedPages(self.cfg.served_pages, clock)
        # forward-confirmed reverse DNS names of client addresses (rules' reverse_dns condition)
        self.names = ReverseNames(timeout_s=self.cfg.reverse_dns_timeout_s, ttl_s=self.cfg.reverse_dns_ttl_s,
                                  negative_ttl_s=min(3600.0, self.cfg.reverse_dns_ttl_s), max_entries=self.cfg.max_clients)
        # the pass cookie's name, part of the client key (pipeline.build sets the configured one)
        self.pass_cookie = "clefgate_pass"
        self.shared_up = backend is not None
        SHARED_UP.set(1.0)  # the state now in force has not failed (yet), or has no backend to fail
        self._retry_at = 0.0
        self._task: asyncio.Task[None] | None = None
        _LIVE.add(self)

    def compatible(self, cfg: ClientsConfig, redis: RedisConfig) -> bool:
        """True when a reload with these settings can keep this state (the login watch's and served pages' own settings aside:
        ``retune``)."""
        return dataclasses.replace(cfg, logins=self.cfg.logins, served_pages=self.cfg.served_pages) == self.cfg and redis == self.redis_cfg

    def retune(self, cfg: ClientsConfig) -> None:
        """Take a reload's settings that a kept state can change in place (``clients.logins``, ``clients.served_pages``),
        keeping what it learnt."""
        self.cfg = cfg
        self.logins.cfg = cfg.logins
        self.pages.retune(cfg.served_pages)

    # -- hot path

    def key(self, features: Features, pass_value: str | None = None) -> str:
        """The request's client key (address + fingerprint): the one the proxy computed, else computed here.

        ``pass_value`` is a pass cookie the client is about to hold (the challenge verify endpoint names the
        client as it will be seen from its next request on).
        """
        if features.client_key and pass_value is None:
            return features.client_key
        return client_key(features.client_ip, features.header_map, self.pass_cookie, pass_value)

    def key_of(self, client_ip: str, header_map: Mapping[str, str]) -> str:
        """The client key from a request's parts (the proxy, before ``Features`` exists)."""
        return client_key(client_ip, header_map, self.pass_cookie)

    def take(self, rule: str, key: str, limit: RateLimit) -> bool:
        """Rate-limit check for a rule: True when the request is within the limit."""
        return self.limiter.take(rule, key, limit)

    def stats(self, client: str) -> ClientStats:
        return self.windows.stats(client)

    def record(self, client: str, path: str, status: int) -> None:
        self.windows.record(client, path, status)

    def passed(self, client: str) -> None:
        """A challenge solved by ``client`` (a key): counted in its window, and its unsolved challenges are forgiven."""
        self.windows.passed(client)
        self.history.solved(client)
        self.history.solved(address_of(client))  # someone at the address solves: it is not ignoring challenges

    # -- replay protection (challenge nonces)

    async def claim(self, key: str, ttl_s: float, local: Callable[[], bool]) -> bool:
        """Claim a one-time key in the shared backend; ``local()`` (claims it in the local store) decides when there
        is none or it fails."""
        # Locally first: a key already used here needs no round trip, and one claimed here stays claimed here
        # should Redis fail later.
        fresh = local()
        if not fresh or self.backend is None:
            return fresh
        if self._down():
            FALLBACKS.inc("replay")
            return True
        try:
            return await self.backend.claim("n:" + key, ttl_s)
        except Exception as exc:  # any Redis/network failure: local state decides, counted
            self._failed("claim", exc)
            FALLBACKS.inc("replay")
            return True

    # -- sync with the shared backend

    async def start(self) -> None:
        """Start the background sync task (only when a shared backend is configured)."""
        if self.backend is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="clefgate-client-sync")

    async def close(self) -> None:
        """Stop syncing, push nothing more, close the backend and let the reverse DNS threads go."""
        self.names.close()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.backend is not None:
            await self.backend.close()

    async def _run(self) -> None:
        interval = self.redis_cfg.sync_interval_s
        while True:
            await asyncio.sleep(interval)
            await self.sync()

    def _down(self) -> bool:
        return not self.shared_up and time.monotonic() < self._retry_at

    def _failed(self, op: str, exc: BaseException) -> None:
        REDIS_ERRORS.inc(op)
        if self.shared_up:
            log.warning("shared state (Redis) unavailable; deciding on local state", extra={"fields": {"op": op, "error": repr(exc)}})
        self.shared_up = False
        SHARED_UP.set(0.0)
        self._retry_at = time.monotonic() + self.redis_cfg.retry_s

    def _up(self) -> None:
        if not self.shared_up:
            log.info("shared state (Redis) reachable again")
            self.shared_up = True
        SHARED_UP.set(1.0)

    async def sync(self) -> bool:
        """Push local deltas and fold in the other replicas'; False when the backend failed (local state stays in force).

        The work goes in chunks of ``_CHUNK`` counters, each its own backend call with its own deadline, and the
        event loop serves requests in between. What a failed call did not push is given back, to go at the next
        sync (a timed-out call may still have reached Redis: it is then counted twice there rather than lost).
        """
        backend = self.backend
        if backend is None:
            return True
        if self._down():
            FALLBACKS.inc("sync")
            return False
        windows = self.windows.pending()
        buckets = self.limiter.pending()
        if not windows and not buckets and self.shared_up:
            return True
        w_ttl = self.windows.window_s * 2
        step = _CHUNK // 2
        w_sent = b_sent = 0  # entries pushed (and folded) so far
        pulled: set[str] = set()  # clients whose older slots were read
        try:
            if not windows and not buckets:  # marked down with nothing to push: a cheap read tells whether it is back
                await backend.read([("w:probe:0", "r")])
            while w_sent < len(windows):
                chunk = windows[w_sent:w_sent + step]
                items: list[tuple[str, str, int, float]] = []
                for client, slot, dr, de, _ in chunk:
                    key = f"w:{client}:{slot}"
                    items += ((key, "r", dr, w_ttl), (key, "e", de, w_ttl))
                totals = await backend.add(items)
                for i, (client, slot, dr, de, _) in enumerate(chunk):
                    self.windows.fold(client, slot, totals[2 * i], totals[2 * i + 1], dr, de)
                w_sent += len(chunk)
                await asyncio.sleep(0)
            while b_sent < len(buckets):
                bchunk = buckets[b_sent:b_sent + _CHUNK]
                # counts older than a full refill no longer matter; keep them twice that long
                totals = await backend.add([(f"rl:{rule}:{key}", "t", taken, max(10.0, 2 * refill_s))
                                            for rule, key, taken, refill_s in bchunk])
                for (rule, key, taken, _), total in zip(bchunk, totals, strict=True):
                    self.limiter.fold(rule, key, total, taken)
                b_sent += len(bchunk)
                await asyncio.sleep(0)
            # the older slots of a window, pulled once: with the first push of the client's newest slot
            needing = [(client, slot) for client, slot, _, _, needs_history in windows if needs_history]
            per_call = _CHUNK // (2 * (_SLOTS - 1))
            for start in range(0, len(needing), per_call):
                older = [(client, s) for client, slot in needing[start:start + per_call] for s in range(slot - _SLOTS + 1, slot)]
                history = await backend.read([(f"w:{c}:{s}", f) for c, s in older for f in ("r", "e")])
                for j, (client, slot) in enumerate(older):
                    if history[2 * j]:
                        self.windows.fold(client, slot, history[2 * j], history[2 * j + 1], 0, 0)
                pulled.update(client for client, _ in needing[start:start + per_call])
                await asyncio.sleep(0)
        except Exception as exc:  # any Redis/network failure: local state decides; what was not sent goes next time
            self.windows.restore(windows[w_sent:])
            self.limiter.restore(buckets[b_sent:])
            self.windows.restore([e for e in windows[:w_sent] if e[4] and e[0] not in pulled], pushed=True)
            self._failed("sync", exc)
            FALLBACKS.inc("sync")
            return False
        self._up()
        return True
