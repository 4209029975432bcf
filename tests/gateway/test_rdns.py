"""Crawlers verified by forward-confirmed reverse DNS: the lookup, its cache, the rule condition and the pipeline's wait."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from gateway import config as configmod
from gateway import rdns
from gateway.config import ConfigError
from gateway.pipeline import build
from gateway.rdns import LookupNeeded, ReverseNames, confirmed_names, under
from gateway.verdict import Action, Verdict
from tests.conftest import make_features

ROOT = Path(__file__).resolve().parents[2]
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
BINGBOT = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"

# a DNS of our own: PTR names, and what each name resolves to
PTR = {"203.0.113.9": "crawl-203-0-113-9.googlebot.com.", "2001:db8::9": "crawl-2001-db8--9.googlebot.com",
       "203.0.113.10": "crawl-203-0-113-10.googlebot.com",  # resolves elsewhere: a PTR record its owner wrote
       "203.0.113.11": "rate-limited-proxy-66-249-66-1.google.com",
       "203.0.113.12": "vm-1.bc.googleusercontent.com",  # any cloud customer's machine
       "203.0.113.13": "msnbot-203-0-113-13.search.msn.com", "203.0.113.14": "203.0.113.14",
       "203.0.113.15": "googlebot.com.evil.example", "203.0.113.16": "CRAWL-203-0-113-16.GoogleBot.COM."}
FORWARD = {"crawl-203-0-113-9.googlebot.com": ["203.0.113.9"], "crawl-2001-db8--9.googlebot.com": ["2001:db8:0:0::9"],
           "crawl-203-0-113-10.googlebot.com": ["198.51.100.1"], "rate-limited-proxy-66-249-66-1.google.com": ["::ffff:203.0.113.11"],
           "vm-1.bc.googleusercontent.com": ["203.0.113.12"], "msnbot-203-0-113-13.search.msn.com": ["203.0.113.13"],
           "googlebot.com.evil.example": ["203.0.113.15"], "crawl-203-0-113-16.googlebot.com": ["203.0.113.16"],
           "203.0.113.14": ["203.0.113.14"]}  # getaddrinfo hands a numeric name back as its address


class FakeDns:
    """PTR and forward answers from the tables above, counting the lookups; ``fail`` raises, ``gate`` holds each lookup."""

    def __init__(self, fail: bool = False, gate: threading.Event | None = None) -> None:
        self.fail, self.gate, self.calls = fail, gate, 0

    def ptr(self, address: str) -> str | None:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail:
            raise OSError("SERVFAIL")
        return PTR.get(address)

    def forward(self, name: str) -> Iterable[str]:
        return FORWARD.get(name, [])

    @property
    def resolver(self) -> rdns.Resolver:
        return (self.ptr, self.forward)


def test_a_name_counts_only_when_it_resolves_back_to_the_address() -> None:
    dns = FakeDns().resolver
    assert confirmed_names("203.0.113.9", dns) == ("crawl-203-0-113-9.googlebot.com",)
    assert confirmed_names("2001:db8::9", dns) == ("crawl-2001-db8--9.googlebot.com",)  # the same address, written otherwise
    assert confirmed_names("203.0.113.11", dns) == ("rate-limited-proxy-66-249-66-1.google.com",)  # IPv4-mapped forward answer
    assert confirmed_names("203.0.113.10", dns) == ()  # the PTR record alone is the address owner's word
    assert confirmed_names("203.0.113.14", dns) == ()  # a PTR holding an address names nothing
    assert confirmed_names("203.0.113.16", dns) == ("crawl-203-0-113-16.googlebot.com",)  # case and the final dot as DNS has them
    assert confirmed_names("198.51.100.77", dns) == ()  # no PTR


def test_the_system_resolver_confirms_a_name_from_the_hosts_file() -> None:
    """The real resolver (getnameinfo, getaddrinfo): loopback is named in every host's /etc/hosts."""
    assert confirmed_names("127.0.0.1") == ("localhost",)


@pytest.mark.parametrize("name,domains,expected", [
    ("crawl-66-249-66-1.googlebot.com", ("googlebot.com",), True), ("googlebot.com", ("googlebot.com",), True),
    ("notgooglebot.com", ("googlebot.com",), False), ("googlebot.com.evil.example", ("googlebot.com",), False),
    ("msnbot-1.search.msn.com", ("googlebot.com", "search.msn.com"), True), ("x.msn.com", ("search.msn.com",), False)])
