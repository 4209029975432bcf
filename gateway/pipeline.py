"""The compiled decision chain: one ordered tuple of named stages, and its composition root.

A ``Pipeline`` is immutable once built; a reload builds a new one and swaps it in
whole, so a request decides with exactly one version of rules, model and policy.

The chain is ``Pipeline.stages``, compiled once when the pipeline is made, in this order
(a stage that is not configured is left out)::

    overrides -> rules -> payload -> default -> model

Each :class:`Stage` is ``run(features, pending)``, where ``pending`` is the
``ScoreRequest`` an earlier stage asked for (a ``score`` rule, ``rules.default: score``)
or None. It answers with a ``Verdict`` (decided: no later stage runs), an awaitable of
one (the model: decided once awaited), a ``ScoreRequest`` (the model is to decide: it
becomes ``pending`` for the stages after it), or None (not its call). ``decide`` only
runs them in order, so it is synchronous whenever a stage before the model settles the
request (the common case, and the one the proxy handles without creating a task), the
decision cache already knows it or the model answers it at once; only a request that
waits for the model returns an awaitable. The last stage always answers.

What each stage does:

- ``overrides``: the console's temporary allows and blocks (their verdict stands as it is);
- ``rules``: the rule table (``rules.files``); a ``score`` rule's answer goes on as ``pending``; a rule that
  challenges, or allows with ``inspect: true``, is overruled by the payload detectors' evidence (a block), so naming
  a crawler, hitting a rate, sending a credentials header or asking for a feed's path shields no injection (where the
  request's policy mode only logs that block, shadow or rollout, the rule's own verdict stands); any other allow wins.
  A rule's challenge of a request that carries a payload then goes on as ``pending`` with the challenge attached
  (``rules.score_challenged``): the model decides whether its payload is an attack, and short of a block the rule's
  challenge stands, so who asks shields no payload from the model either;
- ``payload``: the payload detectors, on what the rules left open: attack evidence
  blocks with or without the model, under the request's policy mode (shadow, rollout);
- ``default``: ``rules.default`` for a request no rule matched, counted by outcome;
- ``model``: the score stage (decider + policy, ``ScoreStage``) under the route's named
  policy, its cache answering synchronously; a verdict short of a block that a fallback
  rule corroborates is blocked (``Policy.corroborate``), and when the model cannot
  answer (or there is none) the fallback rules (``rules.fallback_files``) decide, their
  injection signatures read value by value as the payload stage reads them.

A challenge decided by the rules, the default or the model is turned into a forward for
a client holding a valid pass, and into a block for a client that earned one
(``Policy.escalate``). ``serve``, ``clefgate eval`` and ``clefgate replay`` all drive a
pipeline made by :func:`build`, so they cannot disagree about the order.

:func:`build` is where the chain is put together from a ``Config``: it compiles the
rule files, the one ``Policy`` of the runtime (handed to the model stage as well) and
the challenge service, checks everything that spans sections (rule backends, route
policies, challenge keys), and raises one ``ConfigError`` listing every problem.
Per-client state (windows, rate buckets, solved challenge nonces) is handed from the
previous pipeline to the next on reload.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from gateway import metrics
from gateway.backends import CompiledRoute, compile_routes, match_route
from gateway.carriers import payload_carriers
from gateway.challenge import PREFIX, ChallengeService, Signer, load_signer
from gateway.clients import ClientState, address_of
from gateway.config import Config, ConfigError
from gateway.features import ClientStats, Features
from gateway.payload import PayloadInspector, signatures_for
from gateway.policy import Policy, spared_p_attack
from gateway.policy import check as check_policy
from gateway.rdns import LookupNeeded
from gateway.rules import RuleFileError, RuleTable, from_config
from gateway.verdict import ALLOW_ALL, Action, LocalResponse, PayloadHit, ScoreRequest, Source, Verdict


class RuleEvaluator(Protocol):
    """A compiled rule table (``gateway.rules.RuleTable``)."""

    inspected: frozenset[str]  # the allow and route rules whose forwards the payload detectors still read (inspect: true)

    def evaluate(self, features: Features, resume: tuple[object, ...] | None = None) -> Verdict | ScoreRequest | None:
        """The first matching rule's outcome; ``resume``: go on where a ``LookupNeeded`` stopped it."""


