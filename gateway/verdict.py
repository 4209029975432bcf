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
    # a deterministic payload detector (libinjection, injection signatures) found an attack in a named location
    DETECTOR = "detector"
    # the client's own history decided (it ignored challenges, or showed attack evidence before)
    CLIENT = "client"
    # the site behind the gateway asked for a challenge in its response (challenge.step_up_header)
    ORIGIN = "origin"


# question id -> option -> probability (each question's options sum to 1)
Probabilities = Mapping[str, Mapping[str, float]]


def attack_probability(probabilities: Probabilities | None) -> float:
    """P(the payload is an attack): the payload question when the model has one, else the class question's attack."""
    if not probabilities:
        return 0.0
    payload = probabilities.get("payload")
    if payload is not None:
        return float(payload.get("attack", 0.0))
    return float(probabilities.get("class", {}).get("attack", 0.0))


def bot_probability(probabilities: Probabilities | None) -> float:
    """P(the client is a bad bot): the client question when the model has one, else the class question's bad_bot."""
    if not probabilities:
        return 0.0
    client = probabilities.get("client")
    if client is not None:
        return float(client.get("bad_bot", 0.0))
    return float(probabilities.get("class", {}).get("bad_bot", 0.0))


def risk_of(attack: float, look: float, apart: bool) -> float:
    """P(bad_bot) + P(attack) of the single-class view (:func:`class_probabilities`): for a model that answers the
    payload and client questions apart, a request is an attack, or a benign request from a bad bot, so the risk is
    P(attack) + (1 - P(attack)) x P(client = bad_bot), the chance that either holds; for one that answers a single class
    question, the two are exclusive classes and add up."""
    return attack + (1.0 - attack) * look if apart else attack + look


# A model whose manifest carries familiarity statistics answers beside its questions how familiar the request's payload
# is: {"familiar": 1 - u, "unfamiliar": u} with u = d / (d + threshold), d the Mahalanobis distance of the payload head's
# input to the training rows' (gateway.decider.onnx). u > 0.5 when d exceeds the threshold; d / threshold = u / (1 - u).
# It is a key of the probabilities (its two values sum to 1), so caches, logs and the policy carry it unchanged.
FAMILIARITY = "familiarity"


def distance_ratio(probabilities: Probabilities | None) -> float | None:
    """The payload's distance to what the model was trained on, in multiples of its familiarity threshold (above 1:
    unfamiliar to the model); None when the model reports no familiarity (a manifest without the statistics)."""
    if not probabilities:
        return None
    familiarity = probabilities.get(FAMILIARITY)
    if familiarity is None:
        return None
    u = float(familiarity.get("unfamiliar", 0.0))
    return float("inf") if u >= 1.0 else max(0.0, u) / (1.0 - max(0.0, u))


CLASS_OPTIONS = ("human", "good_bot", "bad_bot", "attack")


def class_probabilities(probabilities: Probabilities) -> dict[str, float]:
    """The single-class view (human, good_bot, bad_bot, attack) of either model output shape.

    A model with a ``class`` question answers it directly; one with ``payload`` and ``client`` questions
    answers it as P(attack) = P(payload = attack) and P(c) = P(payload = benign) x P(client = c) — the
    view that reports and the decision API's ``class`` question use, never the policy.
    """
    cls = probabilities.get("class")
    if cls is not None:
        return {c: float(cls.get(c, 0.0)) for c in CLASS_OPTIONS}
    attack = attack_probability(probabilities)
    client = probabilities.get("client", {})
    return {"human": (1.0 - attack) * float(client.get("human", 0.0)), "good_bot": (1.0 - attack) * float(client.get("good_bot", 0.0)),
            "bad_bot": (1.0 - attack) * float(client.get("bad_bot", 0.0)), "attack": attack}


@dataclass(frozen=True, slots=True)
class PayloadHit:
    """One piece of attack evidence in a request's payload, found by a deterministic detector.

    ``location`` names where it is: ``path``, ``query:NAME``, ``form:NAME``, ``json:$.a.b[0]``,
    ``multipart:NAME``, ``cookie:NAME`` or ``header:NAME``; ``fragment`` is the matching text
    (bounded, control characters escaped); ``decoding`` is the decoding that revealed it
    (raw, percent, percent2, plus, html, json, base64).
    """

    detector: str
    kind: str
    location: str
    fragment: str
    decoding: str = "raw"

    def describe(self) -> str:
        """One line for reasons, explanations and the console."""
        via = "" if self.decoding == "raw" else f" after {self.decoding} decoding"
        return f"{self.detector} found {self.kind} in {self.location}{via}: {self.fragment!r}"


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
    # attack evidence the payload detectors found (empty when none looked or none matched)
    payload: tuple[PayloadHit, ...] = ()
    # the policy did not count the client's look (a score rule's bot_likeness: ignore): the proxy checks the site answered
    # such a request data, not a page (ClientHistory.paged)
    look_ignored: bool = False

    @property
    def score(self) -> float | None:
        """P(bad_bot) + P(attack) of the single-class view when the model decided (the policy's risk), else None."""
        if not self.probabilities or not ({"class", "payload", "client"} & self.probabilities.keys()):
            return None
        return risk_of(attack_probability(self.probabilities), bot_probability(self.probabilities), "client" in self.probabilities)


ALLOW_ALL = Verdict(Action.FORWARD, Source.DEFAULT, "no rule matched; default allow")


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    """A rule's answer "ask the model": which rule sent it, and with which policy/backend.

    ``ignore_bot_likeness`` (a ``score`` rule's ``bot_likeness: ignore``): the client's look is no
    suspicion on these requests, so the policy weighs P(attack) alone where it would weigh
    P(bad_bot) + P(attack); the payload question decides as it always does.
    """

    rule: str | None = None
    policy: str | None = None
    backend: str | None = None
    reason: str = "scored by the model"
    ignore_bot_likeness: bool = False
    # what the verdict's reason adds (why a rule's bot_likeness: ignore was set aside for this client)
    note: str = ""
    # a rule's challenge of a request that carries a payload (rules.score_challenged): the model is asked whether its payload is
    # an attack; short of a block, this challenge stands
    challenge: Verdict | None = None


# the most body a request to the gateway's own endpoints (``/.clefgate/``) may carry
LOCAL_BODY_MAX = 64 * 1024


@dataclass(frozen=True, slots=True)
class LocalResponse:
    """A response the gateway makes itself (challenge page, block page, verify endpoint)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "text/html; charset=utf-8"