def test_a_name_is_under_a_domain_only_at_a_label_boundary(name: str, domains: tuple[str, ...], expected: bool) -> None:
    assert under(name, domains) is expected


def test_answers_are_kept_for_their_time_and_one_lookup_serves_every_waiting_request() -> None:
    now = [1000.0]
    dns = FakeDns()
    names = ReverseNames(ttl_s=100, negative_ttl_s=10, resolver=dns.resolver, clock=lambda: now[0])

    async def run() -> None:
        with pytest.raises(LookupNeeded) as needed:
            names.check("203.0.113.9", (3, "app"))
        assert (needed.value.address, needed.value.names, needed.value.resume) == ("203.0.113.9", names, (3, "app"))
        assert not names.confirmed("203.0.113.9", ("googlebot.com",))  # no answer yet: unconfirmed, nothing looked up
        found = await asyncio.gather(*(names.lookup("203.0.113.9") for _ in range(5)))
        assert found == [("crawl-203-0-113-9.googlebot.com",)] * 5 and dns.calls == 1
        names.check("203.0.113.9")  # answered: no lookup needed
        assert names.confirmed("203.0.113.9", ("googlebot.com",)) and not names.confirmed("203.0.113.9", ("search.msn.com",))
        assert await names.lookup("203.0.113.10") == () and not names.confirmed("203.0.113.10", ("googlebot.com",))
        now[0] += 50  # the name is kept, the negative answer is not
        assert names.names("203.0.113.9") is not None and names.names("203.0.113.10") is None
        now[0] += 60
        assert not names.confirmed("203.0.113.9", ("googlebot.com",))
        with pytest.raises(LookupNeeded):
            names.check("203.0.113.9")
        await names.lookup("203.0.113.9")
        assert dns.calls == 3

    asyncio.run(run())
    names.close()


def _count(result: str) -> float:
    return rdns.LOOKUPS.values.get((result,), 0)


def test_a_failed_lookup_confirms_nothing_for_a_minute() -> None:
    now = [1000.0]
    names = ReverseNames(resolver=FakeDns(fail=True).resolver, clock=lambda: now[0])
    before = _count("failed")
    assert asyncio.run(names.lookup("203.0.113.9")) == () and _count("failed") == before + 1
    names.check("203.0.113.9")  # kept as unverified: no second lookup at once
    now[0] += rdns.RETRY_S
    with pytest.raises(LookupNeeded):
        names.check("203.0.113.9")


def test_slow_lookups_hold_threads_and_neither_one_network_nor_many_take_them_all() -> None:
    gate = threading.Event()
    slow = FakeDns(gate=gate)
    now = [1000.0]  # the answers' clock (the lookups' own timeout is the event loop's)
    names = ReverseNames(timeout_s=2.0, resolver=slow.resolver, clock=lambda: now[0])

    async def run() -> None:
        assert await names.lookup("198.51.100.1") == ()  # timed out: the request goes on, unverified; its thread is held
        same = [asyncio.ensure_future(names.lookup(f"198.51.100.{i}")) for i in range(2, 2 + rdns.NETWORK_THREADS)]
        # the network's share is taken (one timed out, the rest waiting): one more from it is refused at once (a lookup
        # that waited for a thread would wait for the gate, past this half second)
        assert await asyncio.wait_for(same[-1], 0.5) == ()
        assert not any(w.done() for w in same[:-1])
        before = _count("busy")
        # addresses of other networks each: the threads left are taken, and one more is refused, not queued
        others = [asyncio.ensure_future(names.lookup(f"198.18.{i}.1")) for i in range(rdns.THREADS - rdns.NETWORK_THREADS + 1)]
        assert await asyncio.wait_for(others[-1], 0.5) == ()
        assert _count("busy") == before + 1 and not any(o.done() for o in others[:-1])
        gate.set()
        await asyncio.gather(*same, *others)
        # a refusal is tried again after a few seconds, not a minute
        refused = f"198.18.{rdns.THREADS - rdns.NETWORK_THREADS}.1"
        names.check(refused)
        now[0] += rdns.BUSY_RETRY_S
        with pytest.raises(LookupNeeded):
            names.check(refused)

    asyncio.run(run())
    names.close()


