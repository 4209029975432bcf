"""Policy: probabilities -> verdicts, per-route thresholds, difficulty by risk, shadow, rollout, fallbacks."""

from __future__ import annotations

import dataclasses

import pytest

from gateway import policy as policymod
from gateway.config import PolicyConfig, RoutePolicyConfig
from gateway.features import Features
from gateway.policy import Policy
from gateway.verdict import Action, ScoreRequest, Source, Verdict
from tests.conftest import make_features


def probs(human: float = 0.0, good_bot: float = 0.0, bad_bot: float = 0.0, attack: float = 0.0,
          kind: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    out = {"class": {"human": human, "good_bot": good_bot, "bad_bot": bad_bot, "attack": attack}}
    if kind:
        out["attack_kind"] = kind
    return out


CFG = PolicyConfig(block_attack=0.95, block_risk=None, block_attack_corroborated=0.4, challenge_risk=0.6, difficulty_min=14, difficulty_max=20,
                   routes={"checkout": RoutePolicyConfig(challenge_risk=0.3, block_risk=0.9),
                           "quiet": RoutePolicyConfig(shadow=True)})

PAYLOAD = "/search?q=1%27%20OR%20%271%27=%271"  # a query carrying a payload: P(attack) can block it

CASES = [
    # name, policy, probabilities, action, difficulty
    ("clear human", None, probs(human=0.97, bad_bot=0.02, attack=0.01), Action.FORWARD, None),
    ("good bot", None, probs(good_bot=0.9, bad_bot=0.1), Action.FORWARD, None),
    ("just below challenge", None, probs(human=0.41, bad_bot=0.59), Action.FORWARD, None),
    ("at challenge threshold", None, probs(human=0.4, bad_bot=0.6), Action.CHALLENGE, 14),
    ("middle of the band", None, probs(human=0.2, bad_bot=0.8), Action.CHALLENGE, 17),
    ("certain bad bot", None, probs(bad_bot=1.0), Action.CHALLENGE, 20),
    ("attack below block", None, probs(human=0.1, attack=0.9), Action.CHALLENGE, 19),
    ("attack at block", None, probs(human=0.05, attack=0.95), Action.BLOCK, None),
    ("checkout challenges sooner", "checkout", probs(human=0.65, bad_bot=0.35), Action.CHALLENGE, 14),
    ("checkout blocks on combined risk", "checkout", probs(human=0.05, bad_bot=0.5, attack=0.45), Action.BLOCK, None),
    ("unknown policy name uses the default", "nope", probs(human=0.65, bad_bot=0.35), Action.FORWARD, None),
]


@pytest.mark.parametrize("name,policy,p,action,difficulty", CASES, ids=[c[0] for c in CASES])
def test_thresholds(name: str, policy: str | None, p: dict[str, dict[str, float]], action: Action, difficulty: int | None) -> None:
    pol = Policy(CFG)
    v = pol.verdict(make_features(target=PAYLOAD), p, ScoreRequest(rule="score-everything-else", policy=policy, backend="app"))
    assert v.action is action
    assert v.difficulty == difficulty
    assert v.source is Source.MODEL and v.rule == "score-everything-else" and v.backend == "app"
    assert v.probabilities is p and v.explanation and v.explanation[0] in v.reason
    assert v.policy == (policy if policy in ("checkout",) else "default")


@pytest.mark.parametrize("policy,p,shown", [
    (None, probs(human=0.4004, bad_bot=0.5996), "P(bad_bot)+P(attack)=0.5996 < 0.6"),             # not "0.60 < 0.6"
    (None, probs(human=0.4, bad_bot=0.6), "P(bad_bot)+P(attack)=0.60 >= 0.6"),                    # two decimals when they suffice
    ("checkout", probs(human=0.1001, bad_bot=0.8999), "P(bad_bot)+P(attack)=0.8999 >= 0.3"),      # challenged: not "0.90" at a 0.9 block
    (None, probs(human=0.0499, attack=0.9501), "P(attack)=0.95 >= 0.95"),
])
def test_the_reason_never_shows_a_number_that_contradicts_its_comparison(policy: str | None, p: dict[str, dict[str, float]],
                                                                          shown: str) -> None:
    v = Policy(CFG).verdict(make_features(target=PAYLOAD), p, ScoreRequest(policy=policy))
    assert v.explanation[0].partition(";")[0] == shown, v.reason


def test_block_reason_names_the_attack_kind_and_carries_model_explanations() -> None:
    v = Policy(CFG).verdict(make_features(target=PAYLOAD), probs(attack=0.99, kind={"sqli": 0.92, "xss": 0.08}), ScoreRequest(),
                            explanation=("query contains 'union select'",), source=Source.CACHE)
    assert v.action is Action.BLOCK and "sqli 0.92" in v.reason
    assert "payload in query:q (\"1' OR '1'='1\")" in v.reason, v.reason
    assert [(h.detector, h.kind, h.location) for h in v.payload] == [("model", "sqli", "query:q")]
    assert v.explanation[-1] == "query contains 'union select'" and v.source is Source.CACHE


def test_difficulty_rises_monotonically_with_risk() -> None:
    t = Policy(CFG).default
    levels = [t.difficulty(r / 100) for r in range(60, 101)]
    assert levels == sorted(levels) and levels[0] == 14 and levels[-1] == 20


def test_shadow_mode_decides_but_forwards() -> None:
    before = policymod.DECISIONS.get("default", "block", "shadow")
    pol = Policy(PolicyConfig(shadow=True))
    v = pol.verdict(make_features(target=PAYLOAD), probs(attack=0.99), ScoreRequest(rule="r"))
    assert v.action is Action.FORWARD and v.source is Source.SHADOW and v.shadow_action is Action.BLOCK
    assert v.reason.startswith("shadow mode; would block")
    assert policymod.DECISIONS.get("default", "block", "shadow") == before + 1
    assert policymod.SHADOW.get("default") == 1.0
    # a forward stays a plain model forward: nothing to shadow
    assert pol.verdict(make_features(), probs(human=1.0), ScoreRequest()).source is Source.MODEL


def test_shadow_per_route_policy() -> None:
    pol = Policy(CFG)
    quiet = pol.verdict(make_features(), probs(bad_bot=0.9), ScoreRequest(policy="quiet"))
    loud = pol.verdict(make_features(), probs(bad_bot=0.9), ScoreRequest())
    assert quiet.shadow_action is Action.CHALLENGE and quiet.action is Action.FORWARD
    assert loud.action is Action.CHALLENGE and loud.shadow_action is None


def test_rollout_is_stable_per_client_and_roughly_proportional() -> None:
    pol = Policy(PolicyConfig(rollout_percent=25.0))
    enforced = 0
    for i in range(4000):
        f = make_features(client_ip=f"10.{i // 250}.{i % 250}.1")
        first = pol.verdict(f, probs(bad_bot=0.9), ScoreRequest())
        again = pol.verdict(f, probs(bad_bot=0.9), ScoreRequest())
        assert first.action is again.action  # the same client is always in or out
        enforced += first.action is Action.CHALLENGE
        if first.action is Action.FORWARD:
            assert first.source is Source.SHADOW and "25% rollout" in first.reason
    assert 0.20 < enforced / 4000 < 0.30


def test_rollout_by_header() -> None:
    pol = Policy(PolicyConfig(rollout_percent=50.0, rollout_key="header:X-Tenant"))
    outcomes = {pol.verdict(make_features(headers=[("Host", "h"), ("X-Tenant", f"t{i}")], client_ip="1.1.1.1"), probs(bad_bot=0.9),
                            ScoreRequest()).action for i in range(40)}
    assert outcomes == {Action.CHALLENGE, Action.FORWARD}  # same address, decided by the header
    assert Policy(PolicyConfig(rollout_percent=0.0)).verdict(make_features(), probs(bad_bot=1.0), ScoreRequest()).action is Action.FORWARD


@pytest.mark.parametrize("mode,action,reason", [
    ("forward", Action.FORWARD, "model unavailable; fallback: forward"),
    ("rules-only", Action.FORWARD, "model unavailable; rules only: no rule settled this request, forwarded"),
    ("challenge", Action.CHALLENGE, "model unavailable; fallback: challenge"),
])
def test_fallback_verdicts(mode: str, action: Action, reason: str) -> None:
    v = Policy(CFG).fallback_verdict(make_features(), ScoreRequest(rule="r", backend="api"), mode)
    assert (v.action, v.source, v.reason, v.backend, v.rule) == (action, Source.FALLBACK, reason, "api", "r")
    if action is Action.CHALLENGE:
        assert v.difficulty == 14


def test_fallback_respects_shadow_and_rejects_unknown_modes() -> None:
    v = Policy(CFG).fallback_verdict(make_features(), ScoreRequest(policy="quiet"), "challenge")
    assert v.action is Action.FORWARD and v.shadow_action is Action.CHALLENGE
    with pytest.raises(ValueError, match="unknown fallback mode 'open'"):
        Policy(CFG).fallback_verdict(make_features(), ScoreRequest(), "open")


def test_named_policies_inherit_unset_fields() -> None:
    pol = Policy(CFG)
    checkout = pol.thresholds("checkout")
    assert (checkout.challenge_risk, checkout.block_risk, checkout.block_attack, checkout.difficulty_max) == (0.3, 0.9, 0.95, 20)
    assert pol.thresholds(None) is pol.default
    assert "challenge risk>=0.6" in pol.describe() and "2 named" in pol.describe()


def test_cross_field_checks() -> None:
    bad = PolicyConfig(difficulty_min=22, difficulty_max=18, routes={"x": RoutePolicyConfig(challenge_risk=0.8, block_risk=0.5)})
    assert policymod.check(bad) == [
        "policy: difficulty_min (22) is above difficulty_max (18)",
        "policy.routes.x: difficulty_min (22) is above difficulty_max (18)",
        "policy.routes.x: block_risk (0.5) is below challenge_risk (0.8); nothing would ever be challenged",
    ]
    assert policymod.check(CFG) == []


@pytest.mark.parametrize("cfg", [CFG, PolicyConfig(shadow=True), PolicyConfig(rollout_percent=0.0)])
def test_a_cached_answer_gets_one_verdict_object_and_is_still_counted(cfg: PolicyConfig) -> None:
    policy = Policy(cfg)
    p, request, explanation = probs(human=0.2, bad_bot=0.8), ScoreRequest(rule="score-rest"), ("ua=1",)
    fresh = Policy(cfg).verdict(make_features(), p, request, source=Source.CACHE, explanation=explanation)
    label = (fresh.policy or "default", (fresh.shadow_action or fresh.action).value,
             "enforce" if fresh.source is not Source.SHADOW else ("shadow" if cfg.shadow else "rollout"))
    before = policymod.DECISIONS.get(*label)
    first = policy.verdict(make_features(client_ip="198.51.100.1"), p, request, source=Source.CACHE, explanation=explanation)
    again = policy.verdict(make_features(client_ip="198.51.100.2"), p, request, source=Source.CACHE, explanation=explanation)
    assert again is first and first == fresh
    assert policymod.DECISIONS.get(*label) == before + 2  # every request is counted, memo or not
    # a fresh model answer (other probabilities object) is decided anew
    other = policy.verdict(make_features(), probs(human=0.2, bad_bot=0.8), request, source=Source.CACHE, explanation=explanation)
    assert other is not first and other == first


def test_partial_rollout_verdicts_stay_per_client_for_cached_answers() -> None:
    policy = Policy(PolicyConfig(rollout_percent=50.0))
    p, request = probs(bad_bot=0.9), ScoreRequest()
    outcomes = {policy.verdict(make_features(client_ip=f"198.51.100.{i}"), p, request, source=Source.CACHE).action for i in range(64)}
    assert outcomes == {Action.CHALLENGE, Action.FORWARD}


def test_shipped_defaults_challenge_bot_likeness_and_block_only_on_evidence() -> None:
    pol = Policy(PolicyConfig())
    # near-certain automation, no payload evidence: challenged at the top difficulty, never blocked
    certain = pol.verdict(make_features(), probs(bad_bot=0.999, attack=0.0), ScoreRequest())
    assert (certain.action, certain.difficulty) == (Action.CHALLENGE, 20)
    assert pol.verdict(make_features(target=PAYLOAD), probs(bad_bot=0.99), ScoreRequest()).action is Action.CHALLENGE
    assert pol.verdict(make_features(), probs(human=0.05, bad_bot=0.95), ScoreRequest()).action is Action.CHALLENGE
    assert PolicyConfig().block_risk is None
    assert "risk>=" not in pol.describe().split("challenge")[0] and "P(attack)>=0.4 with a fallback rule" in pol.describe()


def test_block_risk_stays_as_an_opt_in() -> None:
    pol = Policy(PolicyConfig(block_risk=0.96))
    v = pol.verdict(make_features(), probs(bad_bot=0.97), ScoreRequest())
    assert v.action is Action.BLOCK and "policy.block_risk: blocks on look alone" in v.reason


NO_PAYLOAD_HEADERS = [("Host", "www.example.com"), ("Sec-Fetch-Dest", "document"),
                      ("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
                                     "Version/18.1 Mobile/15E148 Safari/604.1"),
                      ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"), ("Sec-Fetch-Site", "none"),
                      ("Sec-Fetch-Mode", "navigate"), ("Accept-Language", "en-GB,en;q=0.9"), ("Priority", "u=0, i"),
                      ("Accept-Encoding", "gzip, deflate, br"), ("Cookie", "clefgate_pass=k1.eyJ0IjoicCJ9.c2ln; _ga=GA1.2.3.4")]


@pytest.mark.parametrize("target,headers,body,where", [
    ("/products/12", NO_PAYLOAD_HEADERS, b"", None),                                     # nothing carried: challenged
    ("/wiki/Main_Page", None, b"", None),
    ("/search?q=red+shoes%27+or+1%3D1--", None, b"", "query"),                          # a query is a payload
    ("/item?id=1%27%20OR%201=1", None, b"", "query:id"),                                 # the parameter with the injection is named
    ("/login", [("Host", "h"), ("Content-Type", "application/x-www-form-urlencoded")], b"user=a&pw=%27or%201=1--", "form:pw"),
    ("/api", [("Host", "h"), ("Content-Type", "application/json")], b'{"a": "1;--"}', "body"),
    ("/", [("Host", "h"), ("Cookie", 'prefs={"t":"x\'--"}')], b"", "cookie:prefs"),      # a cookie more than a token
    ("/", [("Host", "h"), ("User-Agent", "() { :; }; echo x' or '1'='1")], b"", "header:user-agent"),
    ("/", [("Host", "h"), ("Referer", "https://x/?q=1'--<script>alert(1)</script>")], b"", "header:referer"),
    ("/", [("Host", "h"), ("X-Forwarded-Host", "evil.example' or '1'='1")], b"", "header:x-forwarded-host"),
    ("/static/..%2f..%2fetc/passwd", None, b"", "path"),
])
def test_a_block_on_p_attack_needs_a_payload_and_names_where(target: str, headers: list[tuple[str, str]] | None, body: bytes,
                                                             where: str | None) -> None:
    pol = Policy(PolicyConfig())
    before = policymod.NO_PAYLOAD.get("default")
    v = pol.verdict(make_features(target=target, headers=headers, body=body), probs(attack=0.999, kind={"sqli": 0.7, "traversal": 0.3}),
                    ScoreRequest())
    if where is None:
        assert (v.action, v.payload, v.difficulty) == (Action.CHALLENGE, (), 20)
        assert "carries no payload" in v.reason and policymod.NO_PAYLOAD.get("default") == before + 1
    else:
        assert v.action is Action.BLOCK and f"payload in {where}" in v.reason, v.reason
        # the first hit names the value holding the syntax of a kind the model named (a JSON body: the value itself)
        assert v.payload[0].location.startswith("json:" if where == "body" else where) and v.payload[0].detector == "model"
        assert v.payload[0].kind == ("traversal" if where == "path" else "sqli") and " syntax in " in v.reason


def test_a_two_headed_model_is_read_by_its_payload_and_client_questions() -> None:
    pol = Policy(PolicyConfig())
    two = {"payload": {"benign": 0.01, "attack": 0.99}, "client": {"human": 0.9, "good_bot": 0.0, "bad_bot": 0.1},
           "attack_kind": {"xss": 0.8, "sqli": 0.2}}
    v = pol.verdict(make_features(target=PAYLOAD), two, ScoreRequest())
    assert v.action is Action.BLOCK and "xss 0.80" in v.reason
    bot = {"payload": {"benign": 1.0, "attack": 0.0}, "client": {"human": 0.2, "good_bot": 0.0, "bad_bot": 0.8}}
    assert pol.verdict(make_features(), bot, ScoreRequest()).action is Action.CHALLENGE


def test_the_default_policy_table_is_the_one_in_docs() -> None:
    from pathlib import Path

    table = Policy(PolicyConfig()).table()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    assert table in doc, "docs/policy.md: paste the output of Policy(PolicyConfig()).table() (clefgate check prints it)"
    assert "P(bad_bot) + P(attack) >= 0.5" in table and "block on look alone" not in table


class Signatures:
    """A fallback rule table stand-in: blocks what contains ``needle``; records what it read."""

    def __init__(self, needle: str = "union select", action: Action = Action.BLOCK) -> None:
        self.needle, self.action, self.read = needle, action, 0

    def __call__(self, features: Features) -> Verdict | None:
        self.read += 1
        if self.needle not in f"{features.path}?{features.query}":
            return None
        return Verdict(self.action, Source.RULE, "sig", rule="block-sql-injection", explanation=("SQL injection signature",))


SQLI = "/search?q=1' union select 1"


@pytest.mark.parametrize("attack,bad,target,expected", [
    (0.5, 0.3, SQLI, Action.BLOCK),                     # in the band, the signature matches: blocked
    (0.4, 0.0, SQLI, Action.BLOCK),                     # at the threshold
    (0.39, 0.5, SQLI, Action.CHALLENGE),                # below it the model's own verdict stands
    (0.5, 0.3, "/search?q=walnut+desk&sort=name%27)", Action.CHALLENGE),  # in the band, no signature: the model's verdict
    (0.5, 0.3, "/search?q=walnut+desk", Action.FORWARD),  # ... which, with no syntax of any attack, does not count P(attack)
])
def test_a_fallback_rule_corroborates_a_block(attack: float, bad: float, target: str, expected: Action) -> None:
    pol, sigs = Policy(CFG), Signatures()
    request = ScoreRequest(rule="score-rest", backend="app")
    v = pol.verdict(make_features(target=target), probs(human=1 - attack - bad, bad_bot=bad, attack=attack), request)
    before = policymod.CORROBORATED.get("default", "block-sql-injection", "enforce")
    out = pol.corroborate(make_features(target=target), v, sigs)
    assert out.action is expected and sigs.read == (1 if attack >= 0.4 else 0)  # the rules are read only in the band
    if expected is Action.BLOCK:
        assert out.source is Source.MODEL and out.rule == "block-sql-injection" and out.backend == "app"
        assert out.reason == f"default policy: P(attack)={attack:.2f} >= 0.4 and fallback rule block-sql-injection matched"
        assert out.explanation[:2] == (out.reason.removeprefix("default policy: "), "SQL injection signature")
        assert out.probabilities is v.probabilities and out.difficulty is None
        assert policymod.CORROBORATED.get("default", "block-sql-injection", "enforce") == before + 1
    else:
        assert out is v


def test_corroboration_needs_a_blocking_rule_can_be_turned_off_and_respects_shadow() -> None:
    features, p = make_features(target=SQLI), probs(human=0.3, bad_bot=0.2, attack=0.5)
    pol = Policy(CFG)
    v = pol.verdict(features, p, ScoreRequest())
    assert pol.corroborate(features, v, Signatures(action=Action.CHALLENGE)) is v
    off = Policy(PolicyConfig(block_attack_corroborated=None, routes={"strict": RoutePolicyConfig(block_attack_corroborated=0.2)}))
    assert off.corroborate(features, off.verdict(features, p, ScoreRequest()), Signatures()).action is Action.CHALLENGE
    # a named policy sets its own floor
    assert off.corroborate(features, off.verdict(features, p, ScoreRequest(policy="strict")), Signatures()).action is Action.BLOCK
    shadow = Policy(PolicyConfig(shadow=True))
    quiet = shadow.corroborate(features, shadow.verdict(features, p, ScoreRequest()), Signatures())
    assert quiet.action is Action.FORWARD and quiet.source is Source.SHADOW and quiet.shadow_action is Action.BLOCK
    assert quiet.reason.startswith("shadow mode; would block: default policy: P(attack)=0.50 >= 0.4 and fallback rule")


def unfamiliar(attack: float, ratio: float) -> dict[str, dict[str, float]]:
    """A two-question answer with the familiarity a model with the statistics reports: distance = ``ratio`` x threshold."""
    u = ratio / (1.0 + ratio)
    return {"payload": {"benign": 1 - attack, "attack": attack}, "client": {"human": 0.9, "good_bot": 0.0, "bad_bot": 0.1},
            "attack_kind": {"sqli": 0.7, "xss": 0.3}, "familiarity": {"familiar": 1 - u, "unfamiliar": u}}


def test_an_unfamiliar_request_the_model_alone_would_block_is_challenged_with_the_reason_and_counted() -> None:
    pol = Policy(PolicyConfig())
    before = policymod.ABSTAINED.get("default")
    features = make_features(target="/collect?v=2&tid=G-XXXX&orderby=price-desc%27)")
    v = pol.verdict(features, unfamiliar(0.99, 3.0), ScoreRequest(backend="app"))
    assert (v.action, v.source, v.payload, v.backend) == (Action.CHALLENGE, Source.MODEL, (), "app")
    assert v.difficulty == 20  # as hard as the suspicion: P(attack) 0.99
    assert "unfamiliar to the model" in v.reason and "3.00x the familiarity threshold" in v.reason, v.reason
    assert "payload in query" in v.reason and v.explanation[0] in v.reason
    assert policymod.ABSTAINED.get("default") == before + 1


@pytest.mark.parametrize("name,config,p,target,action", [
    ("familiar", PolicyConfig(), unfamiliar(0.99, 0.8), PAYLOAD, Action.BLOCK),
    ("at the threshold is familiar", PolicyConfig(), unfamiliar(0.99, 1.0), PAYLOAD, Action.BLOCK),
    ("a manifest without the statistics", PolicyConfig(),
     {k: v for k, v in unfamiliar(0.99, 5.0).items() if k != "familiarity"}, PAYLOAD, Action.BLOCK),
    ("switched off", PolicyConfig(abstain_unfamiliar=False), unfamiliar(0.99, 5.0), PAYLOAD, Action.BLOCK),
    ("switched off for a route", PolicyConfig(routes={"r": RoutePolicyConfig(abstain_unfamiliar=False)}), unfamiliar(0.99, 5.0),
     PAYLOAD, Action.BLOCK),
    ("below the block, unfamiliar changes nothing", PolicyConfig(), unfamiliar(0.7, 5.0), PAYLOAD, Action.CHALLENGE),
    ("no payload: challenged as before", PolicyConfig(), unfamiliar(0.99, 5.0), "/products/12", Action.CHALLENGE),
])
def test_only_an_unfamiliar_model_only_block_abstains(name: str, config: PolicyConfig, p: dict[str, dict[str, float]], target: str,
                                                     action: Action) -> None:
    pol = Policy(config)
    before = policymod.ABSTAINED.get("default"), policymod.ABSTAINED.get("r")
    headers = NO_PAYLOAD_HEADERS if target == "/products/12" else None
    v = pol.verdict(make_features(target=target, headers=headers), p, ScoreRequest(policy="r" if config.routes else None))
    assert v.action is action and "unfamiliar" not in v.reason, v.reason
    assert (policymod.ABSTAINED.get("default"), policymod.ABSTAINED.get("r")) == before
    if action is Action.BLOCK:
        assert v.payload and v.payload[0].detector == "model"


def test_a_route_can_abstain_where_the_default_does_not_and_shadow_mode_records_the_abstention() -> None:
    pol = Policy(PolicyConfig(abstain_unfamiliar=False, routes={"forms": RoutePolicyConfig(abstain_unfamiliar=True, shadow=True)}))
    before = policymod.ABSTAINED.get("forms")
    v = pol.verdict(make_features(target=PAYLOAD), unfamiliar(0.99, 2.0), ScoreRequest(policy="forms"))
    assert (v.action, v.source, v.shadow_action) == (Action.FORWARD, Source.SHADOW, Action.CHALLENGE)
    assert "would challenge" in v.reason and "unfamiliar to the model" in v.reason
    assert policymod.ABSTAINED.get("forms") == before + 1


def test_a_fallback_rule_that_agrees_still_blocks_what_the_model_abstained_on() -> None:
    pol, sigs = Policy(PolicyConfig()), Signatures()
    features = make_features(target=SQLI)
    abstained = pol.verdict(features, unfamiliar(0.99, 4.0), ScoreRequest())
    assert abstained.action is Action.CHALLENGE
    out = pol.corroborate(features, abstained, sigs)
    assert out.action is Action.BLOCK and out.rule == "block-sql-injection" and sigs.read == 1
    assert "fallback rule block-sql-injection matched (the model alone abstained: the request is unfamiliar to the model)" in out.reason
    # no signature: the abstention stands
    clean = make_features(target="/search?q=walnut+desk&sort=name%27)")
    assert pol.corroborate(clean, pol.verdict(clean, unfamiliar(0.99, 4.0), ScoreRequest()), Signatures()).action is Action.CHALLENGE


def test_the_policy_table_says_when_the_model_abstains() -> None:
    assert "unfamiliar to the model" in Policy(PolicyConfig()).table()
    assert "unfamiliar" not in Policy(PolicyConfig(abstain_unfamiliar=False)).table()


SIGN_IN = [("Host", "shop.example"), ("Content-Type", "application/x-www-form-urlencoded"),
           ("User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
           ("Referer", "https://shop.example/login?next=/account"), ("Cookie", "sid=AbC123.sig; _ga=GA1.2.3.4")]


@pytest.mark.parametrize("name,target,headers,body,kind,action", [
    # a person's values with none of the syntax of the kind named: suspicion, challenged
    ("a password", "/login", SIGN_IN, b"user=ana%40example.org&password=Password1%21", {"cmdi": 0.8, "other": 0.2}, Action.CHALLENGE),
    ("plain words", "/search?q=red+shoes+size+9", None, b"", {"sqli": 0.9, "xss": 0.1}, Action.CHALLENGE),
    ("JSON ids", "/api/orders", [("Host", "h"), ("Content-Type", "application/json")], b'{"id": "ord_81f3a", "qty": 2}',
     {"sqli": 0.6, "cmdi": 0.4}, Action.CHALLENGE),
    ("an apostrophe is not markup", "/reviews?text=it%27s+great", None, b"", {"xss": 0.95, "sqli": 0.05}, Action.CHALLENGE),
    ("nor a quote that closes nothing", "/reviews?text=it%27s+O%27Reilly%27s+best%3B+don%27t+miss+it", None, b"", {"sqli": 0.95},
     Action.CHALLENGE),
    # the syntax of a named kind: the model's block stands
    ("a quote breaking out", "/reviews?text=great%27+or+%271%27%3D%271", None, b"", {"sqli": 0.95, "xss": 0.05}, Action.BLOCK),
    ("a shell separator in a form", "/login", SIGN_IN, b"user=a&password=x%3Bid", {"cmdi": 0.8, "other": 0.2}, Action.BLOCK),
    ("markup in JSON", "/api/c", [("Host", "h"), ("Content-Type", "application/json")], b'{"c": "<svg onload=x>"}', {"xss": 1.0},
     Action.BLOCK),
    ("a second kind with a fifth of the answer", "/f?u=%2e%2e%2fetc%2fpasswd", None, b"", {"sqli": 0.75, "traversal": 0.25}, Action.BLOCK),
    ("a kind below a fifth is not named", "/f?u=%2e%2e%2fetc%2fpasswd", None, b"", {"sqli": 0.85, "traversal": 0.15}, Action.CHALLENGE),
    ("a probe takes any kind's syntax", "/admin.php?cmd=id%7Cuname", None, b"", {"probe": 1.0}, Action.BLOCK),
])
def test_a_model_only_block_needs_the_syntax_of_the_kind_it_names(name: str, target: str, headers: list[tuple[str, str]] | None,
                                                                 body: bytes, kind: dict[str, float], action: Action) -> None:
    pol = Policy(PolicyConfig(suspicion_needs_syntax=False))  # P(attack) counted whatever the values hold (see below)
    top = max(kind, key=lambda k: kind[k])
    before = policymod.UNWITNESSED.get("default", top)
    v = pol.verdict(make_features(method="POST" if body else "GET", target=target, headers=headers, body=body),
                    probs(attack=0.99, kind=kind), ScoreRequest())
    assert v.action is action, v.reason
    if action is Action.CHALLENGE:
        assert "no value holds the syntax of " + top in v.reason and v.payload == () and v.difficulty == 20
        assert policymod.UNWITNESSED.get("default", top) == before + 1
    else:
        assert " syntax in " in v.reason and v.payload[0].detector == "model"
        assert policymod.UNWITNESSED.get("default", top) == before
    # switched off, the model alone blocks as it did
    assert Policy(PolicyConfig(block_needs_syntax=False)).verdict(
        make_features(method="POST" if body else "GET", target=target, headers=headers, body=body), probs(attack=0.99, kind=kind),
        ScoreRequest()).action is Action.BLOCK


def test_a_route_can_block_without_the_syntax_and_a_fallback_rule_that_agrees_still_blocks() -> None:
    pol = Policy(PolicyConfig(routes={"api": RoutePolicyConfig(block_needs_syntax=False)}))
    # syntax (a search engine's match-all), but none of the kind named
    plain = make_features(target="/search?q=walnut+desk&filter=*:*")
    assert pol.verdict(plain, probs(attack=0.99, kind={"sqli": 1.0}), ScoreRequest(policy="api")).action is Action.BLOCK
    challenged = pol.verdict(plain, probs(attack=0.99, kind={"sqli": 1.0}), ScoreRequest())
    assert challenged.action is Action.CHALLENGE
    assert pol.corroborate(plain, challenged, Signatures()).action is Action.CHALLENGE  # nothing agrees: the challenge stands
    # the model names the wrong kind (no markup in a SQL injection), and the injection signature is the witness
    features = make_features(target=SQLI)
    named_wrong = pol.verdict(features, probs(attack=0.99, kind={"xss": 1.0}), ScoreRequest())
    assert named_wrong.action is Action.CHALLENGE
    out = pol.corroborate(features, named_wrong, Signatures())
    assert out.action is Action.BLOCK and "(the model alone challenged: no value holds the syntax of the kind it named)" in out.reason
    assert "suspicion only" in pol.table() and "suspicion only" not in Policy(PolicyConfig(block_needs_syntax=False)).table()


def test_abstain_unfamiliar_is_checked_like_the_other_policy_fields_and_on_by_default() -> None:
    from gateway import config as configmod

    backends = {"app": {"servers": ["http://127.0.0.1:9"]}}
    with pytest.raises(configmod.ConfigError) as err:
        configmod.validate({"backends": backends, "policy": {"abstain_unfamiliar": "yes", "routes": {"r": {"abstain_unfamiliar": 1}}}},
                           "c.yaml")
    assert err.value.problems == ["policy.abstain_unfamiliar: expected true or false, got 'yes'",
                                  "policy.routes.r.abstain_unfamiliar: expected true or false, got 1"]
    cfg = configmod.validate({"backends": backends}, "c.yaml")
    assert cfg.policy.abstain_unfamiliar is True and Policy(cfg.policy).default.abstain_unfamiliar is True


API_CLIENT = [("Host", "shop.example"), ("User-Agent", "axios/1.7.2"), ("Accept", "application/json, text/plain, */*")]
IGNORING = ScoreRequest(rule="score-api-clients-on-payload", ignore_bot_likeness=True)


@pytest.mark.parametrize("source", [Source.MODEL, Source.CACHE])  # a cached answer's verdict is kept by identity: counted alike
def test_bot_likeness_ignored_forwards_a_client_the_model_calls_a_bot_and_says_why(source: Source) -> None:
    pol = Policy(CFG)
    f = make_features(target="/api/v1/items?page=2", headers=API_CLIENT)
    p = probs(good_bot=0.05, bad_bot=0.93, attack=0.02)
    assert pol.verdict(f, p, ScoreRequest(rule="score-everything-else")).action is Action.CHALLENGE  # its look, counted
    before = policymod.LOOK_IGNORED.get("default", "score-api-clients-on-payload")
    for _ in range(2):
        v = pol.verdict(f, p, IGNORING, source=source)
        assert v.action is Action.FORWARD and v.rule == "score-api-clients-on-payload" and v.difficulty is None
        assert v.reason == ("default policy: P(attack)=0.02 < 0.6; bot-likeness ignored by rule score-api-clients-on-payload "
                            "(P(bad_bot)=0.93 not counted)")
    assert policymod.LOOK_IGNORED.get("default", "score-api-clients-on-payload") == before + 2
    # what the full risk would have forwarded anyway is not counted as spared
    assert pol.verdict(f, probs(human=0.7, bad_bot=0.28, attack=0.02), IGNORING, source=source).action is Action.FORWARD
    assert policymod.LOOK_IGNORED.get("default", "score-api-clients-on-payload") == before + 2


def test_bot_likeness_ignored_leaves_the_payload_question_as_it_is() -> None:
    pol = Policy(CFG)
    f = make_features(target=PAYLOAD, headers=API_CLIENT)
    # P(attack) alone reaches challenge_risk: challenged, difficulty by P(attack) (0.7: 14 + 6 * 0.25 = 15.5 -> 16)
    v = pol.verdict(f, probs(bad_bot=0.3, attack=0.7), IGNORING)
    assert v.action is Action.CHALLENGE and v.difficulty == 16
    assert v.reason.startswith("default policy: P(attack)=0.70 >= 0.6; bot-likeness ignored by rule score-api-clients-on-payload")
    # P(attack) at block_attack with a payload holding the syntax: blocked, naming it, as without the option
    for request in (IGNORING, ScoreRequest(rule="score-everything-else")):
        blocked = pol.verdict(f, probs(bad_bot=0.03, attack=0.97, kind={"sqli": 1.0}), request)
        assert blocked.action is Action.BLOCK and blocked.payload and blocked.payload[0].location == "query:q", blocked.reason
    # no payload to point at: challenged, as without the option
    bare = pol.verdict(make_features(target="/api/v1/items", headers=API_CLIENT), probs(attack=0.97), IGNORING)
    assert bare.action is Action.CHALLENGE and "carries no payload" in bare.reason
    # an opted-in block on risk weighs P(attack) alone here, and is not said to be on look alone
    strict = Policy(PolicyConfig(block_risk=0.8))
    assert strict.verdict(f, probs(bad_bot=0.9, attack=0.05), IGNORING).action is Action.FORWARD
    on_attack = strict.verdict(f, probs(bad_bot=0.1, attack=0.85), IGNORING)
    assert on_attack.action is Action.BLOCK and "look alone" not in on_attack.reason


def test_bot_likeness_ignored_still_escalates_a_client_that_earned_a_block() -> None:
    from gateway.clients import ClientState

    pol, state = Policy(CFG), ClientState()
    f = make_features(target=PAYLOAD, headers=API_CLIENT)
    state.history.attacked(state.key(f), "sqli in query:q, libinjection")
    v = pol.escalate(f, pol.verdict(f, probs(bad_bot=0.2, attack=0.7), IGNORING), state)
    assert v.action is Action.BLOCK and v.source is Source.CLIENT and "attack evidence" in v.reason


def test_the_table_names_the_rows_bot_likeness_ignored_changes() -> None:
    assert "P(attack) >= 0.6 under a rule with bot_likeness: ignore" in Policy(CFG).table()


FORM = [("Host", "shop.example"), ("Content-Type", "application/x-www-form-urlencoded")]
JSON = [("Host", "h"), ("Content-Type", "application/json")]
POST_CODE = b"reply=Try+%60SELECT+name+FROM+users+WHERE+id+%3D+%3Fid%60+with+a+bound+parameter%2C+and+run+%60pip+install+-U+psycopg%60+first."
GATED = "not counted: no attack syntax in any value (policy.suspicion_needs_syntax)"


def two_questions(attack: float, bad: float = 0.1) -> dict[str, dict[str, float]]:
    return {"payload": {"benign": 1 - attack, "attack": attack}, "client": {"human": 1 - bad, "good_bot": 0.0, "bad_bot": bad},
            "attack_kind": {"sqli": 0.6, "cmdi": 0.4}}


@pytest.mark.parametrize("name,target,headers,body", [
    ("a password", "/login", SIGN_IN, b"user=ana%40example.org&password=Password1%21"),
    ("plain words", "/search?q=red+shoes+size+9", None, b""),
    ("JSON ids", "/api/orders", JSON, b'{"id": "ord_81f3a", "qty": 2}'),
    ("apostrophes", "/reviews?text=it%27s+O%27Reilly%27s+best%3B+don%27t+miss+it", None, b""),
    ("a forum reply quoting SQL and a shell command", "/t/42/reply", FORM, POST_CODE),
])
def test_p_attack_short_of_a_block_counts_only_where_the_request_may_hold_attack_syntax(
        name: str, target: str, headers: list[tuple[str, str]] | None, body: bytes) -> None:
    features = make_features(method="POST" if body else "GET", target=target, headers=headers, body=body)
    before = policymod.SYNTAX_FREE.get("default"), policymod.UNWITNESSED.get("default", "sqli")
    pol, p, request = Policy(PolicyConfig()), two_questions(0.7), ScoreRequest()
    v = pol.verdict(features, p, request, source=Source.CACHE)
    assert (v.action, v.payload, v.difficulty) == (Action.FORWARD, (), None), v.reason
    assert v.reason == f"default policy: P(bad_bot)=0.10 < 0.5; P(attack)=0.70 {GATED}"
    assert (policymod.SYNTAX_FREE.get("default"), policymod.UNWITNESSED.get("default", "sqli")) == (before[0] + 1, before[1])
    # the same cached answer, for a request with syntax: decided for this request, not recalled from the one before
    hit = make_features(target="/search?q=red+shoes&sort=name%27)")
    assert pol.verdict(hit, p, request, source=Source.CACHE).action is Action.CHALLENGE
    # nor at a block's height: a model sure of an attack in a request where nothing could be one is not counted either,
    # and the look alone decides: forwarded, or challenged where the look would challenge
    sure = pol.verdict(features, two_questions(0.99), ScoreRequest())
    assert (sure.action, sure.reason) == (Action.FORWARD, f"default policy: P(bad_bot)=0.10 < 0.5; P(attack)=0.99 {GATED}")
    looked = pol.verdict(features, two_questions(0.99, bad=0.6), ScoreRequest())
    assert (looked.action, looked.reason) == (Action.CHALLENGE, f"default policy: P(bad_bot)=0.60 >= 0.5; P(attack)=0.99 {GATED}")
    # with syntax of a kind the model does not name it is challenged for want of the kind's syntax (block_needs_syntax)
    other = make_features(method="POST" if body else "GET", target=target + ("&" if "?" in target else "?") + "f=*:*",
                          headers=headers, body=body)
    unwitnessed = pol.verdict(other, two_questions(0.99), ScoreRequest())
    assert unwitnessed.action is Action.CHALLENGE and "no value holds the syntax of sqli" in unwitnessed.reason, unwitnessed.reason
    # counted (switched off, or a policy that blocks without the syntax): challenged
    assert Policy(PolicyConfig(suspicion_needs_syntax=False)).verdict(features, two_questions(0.7), ScoreRequest()).action is Action.CHALLENGE
    routed = Policy(PolicyConfig(routes={"r": RoutePolicyConfig(suspicion_needs_syntax=False), "b": RoutePolicyConfig(block_needs_syntax=False)}))
    assert routed.verdict(features, two_questions(0.7), ScoreRequest(policy="r")).action is Action.CHALLENGE
    assert routed.verdict(features, two_questions(0.7), ScoreRequest(policy="b")).action is Action.CHALLENGE


@pytest.mark.parametrize("name,features,bad,action", [
    ("the syntax of a kind the model does not name", make_features(target="/search?q=red+shoes&next=..%2F..%2Fadmin"), 0.1,
     Action.CHALLENGE),
    ("a bare path: a probe's path is its payload", make_features(target="/products/12", headers=NO_PAYLOAD_HEADERS), 0.1, Action.CHALLENGE),
    ("a value longer than the search reads", make_features(target="/search?q=" + "red+shoes+" * 500), 0.1, Action.CHALLENGE),
    ("a body longer than what the gateway keeps", dataclasses.replace(
        make_features("POST", "/t/42/reply", FORM, body=POST_CODE), content_length=200_000), 0.1, Action.CHALLENGE),
    ("a client that looks like a bot", make_features(target="/search?q=red+shoes+size+9"), 0.6, Action.CHALLENGE),
])
def test_p_attack_still_counts_where_the_values_are_not_known_free_of_syntax(name: str, features: Features, bad: float,
                                                                             action: Action) -> None:
    before = policymod.SYNTAX_FREE.get("default")
    v = Policy(PolicyConfig()).verdict(features, two_questions(0.7, bad), ScoreRequest())
    assert v.action is action and "not counted" not in v.reason, v.reason
    assert policymod.SYNTAX_FREE.get("default") == before


def test_where_the_look_is_ignored_and_no_value_holds_syntax_nothing_counts() -> None:
    library = [("Host", "shop.example"), ("User-Agent", "axios/1.7.2"), ("Accept", "application/json")]
    request = ScoreRequest(rule="score-api-clients-on-payload", ignore_bot_likeness=True)
    before = policymod.LOOK_IGNORED.get("default", "score-api-clients-on-payload")
    v = Policy(PolicyConfig()).verdict(make_features(target="/api/v1/items?page=2", headers=library), two_questions(0.8, 0.9), request)
    assert v.action is Action.FORWARD, v.reason
    assert v.reason == (f"default policy: risk=0.00 < 0.5; P(attack)=0.80 {GATED}; bot-likeness ignored by rule "
                        "score-api-clients-on-payload (P(bad_bot)=0.90 not counted)")
    assert policymod.LOOK_IGNORED.get("default", "score-api-clients-on-payload") == before + 1  # the full risk would challenge
    # a look of 0.3 and a gated P(attack): neither the look (ignored) nor the gate spared anything the look alone would not
    spared = Policy(PolicyConfig()).verdict(make_features(target="/api/v1/items?page=2", headers=library), two_questions(0.8, 0.3), request)
    assert spared.action is Action.FORWARD and policymod.LOOK_IGNORED.get("default", "score-api-clients-on-payload") == before + 1
    hit = Policy(PolicyConfig()).verdict(make_features(target="/api/v1/items?page=2&sort=name%27)", headers=library),
                                         two_questions(0.8, 0.9), request)
    assert hit.action is Action.CHALLENGE and hit.reason.startswith("default policy: P(attack)=0.80 >= 0.5"), hit.reason


@pytest.mark.parametrize("attack,bad,action", [
    (0.25, 0.3, Action.FORWARD),    # 0.25 + 0.75 x 0.3 = 0.475: neither question, nor the chance that either holds, reaches 0.5
    (0.3, 0.3, Action.CHALLENGE),   # 0.3 + 0.7 x 0.3 = 0.51
    (0.0, 0.5, Action.CHALLENGE),   # the look alone
    (0.5, 0.0, Action.CHALLENGE),   # P(attack) alone
])
def test_two_questions_make_one_risk_the_chance_that_either_holds(attack: float, bad: float, action: Action) -> None:
    """The risk is P(bad_bot) + P(attack) of the single-class view: with two questions, P(attack) + P(benign) x P(bad_bot)
    (a request is an attack, or a benign one from a bad bot); a single class question's exclusive classes add up."""
    quoted = make_features(target="/search?q=red+shoes&sort=name%27)")  # syntax in a value: P(attack) counts
    v = Policy(PolicyConfig()).verdict(quoted, two_questions(attack, bad), ScoreRequest())
    assert v.action is action, v.reason
    assert v.score == pytest.approx(attack + (1 - attack) * bad)
    single = Policy(PolicyConfig()).verdict(quoted, probs(human=1 - attack - bad, bad_bot=bad, attack=attack), ScoreRequest())
    assert single.action is (Action.CHALLENGE if attack + bad >= 0.5 else Action.FORWARD), single.reason
    assert single.score == pytest.approx(attack + bad)
