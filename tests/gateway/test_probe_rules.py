"""A probe rule (probe: true) asks the site first: a real gateway in front of the bundled demo site, httpx."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.clients import ClientState
from gateway.rules import RuleOptions, load
from gateway.verdict import Action, Verdict
from tests.harness import ROOT, Gateway, config_for

pytestmark = pytest.mark.timeout(120)

BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Accept": "text/html"}
# the demo site serves /shop and /forum; a probe rule over one of them stands for software that runs behind the gateway
RULES = """rules:
  - name: shop-admin-probes
    description: a path of software the demo site runs
    path: /shop/**
    action: challenge
    difficulty: 12
    probe: true
"""


@pytest.fixture(scope="module")
def gateway(demo_origin: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    work = tmp_path_factory.mktemp("probe")
    (work / "probe.yaml").write_text(RULES)
    cfg = config_for(demo_origin.url, rules={"files": [str(work / "probe.yaml"), str(ROOT / "rules" / "default.yaml")]},
                     model={"enabled": False}, challenge={"dev_generate_secret": True},
                     logging={"level": "info", "access_log": "-", "debug_headers": True})
    gw = Gateway(work / "gw", cfg)
    yield gw
    gw.stop()


def test_a_probe_for_software_the_site_does_not_run_is_blocked_and_earns_its_client_a_block(gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        probe = client.get("/wp-login.php", headers={"X-Forwarded-For": "198.51.100.20", **BROWSER})
        assert probe.status_code == 403 and probe.headers.get("x-clefgate-verdict") == "block", probe.headers
        assert probe.headers.get("x-clefgate-source") == "origin" and probe.headers.get("x-clefgate-rule") == "wordpress-paths"
        assert "404" in probe.headers.get("x-clefgate-reason", "")
        head = client.head("/phpmyadmin/index.php", headers={"X-Forwarded-For": "198.51.100.21", **BROWSER})
        assert head.headers.get("x-clefgate-verdict") == "block" and head.headers.get("x-clefgate-rule") == "database-panel-paths"
        # the probe is attack evidence: what the same client would next be challenged for is blocked
        later = client.get("/shop/1", headers={"X-Forwarded-For": "198.51.100.20", **BROWSER})
        assert later.headers.get("x-clefgate-verdict") == "block" and later.headers.get("x-clefgate-source") == "client", later.headers
    metrics = gateway.metrics()
    assert re.search(r'clefgate_probe_checks_total\{answer="absent"\} 2', metrics)


def test_a_path_the_site_has_is_challenged_as_the_rule_says_and_its_answer_never_reaches_the_client(gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        page = client.get("/forum", headers={"X-Forwarded-For": "198.51.100.30", **BROWSER})  # not under the rule
        assert page.status_code == 200
        there = client.get("/shop/1", headers={"X-Forwarded-For": "198.51.100.31", **BROWSER})
        assert there.headers.get("x-clefgate-verdict") == "challenge" and there.headers.get("x-clefgate-challenge") == "pow; difficulty=12"
        assert "Add to cart" not in there.text  # the product page the site answered is dropped
        gone = client.get("/shop/999", headers={"X-Forwarded-For": "198.51.100.33", **BROWSER})  # no such product: a probe
        assert gone.headers.get("x-clefgate-verdict") == "block"
        # a post is never asked of the site: it could change something there
        posted = client.post("/shop/999", data={"sku": "A1"}, headers={"X-Forwarded-For": "198.51.100.32", **BROWSER})
        assert posted.headers.get("x-clefgate-verdict") == "challenge"
    assert re.search(r'clefgate_probe_checks_total\{answer="present"\} [1-9]', gateway.metrics())


def test_probe_is_a_challenge_rule_s_key_and_an_override_drops_it(tmp_path: Any) -> None:
    from gateway.rules.loader import RuleOptions as Options

    path = tmp_path / "r.yaml"
    path.write_text("rules:\n  - {name: wp, path: /wp-login.php, action: challenge, probe: true}\n")
    table = load([str(path)], RuleOptions(), ClientState())
    from tests.conftest import make_features

    out = table.evaluate(make_features(target="/wp-login.php"))
    assert isinstance(out, Verdict) and out.action is Action.CHALLENGE and out.probe
    blocked = load([str(path)], Options(actions={"wp": "block"}), ClientState()).evaluate(make_features(target="/wp-login.php"))
    assert isinstance(blocked, Verdict) and blocked.action is Action.BLOCK and not blocked.probe
