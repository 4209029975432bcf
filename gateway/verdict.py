"""The three small values that carry every decision: Action, Source and Verdict.

A stage of the decision chain is ``(Features) -> Verdict | None``; ``None`` means
"continue with the next stage". Only the server turns a verdict into a response.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Action(enum.Enum):
    """What happens to a request."""

    FORWARD = "forward"
    CHALLENGE = "challenge"
    BLOCK = "block"


class Source(enum.Enum):
    """Which part of the gateway produced a verdict."""

    RULE = "rule"
    MODEL = "model"
    CACHE = "cache"
    FALLBACK = "fallback"
    SHADOW = "shadow"
    DEFAULT = "default"


# question id -> option -> probability (each question's options sum to 1)
Probabilities = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision about one request.

    ``action`` is what the gateway enforces. In shadow mode ``action`` is FORWARD,
    ``source`` is SHADOW and ``shadow_action`` keeps what would have happened.
    """

    action: Action
    source: Source
    reason: str
    probabilities: Probabilities | None = None
    backend: str | None = None
    rule: str | None = None
    # block: HTTP status of the block page; challenge: proof-of-work difficulty (bits)
    status: int | None = None
    difficulty: int | None = None
    # human-readable evidence: the rule's description, or the model's top features
    explanation: tuple[str, ...] = ()
    policy: str | None = None
    shadow_action: Action | None = None
    headers: tuple[tuple[str, str], ...] = field(default=())
    # the model that scored the request (name@version) and how long the decision took
    model: str | None = None
    decision_ms: float | None = None
    # what the model read (a gateway.features.ModelInput), kept for the decision log so it is not computed twice
    model_input: Any = field(default=None, compare=False, repr=False)

    @property
    def score(self) -> float | None:
        """P(bad_bot) + P(attack) when the model decided, else None."""
        if not self.probabilities or "class" not in self.probabilities:
            return None
        cls = self.probabilities["class"]
        return float(cls.get("bad_bot", 0.0)) + float(cls.get("attack", 0.0))


ALLOW_ALL = Verdict(Action.FORWARD, Source.DEFAULT, "no rule matched; default allow")


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    """A rule's answer "ask the model": which rule sent it, and with which policy/backend."""

    rule: str | None = None
    policy: str | None = None
    backend: str | None = None
    reason: str = "scored by the model"


@dataclass(frozen=True, slots=True)
class LocalResponse:
    """A response the gateway makes itself (challenge page, block page, verify endpoint)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "text/html; charset=utf-8"