class ScoreStage(Protocol):
    """The model side: decider + policy; always returns a verdict (fallbacks included).

    A stage may also have ``decide_cached(features, request, client) -> Verdict | None``:
    a synchronous answer for requests it already knows or can score at once (``client`` is the
    client's window when ``features.client`` is unset; a fallback verdict when the model failed),
    tried before ``decide``.
    """

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict: ...


# the model stage for a pipeline's policy (``gateway.decider.Decider.stage``): :func:`build` calls it once, with the one Policy it compiled
ScoreStageMaker = Callable[[Policy], ScoreStage]


class LocalEndpoints(Protocol):
    """Requests under the reserved prefix (``/.clefgate/``), e.g. the challenge verify endpoint."""

    prefix: str

    def handle(self, features: Features, body: bytes) -> LocalResponse | Awaitable[LocalResponse]: ...


class PageRenderer(Protocol):
    """Turns a CHALLENGE or BLOCK verdict into the page the client gets."""

    def challenge(self, verdict: Verdict, features: Features) -> LocalResponse: ...

    def block(self, verdict: Verdict, features: Features) -> LocalResponse: ...


class OverrideStage(Protocol):
    """Temporary allows and blocks (the console's): a verdict for a client they cover, else None."""

    def match(self, features: Features) -> Verdict | None: ...


ResponseObserver = Callable[[Features, Verdict, int], None]
# what a stage answers: decided (a verdict, or the model's awaitable one), "ask the model", or not its call
StageOutcome = Verdict | Awaitable[Verdict] | ScoreRequest | None
StageRun = Callable[[Features, ScoreRequest | None], StageOutcome]
# the last stage (the model's) always decides
FinalRun = Callable[[Features, ScoreRequest | None], Verdict | Awaitable[Verdict]]


@dataclass(frozen=True, slots=True)
class Stage:
    """One named step of the decision chain (see the module docstring for what it may answer)."""

    name: str
    run: StageRun


NO_MODEL = Verdict(Action.FORWARD, Source.DEFAULT, "model not configured; forwarded")
FALLBACK_RULED = metrics.counter("clefgate_fallback_rule_decisions_total",
                                 "Requests the model could not score that a fallback rule (rules.fallback_files) decided, by rule and action.",
                                 ("rule", "action"))
RULE_CHALLENGES_BLOCKED = metrics.counter(
    "clefgate_rule_challenges_blocked_total", "Requests a rule challenged whose payload the model (or a fallback rule standing in for it) "
    "found an attack, blocked instead (rules.score_challenged), by rule.", ("rule",))
DEFAULTS = metrics.counter("clefgate_rule_defaults_total", "Requests no rule matched, by what the default (rules.default) did.",
                           ("outcome",))


