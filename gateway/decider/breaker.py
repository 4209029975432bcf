"""The circuit breaker: a deadline on every model call, and a model skipped while it fails.

Closed: calls go through with a deadline; failures (timeouts, errors, invalid
outputs, overload) are counted in a sliding window, and ``failure_threshold`` of them
open the breaker. Open: the model is not called at all for ``cooldown_s``; callers
get ``BreakerOpen`` at once (the stage turns it into the configured fallback).
Half-open: one trial call at a time; ``half_open_probes`` consecutive successes
close the breaker, one failure opens it again. Every transition is logged once and
counted; the state is a gauge.

Each admitted call holds a ticket (``allow()``'s return value) and hands it back with
its outcome. Only the trial's ticket moves a half-open breaker, and a closed period's
failure window counts only calls admitted in that period: a slow call let through
before the breaker opened must neither close it while the trial is still out nor free
the trial slot for a second trial.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from gateway import metrics
from gateway.decider.scoring import BreakerOpen, ModelError, ModelTimeout, Scored, Scorer
from gateway.features import ModelInput

log = logging.getLogger("clefgate.decider")

CLOSED, HALF_OPEN, OPEN = "closed", "half_open", "open"
_STATE_VALUE = {CLOSED: 0.0, HALF_OPEN: 1.0, OPEN: 2.0}

BREAKER_STATE = metrics.gauge("clefgate_breaker_state", "Model circuit breaker state: 0 closed, 1 half-open, 2 open.", ("model",),
                              merge="max")
BREAKER_TRANSITIONS = metrics.counter("clefgate_breaker_transitions_total", "Circuit breaker state changes, by new state.",
                                      ("model", "state"))
MODEL_FAILURES = metrics.counter("clefgate_model_failures_total",
                                 "Failed model calls by kind (timeout, error, invalid, overload, breaker_open).", ("model", "kind"))
MODEL_LATENCY = metrics.histogram("clefgate_model_latency_seconds",
                                  "Time a request waited for the model (queue + batch run), successes and failures alike.", ("model",))


class CircuitBreaker:
    """The state machine alone (no I/O), so it can be tested with a fake clock."""

    def __init__(self, label: str, *, failure_threshold: int = 5, window_s: float = 10.0, cooldown_s: float = 5.0,
                 half_open_probes: int = 3, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.failure_threshold = failure_threshold
        self.window_s = window_s
        self.cooldown_s = cooldown_s
        self.half_open_probes = half_open_probes
        self.clock = clock
        self.state = CLOSED
        self._failures: deque[float] = deque()
        self._opened_at = 0.0
        # Tickets: the closed period's number, or a trial's own. Bumped on every transition and every trial handed
        # out, so an outcome carrying an older ticket is recognised as stale. Never 0 (allow's "no").
        self._ticket = 1
        self._trial = 0  # the ticket of the half-open trial in flight; 0: none
        self._successes = 0
        # The gauge is not set here: a reload builds its candidate's breaker before it knows the candidate will serve,
        # and a rejected one must not overwrite the running breaker's state. The first breaker of a model shows at
        # once; a later one shows when it admits its first call or its runtime is swapped in (``publish``).
        self._published = False
        if (label,) not in BREAKER_STATE.values:
            self.publish()

    def allow(self) -> int:
        """May a call go to the model now? 0 if not, else the call's ticket for success/failure/release.

        In half-open a ticket is the one trial slot. Calls are only admitted through a breaker that serves, so the
        first one publishes its state.
        """
        if self.state == CLOSED:
            if not self._published:
                self.publish()
            return self._ticket
        if self.state == OPEN:
            if self.clock() - self._opened_at < self.cooldown_s:
                return 0
            self._move(HALF_OPEN)
        if self._trial:
            return 0
        self._ticket += 1
        self._trial = self._ticket
        return self._trial

    def publish(self) -> None:
        """Export this breaker's state as the model's gauge (it guards the runtime that serves now)."""
        self._published = True
        BREAKER_STATE.set(_STATE_VALUE[self.state], self.label)

    def success(self, ticket: int | None = None) -> None:
        """The call holding ``ticket`` got an answer. Without a ticket (tests, a forced outcome) it is the current call's."""
        if self.state == HALF_OPEN and (ticket is None or ticket == self._trial):
            self._trial = 0
            self._successes += 1
            if self._successes >= self.half_open_probes:
                self._move(CLOSED)

    def failure(self, ticket: int | None = None) -> None:
        """The call holding ``ticket`` failed. Without a ticket (tests, a forced outcome) it is the current call's."""
        if self.state == HALF_OPEN:
            if ticket is None or ticket == self._trial:  # a call admitted before the breaker opened says nothing now
                self._trial = 0
                self._open(self.clock())
            return
        if self.state == OPEN or (ticket is not None and ticket != self._ticket):
            return  # open already, or a call from before the last opening: the window holds this period's calls
        now = self.clock()
        failures = self._failures
        failures.append(now)
        while failures and now - failures[0] > self.window_s:
            failures.popleft()
        if len(failures) >= self.failure_threshold:
            self._open(now)

    def trip(self) -> None:
        """Open now, whatever the count (a model that failed its warm-up starts here); half-open trials follow the cooldown."""
        self._open(self.clock())

    def release(self, ticket: int | None = None) -> None:
        """The call holding ``ticket`` ended without a verdict on the model (e.g. the caller was cancelled)."""
        if self.state == HALF_OPEN and (ticket is None or ticket == self._trial):
            self._trial = 0

    def _open(self, now: float) -> None:
        self._opened_at = now
        self._move(OPEN)

    def _move(self, state: str) -> None:
        if state == self.state:
            return
        previous, self.state = self.state, state
        self._failures.clear()
        self._successes = 0
        self._trial = 0
        self._ticket += 1
        self.publish()
        BREAKER_TRANSITIONS.inc(self.label, state)
        level = logging.WARNING if state == OPEN else logging.INFO
        log.log(level, "model circuit breaker %s -> %s", previous, state,
                extra={"fields": {"model": self.label, "from": previous, "to": state, "cooldown_s": self.cooldown_s}})


