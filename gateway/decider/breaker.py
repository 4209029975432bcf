"""The circuit breaker: a deadline on every model call, and a model skipped while it fails.

Closed: calls go through with a deadline; failures (timeouts, errors, invalid
outputs, overload) are counted in a sliding window, and ``failure_threshold`` of them
open the breaker. Open: the model is not called at all for ``cooldown_s``; callers
get ``BreakerOpen`` at once (the stage turns it into the configured fallback).
Half-open: one trial call at a time; ``half_open_probes`` consecutive successes
close the breaker, one failure opens it again. Every transition is logged once and
counted; the state is a gauge.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
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
        self._trial_in_flight = False
        self._successes = 0
        BREAKER_STATE.set(0.0, label)

    def allow(self) -> bool:
        """May a call go to the model now? (A True in half-open reserves the one trial slot.)"""
        if self.state == CLOSED:
            return True
        if self.state == OPEN:
            if self.clock() - self._opened_at < self.cooldown_s:
                return False
            self._move(HALF_OPEN)
        if self._trial_in_flight:
            return False
        self._trial_in_flight = True
        return True

    def success(self) -> None:
        if self.state == HALF_OPEN:
            self._trial_in_flight = False
            self._successes += 1
            if self._successes >= self.half_open_probes:
                self._move(CLOSED)

    def failure(self) -> None:
        now = self.clock()
        if self.state == HALF_OPEN:
            self._trial_in_flight = False
            self._open(now)
            return
        if self.state == OPEN:
            return
        failures = self._failures
        failures.append(now)
        while failures and now - failures[0] > self.window_s:
            failures.popleft()
        if len(failures) >= self.failure_threshold:
            self._open(now)

    def release(self) -> None:
        """A trial call ended without a verdict on the model (e.g. the caller was cancelled)."""
        if self.state == HALF_OPEN:
            self._trial_in_flight = False

    def _open(self, now: float) -> None:
        self._opened_at = now
        self._move(OPEN)

    def _move(self, state: str) -> None:
        if state == self.state:
            return
        previous, self.state = self.state, state
        self._failures.clear()
        self._successes = 0
        BREAKER_STATE.set(_STATE_VALUE[state], self.label)
        BREAKER_TRANSITIONS.inc(self.label, state)
        level = logging.WARNING if state == OPEN else logging.INFO
        log.log(level, "model circuit breaker %s -> %s", previous, state,
                extra={"fields": {"model": self.label, "from": previous, "to": state, "cooldown_s": self.cooldown_s}})


T = TypeVar("T")


async def guarded(breaker: CircuitBreaker, timeout_s: float, call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call()`` under ``breaker`` with a deadline; every failure is counted and re-raised as a ModelError."""
    label = breaker.label
    if not breaker.allow():
        MODEL_FAILURES.inc(label, BreakerOpen.kind)
        raise BreakerOpen(f"circuit breaker {breaker.state}")
    start = time.perf_counter()

    def failed(kind: str) -> None:
        MODEL_LATENCY.observe(time.perf_counter() - start, label)
        MODEL_FAILURES.inc(label, kind)
        breaker.failure()

    try:
        async with asyncio.timeout(timeout_s):
            result = await call()
    except TimeoutError:
        failed(ModelTimeout.kind)
        raise ModelTimeout(f"no answer within {timeout_s * 1000:.0f} ms") from None
    except ModelError as exc:
        failed(exc.kind)
        raise
    except asyncio.CancelledError:
        breaker.release()
        raise
    except (ValueError, LookupError) as exc:
        # the caller's input was refused (e.g. a state too long): not the model's fault
        breaker.release()
        raise exc
    except Exception as exc:  # a bug or a runtime error inside the model layer: still a failure, never a lost request
        failed(ModelError.kind)
        raise ModelError(f"model call failed: {exc!r}") from exc
    MODEL_LATENCY.observe(time.perf_counter() - start, label)
    breaker.success()
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
