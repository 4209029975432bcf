"""Replay protection: each solved challenge (its nonce) is accepted once.

The in-memory store is bounded; entries leave when their token would have expired
anyway, or, when the store is full, those expiring soonest first (counted, since an evicted nonce could
be replayed until its token expires). With Redis configured the claim is shared by all
replicas (``ClientState.claim``) and this store still remembers it locally.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

from gateway import metrics

EVICTED = metrics.counter("clefgate_challenge_nonces_evicted_total",
                          "Solved-challenge nonces forgotten before their token expired because the store was full.")


class NonceStore:
    """Nonces seen, with their expiry; at most ``max_entries``."""

    def __init__(self, max_entries: int = 100_000, clock: Callable[[], float] = time.time) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self._seen: dict[str, float] = {}
        # (expiry, nonce), soonest first. Claims arrive in solving order, not expiry order (a slow device solves
        # an older token after a fresh one was solved), so the next to expire is found here, not by age.
        self._expiry: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._seen)

    def resized(self, max_entries: int) -> NonceStore:
        """This store under another limit: itself when the limit is the same, else a copy of its entries (the
        running store is left as it is until the config that asks for the change is in force)."""
        if max_entries == self.max_entries:
            return self
        other = NonceStore(max_entries, self.clock)
        other._seen = dict(self._seen)
        other._expiry = list(self._expiry)
        return other

    def _pop(self) -> None:
        _, nonce = heapq.heappop(self._expiry)
        del self._seen[nonce]

    def claim(self, nonce: str, expires_at: float) -> bool:
        """True the first time ``nonce`` is claimed (before ``expires_at``), False on a replay."""
        now = self.clock()
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            self._pop()
        if nonce in self._seen:
            return False
        # full (or the limit was lowered by a reload): forget the nonces whose tokens expire soonest
        while self._seen and len(self._seen) >= self.max_entries:
            self._pop()
            EVICTED.inc()
        self._seen[nonce] = expires_at
        heapq.heappush(expiry, (expires_at, nonce))
        return True