def test_with_lookups_off_an_unknown_address_is_unconfirmed() -> None:
    names = ReverseNames(timeout_s=0, resolver=FakeDns().resolver)
    assert names.confirmed("203.0.113.9", ("googlebot.com",)) is False


def _pipeline(tmp_path: Path, dns: FakeDns, **clients: Any) -> Any:
    raw: dict[str, Any] = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "payload": {"enabled": False},
                           "rules": {"files": [str(ROOT / "rules" / "default.yaml")], "default": "allow"},
                           "challenge": {"keys": [{"id": "k1", "secret": "s" * 40}]}, "clients": clients}
    pipeline = build(configmod.validate(raw, str(tmp_path / "clefgate.yaml")))
    assert pipeline.state is not None
    pipeline.state.names.resolver = dns.resolver
    return pipeline


def _decide(pipeline: Any, user_agent: str, address: str) -> tuple[Verdict, bool]:
    headers = [("Host", "shop.example"), ("User-Agent", user_agent), ("Accept", "*/*"), ("Accept-Encoding", "gzip")]
    outcome = pipeline.decide(make_features(headers=headers, client_ip=address))
    if isinstance(outcome, Verdict):
        return outcome, False
    return asyncio.run(outcome), True


def test_the_shipped_rules_let_a_crawler_through_from_a_new_range_when_its_name_confirms_it(tmp_path: Path) -> None:
    dns = FakeDns()
    pipeline = _pipeline(tmp_path, dns)
    verdict, waited = _decide(pipeline, GOOGLEBOT, "66.249.66.1")  # inside the published ranges: no lookup
    assert verdict.rule == "allow-verified-googlebot" and not waited and dns.calls == 0
    verdict, waited = _decide(pipeline, GOOGLEBOT, "203.0.113.9")
    assert (verdict.action, verdict.rule, waited) == (Action.FORWARD, "allow-googlebot-by-reverse-dns", True)
    verdict, waited = _decide(pipeline, GOOGLEBOT, "203.0.113.9")  # the answer is kept: decided at once
    assert verdict.rule == "allow-googlebot-by-reverse-dns" and not waited and dns.calls == 1
    assert _decide(pipeline, GOOGLEBOT, "2001:db8::9")[0].rule == "allow-googlebot-by-reverse-dns"
    assert _decide(pipeline, BINGBOT, "203.0.113.13")[0].rule == "allow-bingbot-by-reverse-dns"
    # a name that does not resolve back, a cloud customer's name, the wrong operator's name, a look-alike domain, no name
    for agent, address in ((GOOGLEBOT, "203.0.113.10"), (GOOGLEBOT, "203.0.113.12"), (GOOGLEBOT, "203.0.113.13"),
                           (GOOGLEBOT, "203.0.113.15"), (BINGBOT, "203.0.113.9"), (GOOGLEBOT, "198.51.100.7")):
        verdict, _ = _decide(pipeline, agent, address)
        assert (verdict.action, verdict.rule) == (Action.BLOCK, "block-crawler-spoofers"), (agent, address)
    before = dns.calls
    firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    verdict, waited = _decide(pipeline, firefox, "198.51.100.8")  # no crawler's name: nothing looked up
    assert verdict.action is Action.FORWARD and not waited and dns.calls == before


def test_a_crawler_that_its_published_range_verifies_is_never_looked_up(tmp_path: Path) -> None:
    dns = FakeDns()
    pipeline = _pipeline(tmp_path, dns)
    for agent, address in ((GOOGLEBOT, "66.249.66.1"), (BINGBOT, "157.55.39.1"), (GOOGLEBOT, "2001:4860:4801:10::1")):
        verdict, waited = _decide(pipeline, agent, address)
        assert verdict.action is Action.FORWARD and verdict.rule.startswith("allow-verified-") and not waited, (agent, verdict)
    assert dns.calls == 0


