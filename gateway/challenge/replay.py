"""Replay protection: each solved challenge (its nonce) is accepted once.

The in-memory store is bounded; entries leave when their token would have expired
anyway, or, when the store is full, oldest first (counted, since an evicted nonce could
be replayed until its token expires). With Redis configured the claim is shared by all
replicas (``ClientState.claim``) and this store still remembers it locally.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from gateway import metrics

EVICTED = metrics.counter("clefgate_challenge_nonces_evicted_total",
                          "Solved-challenge nonces forgotten before their token expired because the store was full.")


class NonceStore:
    """Nonces seen, with their expiry; at most ``max_entries``."""

    def __init__(self, max_entries: int = 100_000, clock: Callable[[], float] = time.time) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def claim(self, nonce: str, expires_at: float) -> bool:
        """True the first time ``nonce`` is claimed (before ``expires_at``), False on a replay."""
        now = self.clock()
        seen = self._seen
        # Tokens share one lifetime, so insertion order is expiry order: drop from the front.
        while seen:
            _, exp = next(iter(seen.items()))
            if exp > now:
                break
            seen.popitem(last=False)
        if nonce in seen:
            return False
        if len(seen) >= self.max_entries:
            seen.popitem(last=False)
            EVICTED.inc()
        seen[nonce] = expires_at
        return True
