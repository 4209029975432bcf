"""The scoring contract shared by every decider layer.

A ``Scorer`` turns one request's model input (``gateway.features.ModelInput``: the
canonical text, its ids and the numeric vector, computed once per request) into
calibrated probabilities, asynchronously. A ``BatchModel`` is the synchronous thing at
the bottom (an ONNX session) that scores many inputs in one run; ``BatchingScorer``
adapts one to the other. Failures are exceptions of the types below so that the breaker can count
them by kind and the stage can pick the configured fallback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gateway.features import ModelInput
from gateway.verdict import Probabilities, Source


class ModelError(Exception):
    """The model could not produce a usable answer. ``kind`` labels the failure metric."""

    kind = "error"


class ModelTimeout(ModelError):
    kind = "timeout"


class ModelOverloaded(ModelError):
    kind = "overload"


class InvalidOutput(ModelError):
    kind = "invalid"


class BreakerOpen(ModelError):
    kind = "breaker_open"


@dataclass(frozen=True, slots=True)
class Scored:
    """Probabilities for one request, and where they came from (model or cache)."""

    probabilities: Probabilities
    source: Source = Source.MODEL
    model: str = ""
    explanation: tuple[str, ...] = ()


class Scorer(Protocol):
    """Anything that scores one request's model input asynchronously."""

    async def score(self, item: ModelInput) -> Scored: ...


class BatchModel(Protocol):
    """A synchronous model that scores a batch in one run (runs in a worker thread)."""

    @property
    def label(self) -> str:
        """``name@version`` of the loaded model."""
        ...

    def run_inputs(self, batch: list[ModelInput]) -> list[Probabilities]: ...


def check_probabilities(probs: Probabilities, questions: dict[str, tuple[str, ...]] | None = None) -> None:
    """Raise InvalidOutput unless every question's probabilities are finite, in [0, 1] and sum to 1."""
    if not isinstance(probs, Mapping) or not all(isinstance(options, Mapping) for options in probs.values()):
        raise InvalidOutput(f"model returned {type(probs).__name__}, not probabilities per question and option")
    if not probs:
        raise InvalidOutput("model returned no questions")
    for qid, options in probs.items():
        if questions is not None and qid in questions and tuple(options) != questions[qid]:
            raise InvalidOutput(f"question {qid!r}: options {tuple(options)} != {questions[qid]}")
        total = 0.0
        for opt, p in options.items():
            if not isinstance(p, float | int) or not math.isfinite(p) or p < -1e-6 or p > 1 + 1e-6:
                raise InvalidOutput(f"question {qid!r}: option {opt!r} has probability {p!r}")
            total += p
        if abs(total - 1.0) > 1e-3:
            raise InvalidOutput(f"question {qid!r}: probabilities sum to {total:.4f}")