@dataclass(frozen=True)
class Pipeline:
    """One compiled version of everything that decides.

    The fields are the parts; ``stages`` is the decision chain compiled from them when
    the pipeline is made (``dataclasses.replace`` makes a new pipeline, compiled anew).
    ``default`` is what happens when no rule matches: a named, counted verdict or a
    ``ScoreRequest`` (ask the model). ``observers`` are told each response status
    (per-client windows, challenge bookkeeping); they must be cheap and never raise.
    ``passes`` turns a CHALLENGE into FORWARD for a client holding a valid pass cookie
    (and re-challenges it when its behaviour drifted).
    """

    rules: RuleEvaluator | None = None
    scorer: ScoreStage | None = None
    default: Verdict | ScoreRequest = ALLOW_ALL
    # rules.fallback_files: decide a request the model could not answer (or with no model), and
    # corroborate a model verdict whose P(attack) reaches policy.block_attack_corroborated
    fallback_rules: RuleEvaluator | None = None
    pages: PageRenderer | None = None
    local: LocalEndpoints | None = None
    observers: tuple[ResponseObserver, ...] = field(default=())
    # bytes of request body the decision needs before it is made (0: decide on the head)
    body_prefix_bytes: int = 0
    description: str = "allow-all"
    passes: ChallengeService | None = None
    state: ClientState | None = None
    # the runtime's one Policy: the model stage decides with it too (build hands it to the stage's maker)
    policy: Policy | None = None
    route_policies: tuple[CompiledRoute, ...] = ()
    # payload detectors (gateway.payload), run on what the rules leave open, before the model; block_status: their block's status
    inspector: PayloadInspector | None = None
    block_status: int = 403
    # rules.score_challenged: a rule's challenge of a request with a payload is scored by the model too (a block wins)
    score_challenged: bool = False
    # temporary allows and blocks set in the console (gateway.console.Overrides): consulted before anything else
    overrides: OverrideStage | None = None
    # the decision chain, in order (compiled from the fields above)
    stages: tuple[Stage, ...] = field(init=False, repr=False, compare=False)
    # what decide calls: the runs of the stages before the last, and the last (the model's, which always decides)
    _runs: tuple[StageRun, ...] = field(init=False, repr=False, compare=False)
    _last: FinalRun = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        first, last = _compile(self)
        object.__setattr__(self, "stages", (*first, last))
        object.__setattr__(self, "_runs", tuple(stage.run for stage in first))
        object.__setattr__(self, "_last", last.run)

    def decide(self, features: Features) -> Verdict | Awaitable[Verdict]:
        """The verdict for a request: a ``Verdict`` when a stage before the model settles it, else an awaitable (the model's,
        or the rules' when a ``reverse_dns`` condition waits for a lookup)."""
        return _run_stages(self._runs, self._last, features)

    def stage(self, name: str) -> Stage:
        """The stage called ``name`` (KeyError when this pipeline has none)."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    def policy_for(self, features: Features) -> str | None:
        """The named policy of the route a request falls under: the route that also picks its backend."""
        return _route_policy(self.route_policies, features)

    def routed(self, features: Features, request: ScoreRequest) -> ScoreRequest:
        """``request`` under the named policy of its route, unless it names one of its own (a ``score`` rule's)."""
        return _routed(self.route_policies, features, request)

    def observe(self, features: Features, verdict: Verdict, status: int) -> None:
        """Tell every observer how a request ended (call once per answered request)."""
        for observer in self.observers:
            observer(features, verdict, status)

    async def start(self) -> None:
        """Start background work (the shared-state sync task when Redis is configured)."""
        if self.state is not None:
            await self.state.start()

    async def close(self, successor: Pipeline | None = None) -> None:
        """Stop background work, unless ``successor`` (the pipeline replacing this one on reload) took the state over."""
        if self.state is not None and (successor is None or successor.state is not self.state):
            await self.state.close()


def _compile(p: Pipeline) -> tuple[tuple[Stage, ...], Stage]:
    """The stages of ``p`` in order (see the module docstring): those before the model's, and the model's.

    Each stage is a closure over the parts it reads, fetched here once rather than on every
    request (and never over the pipeline itself, so a replaced pipeline is freed when the
    last request holding it ends); a challenge goes through ``honoured`` only when one is decided.
    """
    policy, passes, state, fallback_rules = p.policy, p.passes, p.state, p.fallback_rules
    routes, block_status = p.route_policies, p.block_status
    challenge, forward = Action.CHALLENGE, Action.FORWARD
    honour = passes.honour if passes is not None else None
    escalate = functools.partial(policy.escalate, state=state) if policy is not None and state is not None else None

    def honoured(verdict: Verdict, features: Features) -> Verdict:
        """A challenge becomes a forward for a client holding a valid pass, and a block for a client that earned one
        (``Policy.escalate``), as does a forward that P(attack) would have challenged but for want of attack syntax
        (``policy.suspicion_needs_syntax``), since the site serves its page (``clients.served_pages``) or since it asks for a
        file of the kind pages load; other verdicts stand."""
        if verdict.action is challenge:
            if honour is not None:
                verdict = honour(verdict, features)
            if escalate is not None and verdict.action is challenge:
                return escalate(features, verdict)
        elif escalate is not None and verdict.action is forward and spared_p_attack(verdict):
            return escalate(features, verdict)
        return verdict

    def without_model(features: Features, fallback: Verdict) -> Verdict:
        """``fallback`` unless a fallback rule decides the request the model could not score."""
        outcome = fallback_rules.evaluate(features) if fallback_rules is not None else None
        if not isinstance(outcome, Verdict) or outcome.action is Action.FORWARD:
            return fallback
        FALLBACK_RULED.inc(outcome.rule or "?", outcome.action.value)
        backend = outcome.backend or fallback.backend
        ruled = dataclasses.replace(outcome, reason=f"{outcome.reason} (model unavailable: fallback rule)", backend=backend,
                                    model=fallback.model, decision_ms=fallback.decision_ms, policy=fallback.policy)
        # the rule stands in for the model, so the request's policy decides whether it is enforced (shadow, rollout)
        return ruled if policy is None else policy.as_configured(features, ruled)

    stages: list[Stage] = []
    if p.overrides is not None:
        match = p.overrides.match

        def overrides(features: Features, pending: ScoreRequest | None) -> Verdict | None:
            return match(features)
        stages.append(Stage("overrides", overrides))

    # the stages after the rules, as Pipeline.decide runs them (set below, once they are all compiled): a request whose
    # address a reverse_dns rule needed looked up goes on through them once the table resumes
    after_rules: list[Callable[[Features, ScoreRequest | None], Verdict | Awaitable[Verdict]]] = []
    if p.rules is not None:
        evaluate = p.rules.evaluate
        inspect_ruled = p.inspector.inspect if p.inspector is not None else None
        rules_at = len(stages)

        inspected = p.rules.inspected

        # the score requests a rule's outcome turns into, one per outcome (the policy memoises by the request's identity):
        # a score rule's request with its look counted again, and a rule's challenge of a request with a payload as a
        # question for the model (rules.score_challenged)
        counted: dict[int, tuple[object, ScoreRequest]] = {}
        rescored: dict[int, tuple[object, ScoreRequest]] = {}
        rescore = p.scorer is not None and p.score_challenged

        def derived(made: dict[int, tuple[object, ScoreRequest]], outcome: Verdict | ScoreRequest,
                    make: Callable[[], ScoreRequest]) -> ScoreRequest:
            hit = made.get(id(outcome))
            if hit is None or hit[0] is not outcome:
                if len(made) >= 1024:
                    made.clear()
                hit = made[id(outcome)] = (outcome, make())
            return hit[1]

        def scored(outcome: Verdict) -> ScoreRequest:
            rule = outcome.rule or "?"
            return derived(rescored, outcome, lambda: ScoreRequest(
                rule=outcome.rule, policy=outcome.policy, backend=outcome.backend, reason=f"challenged by rule {rule}; payload scored",
                note=f"rule {rule} challenged it, and its payload was scored (rules.score_challenged)", challenge=outcome))

        def ruled(features: Features, outcome: Verdict | ScoreRequest | None) -> Verdict | ScoreRequest | None:
            if not isinstance(outcome, Verdict):
                if outcome is not None and outcome.ignore_bot_likeness and state is not None \
                        and state.history.paged_within(state.key(features), PAGED_FOR_S):
                    # the client claimed to ask for data and was answered pages: its look counts again
                    asked = outcome
                    return derived(counted, asked, lambda: dataclasses.replace(
                        asked, ignore_bot_likeness=False,
                        note=f"its look counts under rule {asked.rule or '?'}: the site answered it pages where it asked for data"))
                return outcome
            # a rule that challenges the client (a crawler's name, its rate), or lets it through on a claim anyone can
            # make (inspect: true: a feed's path, a credentials header), does not shield what it sends: attack
            # evidence in the request blocks it, as it would had no rule matched; any other allow wins
            action = outcome.action
            if inspect_ruled is not None and (action is challenge or (action is forward and outcome.rule in inspected)):
                hits = inspect_ruled(features)
                if hits:
                    detected = _detected(policy, routes, block_status, features, None, hits)
                    if detected.action is not forward:
                        return detected
                    # shadow or rollout: the block is logged, not enforced, and the rule's own verdict stands: a forward
                    # goes to its rule's backend, and a challenge is not lifted by attack syntax added to the request
                    if action is forward:
                        return dataclasses.replace(detected, backend=outcome.backend, rule=outcome.rule)
            if action is challenge:
                # who asks is no shield for what is asked: a payload the model finds an attack blocks it (the rule's challenge
                # stands short of that, Pipeline.score_challenged)
                if rescore and payload_carriers(features):
                    return scored(outcome)
                return honoured(outcome, features)
            return outcome

        async def looked_up(needed: LookupNeeded, features: Features) -> Verdict:
            """The table resumed where it stopped once the address is looked up, then the stages after it."""
            await needed.names.lookup(needed.address)
            outcome = ruled(features, evaluate(features, needed.resume))
            verdict = outcome if isinstance(outcome, Verdict) else after_rules[0](features, outcome)
            return verdict if isinstance(verdict, Verdict) else await verdict

        def rules(features: Features, pending: ScoreRequest | None) -> Verdict | ScoreRequest | Awaitable[Verdict] | None:
            try:
                return ruled(features, evaluate(features))
            except LookupNeeded as needed:
                return looked_up(needed, features)
        stages.append(Stage("rules", rules))

    if p.inspector is not None:
        inspect = p.inspector.inspect

        def payload(features: Features, pending: ScoreRequest | None) -> Verdict | None:
            # attack evidence decides with or without the model (what a rule let through or challenged was read in the rules
            # stage)
            if pending is not None and pending.challenge is not None:
                return None
            hits = inspect(features)
            return _detected(policy, routes, block_status, features, pending, hits) if hits else None
        stages.append(Stage("payload", payload))

    otherwise = p.default
    count = DEFAULTS.inc
    label = otherwise.action.value if isinstance(otherwise, Verdict) else "score"  # an enum's .value costs a call per request
    challenged = otherwise if isinstance(otherwise, Verdict) and otherwise.action is challenge else None

    def default(features: Features, pending: ScoreRequest | None) -> Verdict | ScoreRequest | None:
        if pending is not None:
            return None
        count(label)
        return otherwise if challenged is None else honoured(challenged, features)
    stages.append(Stage("default", default))

    if p.scorer is None:
        def no_model(features: Features, pending: ScoreRequest | None) -> Verdict:
            """No model: forwarded (``NO_MODEL``), unless a fallback rule decides."""
            backend = pending.backend if pending is not None else None
            forward = NO_MODEL if backend is None else dataclasses.replace(NO_MODEL, backend=backend)
            return forward if fallback_rules is None else honoured(without_model(features, forward), features)
        if p.rules is not None:
            after_rules.append(_resumed(stages, no_model, rules_at + 1))
        return tuple(stages), Stage("model", no_model)

    scorer = p.scorer
    # the score stage's synchronous cache lookup, when it has one (ScoreStage.decide_cached)
    cached: Callable[[Features, ScoreRequest, ClientStats | None], Verdict | None] | None = getattr(scorer, "decide_cached", None)
    # a model verdict short of a block, blocked when a fallback rule corroborates it
    corroborate = (functools.partial(policy.corroborate, rules=fallback_rules.evaluate)
                   if policy is not None and fallback_rules is not None else None)

    def ruled_challenge(features: Features, verdict: Verdict, challenged: Verdict) -> Verdict:
        """A rule's challenge of a scored request: the model's block, else the rule's challenge, honoured; the challenge
        carries what the model said of the payload (its probabilities, version, input and reason), so that the decision
        log and the console show the scores and the retraining feed keeps the example."""
        if verdict.action is Action.BLOCK:
            RULE_CHALLENGES_BLOCKED.inc(challenged.rule or "?")
            return verdict
        if verdict.probabilities is not None:
            challenged = dataclasses.replace(challenged, probabilities=verdict.probabilities, model=verdict.model,
                                             decision_ms=verdict.decision_ms, model_input=verdict.model_input,
                                             explanation=(*challenged.explanation, f"the model, short of a block: {verdict.reason}"))
        return honoured(challenged, features)

    async def score(features: Features, request: ScoreRequest) -> Verdict:
        """The scorer's verdict, corroborated (the fallback rules' when the model could not answer), honoured."""
        verdict = await scorer.decide(features, request)
        if verdict.source is Source.FALLBACK:
            if fallback_rules is not None:
                verdict = without_model(features, verdict)
        elif corroborate is not None:
            verdict = corroborate(features, verdict)
        if request.challenge is not None:
            return ruled_challenge(features, verdict, request.challenge)
        return honoured(verdict, features)

    def model(features: Features, pending: ScoreRequest | None) -> Verdict | Awaitable[Verdict]:
        """The route's policy, the client's window, the cache's synchronous answer, else the scorer (awaited)."""
        request = pending if pending is not None else ScoreRequest()
        if routes:
            request = _routed(routes, features, request)
        client = features.client
        if client is None and state is not None:
            # the model reads the client's window (address + fingerprint) as it was before this request
            client = state.stats(state.key(features))
        if cached is not None:
            # a repeated request (the flood's common case), or one the model answers at once, is decided here, without a task
            verdict = cached(features, request, client)
            if verdict is not None:
                if verdict.source is Source.FALLBACK:
                    if fallback_rules is not None:
                        verdict = without_model(features, verdict)
                elif corroborate is not None:
                    verdict = corroborate(features, verdict)
                if request.challenge is not None:
                    return ruled_challenge(features, verdict, request.challenge)
                return honoured(verdict, features) if verdict.action is not Action.BLOCK else verdict
        if client is not features.client:
            features = dataclasses.replace(features, client=client)
        return score(features, request)
    if p.rules is not None:
        after_rules.append(_resumed(stages, model, rules_at + 1))
    return tuple(stages), Stage("model", model)


def _resumed(stages: list[Stage], last: FinalRun, start: int) -> FinalRun:
    """A function deciding a request with ``stages[start:]`` and then ``last``, given what the stages before left pending,
    as :meth:`Pipeline.decide` does."""
    return functools.partial(_run_stages, tuple(stage.run for stage in stages[start:]), last)


def _run_stages(runs: tuple[StageRun, ...], last: FinalRun, features: Features, pending: ScoreRequest | None = None) -> Verdict | Awaitable[Verdict]:
    for run in runs:
        outcome = run(features, pending)
        if outcome is None:
            continue
        if isinstance(outcome, ScoreRequest):
            pending = outcome
            continue
        return outcome
    return last(features, pending)


def _detected(policy: Policy | None, routes: tuple[CompiledRoute, ...], status: int, features: Features, outcome: ScoreRequest | None,
              hits: tuple[PayloadHit, ...]) -> Verdict:
    """A block for the payload detectors' hits, under the request's policy mode (shadow, rollout)."""
    named = outcome.policy if outcome is not None else None
    verdict = Verdict(Action.BLOCK, Source.DETECTOR, f"attack payload: {hits[0].describe()}", backend=outcome.backend if outcome else None,
                      status=status, explanation=tuple(h.describe() for h in hits), payload=hits,
                      policy=named or (_route_policy(routes, features) if routes else None))
    if policy is None:
        return verdict
    applied = policy.as_configured(features, verdict)
    return applied if applied.payload == hits else dataclasses.replace(applied, payload=hits)


def _route_policy(routes: tuple[CompiledRoute, ...], features: Features) -> str | None:
    route = match_route(routes, features.host, features.path)
    return None if route is None else route.policy


def _routed(routes: tuple[CompiledRoute, ...], features: Features, request: ScoreRequest) -> ScoreRequest:
    if request.policy is None and routes:
        policy = _route_policy(routes, features)
        if policy is not None:
            return dataclasses.replace(request, policy=policy)
    return request


# how long a client the site answered pages where it claimed to ask for data (a score rule's bot_likeness: ignore) has its
# look counted again
PAGED_FOR_S = 3600.0
# the body a credential submission is recognised by (a login form's fields come first and are short)
LOGIN_BODY_BYTES = 4096


def client_recorder(state: ClientState) -> ResponseObserver:
    """The observer feeding per-client state (keyed by address + fingerprint), blind to the gateway's own pages.

    Forwarded requests feed the client's window. Block and challenge pages (and
    ``/.clefgate/`` answers) are not recorded there, so a client the gateway refused cannot
    climb its own 4xx ratio and trip further rules: the gateway never feeds its own
    detectors (the 403-loop of log-driven bouncers). What can earn a block is kept apart:
    a challenge page served to a request that could solve it (not a fetch/XHR), and a block
    with attack evidence (a verdict naming a payload, or a payload detector's).
    Every answered request notes its fingerprint at its address (shared addresses), every credential
    submission its endpoint (``gateway.logins``: the site's answer where it was forwarded), and every forwarded GET or
    HEAD the site answered with a 2xx or 304 its page (``gateway.served``).
    """
    record = state.record
    history = state.history
    see = state.addresses.see
    logins = state.logins
    served = state.pages.observe

    def observe(features: Features, verdict: Verdict, status: int) -> None:
        key = state.key(features)
        see(key)
        action = verdict.action
        if features.body_prefix and features.method != "GET":
            logins.observe(features, status, action is Action.FORWARD)
        if action is Action.FORWARD:
            if not features.path.startswith(PREFIX):
                record(key, features.path, status)
                served(features, status, verdict.reason)
        elif action is Action.CHALLENGE:
            if _could_solve(features):
                history.challenged(key)
                history.challenged(address_of(key))
        elif verdict.payload or verdict.source is Source.DETECTOR:
            hit = verdict.payload[0] if verdict.payload else None
            history.attacked(key, f"{hit.kind} in {hit.location}, {hit.detector}" if hit is not None else verdict.reason[:120])
    return observe


def _could_solve(features: Features) -> bool:
    """True for a request answered with a page its client could solve: a navigation, not a page's fetch/XHR or subresource."""
    hm = features.header_map
    dest = hm.get("sec-fetch-dest")
    if dest is not None and dest not in ("document", "iframe", "frame"):
        return False
    return "x-requested-with" not in hm


def _default(cfg: Config) -> Verdict | ScoreRequest:
    mode = cfg.rules.default
    if mode == "allow":
        return ALLOW_ALL
    if mode == "challenge":
        return Verdict(Action.CHALLENGE, Source.DEFAULT, "no rule matched; default challenge", difficulty=cfg.challenge.difficulty)
    if mode == "block":
        return Verdict(Action.BLOCK, Source.DEFAULT, "no rule matched; default block", status=cfg.challenge.block_status)
    return ScoreRequest(rule=None, reason="no rule matched; scored by the model")


def check(cfg: Config, model: ScoreStageMaker | None = None) -> list[str]:
    """Every problem :func:`build` would raise, as a list (for ``clefgate check``)."""
    try:
        build(cfg, model)
    except ConfigError as exc:
        return exc.problems
    return []


def build(cfg: Config, model: ScoreStageMaker | None = None, *, previous: Pipeline | None = None) -> Pipeline:
    """Compile the decision chain for ``cfg``; raise ConfigError listing every problem.

    ``model`` makes the model stage (decider + policy) when a model is configured
    (``Decider.stage``; ``clefgate eval`` and ``replay`` pass their own): it is called
    once, with the Policy compiled here, so the pipeline and its model stage decide
    with one and the same policy.
    ``previous`` is the running pipeline on a reload: its per-client windows, rate
    buckets and solved-challenge nonces carry over (when ``clients``/``redis`` did not
    change), so a reload forgets nobody. Call ``await pipeline.start()`` before
    serving and ``await old.close(successor=new)`` after swapping.
    """
    problems: list[str] = []
    rule_problems: list[str] = []
    source = cfg.source

    state = previous.state if previous is not None and previous.state is not None and previous.state.compatible(cfg.clients, cfg.redis) \
        else ClientState(cfg.clients, cfg.redis)
    state.pass_cookie = cfg.challenge.cookie_name  # part of the client key

    tables: dict[bool, RuleTable | None] = {False: None, True: None}  # rules.files, rules.fallback_files
    challengers: list[str] = []
    # the fallback rules' injection signatures read value by value, as the payload detectors read them (a name mentioned
    # among words, prose, a line break in a body field), not over the whole request as one text
    reader = PayloadInspector(cfg, signatures_for(cfg, cfg.rules.fallback_files), fallback=True) if cfg.rules.fallback_files else None
    for fallback, files in ((False, cfg.rules.files), (True, cfg.rules.fallback_files)):
        if not files:
            continue
        try:
            tables[fallback] = compiled = from_config(cfg, state, fallback=fallback,
                                                      signatures=reader.matched if fallback and reader is not None else None)
        except RuleFileError as exc:
            source = source if rule_problems else exc.source
            rule_problems += exc.problems
            challengers += exc.challengers
        else:
            challengers += [r.label for r in compiled.rules if r.action == "challenge"]
    table, fallback_table = tables[False], tables[True]

    policy = Policy(cfg.policy)
    problems.extend(check_policy(cfg.policy))
    for i, route in enumerate(cfg.routes):
        if route.policy and route.policy not in cfg.policy.routes:
            known = ", ".join(sorted(cfg.policy.routes)) or "none"
            problems.append(f"routes[{i}].policy: unknown policy {route.policy!r} (known under policy.routes: {known})")

    why = []
    if challengers:
        why.append(f"rule(s) {', '.join(challengers[:3])}{' and others' if len(challengers) > 3 else ''} challenge")
    if cfg.rules.default == "challenge":
        why.append("rules.default is challenge")
    if model is not None and policy.can_challenge:
        why.append("the model policy can challenge")
    signer: Signer | None
    if previous is not None and previous.passes is not None and not cfg.challenge.keys and cfg.challenge.dev_generate_secret:
        signer = previous.passes.signer  # keep the generated dev key across reloads so passes survive them
    else:
        signer = load_signer(cfg.challenge, needed=bool(why), why=" and ".join(why), problems=problems)

    if rule_problems or problems:
        # rule-file problems already read "file:rule: message"; config problems read "path: message"
        raise ConfigError(rule_problems + problems, source if not problems else cfg.source)
    assert signer is not None

    service = ChallengeService(cfg.challenge, signer, state)
    if previous is not None and previous.passes is not None:
        # a solved challenge stays solved across reloads, under the limit the new config sets
        service.nonces = previous.passes.nonces.resized(cfg.challenge.max_nonces)

    routes = compile_routes(cfg.routes)
    default = _default(cfg)
    inspector = PayloadInspector(cfg, signatures_for(cfg)) if cfg.payload.enabled else None
    scorer = model(policy) if model is not None else None  # the model stage decides with the pipeline's own policy
    # the proxy reads this much body before deciding: what the model reads, what the detectors inspect, and a form the
    # challenge keeps whole (``challenge.keep_form_bytes``) where something can challenge (a pass-through keeps its fast path:
    # a site's step-up there keeps no form)
    body_prefix = max(cfg.limits.body_prefix_bytes if scorer is not None else 0, cfg.payload.max_body_bytes if inspector is not None else 0,
                      cfg.challenge.keep_form_bytes if why else 0,
                      # a login form's fields, where rules may ask whether it is a credential submission (login_surge)
                      LOGIN_BODY_BYTES if table is not None and cfg.clients.logins.enabled else 0)
    parts = [f"{len(table)} rules from {len(table.files)} file(s)" if table is not None else "no rules",
             *([f"{len(fallback_table)} fallback rules"] if fallback_table is not None else []),
             f"default {cfg.rules.default}", "model" if scorer is not None else "no model",
             *(["payload detectors"] if inspector is not None else []), policy.describe()]
    state.retune(cfg.clients)  # a kept state takes the settings it can change in place, now that the config is valid
    policy.serves = state.pages.serves  # the pages the site serves, which the policy does not suspect a bare request of probing for
    return Pipeline(rules=table, scorer=scorer, default=default, fallback_rules=fallback_table, pages=service, local=service, observers=(client_recorder(state),),
                    body_prefix_bytes=body_prefix, description="; ".join(parts),
                    passes=service, state=state, policy=policy, route_policies=routes if any(r.route.policy for r in routes) else (),
                    inspector=inspector, block_status=cfg.challenge.block_status, score_challenged=cfg.rules.score_challenged)
