"""The compiled decision chain: rules -> (model -> policy) -> verdict.

A ``Pipeline`` is immutable once built; a reload builds a new one and swaps it in
whole, so a request decides with exactly one version of rules, model and policy.
``decide`` is synchronous whenever the rules settle the request (the common case,
and the one the proxy handles without creating a task); only a request that needs
the model returns an awaitable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from gateway.config import Config
from gateway.features import Features
from gateway.verdict import ALLOW_ALL, Action, LocalResponse, ScoreRequest, Source, Verdict


class RuleEvaluator(Protocol):
    """A compiled rule table (``gateway.rules.RuleTable``)."""

    def evaluate(self, features: Features) -> Verdict | ScoreRequest | None: ...


class ScoreStage(Protocol):
    """The model side: decider + policy; always returns a verdict (fallbacks included)."""

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict: ...


class LocalEndpoints(Protocol):
    """Requests under the reserved prefix (``/.clefgate/``), e.g. the challenge verify endpoint."""

    prefix: str

    def handle(self, features: Features, body: bytes) -> LocalResponse | Awaitable[LocalResponse]: ...


class PageRenderer(Protocol):
    """Turns a CHALLENGE or BLOCK verdict into the page the client gets."""

    def challenge(self, verdict: Verdict, features: Features) -> LocalResponse: ...

    def block(self, verdict: Verdict, features: Features) -> LocalResponse: ...


ResponseObserver = Callable[[Features, Verdict, int], None]

NO_MODEL = Verdict(Action.FORWARD, Source.DEFAULT, "model not configured; forwarded")


@dataclass(frozen=True)
class Pipeline:
    """One compiled version of everything that decides.

    ``default`` is what happens when no rule matches: a named, counted verdict or a
    ``ScoreRequest`` (ask the model). ``observers`` are told each response status
    (per-client windows, challenge bookkeeping); they must be cheap and never raise.
    """

    rules: RuleEvaluator | None = None
    scorer: ScoreStage | None = None
    default: Verdict | ScoreRequest = ALLOW_ALL
    pages: PageRenderer | None = None
    local: LocalEndpoints | None = None
    observers: tuple[ResponseObserver, ...] = field(default=())
    # bytes of request body the decision needs before it is made (0: decide on the head)
    body_prefix_bytes: int = 0
    description: str = "allow-all"

    def decide(self, features: Features) -> Verdict | Awaitable[Verdict]:
        outcome = self.rules.evaluate(features) if self.rules is not None else None
        if outcome is None:
            outcome = self.default
        if isinstance(outcome, Verdict):
            return outcome
        if self.scorer is None:
            return NO_MODEL
        return self.scorer.decide(features, outcome)

    def observe(self, features: Features, verdict: Verdict, status: int) -> None:
        for observer in self.observers:
            observer(features, verdict, status)


def build(cfg: Config, scorer: ScoreStage | None = None) -> Pipeline:
    """Compile the decision chain for ``cfg`` (grows with rules, policy and challenge)."""
    return Pipeline(scorer=scorer, body_prefix_bytes=cfg.limits.body_prefix_bytes if cfg.rules.files else 0)
