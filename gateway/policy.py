"""Evidence -> action: thresholds, escalation of clients that earned a block, shadow mode, rollout.

First promise: a person is never blocked. Suspicion earns a challenge; only evidence earns
a block. A :class:`Policy` is compiled from ``cfg.policy``: one :class:`Thresholds` per
named policy (``policy.routes``; a route or a ``score`` rule names one) plus the default.
For a scored request it answers with a ``Verdict``:

* ``block`` when P(attack) >= ``block_attack`` *and* the request carries a payload
  (``gateway.carriers``: query, body, a cookie or header value that can hold one, a path
  with injection characters); the reason and ``Verdict.payload`` name where. A request
  with no payload is challenged instead, whatever P(attack) says;
* ``block`` also when P(attack) >= ``block_attack_corroborated`` and a fallback rule (the
  injection signatures) would block the request: :meth:`Policy.corroborate`, which the
  pipeline calls on a model verdict short of a block;
* ``challenge`` instead of that model-only block when the request is unfamiliar to the model
  (``abstain_unfamiliar``, on by default): the model reports how far the request's payload lies
  from everything it was trained on (``gateway.verdict.distance_ratio``, from a manifest with
  familiarity statistics), and beyond its threshold the model abstains; counted in
  ``clefgate_model_abstained_total``. Detector and rule blocks decide before the model and are
  never affected; a fallback rule that agrees still blocks (``corroborate``);
* ``challenge`` instead of that model-only block when no value of the request holds the syntax
  of the attack kind the model names (``block_needs_syntax``, on by default;
  ``gateway.witness``): an injection has to break out of where its value is put, and a value
  in plain words, a password or an id cannot. Counted in ``clefgate_model_unwitnessed_total``;
  a fallback rule that agrees still blocks;
* ``forward`` where P(attack) short of a block is what would challenge a request (the look alone
  would not) and the request is known free of attack syntax (``suspicion_needs_syntax``, on by
  default; ``gateway.witness.syntax_free``, strict: what it cannot read as an application might
  keeps P(attack) counted): the risk is the client's look alone. A person posting code, a
  question about SQL or shell, or rich text the model finds unusual is not challenged for it;
  a probe's bare path keeps its P(attack), a policy that blocks without the syntax
  (``block_needs_syntax: false``) counts P(attack) whatever the request holds, and a client
  that earned a block is blocked all the same (:meth:`Policy.escalate`). So too at a block's height: P(attack) >=
  ``block_attack`` with a payload none of whose values holds attack syntax is the model's suspicion of words, names and
  ids (what the look alone says decides: a challenge only when it would challenge). Counted in
  ``clefgate_policy_syntaxless_total``; a fallback rule that agrees still blocks;
* ``forward`` likewise where the request carries nothing but its path (no query, body, cookie or header value
  that can hold a payload), a path free of attack syntax, and the site serves that page (``clients.served_pages``,
  ``gateway.served``: it answered a forwarded GET or HEAD for it with a 2xx or 304): a path the site serves is a
  page, not a probe for something absent; counted in ``clefgate_policy_served_pages_total``. So too where such a
  path names a file of the kind pages load (an image, a font, a style sheet, a script or a page:
  ``gateway.served.static_file``), which reads what any visitor reads, at any P(attack); counted in
  ``clefgate_policy_static_files_total``. A client that earned a block is blocked all the same;
* ``challenge`` when P(bad_bot)+P(attack) >= ``challenge_risk`` (the single-class view's: for a model that answers
  the two questions apart, P(attack) + P(benign) x P(client = bad_bot), :func:`risk_of`), with a proof-of-work
  difficulty rising linearly from ``difficulty_min`` at the threshold to
  ``difficulty_max`` at risk 1 (a little more suspicious, a little more work). Bot-likeness
  (P(bad_bot), combined risk, the client statistics the model reads) never blocks, unless
  the operator opts in with ``block_risk``;
* under a ``score`` rule with ``bot_likeness: ignore`` (``ScoreRequest.ignore_bot_likeness``: API
  clients on API paths, which cannot solve a challenge) the risk is P(attack) alone: the client's
  look is no suspicion there, while every P(attack) row above, the payload detectors, the rules
  before it (rate limits, error-heavy clients) and a client's earned block apply as everywhere.
  The reason says so, naming the rule; a request forwarded that the full risk would have
  challenged is counted in ``clefgate_policy_bot_likeness_ignored_total``;
* ``forward`` otherwise.

Probabilities are read with ``attack_probability``/``bot_probability``, so a model that
answers the payload and client questions apart works unchanged.

A client earns a block (:meth:`Policy.escalate`, source ``client``): a request that would be
challenged is blocked instead when the client (address + fingerprint, ``gateway.clients``)
was served ``block_ignored_challenges`` challenges within ``ignored_challenges_window_s``
without solving one, or showed attack evidence (a payload detector's block, a model block
with its payload named) within ``block_after_attack_s``; or when its address was served
``block_ignored_challenges_per_address`` challenges in that window, whatever the
fingerprint, and nobody there solved one (a client rotating its user agent).

Shadow mode (global or per policy) and rollout (enforce for N% of clients by a stable
hash of the client id) turn an enforced CHALLENGE/BLOCK into ``action=FORWARD,
source=SHADOW, shadow_action=<what would have happened>``; the decision is still made,
logged and counted, so the operator sees what enforcing would do.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gateway import metrics
from gateway.carriers import describe as describe_carriers
from gateway.carriers import payload_carriers
from gateway.clients import ClientState, address_of
from gateway.config import PolicyConfig, RoutePolicyConfig
from gateway.features import Features
from gateway.served import SERVED_PAGE, STATIC_FILE, static_file
from gateway.verdict import (
    Action,
    PayloadHit,
    Probabilities,
    ScoreRequest,
    Source,
    Verdict,
    attack_probability,
    bot_probability,
    distance_ratio,
    risk_of,
)
from gateway.witness import named_kinds, syntax_free, syntax_witness

DECISIONS = metrics.counter("clefgate_policy_decisions_total",
                            "Model and fallback decisions by policy, action decided, and whether it was enforced (enforce, shadow, rollout).",
                            ("policy", "action", "mode"))
SHADOW = metrics.gauge("clefgate_policy_shadow", "1 when a policy runs in shadow mode (decides, logs, enforces nothing).", ("policy",),
                       merge="max")
CORROBORATED = metrics.counter("clefgate_corroborated_blocks_total",
                               "Model verdicts short of a block turned into a block because P(attack) >= block_attack_corroborated and a "
                               "fallback rule would block the request, by policy, rule and mode (these are not in clefgate_policy_decisions_total).",
                               ("policy", "rule", "mode"))
EARNED = metrics.counter("clefgate_client_blocks_total",
                         "Requests that would have been challenged, blocked because the client earned it, by why (ignored_challenges, "
                         "attack_evidence) and mode (enforce; shadow and rollout leave the challenge standing).", ("why", "mode"))
NO_PAYLOAD = metrics.counter("clefgate_policy_no_payload_challenges_total",
                             "Requests with P(attack) >= block_attack that carried no payload, challenged instead of blocked, by policy.",
                             ("policy",))
ABSTAINED = metrics.counter("clefgate_model_abstained_total",
                            "Requests the model would have blocked on P(attack) alone whose payload is unfamiliar to it (farther from its "
                            "training rows than its manifest's familiarity threshold), challenged instead (policy.abstain_unfamiliar), by "
                            "policy; a fallback rule that then agrees still blocks (clefgate_corroborated_blocks_total).", ("policy",))
SYNTAX_FREE = metrics.counter("clefgate_policy_syntaxless_total",
                              "Requests whose P(attack) would have raised the risk to a challenge (short of a block) or held a block's "
                              "height (with a payload) while the request was known free of attack syntax (gateway.witness.syntax_free): "
                              "P(attack) not counted, the look alone decided (policy.suspicion_needs_syntax), by policy. A client that "
                              "earned a block is blocked all the same.",
                              ("policy",))
SERVED_PAGES = metrics.counter("clefgate_policy_served_pages_total",
                               "Requests forwarded whose P(attack), short of a block, would have raised the risk to a challenge while the "
                               "request carried nothing but its path, to a page the site serves (gateway.served): P(attack) not counted "
                               "(clients.served_pages), by policy. A client that earned a block is blocked all the same.", ("policy",))
STATIC_FILES = metrics.counter("clefgate_policy_static_files_total",
                               "Requests whose P(attack) would have raised the risk to a challenge (or held a block's height) while the "
                               "request carried nothing but its path, to a file of the kind pages load (an image, font, style, script or "
                               "page; gateway.served.static_file): P(attack) not counted (policy.suspicion_needs_syntax), by policy. A "
                               "client that earned a block is blocked all the same.", ("policy",))
UNWITNESSED = metrics.counter("clefgate_model_unwitnessed_total",
                              "Requests the model would have blocked on P(attack) alone in which no value holds the syntax of the attack "
                              "kind it names (gateway.witness), challenged instead (policy.block_needs_syntax), by policy and kind; a "
                              "fallback rule that then agrees still blocks (clefgate_corroborated_blocks_total).", ("policy", "kind"))
LOOK_IGNORED = metrics.counter("clefgate_policy_bot_likeness_ignored_total",
                               "Requests a score rule with bot_likeness: ignore sent to the model that P(bad_bot) + P(attack) would have "
                               "challenged and P(attack) alone did not (forwarded instead), by policy and rule.", ("policy", "rule"))
ROLLOUT = metrics.gauge("clefgate_policy_rollout_percent", "Share of clients for which a policy's decisions are enforced.", ("policy",),
                        merge="min")

DEFAULT = "default"
# the words a verdict's reason carries when the model abstained (operators search the decision log for them)
UNFAMILIAR = "unfamiliar to the model"
# ... and when no value held the syntax of the kind the model named
NO_SYNTAX = "no value holds the syntax"
# ... and when no value held the syntax of any attack, so P(attack) was not counted (policy.suspicion_needs_syntax)
SYNTAXLESS = "no attack syntax in any value"
# ... and when a score rule said the client's look is no suspicion on its requests (bot_likeness: ignore)
BOT_LIKENESS_IGNORED = "bot-likeness ignored"
FALLBACK_MODES = ("forward", "challenge", "rules-only")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """One named policy with every inherited value filled in."""

    name: str
    block_attack: float
    block_risk: float | None
    block_attack_corroborated: float | None
    challenge_risk: float
    difficulty_min: int
    difficulty_max: int
    shadow: bool
    rollout_percent: float
    abstain_unfamiliar: bool = True
    block_needs_syntax: bool = True
    suspicion_needs_syntax: bool = True

    def difficulty(self, risk: float) -> int:
        """Proof-of-work bits for a challenge at ``risk`` (linear between the threshold and 1)."""
        span = 1.0 - self.challenge_risk
        share = 1.0 if span <= 0 else min(1.0, max(0.0, (risk - self.challenge_risk) / span))
        return int(self.difficulty_min + share * (self.difficulty_max - self.difficulty_min) + 0.5)  # half up


def _merge(name: str, base: PolicyConfig, override: RoutePolicyConfig | None) -> Thresholds:
    o = override or RoutePolicyConfig()
    return Thresholds(
        name=name,
        block_attack=base.block_attack if o.block_attack is None else o.block_attack,
        block_risk=base.block_risk if o.block_risk is None else o.block_risk,
        block_attack_corroborated=base.block_attack_corroborated if o.block_attack_corroborated is None else o.block_attack_corroborated,
        challenge_risk=base.challenge_risk if o.challenge_risk is None else o.challenge_risk,
        difficulty_min=base.difficulty_min if o.difficulty_min is None else o.difficulty_min,
        difficulty_max=base.difficulty_max if o.difficulty_max is None else o.difficulty_max,
        shadow=base.shadow if o.shadow is None else o.shadow,
        rollout_percent=base.rollout_percent if o.rollout_percent is None else o.rollout_percent,
        abstain_unfamiliar=base.abstain_unfamiliar if o.abstain_unfamiliar is None else o.abstain_unfamiliar,
        block_needs_syntax=base.block_needs_syntax if o.block_needs_syntax is None else o.block_needs_syntax,
        suspicion_needs_syntax=base.suspicion_needs_syntax if o.suspicion_needs_syntax is None else o.suspicion_needs_syntax,
    )


def check(cfg: PolicyConfig) -> list[str]:
    """Problems across fields (each field's own range is checked by the config schema)."""
    problems = []
    for name, t in [(DEFAULT, _merge(DEFAULT, cfg, None)), *((n, _merge(n, cfg, r)) for n, r in cfg.routes.items())]:
        where = "policy" if name == DEFAULT else f"policy.routes.{name}"
        if t.difficulty_min > t.difficulty_max:
            problems.append(f"{where}: difficulty_min ({t.difficulty_min}) is above difficulty_max ({t.difficulty_max})")
        if t.block_risk is not None and t.block_risk < t.challenge_risk:
            problems.append(f"{where}: block_risk ({t.block_risk}) is below challenge_risk ({t.challenge_risk}); "
                            "nothing would ever be challenged")
    return problems


class Policy:
    """Compiled ``cfg.policy``: probabilities -> Verdict, fallbacks, shadow and rollout."""

    def __init__(self, cfg: PolicyConfig | None = None) -> None:
        cfg = cfg or PolicyConfig()
        self.cfg = cfg
        self.default = _merge(DEFAULT, cfg, None)
        self.named = {name: _merge(name, cfg, override) for name, override in cfg.routes.items()}
        self._rollout_header = cfg.rollout_key[7:].lower() if cfg.rollout_key.startswith("header:") else ""
        # whether the site serves a request's page (gateway.served, set by the pipeline): P(attack) short of a block on a
        # request that carries nothing but its path is not counted there
        self.serves: Callable[[Features], bool] | None = None
        # verdicts for cached answers, by identity of (probabilities, request, explanation): a cached
        # answer hands many requests the same objects, and under a policy whose outcome does not
        # depend on the client (no partial rollout) they all get the same verdict
        self._memo: dict[tuple[int, int, int], tuple[Probabilities, ScoreRequest, Sequence[str], Verdict, tuple[str, str, str], bool]] = {}
        for t in (self.default, *self.named.values()):
            SHADOW.set(1.0 if t.shadow else 0.0, t.name)
            ROLLOUT.set(t.rollout_percent, t.name)

    @property
    def can_challenge(self) -> bool:
        """True when some policy can produce a CHALLENGE (so a challenge key is needed)."""
        return any(t.block_risk is None or t.challenge_risk < t.block_risk for t in (self.default, *self.named.values()))

    def thresholds(self, name: str | None) -> Thresholds:
        """The named policy, or the default for None or a name not configured."""
        if name is None:
            return self.default
        return self.named.get(name, self.default)

    def describe(self) -> str:
        t = self.default
        mode = "shadow" if t.shadow else ("enforce" if t.rollout_percent >= 100 else f"rollout {t.rollout_percent:g}%")
        also = "".join([*([f" or risk>={t.block_risk:g}"] if t.block_risk is not None else []),
                        *([f" or P(attack)>={t.block_attack_corroborated:g} with a fallback rule"] if t.block_attack_corroborated is not None else [])])
        return (f"policy block P(attack)>={t.block_attack:g} with a payload{also}, challenge risk>={t.challenge_risk:g} "
                f"(difficulty {t.difficulty_min}-{t.difficulty_max}), {mode}" + (f", {len(self.named)} named" if self.named else ""))

    # -- rollout

    def client_id(self, features: Features) -> str:
        if self._rollout_header:
            value = features.header_map.get(self._rollout_header)
            if value:
                return value
        return features.client_ip

    def in_rollout(self, features: Features, t: Thresholds) -> bool:
        """Stable per client: the same client is always in or out for a given percentage."""
        if t.rollout_percent >= 100.0:
            return True
        if t.rollout_percent <= 0.0:
            return False
        bucket = zlib.crc32(self.client_id(features).encode("utf-8", "surrogateescape")) % 10000
        return bucket < t.rollout_percent * 100

    # -- decisions

    def verdict(self, features: Features, probabilities: Probabilities, request: ScoreRequest, *,
                source: Source = Source.MODEL, explanation: Sequence[str] = ()) -> Verdict:
        """The model's probabilities as a verdict under the request's policy.

        ``probabilities`` is ``{"class": {"human", "good_bot", "bad_bot", "attack"}, "attack_kind": {...}}``;
        ``explanation`` carries the model's top contributing features when it provides them;
        ``source`` lets the decider mark cached decisions (``Source.CACHE``).
        """
        t = self.thresholds(request.policy)
        memo = source is Source.CACHE and (t.shadow or t.rollout_percent >= 100.0 or t.rollout_percent <= 0.0)
        if memo:
            key = (id(probabilities), id(request), id(explanation))
            hit = self._memo.get(key)
            if hit is not None and hit[0] is probabilities and hit[1] is request and hit[2] is explanation:
                DECISIONS.inc(*hit[4])
                if hit[5]:
                    LOOK_IGNORED.inc(hit[4][0], request.rule or "?")
                return hit[3]
        attack = attack_probability(probabilities)
        bot = bot_probability(probabilities)
        apart = "client" in probabilities  # two questions: P(bad_bot) of the class view is P(benign) x P(client = bad_bot)
        # a score rule's bot_likeness: ignore: the client's look is no suspicion here, P(attack) alone is the risk
        ignored = request.ignore_bot_likeness
        look = 0.0 if ignored else bot
        # P(attack) raises the risk only with a breakout somewhere in the request (policy.suspicion_needs_syntax): asked
        # where P(attack) short of a block is what would challenge the request, and at a block's height
        asks = t.suspicion_needs_syntax and t.block_needs_syntax
        high = attack >= t.block_attack
        gated = asks and not high and look < t.challenge_risk <= risk_of(attack, look, apart)
        if gated or high:
            memo = False  # the outcome depends on the request's values, not on the probabilities alone
        carriers = payload_carriers(features) if gated or high else ()
        # why P(attack) is not counted, the reason's words and the counter that counts it; None where it is counted
        uncounted: tuple[str, metrics.Counter] | None = None
        if carriers:
            # a payload none of whose values holds attack syntax: the model's suspicion of words, names and ids
            if asks and syntax_free(features):
                uncounted = f"{SYNTAXLESS} (policy.suspicion_needs_syntax)", SYNTAX_FREE
        elif gated or (high and asks):
            # a request carrying nothing but its path, which the site serves (short of a block): its path is a page, not a
            # probe (clients.served_pages); or a path to a file of the kind pages load (an image, a font, a style, a script,
            # a page), at any P(attack): it reads what any visitor reads (and in both, a path that holds no syntax: a
            # secret's or a backup's name is a probe whoever was served it)
            if gated and self.serves is not None and self.serves(features):
                uncounted = f"it carries nothing but its path, {SERVED_PAGE} (clients.served_pages)", SERVED_PAGES
            elif static_file(features):
                uncounted = f"it carries nothing but its path, to {STATIC_FILE} (policy.suspicion_needs_syntax)", STATIC_FILES
            if uncounted is not None and not syntax_free(features):
                uncounted = None
        discounted = uncounted is not None
        counted = 0.0 if discounted else attack
        risk = risk_of(counted, look, apart)
        spared = False
        difficulty: int | None = None
        payload: tuple[PayloadHit, ...] = ()
        if high and not discounted:
            # evidence needs a payload to point at
            kind = _top(probabilities.get("attack_kind"))
            named = f" ({kind[0]} {kind[1]:.2f})" if kind else ""
            shown = _shown(attack, (t.block_attack,), ())
            distance = distance_ratio(probabilities) if carriers and t.abstain_unfamiliar else None
            unfamiliar = distance is not None and distance > 1.0
            kinds = named_kinds(probabilities.get("attack_kind"))
            witness = syntax_witness(features, kinds) if carriers and t.block_needs_syntax and not unfamiliar else None
            if unfamiliar:
                # the model abstains: nothing but the model witnessed an attack (detectors and rules decided before it; a
                # fallback rule that agrees still blocks, Policy.corroborate), and the payload is unlike what it learned from
                action = Action.CHALLENGE
                difficulty = t.difficulty(max(risk, attack))
                reason = (f"P(attack)={shown} >= {t.block_attack:g}{named}; payload in {describe_carriers(carriers)}, but the request is "
                          f"{UNFAMILIAR} (its payload lies {distance:.2f}x the familiarity threshold from what the model was trained "
                          "on) and no detector or rule witnessed an attack: challenged")
                ABSTAINED.inc(t.name)
            elif carriers and t.block_needs_syntax and witness is None:
                # nothing in the request could break out of where it is put: the model's suspicion alone, not evidence
                action = Action.CHALLENGE
                difficulty = t.difficulty(max(risk, attack))
                reason = (f"P(attack)={shown} >= {t.block_attack:g}{named}; payload in {describe_carriers(carriers)}, but {NO_SYNTAX} "
                          f"of {' or '.join(kinds)} and no detector or rule witnessed an attack: challenged")
                UNWITNESSED.inc(t.name, kinds[0])
            elif carriers:
                action = Action.BLOCK
                reason = f"P(attack)={shown} >= {t.block_attack:g}{named}; payload in {describe_carriers(carriers)}"
                payload = tuple(PayloadHit("model", kind[0] if kind else "attack", location, fragment) for location, fragment in carriers[:3])
                if witness is not None:
                    reason += f"; {witness.describe()}"
                    others = (hit for hit in payload if hit.location != witness.location)
                    payload = (PayloadHit("model", witness.kind, witness.location, witness.fragment), *others)[:3]
            else:
                action = Action.CHALLENGE
                difficulty = t.difficulty(max(risk, attack))
                reason = (f"P(attack)={shown} >= {t.block_attack:g}{named}, but the request carries no payload "
                          "(no query, body, cookie or header value that can hold one): challenged")
                NO_PAYLOAD.inc(t.name)
        elif t.block_risk is not None and risk >= t.block_risk:
            action = Action.BLOCK
            reason = (f"{_risk_name(ignored, discounted)}={_shown(risk, (t.block_risk,), ())} >= {t.block_risk:g} "
                      f"(policy.block_risk{'' if ignored else ': blocks on look alone'})")
        elif risk >= t.challenge_risk:
            action = Action.CHALLENGE
            difficulty = t.difficulty(risk)
            reason = f"{_risk_name(ignored, discounted)}={_shown(risk, (t.challenge_risk,), _above(t))} >= {t.challenge_risk:g}"
        else:
            action = Action.FORWARD
            reason = f"{_risk_name(ignored, discounted)}={_shown(risk, (), (t.challenge_risk, *_above(t)))} < {t.challenge_risk:g}"
            spared = ignored and risk_of(counted, bot, apart) >= t.challenge_risk
        if uncounted is not None:
            # a forward, or a challenge on the look alone
            reason += f"; P(attack)={attack:.2f} not counted: {uncounted[0]}"
            uncounted[1].inc(t.name)
        if request.note:
            reason += f"; {request.note}"
        if ignored:
            # operators see why a client the model calls a bot went through: the rule, and the look it did not count
            reason += f"; {BOT_LIKENESS_IGNORED} by rule {request.rule or '?'} (P(bad_bot)={bot:.2f} not counted)"
            if spared:
                LOOK_IGNORED.inc(t.name, request.rule or "?")
        verdict = Verdict(action, source, f"{t.name} policy: {reason}", probabilities=probabilities, backend=request.backend,
                          rule=request.rule, difficulty=difficulty, explanation=(reason, *explanation), policy=t.name, payload=payload,
                          look_ignored=ignored)
        if not memo:
            return self._enforce(features, verdict, t)
        mode = self._mode(features, action, t)
        enforced = self._apply(verdict, t, mode)
        if len(self._memo) >= 4096:
            self._memo.clear()
        self._memo[key] = (probabilities, request, explanation, enforced, (t.name, action.value, mode), spared)
        DECISIONS.inc(t.name, action.value, mode)
        return enforced

    def corroborate(self, features: Features, verdict: Verdict, rules: Callable[[Features], Verdict | ScoreRequest | None]) -> Verdict:
        """``verdict`` (the model's, short of a block), or a block when a fallback rule corroborates it.

        A block needs P(attack) >= the policy's ``block_attack_corroborated`` *and* a
        fallback rule (``rules``: the compiled ``rules.fallback_files``) that blocks the
        request. The rules are read only for requests in that band, so a request the
        model finds harmless costs nothing more. Shadow mode and rollout apply as for any
        model verdict.
        """
        t = self.thresholds(verdict.policy)
        floor = t.block_attack_corroborated
        if floor is None or verdict.probabilities is None or (verdict.shadow_action or verdict.action) is Action.BLOCK:
            return verdict
        attack = attack_probability(verdict.probabilities)
        if attack < floor:
            return verdict
        outcome = rules(features)
        if not isinstance(outcome, Verdict) or outcome.action is not Action.BLOCK:
            return verdict
        rule = outcome.rule or "?"
        reason = f"P(attack)={attack:.2f} >= {floor:g} and fallback rule {rule} matched"
        if UNFAMILIAR in verdict.reason:
            reason += f" (the model alone abstained: the request is {UNFAMILIAR})"
        elif NO_SYNTAX in verdict.reason:
            reason += f" (the model alone challenged: {NO_SYNTAX} of the kind it named)"
        kind = _top(verdict.probabilities.get("attack_kind"))
        carriers = payload_carriers(features)[:1] or (("request", features.target[:80]),)
        payload = outcome.payload or tuple(PayloadHit(f"model+rule:{rule}", kind[0] if kind else "attack", location, fragment)
                                           for location, fragment in carriers)
        block = dataclasses.replace(verdict, action=Action.BLOCK, source=Source.MODEL if verdict.source is Source.SHADOW else verdict.source,
                                    reason=f"{t.name} policy: {reason}", rule=rule, status=outcome.status, difficulty=None,
                                    explanation=(reason, *outcome.explanation, *verdict.explanation[1:]), shadow_action=None,
                                    payload=payload)
        mode = self._mode(features, Action.BLOCK, t)
        CORROBORATED.inc(t.name, rule, mode)
        return self._apply(block, t, mode)

    def escalate(self, features: Features, verdict: Verdict, state: ClientState) -> Verdict:
        """A CHALLENGE for a client that earned a block, as a block (source ``client``), and so a FORWARD whose P(attack)
        would have challenged it but for want of attack syntax (``suspicion_needs_syntax``), since the site serves its
        page (``clients.served_pages``) or since it asks for a file of the kind pages load: :func:`spared_p_attack`; any
        other verdict as it is.

        Earned: the client (address + fingerprint) was served ``block_ignored_challenges`` challenges within
        ``ignored_challenges_window_s`` without solving one, or showed attack evidence within
        ``block_after_attack_s``; or its address was served ``block_ignored_challenges_per_address`` challenges in the
        window, whatever the fingerprint, and nobody there solved one (a client rotating its fingerprint). Only what
        would be challenged escalates: history never blocks a request the rules and the model let through, so a
        person behind the same address who is not challenged is never touched.
        Enforced only where the verdict's policy enforces (shadow and rollout leave the challenge standing).
        """
        if verdict.action is not Action.CHALLENGE and not (verdict.action is Action.FORWARD and spared_p_attack(verdict)):
            return verdict
        cfg = self.cfg
        key = state.key(features)
        why = reason = ""
        if cfg.block_after_attack_s > 0:
            evidence = state.history.attack(key, cfg.block_after_attack_s)
            if evidence is not None:
                why, reason = "attack_evidence", f"this client showed attack evidence {evidence[0]:.0f} s ago ({evidence[1]})"
        if not why and cfg.block_ignored_challenges:
            unsolved = state.history.unsolved(key, cfg.ignored_challenges_window_s)
            if unsolved >= cfg.block_ignored_challenges:
                why = "ignored_challenges"
                reason = (f"this client was challenged {unsolved} times in {cfg.ignored_challenges_window_s:g} s "
                          "without solving one")
        if not why and cfg.block_ignored_challenges_per_address:
            unsolved = state.history.unsolved(address_of(key), cfg.ignored_challenges_window_s)
            if unsolved >= cfg.block_ignored_challenges_per_address:
                why = "ignored_challenges_address"
                reason = (f"this address was challenged {unsolved} times in {cfg.ignored_challenges_window_s:g} s, whatever the "
                          "browser, without anyone solving one")
        if not why:
            return verdict
        t = self.thresholds(verdict.policy)
        mode = self._mode(features, Action.BLOCK, t)
        EARNED.inc(why, mode)
        if mode != "enforce":
            return verdict
        return dataclasses.replace(verdict, action=Action.BLOCK, source=Source.CLIENT, reason=f"client blocked: {reason}; would otherwise: "
                                   f"{verdict.reason}", status=None, difficulty=None, shadow_action=None,
                                   explanation=(reason, *verdict.explanation))

    def table(self) -> str:
        """The default policy as evidence -> action, one line each (``clefgate check`` prints it; docs/policy.md carries it)."""
        t, cfg = self.default, self.cfg
        rows = [("a rule that blocks (rules/*.yaml: scanners, rate limits, ...)", "block, with the rule's status"),
                ("a payload detector's hit (injection signatures, libinjection)", "block, naming detector, location, fragment")]
        rows.append((f"P(attack) >= {t.block_attack:g} and the request carries a payload", "block, naming where the payload is"))
        if t.block_attack_corroborated is not None:
            rows.append((f"P(attack) >= {t.block_attack_corroborated:g} and an injection signature agrees", "block (two witnesses)"))
        if cfg.block_ignored_challenges:
            rows.append((f"a client challenged {cfg.block_ignored_challenges} times in {cfg.ignored_challenges_window_s:g} s without solving",
                         "block instead of another challenge"))
        if cfg.block_ignored_challenges_per_address:
            rows.append((f"an address challenged {cfg.block_ignored_challenges_per_address} times in {cfg.ignored_challenges_window_s:g} s, "
                         "any browser, nobody solving", "block instead of another challenge"))
        if cfg.block_after_attack_s:
            rows.append((f"a client with attack evidence in the last {cfg.block_after_attack_s:g} s",
                         "block what would be challenged"))
        if t.block_risk is not None:
            rows.append((f"P(bad_bot) + P(attack) >= {t.block_risk:g} (opt-in block_risk)", "block on look alone"))
        if t.suspicion_needs_syntax and t.block_needs_syntax:
            rows.append((f"P(attack) >= {t.block_attack:g} with a payload, but {SYNTAXLESS}", "P(attack) not counted: the look alone decides"))
        if t.abstain_unfamiliar:
            rows.append((f"P(attack) >= {t.block_attack:g} with a payload, but the request is {UNFAMILIAR}", "challenge (the model abstains)"))
        if t.block_needs_syntax:
            rows.append((f"P(attack) >= {t.block_attack:g} with a payload, but {NO_SYNTAX} of the kind named", "challenge (suspicion only)"))
        if t.suspicion_needs_syntax and t.block_needs_syntax:
            rows.append((f"P(attack) < {t.block_attack:g} raising the risk, but {SYNTAXLESS}", "P(attack) not counted: the look alone decides"))
            rows.append((f"P(attack) < {t.block_attack:g} raising the risk, but a bare path to {SERVED_PAGE}",
                         "P(attack) not counted: the look alone decides"))
            rows.append((f"any P(attack) raising the risk, but a bare path to {STATIC_FILE}", "P(attack) not counted: the look alone decides"))
        rows += [(f"P(attack) >= {t.block_attack:g}, no payload in the request", "challenge"),
                 (f"P(bad_bot) + P(attack) >= {t.challenge_risk:g} (bot-likeness, client statistics)",
                  f"challenge, difficulty {t.difficulty_min}-{t.difficulty_max} bits rising with risk"),
                 (f"P(attack) >= {t.challenge_risk:g} under a rule with bot_likeness: ignore (API clients)",
                  "challenge (the client's look is not counted)"),
                 ("a rule that challenges", "challenge"),
                 ("a valid pass cookie, behaviour unchanged", "forward instead of a challenge"),
                 ("anything else", "forward")]
        width = max(len(e) for e, _ in rows)
        mode = "shadow: nothing enforced, all logged" if t.shadow else (
            "enforced" if t.rollout_percent >= 100 else f"enforced for {t.rollout_percent:g}% of clients")
        lines = [f"{'evidence':<{width}}  action", f"{'-' * width}  {'-' * 6}", *(f"{e:<{width}}  {a}" for e, a in rows),
                 f"(default policy, {mode}; a client is its address and browser fingerprint)"]
        return "\n".join(lines) + "\n"

    def fallback_verdict(self, features: Features, request: ScoreRequest, mode: str) -> Verdict:
        """The verdict when the model is unavailable (breaker open, timeout, error).

        ``forward`` lets the request through; ``challenge`` challenges it at the
        policy's lowest difficulty (where the no-JavaScript path is offered);
        ``rules-only`` forwards what the rules did not settle, as a gateway without a
        model would. Shadow mode and rollout apply as for model verdicts.
        """
        t = self.thresholds(request.policy)
        if mode == "challenge":
            verdict = Verdict(Action.CHALLENGE, Source.FALLBACK, "model unavailable; fallback: challenge", backend=request.backend,
                              rule=request.rule, difficulty=t.difficulty_min, policy=t.name,
                              explanation=("the model did not answer in time; challenged as configured",))
        elif mode in ("forward", "rules-only"):
            reason = ("model unavailable; fallback: forward" if mode == "forward"
                      else "model unavailable; rules only: no rule settled this request, forwarded")
            verdict = Verdict(Action.FORWARD, Source.FALLBACK, reason, backend=request.backend, rule=request.rule, policy=t.name)
        else:
            raise ValueError(f"unknown fallback mode {mode!r} (one of {', '.join(FALLBACK_MODES)})")
        return self._enforce(features, verdict, t)

    def as_configured(self, features: Features, verdict: Verdict) -> Verdict:
        """``verdict`` (a fallback rule's, standing in for the model) under its policy's shadow mode and rollout.

        Not counted again: the request was counted when the model's fallback was decided.
        """
        t = self.thresholds(verdict.policy)
        return self._apply(verdict, t, self._mode(features, verdict.action, t))

    def _enforce(self, features: Features, verdict: Verdict, t: Thresholds) -> Verdict:
        mode = self._mode(features, verdict.action, t)
        DECISIONS.inc(t.name, verdict.action.value, mode)
        return self._apply(verdict, t, mode)

    def _mode(self, features: Features, action: Action, t: Thresholds) -> str:
        """enforce, shadow or rollout (the client is outside the rollout)."""
        if action is Action.FORWARD:
            return "enforce"
        if t.shadow:
            return "shadow"
        return "enforce" if self.in_rollout(features, t) else "rollout"

    def _apply(self, verdict: Verdict, t: Thresholds, mode: str) -> Verdict:
        if mode == "enforce":
            return verdict
        action = verdict.action
        why = "shadow mode" if mode == "shadow" else f"client outside the {t.rollout_percent:g}% rollout"
        return Verdict(Action.FORWARD, Source.SHADOW, f"{why}; would {action.value}: {verdict.reason}",
                       probabilities=verdict.probabilities, backend=verdict.backend, rule=verdict.rule, status=verdict.status,
                       difficulty=verdict.difficulty, explanation=verdict.explanation, policy=verdict.policy, shadow_action=action)


def spared_p_attack(verdict: Verdict) -> bool:
    """True for a model verdict whose P(attack) was not counted: no attack syntax in any value, or nothing but the path
    of a page the site serves or of a file pages load (a client that earned a block is blocked all the same)."""
    reason = verdict.reason
    return SYNTAXLESS in reason or SERVED_PAGE in reason or STATIC_FILE in reason


def _risk_name(ignored: bool, discounted: bool = False) -> str:
    """What the risk compared with the thresholds is: the payload question alone under bot_likeness: ignore, the client
    question alone (or nothing) when P(attack) is not counted (no attack syntax, a page the site serves, a file pages
    load)."""
    if discounted:
        return "risk" if ignored else "P(bad_bot)"
    return "P(attack)" if ignored else "P(bad_bot)+P(attack)"


def _above(t: Thresholds) -> tuple[float, ...]:
    """The block thresholds a risk short of a block stays under."""
    return (t.block_risk,) if t.block_risk is not None else ()


def _shown(value: float, at_least: Sequence[float], below: Sequence[float]) -> str:
    """``value`` with two decimals, or as many more as it takes for the printed number to compare with the
    thresholds as the value did (0.4996 is not shown as "0.50 < 0.5", nor 0.9599 as "0.96" under a 0.96 block)."""
    for digits in (2, 3, 4, 6):
        text = f"{value:.{digits}f}"
        shown = float(text)
        if all(shown >= x for x in at_least) and all(shown < x for x in below):
            return text
    return repr(value)


def _top(options: Mapping[str, float] | None) -> tuple[str, float] | None:
    if not options:
        return None
    name = max(options, key=lambda k: options[k])
    return name, float(options[name])
