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
import types
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gateway import metrics
from gateway.decider.cache import CachedScorer, request_key
from gateway.decider.scoring import ModelError, Scored, Scorer
from gateway.features import ClientStats, Features, ModelInput, model_input
from gateway.verdict import Action, Probabilities, ScoreRequest, Source, Verdict

log = logging.getLogger("clefgate.decider")

FALLBACKS = metrics.counter("clefgate_model_fallbacks_total",
                            "Requests decided by the fallback because the model could not answer, by mode and cause.", ("mode", "cause"))
DECISIONS = metrics.counter("clefgate_model_decisions_total", "Requests decided from model probabilities, by source (model, cache).",
                            ("source",))


def _compile_with_decision() -> Callable[[Verdict, str | None, float, ModelInput | None], Verdict]:
    """``dataclasses.replace(verdict, model=, decision_ms=, model_input=)`` without its per-call field walk.

    ``replace`` inspects the fields and calls the frozen ``__init__`` (every field through
    ``object.__setattr__``): a few microseconds on every scored request. This copies the
    slots directly (as ``gateway.proxy.wirefeatures`` builds Features); without slots it
    is ``replace`` itself. A test checks both give equal verdicts.
    """
    names = [f.name for f in dataclasses.fields(Verdict)]
    if not all(isinstance(Verdict.__dict__.get(n), types.MemberDescriptorType) for n in names):
        def replaced(v: Verdict, model: str | None, decision_ms: float, model_input: ModelInput | None) -> Verdict:
            return dataclasses.replace(v, model=model, decision_ms=decision_ms, model_input=model_input)
        return replaced
    given = {"model", "decision_ms", "model_input"}
    env: dict[str, Any] = {"_new": object.__new__, "Verdict": Verdict}
    body = ["    n = _new(Verdict)"]
    for name in names:
        env[f"_set_{name}"] = Verdict.__dict__[name].__set__
        body.append(f"    _set_{name}(n, {name if name in given else 'v.' + name})")
    src = "def with_decision(v, model, decision_ms, model_input):\n" + "\n".join(body) + "\n    return n\n"
    exec(compile(src, "<gateway.decider.stage>", "exec"), env)
    return env["with_decision"]  # type: ignore[no-any-return]


with_decision = _compile_with_decision()


class PolicyLike(Protocol):
    """What the stage needs from ``gateway.policy.Policy``."""

    def verdict(self, features: Features, probabilities: Probabilities, request: ScoreRequest, *,
                source: Source = Source.MODEL, explanation: Sequence[str] = ()) -> Verdict: ...

    def fallback_verdict(self, features: Features, request: ScoreRequest, mode: str) -> Verdict: ...


class ModelStage:
    """Scorer + policy = a verdict for every scored request, fallbacks included."""

    def __init__(self, scorer: Scorer, policy: PolicyLike, *, fallback: str = "forward", model_label: str = "",
                 explain: Callable[[ModelInput, Probabilities], tuple[str, ...]] | None = None,
                 cache: CachedScorer | None = None, featurize: Callable[[Features], ModelInput] = model_input,
                 ready: Callable[[], bool] | None = None) -> None:
        self.scorer = scorer
        # whether the scorer would answer a request synchronously at once (its ``score_sync``; the batcher's ``runs_at_once``)
        self.ready = ready if ready is not None and callable(getattr(scorer, "score_sync", None)) else None
        # what the model reads about a request: the loaded model's featurizer (its manifest's feature version)
        self.featurize = featurize
        self.policy = policy
        self.fallback = fallback
        self.model_label = model_label
        self.explain = explain
        self.cache = cache

    def decide_cached(self, features: Features, request: ScoreRequest, client: ClientStats | None) -> Verdict | None:
        """The verdict for a request answered synchronously; None when it must wait for the model (:meth:`decide`).

        ``client`` is the client's window (``features.client`` may not be filled in yet:
        building a copy of the features with it costs more than the whole lookup). The
        raw-request cache level answers a repeated request without serialization; an unseen
        one is scored here too when the scorer can answer it at once (``ready``: a lone
        model run on the event loop, see ``gateway.decider.batching``), with the same
        caches, checks and policy as :meth:`decide`, and no task, timer or future.
        """
        start = time.perf_counter()
        cache = self.cache
        raw_key = b""
        if cache is not None:
            raw_key = request_key(features, client)
            scored = cache.get_request(raw_key)
            if scored is not None:
                verdict = self.policy.verdict(features, scored.probabilities, request, source=scored.source,
                                              explanation=scored.explanation)
                DECISIONS.inc(scored.source.value)
                return with_decision(verdict, scored.model or self.model_label, (time.perf_counter() - start) * 1000.0, None)
        ready = self.ready
        if ready is None or not ready():
            return None
        if client is not features.client:
            features = dataclasses.replace(features, client=client)
        item: ModelInput | None = None
        try:
            item = self.featurize(features)
            answered = self.scorer.score_sync(item)  # type: ignore[attr-defined]
        except ModelError as exc:
            return self._fallback(features, request, exc.kind, str(exc), start)
        except Exception as exc:  # a bug below must cost one fallback, never the request
            log.exception("model stage failed")
            return self._fallback(features, request, "error", repr(exc), start)
        if answered is None:
            return None
        return self._answer(features, request, answered, item, raw_key, start)

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        start = time.perf_counter()
        item: ModelInput | None = None
        scored: Scored | None = None
        cache = self.cache
        raw_key = request_key(features) if cache is not None else b""
        try:
            if cache is not None:
                scored = cache.get_request(raw_key)
            if scored is None:
                # serialize + encode once: the model-input cache key and the model both read this
                item = self.featurize(features)
                scored = await self.scorer.score(item)
        except ModelError as exc:
            return self._fallback(features, request, exc.kind, str(exc), start)
        except Exception as exc:  # a bug below must cost one fallback, never the request
            log.exception("model stage failed")
            return self._fallback(features, request, "error", repr(exc), start)
        return self._answer(features, request, scored, item, raw_key, start)

    def _answer(self, features: Features, request: ScoreRequest, scored: Scored, item: ModelInput | None, raw_key: bytes,
                start: float) -> Verdict:
        """The policy's verdict on ``scored`` (explained when it stops the request), kept for the request's repeats."""
        cache = self.cache
        verdict = self.policy.verdict(features, scored.probabilities, request, source=scored.source, explanation=scored.explanation)
        if (self.explain is not None and item is not None and not scored.explanation
                and (verdict.action is not Action.FORWARD or verdict.shadow_action not in (None, Action.FORWARD))):
            # only for requests that were stopped (or would have been): operators ask "why?" about those
            found = self.explain(item, scored.probabilities)
            scored = dataclasses.replace(scored, explanation=found)
            verdict = dataclasses.replace(verdict, explanation=(*verdict.explanation, *found))
            if cache is not None:
                cache.annotate(item, scored)  # the next request with this input reuses the explanation
        if cache is not None and item is not None:
            cache.put_request(raw_key, scored)  # a repeat of this exact request skips serialization too
        DECISIONS.inc(scored.source.value)
        return with_decision(verdict, scored.model or self.model_label, (time.perf_counter() - start) * 1000.0, item)

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
