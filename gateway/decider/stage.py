"""The model stage of the pipeline: score a request, then let the policy decide.

This is the ``ScoreStage`` the pipeline calls for requests the rules send to the
model. It never raises: a model that times out, fails, is overloaded or sits behind
an open breaker yields the policy's fallback verdict for the configured mode
(``forward``, ``challenge`` or ``rules-only``), counted by mode and cause.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Protocol

from gateway import metrics
from gateway.decider.scoring import ModelError, Scorer
from gateway.features import ClientStats, Features
from gateway.verdict import Probabilities, ScoreRequest, Source, Verdict

log = logging.getLogger("clefgate.decider")

FALLBACKS = metrics.counter("clefgate_model_fallbacks_total",
                            "Requests decided by the fallback because the model could not answer, by mode and cause.", ("mode", "cause"))
DECISIONS = metrics.counter("clefgate_model_decisions_total", "Requests decided from model probabilities, by source (model, cache).",
                            ("source",))


class PolicyLike(Protocol):
    """What the stage needs from ``gateway.policy.Policy``."""

    def verdict(self, features: Features, probabilities: Probabilities, request: ScoreRequest) -> Verdict: ...

    def fallback_verdict(self, features: Features, request: ScoreRequest, mode: str) -> Verdict: ...


class ModelStage:
    """Scorer + policy = a verdict for every scored request, fallbacks included."""

    def __init__(self, scorer: Scorer, policy: PolicyLike, *, fallback: str = "forward", model_label: str = "",
                 client_stats: Callable[[Features], ClientStats | None] | None = None) -> None:
        self.scorer = scorer
        self.policy = policy
        self.fallback = fallback
        self.model_label = model_label
        self.client_stats = client_stats

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        start = time.perf_counter()
        if self.client_stats is not None and features.client is None:
            stats = self.client_stats(features)
            if stats is not None:
                features = dataclasses.replace(features, client=stats)
        try:
            scored = await self.scorer.score(features)
        except ModelError as exc:
            return self._fallback(features, request, exc.kind, str(exc), start)
        except Exception as exc:  # a bug below must cost one fallback, never the request
            log.exception("model stage failed")
            return self._fallback(features, request, "error", repr(exc), start)
        verdict = self.policy.verdict(features, scored.probabilities, request)
        if scored.source is Source.CACHE and verdict.source is Source.MODEL:
            verdict = dataclasses.replace(verdict, source=Source.CACHE)
        DECISIONS.inc(scored.source.value)
        return dataclasses.replace(
            verdict,
            model=scored.model or self.model_label,
            decision_ms=(time.perf_counter() - start) * 1000.0,
            explanation=verdict.explanation or scored.explanation,
        )

    def _fallback(self, features: Features, request: ScoreRequest, cause: str, detail: str, start: float) -> Verdict:
        FALLBACKS.inc(self.fallback, cause)
        verdict = self.policy.fallback_verdict(features, request, self.fallback)
        return dataclasses.replace(
            verdict,
            source=Source.FALLBACK,
            reason=f"{verdict.reason} (model unavailable: {cause})",
            explanation=(*verdict.explanation, detail),
            model=self.model_label,
            decision_ms=(time.perf_counter() - start) * 1000.0,
        )