T = TypeVar("T")


class _Call:
    """One call under a breaker: its ticket and start, and how its end is counted."""

    def __init__(self, breaker: CircuitBreaker, ticket: int) -> None:
        self.breaker, self.ticket, self.start = breaker, ticket, time.perf_counter()

    def failed(self, kind: str) -> None:
        MODEL_LATENCY.observe(time.perf_counter() - self.start, self.breaker.label)
        MODEL_FAILURES.inc(self.breaker.label, kind)
        self.breaker.failure(self.ticket)

    def succeeded(self) -> None:
        MODEL_LATENCY.observe(time.perf_counter() - self.start, self.breaker.label)
        self.breaker.success(self.ticket)

    @contextmanager
    def counted(self, timeout_s: float | None = None) -> Iterator[None]:
        """Every failure inside is counted and re-raised as a ModelError (a TimeoutError as ModelTimeout when the call
        has a deadline of ``timeout_s``); a refused input or a cancelled caller releases the ticket."""
        try:
            yield
        except TimeoutError as exc:
            if timeout_s is None:
                self.failed(ModelError.kind)
                raise ModelError(f"model call failed: {exc!r}") from exc
            self.failed(ModelTimeout.kind)
            raise ModelTimeout(f"no answer within {timeout_s * 1000:.0f} ms") from None
        except ModelError as exc:
            self.failed(exc.kind)
            raise
        except asyncio.CancelledError:
            self.breaker.release(self.ticket)
            raise
        except (ValueError, LookupError):
            # the caller's input was refused (e.g. a state too long): not the model's fault
            self.breaker.release(self.ticket)
            raise
        except Exception as exc:  # a bug or a runtime error inside the model layer: still a failure, never a lost request
            self.failed(ModelError.kind)
            raise ModelError(f"model call failed: {exc!r}") from exc


async def guarded(breaker: CircuitBreaker, timeout_s: float, call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call()`` under ``breaker`` with a deadline; every failure is counted and re-raised as a ModelError."""
    ticket = breaker.allow()
    if not ticket:
        MODEL_FAILURES.inc(breaker.label, BreakerOpen.kind)
        raise BreakerOpen(f"circuit breaker {breaker.state}")
    c = _Call(breaker, ticket)
    with c.counted(timeout_s):
        async with asyncio.timeout(timeout_s):
            result = await call()
    c.succeeded()
    return result


def guarded_sync(breaker: CircuitBreaker, call: Callable[[], T | None]) -> T | None:
    """:func:`guarded` for a call answered synchronously (None: it cannot answer at once, and says nothing of the model).

    Only a closed breaker is asked (None otherwise): an open or half-open one is left to :func:`guarded`, which
    owns its trial calls. No deadline: the caller asks this only of runs known to be short.
    """
    if breaker.state != CLOSED:
        return None
    c = _Call(breaker, breaker.allow())
    with c.counted():
        result = call()
    if result is None:
        breaker.release(c.ticket)
        return None
    c.succeeded()
    return result


class BreakerScorer:
    """Gives every call a deadline and consults the breaker before calling ``inner``."""

    def __init__(self, inner: Scorer, breaker: CircuitBreaker, timeout_s: float) -> None:
        self.inner = inner
        self.breaker = breaker
        self.timeout_s = timeout_s
        self.label = breaker.label

    async def score(self, item: ModelInput) -> Scored:
        return await guarded(self.breaker, self.timeout_s, lambda: self.inner.score(item))

    def score_sync(self, item: ModelInput) -> Scored | None:
        """The inner scorer's synchronous answer under the breaker (None: ask :meth:`score`)."""
        sync: Callable[[ModelInput], Scored | None] | None = getattr(self.inner, "score_sync", None)
        if sync is None:
            return None
        return guarded_sync(self.breaker, lambda: sync(item))
