"""The pages the site serves (gateway.served): what teaches one, how long it is kept, and what the policy does with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import policy as policymod
from gateway.config import PolicyConfig, ServedPagesConfig
from gateway.pipeline import build
from gateway.policy import Policy
from gateway.served import STATIC_FILE, ServedPages, site_host
from gateway.verdict import Action, ScoreRequest, Source, Verdict
from tests.conftest import make_features
from tests.gateway.test_pipeline import KEY, FakeScorer, cfg_of, rules_file
from tests.gateway.test_policy import NO_PAYLOAD_HEADERS, two_questions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def page(target: str = "/products/12", host: str = "www.example.com", method: str = "GET", ip: str = "203.0.113.9") -> object:
    return make_features(method, target, [("Host", host), *NO_PAYLOAD_HEADERS[1:]], client_ip=ip)


@pytest.mark.parametrize("status,method,learnt", [
    (200, "GET", True), (206, "GET", True), (304, "GET", True), (200, "HEAD", True),
    (301, "GET", False), (302, "GET", False), (404, "GET", False), (410, "GET", False), (500, "GET", False), (503, "GET", False),
    (200, "POST", False), (201, "PUT", False), (200, "OPTIONS", False),
])
def test_a_page_is_learnt_from_a_get_or_head_the_site_answered_with_a_2xx_or_304(status: int, method: str, learnt: bool) -> None:
    pages = ServedPages()
    pages.observe(page(method=method), status)
    assert pages.serves(page()) is learnt
    assert pages.serves(page(method="HEAD")) is learnt


def test_a_page_is_its_host_as_routed_and_its_path_as_sent() -> None:
    pages = ServedPages()
    pages.observe(page(host="WWW.Example.com:8443"), 200)
    assert pages.serves(page(host="www.example.com")) and pages.serves(page(host="www.example.com."))
    assert not pages.serves(page(host="shop.example.com"))
    for other in ("/Products/12", "/products/12/", "/products//12", "/products/%31%32", "/products/12;x=1"):
        assert not pages.serves(page(other)), other  # a site may route these apart: no guess makes a probe a page
    assert not pages.serves(page(method="POST"))
    assert site_host(page(host="[2001:db8::1]:8080")) == "[2001:db8::1]"


def test_pages_are_forgotten_after_their_ttl_and_the_least_recently_served_go_first() -> None:
    clock = Clock()
    pages = ServedPages(ServedPagesConfig(ttl_s=60.0, max_pages=3), clock)
    for i in range(3):
        pages.observe(page(f"/p/{i}"), 200)
    clock.now += 30
    pages.observe(page("/p/0"), 200)  # served again: the most recent now
    pages.observe(page("/p/3"), 200)  # the fourth: /p/1 goes
    assert [pages.serves(page(f"/p/{i}")) for i in range(4)] == [True, False, True, True]
    clock.now += 45  # /p/2 was last served 75 s ago, /p/0 and /p/3 45 s ago
    assert [pages.serves(page(f"/p/{i}")) for i in range(4)] == [True, False, False, True]
    assert len(pages) == 2
    pages.observe(page("/" + "x" * 600), 200)  # longer than any page worth remembering
    assert not pages.serves(page("/" + "x" * 600))


def test_a_reload_keeps_what_was_learnt_trims_it_or_forgets_it_when_turned_off() -> None:
    pages = ServedPages()
    for i in range(5):
        pages.observe(page(f"/p/{i}"), 200)
    pages.retune(ServedPagesConfig(max_pages=2))
    assert [pages.serves(page(f"/p/{i}")) for i in range(5)] == [False, False, False, True, True]
    pages.retune(ServedPagesConfig(enabled=False))
    assert not pages.serves(page("/p/4")) and len(pages) == 0
    pages.observe(page("/p/4"), 200)
    assert len(pages) == 0


SERVED = "not counted: it carries nothing but its path, a page the site serves (clients.served_pages)"


def test_the_policy_does_not_count_p_attack_on_a_bare_request_to_a_page_the_site_serves() -> None:
    pol, pages = Policy(PolicyConfig()), ServedPages()
    pol.serves = pages.serves
    bare = page()
    assert pol.verdict(bare, two_questions(0.7), ScoreRequest()).action is Action.CHALLENGE  # a path nobody was served yet
    pages.observe(bare, 200)
    before = policymod.SERVED_PAGES.get("default")
    v = pol.verdict(bare, two_questions(0.7), ScoreRequest(), source=Source.CACHE)
    assert v.action is Action.FORWARD, v.reason
    assert v.reason == f"default policy: P(bad_bot)=0.10 < 0.5; P(attack)=0.70 {SERVED}"
    assert policymod.SERVED_PAGES.get("default") == before + 1
    # the look still counts, a P(attack) that would block still challenges (no payload to block), and the gate's switch holds
    assert pol.verdict(bare, two_questions(0.7, bad=0.6), ScoreRequest()).action is Action.CHALLENGE
    sure = pol.verdict(bare, two_questions(0.99), ScoreRequest())
    assert sure.action is Action.CHALLENGE and "carries no payload" in sure.reason
    off = Policy(PolicyConfig(suspicion_needs_syntax=False))
    off.serves = pages.serves
    assert off.verdict(bare, two_questions(0.7), ScoreRequest()).action is Action.CHALLENGE
    # anything beyond the path is judged as before: a query with a quote keeps its P(attack) on the same page
    quoted = make_features(target="/products/12?ref=a%27)", headers=[("Host", "www.example.com"), *NO_PAYLOAD_HEADERS[1:]])
    assert pol.verdict(quoted, two_questions(0.7), ScoreRequest()).action is Action.CHALLENGE
    assert policymod.SERVED_PAGES.get("default") == before + 1
    assert "a bare path to a page the site serves" in pol.table()


class PathScorer(FakeScorer):
    """In the challenge band on P(attack) alone, short of a block, for whatever it is asked."""

    def __init__(self, policy: Policy) -> None:
        super().__init__(policy)

    async def decide(self, features: object, request: ScoreRequest) -> Verdict:
        return self.policy.verdict(features, two_questions(0.7), request)  # type: ignore[arg-type]


async def decided(p: object, f: object, status: int) -> Verdict:
    v = p.decide(f)  # type: ignore[attr-defined]
    verdict = v if isinstance(v, Verdict) else await v
    p.observe(f, verdict, status)  # type: ignore[attr-defined]
    return verdict


CRAWLER = "Mozilla/5.0 (compatible; ExampleBot/2.1; +https://example.org/bot)"


async def test_a_person_reaches_a_page_the_site_served_a_crawler_and_a_probe_of_a_missing_one_is_still_challenged(
        tmp_path: Path) -> None:
    text = ("rules:\n  - name: example-bot\n    user_agent: 'ExampleBot'\n    action: allow\n"
            "  - name: everything\n    action: score\n")
    p = build(cfg_of(rules={"files": [rules_file(tmp_path, text)]}, challenge={"keys": [KEY]}), PathScorer)
    bot = [("Host", "www.example.com"), ("User-Agent", CRAWLER), ("Accept", "*/*")]
    person = page("/guides/rewiring-a-lamp")
    assert (await decided(p, person, 403)).action is Action.CHALLENGE
    # the crawler is forwarded (its rule): the site answers one page and not the other
    assert (await decided(p, make_features(target="/guides/rewiring-a-lamp", headers=bot), 200)).rule == "example-bot"
    assert (await decided(p, make_features(target="/setup.bak", headers=bot), 404)).rule == "example-bot"
    served = await decided(p, person, 200)
    assert served.action is Action.FORWARD and SERVED in served.reason, served.reason
    assert (await decided(p, page("/setup.bak"), 403)).action is Action.CHALLENGE
    # a client that earned a block is blocked on the served page all the same (Policy.escalate)
    p.state.history.attacked(p.state.key(person), "sqli in query:q, libinjection")
    earned = await decided(p, person, 403)
    assert earned.action is Action.BLOCK and earned.source is Source.CLIENT, earned.reason
    # a reload keeps the pages; one that turns them off forgets them
    kept = build(cfg_of(rules={"files": [rules_file(tmp_path, text)]}, challenge={"keys": [KEY]}), PathScorer, previous=p)
    assert kept.state is p.state and kept.state.pages.serves(person)
    off = build(cfg_of(rules={"files": [rules_file(tmp_path, text)]}, challenge={"keys": [KEY]},
                       clients={"served_pages": {"enabled": False}}), PathScorer, previous=kept)
    assert off.state is p.state and not off.state.pages.serves(person)
    assert (await decided(off, page("/guides/rewiring-a-lamp", ip="198.51.100.23"), 403)).action is Action.CHALLENGE


def test_a_page_is_not_learnt_from_credentials_an_overlong_host_or_a_forward_it_earned_itself() -> None:
    clock = Clock()
    pages = ServedPages(ServedPagesConfig(ttl_s=60.0), clock)
    with_token = make_features(target="/account", headers=[("Host", "www.example.com"), ("Authorization", "Bearer t0k3n")])
    pages.observe(with_token, 200)
    assert not pages.serves(page("/account"))
    pages.observe(page(host="a" * 254 + ".example"), 200)
    assert len(pages) == 0
    pages.observe(page("/guide"), 200)
    clock.now += 50
    # forwarded because its page was known: the page is not kept alive by it, so a scanner asking again keeps nothing
    pages.observe(page("/guide"), 200, f"default policy: P(bad_bot)=0.10 < 0.5; P(attack)=0.70 {SERVED}")
    clock.now += 15
    assert not pages.serves(page("/guide"))


def test_a_path_that_holds_attack_syntax_is_judged_as_before_whoever_was_served_it() -> None:
    pol, pages = Policy(PolicyConfig()), ServedPages()
    pol.serves = pages.serves
    for path in ("/.git/config", "/.env", "/wp-config.php.bak", "/etc/passwd"):
        pages.observe(page(path), 200)
        assert pages.serves(page(path))
        v = pol.verdict(page(path), two_questions(0.7), ScoreRequest())
        assert v.action is Action.CHALLENGE and SERVED not in v.reason, (path, v.reason)


STATIC = f"not counted: it carries nothing but its path, to {STATIC_FILE} (policy.suspicion_needs_syntax)"


@pytest.mark.parametrize("target,method,spared", [
    ("/build/assets/app-bM1pw56v.js", "GET", True),
    ("/user_avatar/kim/96/8386_2.png", "HEAD", True),
    ("/assets/fonts/merriweather-v28-latin-600.WOFF2", "GET", True),
    ("/index.html", "GET", True),
    ("/products/12", "GET", False),                # no extension: a page or a probe, as before
    ("/build/app.js", "POST", False),              # a file is read, not posted to
    ("/webshell.jsp;.png", "GET", False),          # a path parameter: the server runs the jsp
    ("/admin;x=1/app.js", "GET", False),           # a parameter in a folder
    ("/index.php/x.png", "GET", False),            # PATH_INFO: the server runs index.php
    ("/uploads/shell.php.png", "GET", False),      # an inner extension a server runs
    ("/npm/bootstrap@5.3.0/dist/css/bootstrap.min.css", "GET", True),  # a version's dots in a folder are no script
    ("/exports/users.csv", "GET", False),          # a file pages do not load
    ("/.git/config.js", "GET", False),             # a name that holds a probe's syntax
])
def test_p_attack_is_not_counted_on_a_bare_request_for_a_file_of_the_kind_pages_load(target: str, method: str, spared: bool) -> None:
    pol = Policy(PolicyConfig())
    before = policymod.STATIC_FILES.get("default")
    v = pol.verdict(page(target, method=method), two_questions(0.7), ScoreRequest())
    assert (v.action is Action.FORWARD) is spared, v.reason
    if not spared:  # a probe the model is sure of is challenged, as any bare path is
        assert pol.verdict(page(target, method=method), two_questions(0.99), ScoreRequest()).action is Action.CHALLENGE
    assert (v.reason == f"default policy: P(bad_bot)=0.10 < 0.5; P(attack)=0.70 {STATIC}") is spared
    assert policymod.STATIC_FILES.get("default") == before + spared
    if spared:
        # the look still counts, and so does nothing else however sure the model is of a probe
        assert pol.verdict(page(target, method=method), two_questions(0.7, bad=0.6), ScoreRequest()).action is Action.CHALLENGE
        sure = pol.verdict(page(target, method=method), two_questions(0.99), ScoreRequest())
        assert (sure.action, sure.reason) == (Action.FORWARD, f"default policy: P(bad_bot)=0.10 < 0.5; P(attack)=0.99 {STATIC}")
        looked = pol.verdict(page(target, method=method), two_questions(0.99, bad=0.6), ScoreRequest())
        assert (looked.action, looked.reason) == (Action.CHALLENGE, f"default policy: P(bad_bot)=0.60 >= 0.5; P(attack)=0.99 {STATIC}")
        assert Policy(PolicyConfig(suspicion_needs_syntax=False)).verdict(
            page(target, method=method), two_questions(0.7), ScoreRequest()).action is Action.CHALLENGE


def test_a_live_gateway_forwards_a_file_pages_load_to_the_real_origin_and_challenges_a_bare_path(tmp_path: Path) -> None:
    """Through the proxy, to a real origin, with the model in the challenge band on P(attack) alone for everything."""
    from tests.proxy_support import gateway, get, make_config, request, shared_origin

    origin = shared_origin("a")
    p = build(cfg_of(challenge={"keys": [KEY]}), PathScorer)
    with gateway(make_config([origin.url], tmp_path), p) as g:
        for path in ("/build/assets/app-bM1pw56v.js", "/user_avatar/kim/96/8386_2.png", "/index.html"):
            answer = request(g.port, get(path, host="www.example.com"))
            assert answer.status == 200 and b"challenge" not in answer.body.lower(), (path, answer.status)
        for path in ("/guides/rewiring-a-lamp", "/index.php/x.png", "/uploads/shell.php.png"):
            assert request(g.port, get(path, host="www.example.com")).status == 403, path
