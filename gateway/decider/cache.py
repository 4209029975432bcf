"""The decision cache: a bounded TTL cache of model answers keyed by the model's input.

The key is a digest of what the model reads (the canonical serialization and the
numeric vector from ``gateway.features``), never of volatile values such as request
ids or timestamps, so identical requests share one answer. The numeric vector is
quantized to one decimal in the key: its per-client window statistics (rate, error
ratio, timing; log-scaled to about 0..1) drift with every request, and at full
precision no two requests of an active client would ever share an entry. A cached
answer is therefore reused while a client's behaviour stays within the same tenth of
each statistic, and re-scored when it moves. Concurrent misses for the same key share one model call (single flight),
which keeps a flood of identical requests from becoming a flood of inferences.
If the first caller of a shared call goes away, the cache asks the model again for those
left waiting, within what is left of the earliest waiting caller's deadline: a caller
never waits longer than the deadline it would have had on its own. Hits, misses,
evictions and expirations are counted.

A second, cheaper level is keyed by the raw request (``request_key``: method, host, target,
version, headers as sent, body prefix, coarse client statistics), so a repeated request
is answered without even serializing it; a miss there falls through to the model-input
level above. Infrastructure headers (X-Forwarded-For, X-Request-Id, ...; see
``gateway.features.INFRA_HEADERS``) enter that key by name and value *length* only,
which is all the model input takes from them: a flood from many addresses, each
request with its own id, is still one repeated request to the model.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Literal

from cachetools import TTLCache

from gateway import metrics
from gateway.decider.scoring import ModelError, ModelTimeout, Scored, Scorer
from gateway.features import INFRA_HEADERS, ClientStats, Features, ModelInput
from gateway.verdict import Source

CACHE_REQUESTS = metrics.counter("clefgate_decision_cache_requests_total", "Decision cache lookups by result (hit, miss, coalesced).",
                                 ("result",))
CACHE_EVICTIONS = metrics.counter("clefgate_decision_cache_evictions_total",
                                  "Entries removed from the decision cache, by reason (size, expired).", ("reason",))
CACHE_ENTRIES = metrics.gauge("clefgate_decision_cache_entries", "Entries in the decision cache.")


@functools.lru_cache(maxsize=16)
def _tenths(width: int) -> str:
    """A %-format writing ``width`` numbers to one decimal, comma-separated (one C call for a whole vector)."""
    return ",".join(["%.1f"] * width)


def decision_key(item: ModelInput) -> bytes:
    """The cache key of a model input: its text and its numeric vector rounded to one decimal (at feature version 2,
    the client's text and vector too, the text framed by its length)."""
    numeric = tuple(item.numeric)
    h = hashlib.blake2b(item.text.encode("utf-8", "surrogatepass"), digest_size=16)
    h.update((_tenths(len(numeric)) % numeric).encode())
    if item.client_numeric or item.client_text:
        # a two-input model: the client input is part of what is answered
        client = tuple(item.client_numeric)
        text = item.client_text.encode("utf-8", "surrogatepass")
        h.update(b"\0" + len(text).to_bytes(8, "big") + text + (_tenths(len(client)) % client).encode())
    return h.digest()


def _log2(x: float) -> int:
    return int(x).bit_length() if x > 0 else 0


@functools.lru_cache(maxsize=4096)
def _client_part(c: ClientStats) -> bytes:
    """The bucketed client statistics of a key (memoized: a flood's new clients all share one empty window)."""
    return (f"|{_log2(c.requests)} {_log2(c.rate_per_min)} {int(c.error_ratio * 10)} {int(c.path_diversity * 10)} "
            f"{_log2(c.mean_gap_s * 10)} {min(c.challenges_passed, 5)}").encode()


def request_key(features: Features, client: ClientStats | Literal[False] | None = False) -> bytes:
    """The raw-request cache key: everything the model's input is computed from, client statistics bucketed.

    ``client`` is the client's window when ``features.client`` is not filled in yet (the
    pipeline reads it just before scoring); by default ``features.client`` is used.
    Values of infrastructure headers are left out (only their lengths reach the model). The host is in: the
    model reads it (a Referer to the same host or another), and in absolute form (``GET http://a.example/x``) it
    comes from the target, not from the Host header hashed below.
    """
    lines = [f"{features.method} {features.path}?{features.query} {features.http_version} {features.content_length} "
             f"{features.host}"]
    for name, value in features.headers:
        # An infrastructure header reaches the model input only through its name and the length of its
        # value (the header-bytes feature); its line has no ':' so it cannot collide with a "name:value".
        lines.append(f"{name}#{len(value)}" if name.lower() in INFRA_HEADERS else f"{name}:{value}")
    h = hashlib.blake2b("\n".join(lines).encode("utf-8", "surrogateescape"), digest_size=16)
    # The body prefix goes in framed by its length, and the client part behind a marker: without them the end of the
    # header text, the body and the window could run into each other, and two requests the model reads differently
    # (a payload in a header value, or the same bytes as a chunked body) would share one decision.
    body = features.body_prefix
    h.update(b"\0" + len(body).to_bytes(8, "big") + body)
    c = features.client if client is False else client
    if c is not None:
        h.update(b"\1" + _client_part(c))
    return h.digest()


class _CountingTTLCache(TTLCache):  # type: ignore[type-arg]
    """A TTLCache that counts what it drops."""

    def popitem(self) -> tuple[Any, Any]:
        item = super().popitem()
        CACHE_EVICTIONS.inc("size")
        return item

    def expire(self, time: float | None = None) -> list[tuple[Any, Any]]:
        expired = super().expire(time)
        if expired:
            CACHE_EVICTIONS.inc("expired", amount=len(expired))
        return expired  # type: ignore[no-any-return]


class _RequestLevel:
    """The raw-request level: a bounded mapping with a time-to-live per entry, oldest dropped first.

    A lookup is one C-level dict get and a clock read (cachetools' TTLCache, used for the
    model-input level, runs several Python-level layers per lookup, and the raw level is
    asked on every scored request).
    """

    def __init__(self, maxsize: int, ttl_s: float, timer: Callable[[], float]) -> None:
        self.maxsize = maxsize
        self.ttl_s = ttl_s
        self.timer = timer
        self._entries: OrderedDict[Hashable, tuple[float, Scored]] = OrderedDict()

    def get(self, key: Hashable) -> Scored | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.timer() >= entry[0]:
            del self._entries[key]
            CACHE_EVICTIONS.inc("expired")
            return None
        return entry[1]

    def __setitem__(self, key: Hashable, value: Scored) -> None:
        entries = self._entries
        if entries.pop(key, None) is None and entries and len(entries) >= self.maxsize:
            entries.popitem(last=False)
            CACHE_EVICTIONS.inc("size")
        entries[key] = (self.timer() + self.ttl_s, value)

    def __len__(self) -> int:
        return len(self._entries)


def _fail(shared: asyncio.Future[Scored], exc: BaseException) -> None:
    """Hand a failed shared call's error to the callers waiting on it (their fallback applies)."""
    if not shared.done():
        shared.set_exception(exc if isinstance(exc, Exception) else ModelError("the shared model call was cancelled"))
        shared.exception()  # marked retrieved: the callers re-raise it themselves


def _retrieve(call: asyncio.Future[Scored]) -> None:
    """Mark a shared model call's failure as seen: its callers, if any are left, re-raise it themselves."""
    if not call.cancelled():
        call.exception()


def _deadline_of(inner: Scorer) -> float | None:
    """The deadline of a model call through ``inner``: its own timeout (a BreakerScorer's), None without one."""
    timeout = getattr(inner, "timeout_s", None)
    return float(timeout) if isinstance(timeout, int | float) else None


class CachedScorer:
    """Answers repeated inputs from the cache; everything else goes to ``inner``."""

    def __init__(self, inner: Scorer, key_fn: Callable[[ModelInput], Hashable] = decision_key, *, ttl_s: float = 600.0, maxsize: int = 100_000,
                 timer: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        # the model call's deadline (the breaker's), which a call the cache makes again for waiting callers must not
        # extend; None (not bounded here) when ``inner`` has none
        self.deadline_s = _deadline_of(inner)
        self.key_fn = key_fn
        self.cache: TTLCache = _CountingTTLCache(maxsize=maxsize, ttl=ttl_s, timer=timer)  # type: ignore[type-arg]
        self.requests = _RequestLevel(maxsize, ttl_s, timer)
        self._inflight: dict[Hashable, asyncio.Future[Scored]] = {}
        self._followers: dict[Hashable, int] = {}  # callers waiting on an in-flight call, by key
        # when the first of them began waiting (loop time): kept on the coalesced path, so a miss pays nothing for it
        self._joined: dict[Hashable, float] = {}

    def sharing(self, inner: Scorer) -> CachedScorer:
        """A cache in front of ``inner`` holding the same entries as this one (a reload with the same model).

        This one keeps its own ``inner`` (and deadline): a runtime still serving (or kept after a rejected reload)
        goes on asking its own chain, never one that is being built or was thrown away.
        """
        other = copy.copy(self)
        other.inner = inner
        other.deadline_s = _deadline_of(inner)
        return other

    def get_request(self, key: bytes) -> Scored | None:
        """A cached answer for a repeated raw request (counted as a hit), or None."""
        hit = self.requests.get(key)
        if hit is not None:
            CACHE_REQUESTS.inc("hit")
        return hit

    def annotate(self, item: ModelInput, scored: Scored) -> None:
        """Store ``scored`` (e.g. with its explanation added) as the cached answer for ``item``."""
        self.cache[self.key_fn(item)] = scored if scored.source is Source.CACHE else dataclasses.replace(scored, source=Source.CACHE)

    def put_request(self, key: bytes, scored: Scored) -> None:
        self.requests[key] = scored if scored.source is Source.CACHE else dataclasses.replace(scored, source=Source.CACHE)

    def __len__(self) -> int:
        return len(self.cache)

    def _hit(self, key: Hashable) -> Scored | None:
        """The answer kept for ``key``, counted as a hit; None (not counted: the caller counts what it does next)."""
        hit = self.cache.get(key)
        if hit is not None:
            CACHE_REQUESTS.inc("hit")
        return hit  # type: ignore[no-any-return]

    def score_sync(self, item: ModelInput) -> Scored | None:
        """:meth:`score` answered synchronously: a cached answer, or the inner scorer's own synchronous one (stored);
        None when neither can answer at once (nothing is counted then: :meth:`score` counts the lookup it makes)."""
        sync: Callable[[ModelInput], Scored | None] | None = getattr(self.inner, "score_sync", None)
        key = self.key_fn(item)
        hit = self._hit(key)
        if hit is not None:
            return hit
        if sync is None or key in self._inflight:
            return None  # a shared call is under way: wait for it with the others
        try:
            scored = sync(item)
        except BaseException:
            CACHE_REQUESTS.inc("miss")
            raise
        if scored is None:
            return None
        CACHE_REQUESTS.inc("miss")
        self._store(key, scored)
        return scored

    async def score(self, item: ModelInput) -> Scored:
        key = self.key_fn(item)
        hit = self._hit(key)
        if hit is not None:
            return hit
        waiting = self._inflight.get(key)
        if waiting is not None:
            CACHE_REQUESTS.inc("coalesced")
            followers = self._followers
            count = followers.get(key, 0)
            if not count:
                self._joined[key] = asyncio.get_running_loop().time()
            followers[key] = count + 1
            try:
                return dataclasses.replace(await asyncio.shield(waiting), source=Source.CACHE)
            finally:
                left = followers.pop(key, 1) - 1
                if left:
                    followers[key] = left
                else:
                    self._joined.pop(key, None)
        CACHE_REQUESTS.inc("miss")
        shared: asyncio.Future[Scored] = asyncio.get_running_loop().create_future()
        self._inflight[key] = shared
        try:
            scored = await self.inner.score(item)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and self._followers.get(key) and not shared.done():
                # The first caller went away (its client hung up and the proxy cancelled it) while others wait on
                # the same input: they get the model's answer, from a call the cache makes for them, not a fallback.
                call = asyncio.ensure_future(self._fill(key, item, shared, self._joined.get(key)))
                call.add_done_callback(_retrieve)
                raise
            self._inflight.pop(key, None)
            _fail(shared, exc)
            raise
        self._inflight.pop(key, None)
        shared.set_result(scored)
        self._store(key, scored)
        return scored

    async def _fill(self, key: Hashable, item: ModelInput, shared: asyncio.Future[Scored], joined: float | None) -> Scored:
        """The model call for the callers left waiting on ``shared`` (its first caller was cancelled).

        It ends by the deadline of the earliest of them (who began waiting at loop time ``joined``): the others
        joined later, so each is answered (or timed out) within its own deadline, never after a second full one.
        """
        deadline = None if self.deadline_s is None or joined is None else joined + self.deadline_s
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    scored = await self.inner.score(item)
            except TimeoutError:
                raise ModelTimeout(f"no answer within {self.deadline_s or 0.0:g} s of the first waiting caller "
                                   f"(the model call was made again for those waiting on it)") from None
        except BaseException as exc:
            _fail(shared, exc)
            raise
        finally:
            self._inflight.pop(key, None)
        if not shared.done():
            shared.set_result(scored)
        self._store(key, scored)
        return scored

    def _store(self, key: Hashable, scored: Scored) -> None:
        self.cache[key] = dataclasses.replace(scored, source=Source.CACHE)
        CACHE_ENTRIES.set(len(self.cache))