def test_requests_waiting_for_one_address_share_its_lookup(tmp_path: Path) -> None:
    gate = threading.Event()
    dns = FakeDns(gate=gate)
    pipeline = _pipeline(tmp_path, dns)
    headers = [("Host", "shop.example"), ("User-Agent", GOOGLEBOT), ("Accept", "*/*")]

    async def run() -> list[Verdict]:
        waiting = [pipeline.decide(make_features(target=f"/page/{i}", headers=headers, client_ip="203.0.113.9")) for i in range(6)]
        assert not any(isinstance(w, Verdict) for w in waiting)
        asyncio.get_running_loop().call_later(0.05, gate.set)
        return list(await asyncio.gather(*waiting))

    verdicts = asyncio.run(run())
    assert {v.rule for v in verdicts} == {"allow-googlebot-by-reverse-dns"} and dns.calls == 1


def test_the_table_resumes_where_it_stopped_no_rule_runs_twice(tmp_path: Path) -> None:
    """A rate rule and a route rule before the one asking for names: after the lookup the table goes on from that rule,
    so the first request spends one token (not two) and keeps the backend the route rule chose."""
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n"
                    "  - {name: tight, rate: {limit: 2/min, key: ip}, action: block, status: 429}\n"
                    "  - {name: to-api, path: /api/**, action: route, backend: api, continue: true}\n"
                    "  - {name: named-bot, user_agent: '(?i)examplebot', reverse_dns: [bots.example.org], action: allow}\n")
    raw = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}, "api": {"servers": ["http://127.0.0.1:10"]}},
           "payload": {"enabled": False}, "rules": {"files": [str(path)], "default": "allow"}}
    PTR["203.0.113.40"] = "crawler-1.bots.example.org"
    FORWARD["crawler-1.bots.example.org"] = ["203.0.113.40"]
    try:
        pipeline = build(configmod.validate(raw, str(tmp_path / "clefgate.yaml")))
        assert pipeline.state is not None
        dns = FakeDns()
        pipeline.state.names.resolver = dns.resolver
        headers = [("Host", "shop.example"), ("User-Agent", "ExampleBot/1.0")]
        seen = []
        for _ in range(3):
            outcome = pipeline.decide(make_features(target="/api/items", headers=headers, client_ip="203.0.113.40"))
            verdict = outcome if isinstance(outcome, Verdict) else asyncio.run(outcome)
            seen.append((verdict.action, verdict.rule, verdict.backend))
        assert seen == [(Action.FORWARD, "named-bot", "api"), (Action.FORWARD, "named-bot", "api"), (Action.BLOCK, "tight", None)]
        assert dns.calls == 1
    finally:
        del PTR["203.0.113.40"], FORWARD["crawler-1.bots.example.org"]


UNVERIFIED = "crawlers-unverified-come-back-later"


def test_with_lookups_off_the_published_ranges_alone_verify_and_the_others_are_asked_to_come_back(tmp_path: Path) -> None:
    dns = FakeDns()
    pipeline = _pipeline(tmp_path, dns, reverse_dns_timeout_s=0)
    assert _decide(pipeline, GOOGLEBOT, "66.249.66.1")[0].rule == "allow-verified-googlebot"
    assert _decide(pipeline, GOOGLEBOT, "203.0.113.9") == (_decide(pipeline, GOOGLEBOT, "203.0.113.9")[0], False)
    verdict = _decide(pipeline, GOOGLEBOT, "203.0.113.9")[0]
    assert (verdict.action, verdict.rule, verdict.status) == (Action.BLOCK, UNVERIFIED, 429) and dns.calls == 0
    # a crawler whose operator documents no name check (DuckDuckBot) is a spoofer outside its addresses, as before
    duck = "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)"
    assert _decide(pipeline, duck, "203.0.113.9")[0].rule == "block-crawler-spoofers"


@pytest.mark.parametrize("dns", [FakeDns(fail=True), FakeDns(gate=threading.Event())], ids=["fails", "times-out"])
def test_a_lookup_without_an_answer_asks_the_crawler_to_come_back_later_not_to_leave(tmp_path: Path, dns: FakeDns) -> None:
    """A failed or timed-out lookup says nothing about the claimant: 429 with Retry-After, which a search engine retries
    without dropping the page, where a 403 says the page is forbidden; a definite answer that is not the operator's blocks."""
    pipeline = _pipeline(tmp_path, dns, reverse_dns_timeout_s=0.2)
    try:
        verdict, waited = _decide(pipeline, GOOGLEBOT, "203.0.113.9")
        assert (verdict.action, verdict.rule, verdict.status, waited) == (Action.BLOCK, UNVERIFIED, 429, True)
        assert pipeline.pages.block(verdict, make_features()).headers[-1] == ("Retry-After", "60")
        assert _decide(pipeline, GOOGLEBOT, "203.0.113.9") == (verdict, False)  # not looked up again for a minute
    finally:
        if dns.gate is not None:
            dns.gate.set()
    answered = _pipeline(tmp_path, FakeDns())
    verdict, _ = _decide(answered, GOOGLEBOT, "198.51.100.7")  # no name at all: a definite answer
    assert (verdict.rule, verdict.status) == ("block-crawler-spoofers", 403)


def test_a_lookup_that_keeps_nothing_is_decided_as_unanswered_not_asked_for_again(tmp_path: Path) -> None:
    """A pipeline being replaced looks nothing up and keeps nothing: the table, resumed after the first rule asking for
    names, does not stop again before the later ones (the shipped come-back-later rule claims every name the lookups
    verify), which would raise out of the pipeline's wait."""
    dns = FakeDns()
    pipeline = _pipeline(tmp_path, dns)
    assert pipeline.state is not None
    pipeline.state.names.close()
    for agent in (GOOGLEBOT, BINGBOT, "Mozilla/5.0 (Applebot/0.1)"):
        verdict, waited = _decide(pipeline, agent, "203.0.113.9")
        assert (verdict.rule, verdict.status, waited) == (UNVERIFIED, 429, True)
    assert dns.calls == 0


@pytest.mark.parametrize("rule,problem", [
    ("{name: r, reverse_dns: [googlebot.com], action: allow}", "reverse_dns: needs a user_agent condition"),
    ("{name: r, any: [{reverse_dns: [googlebot.com]}], action: allow}", "reverse_dns: needs a user_agent condition"),
    ("{name: r, user_agent: bot, reverse_dns: [com], action: allow}", "'com' is not a domain name of two labels"),
    ("{name: r, user_agent: bot, reverse_dns: ['*.googlebot.com'], action: allow}", "is not a domain name"),
    ("{name: r, user_agent: bot, reverse_dns: [], action: allow}", "reverse_dns: empty list"),
    ("{name: r, reverse_dns_unanswered: true, action: block}", "reverse_dns_unanswered: needs a user_agent condition"),
    ("{name: r, user_agent: bot, reverse_dns_unanswered: maybe, action: block}", "reverse_dns_unanswered: expected true or false")])
def test_a_reverse_dns_condition_is_checked_with_the_rest_of_the_file(tmp_path: Path, rule: str, problem: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(f"rules:\n  - {rule}\n  - {{name: other, ip: 10.0.0.5/8, action: block}}\n")
    raw = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"files": [str(path)]}}
    with pytest.raises(ConfigError) as err:
        build(configmod.validate(raw, str(tmp_path / "clefgate.yaml")))
    assert any(problem in p for p in err.value.problems), err.value.problems
    assert any("other: ip:" in p for p in err.value.problems)  # every problem of the file, not the first alone


def test_a_not_group_asks_for_the_lookup_too(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - {name: unconfirmed-bot, user_agent: '(?i)examplebot', not: {reverse_dns: [bots.example.org]}, action: block}\n")
    raw = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "payload": {"enabled": False},
           "rules": {"files": [str(path)], "default": "allow"}}
    pipeline = build(configmod.validate(raw, str(tmp_path / "clefgate.yaml")))
    PTR["203.0.113.40"] = "crawler-1.bots.example.org"
    FORWARD["crawler-1.bots.example.org"] = ["203.0.113.40"]
    try:
        assert pipeline.state is not None
        pipeline.state.names.resolver = FakeDns().resolver
        assert _decide(pipeline, "ExampleBot/1.0", "203.0.113.40")[0].action is Action.FORWARD
        assert _decide(pipeline, "ExampleBot/1.0", "203.0.113.41")[0].action is Action.BLOCK
    finally:
        del PTR["203.0.113.40"], FORWARD["crawler-1.bots.example.org"]


def test_unanswered_is_its_own_answer_in_a_rule_of_ones_own(tmp_path: Path) -> None:
    """``reverse_dns_unanswered`` looks the claimant up as ``reverse_dns`` does; ``false`` and ``not`` read the other way."""
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n"
                    "  - {name: named, user_agent: '(?i)examplebot', reverse_dns: [bots.example.org], action: allow}\n"
                    "  - {name: unknown, user_agent: '(?i)examplebot', reverse_dns_unanswered: true, action: challenge}\n"
                    "  - {name: known, user_agent: '(?i)examplebot', any: [{reverse_dns_unanswered: false}], action: block}\n"
                    "  - {name: never, user_agent: '(?i)examplebot', not: {reverse_dns_unanswered: false}, action: block}\n")
    raw = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "payload": {"enabled": False},
           "rules": {"files": [str(path)], "default": "allow"}, "challenge": {"keys": [{"id": "k1", "secret": "s" * 40}]}}
    for dns, expected in ((FakeDns(), "known"), (FakeDns(fail=True), "unknown")):
        pipeline = build(configmod.validate(raw, str(tmp_path / "clefgate.yaml")))
        assert pipeline.state is not None
        pipeline.state.names.resolver = dns.resolver
        verdict, waited = _decide(pipeline, "ExampleBot/1.0", "203.0.113.41")  # no name at all, or no answer
        assert (verdict.rule, waited, dns.calls) == (expected, True, 1), dns.fail


def test_fallback_rules_cannot_wait_for_a_lookup(tmp_path: Path) -> None:
    path = tmp_path / "fallback.yaml"
    path.write_text("rules:\n  - {name: named-bot, user_agent: '(?i)examplebot', reverse_dns: [bots.example.org], action: allow}\n")
    raw = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"fallback_files": [str(path)]}}
    with pytest.raises(ConfigError) as err:
        build(configmod.validate(raw, str(tmp_path / "clefgate.yaml")))
    assert any("reverse_dns: not in rules.fallback_files" in p for p in err.value.problems), err.value.problems


@pytest.mark.timeout(120)
def test_a_served_crawler_claim_waits_for_the_real_resolver_and_is_answered(demo_origin: Any, tmp_path: Path) -> None:
    """Through a running gateway and the system resolver: loopback's name (localhost, from the hosts file) is confirmed and
    is not Google's, so a Googlebot claim from it is blocked as a spoofer after the lookup; a browser is not looked up."""
    import httpx

    from tests.harness import config_for, running_gateway

    cfg = config_for(demo_origin.url, rules={"files": [str(ROOT / "rules" / "default.yaml")], "default": "allow"},
                     challenge={"dev_generate_secret": True}, logging={"level": "info", "access_log": "-", "debug_headers": True})
    with running_gateway(tmp_path / "gw", cfg) as gw:
        url = f"http://127.0.0.1:{gw.port}/"
        firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
        # a browser from another address (through the trusted front): no lookup at all
        assert httpx.get(url, headers={"User-Agent": firefox, "X-Forwarded-For": "198.51.100.23"}, timeout=30).status_code == 200
        assert "clefgate_reverse_dns_lookups_total{" not in gw.metrics()
        spoof = httpx.get(url, headers={"User-Agent": GOOGLEBOT}, timeout=30)
        assert spoof.status_code == 403 and spoof.headers["x-clefgate-rule"] == "block-crawler-spoofers"
        assert 'clefgate_reverse_dns_lookups_total{result="confirmed"} 1' in gw.metrics()


def test_offline_deciders_look_nothing_up(tmp_path: Path) -> None:
    """The console's what-if replay decides in a thread without an event loop: a logged crawler claim from outside the
    ranges is decided there as unverified by name, not left waiting for a lookup."""
    from gateway.console import replay_under

    raw = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "payload": {"enabled": False},
           "rules": {"files": [str(ROOT / "rules" / "default.yaml")], "default": "allow"}, "model": {"enabled": False},
           "challenge": {"dev_generate_secret": True}}
    cfg = configmod.validate(raw, str(tmp_path / "clefgate.yaml"))
    assert cfg.clients.reverse_dns_timeout_s > 0
    entry = {"method": "GET", "target": "/", "client_ip": "203.0.113.9", "request_id": "r1", "time": 1_800_000_000.0, "status": 403,
             "decided": "block", "headers": [["Host", "shop.example"], ["User-Agent", GOOGLEBOT]]}
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["ok"] = replay_under(cfg, {}, [entry], None)
        except Exception as exc:  # whatever it is, the assertion below shows it
            result["error"] = repr(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert "error" not in result and result["ok"]["actions"] == {"block": 1}, result
