"""A site asks for a challenge in its response (challenge.step_up_header): a real origin, a real gateway, httpx.

The origin's ``/step-up/{bits}`` acts only for a request whose ``X-Clefgate-Pass`` holds ``bits``; to any other it
answers 403 with ``X-Clefgate-Step-Up: {bits}``. The gateway answers such a response with its challenge, tells the
site what a client's pass holds, and never shows clients the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from gateway.challenge import solve
from gateway.proxy.http1 import ResponseScan, parse_response_head
from tests.harness import ROOT, Gateway, config_for
from tests.origin import OriginProcess, start_origin

pytestmark = pytest.mark.timeout(120)

SECRET = "step-up-test-secret-0123456789-abcdefghijklmnop"
BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
           "Accept": "text/html,application/xhtml+xml", "Accept-Language": "en-GB,en;q=0.5"}


@pytest.fixture(scope="module")
def origin() -> Iterator[OriginProcess]:
    o = start_origin("step-up-origin")
    yield o
    o.stop()


def _gateway(origin: OriginProcess, work: Path, **challenge: object) -> Gateway:
    rules = work / "allow.yaml"
    # the site decides; a rule that can challenge elsewhere has the gateway read a form's body before deciding, to keep it
    rules.write_text("rules:\n  - name: members\n    description: a challenge elsewhere\n    path: /members/**\n    action: challenge\n"
                     "  - name: let-everything-through\n    description: the site decides here\n    action: allow\n")
    cfg = config_for(origin.url, rules={"files": [str(rules)]}, model={"enabled": False},
                     challenge={"keys": [{"id": "t", "secret": SECRET}], **challenge},
                     logging={"level": "info", "access_log": "-", "debug_headers": True})
    return Gateway(work / "gw", cfg)


@pytest.fixture(scope="module")
def gateway(origin: OriginProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    gw = _gateway(origin, tmp_path_factory.mktemp("step-up"))
    yield gw
    gw.stop()


def _pass(gw: Gateway, client: httpx.Client, page: httpx.Response, xff: str) -> httpx.Response:
    """Solve the challenge page as its script would: the verify endpoint's answer (a 303 home, or the kept form's resend page)."""
    token = re.search(r'name="token" value="([^"]+)"', page.text)
    nonce = re.search(r'data-nonce="([^"]+)"', page.text)
    difficulty = re.search(r'data-difficulty="(\d+)"', page.text)
    assert token and nonce and difficulty, page.text[:400]
    fields = {"token": token.group(1), "counter": solve(nonce.group(1), int(difficulty.group(1)))}
    kept = re.search(r'name="form" value="([^"]*)"', page.text)
    if kept:
        fields["form"] = kept.group(1).replace("&amp;", "&")
    return client.post(gw.url + "/.clefgate/verify", content=urlencode(fields),
                       headers={"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": xff, "Origin": gw.url,
                                "Sec-Fetch-Site": "same-origin", **BROWSER})


def test_the_site_s_step_up_is_answered_with_a_challenge_and_acted_on_once_solved(gateway: Gateway) -> None:
    xff = "198.51.100.7"
    with httpx.Client(timeout=30) as client:
        page = client.get(gateway.url + "/step-up/10", headers={"X-Forwarded-For": xff, **BROWSER})
        assert page.status_code == 403 and "x-clefgate-step-up" not in page.headers
        assert page.headers.get("x-clefgate-source") == "origin" and page.headers.get("x-clefgate-verdict") == "challenge"
        assert page.headers.get("x-clefgate-challenge") == "pow; difficulty=10"
        assert "step up first" not in page.text
        answer = _pass(gateway, client, page, xff)
        assert answer.status_code == 303 and answer.headers["location"] == "/step-up/10"
        cookie = answer.headers["set-cookie"].split(";", 1)[0]
        acted = client.get(gateway.url + "/step-up/10", headers={"X-Forwarded-For": xff, "Cookie": cookie, **BROWSER})
        assert acted.status_code == 200 and acted.json()["acted"] is True
        # a site that asks a client whose pass is already enough gets its own answer through, the field cut (no loop)
        again = client.get(gateway.url + "/step-up/8?always=1", headers={"X-Forwarded-For": xff, "Cookie": cookie, **BROWSER})
        assert again.status_code == 403 and again.text == "step up first\n" and "x-clefgate-step-up" not in again.headers
        # a step the pass does not reach is asked again, at the site's difficulty
        more = client.get(gateway.url + "/step-up/12", headers={"X-Forwarded-For": xff, "Cookie": cookie, **BROWSER})
        assert more.status_code == 403 and more.headers.get("x-clefgate-challenge") == "pow; difficulty=12"
    with httpx.Client(timeout=30) as client:  # a client without the pass (httpx keeps cookies)
        # a site that asks for more than 32 bits gets 32
        most = client.get(gateway.url + "/step-up/40", headers={"X-Forwarded-For": xff, **BROWSER})
        assert most.headers.get("x-clefgate-challenge") == "pow; difficulty=32"
        # a HEAD and a chunked answer are stepped up the same way
        head = client.head(gateway.url + "/step-up/10", headers={"X-Forwarded-For": xff, **BROWSER})
        chunked = client.get(gateway.url + "/step-up/10?chunked=1", headers={"X-Forwarded-For": xff, **BROWSER})
        assert head.headers.get("x-clefgate-source") == "origin", head.headers
        assert chunked.headers.get("x-clefgate-source") == "origin", chunked.headers
        assert "step up first" not in chunked.text
        # the connection the site's answer came on is dropped; the next request is served as usual
        assert client.get(gateway.url + "/echo", headers={"X-Forwarded-For": xff, **BROWSER}).status_code == 200
    metrics = gateway.metrics()
    assert re.search(r'clefgate_challenge_step_ups_total\{outcome="challenged"\} [4-9]', metrics), metrics[:200]
    assert 'clefgate_challenge_step_ups_total{outcome="passed"} 1' in metrics  # only where the site asked again


def test_a_posted_form_the_site_steps_up_is_sent_again_once_solved(gateway: Gateway) -> None:
    xff = "198.51.100.8"
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": gateway.url, "Sec-Fetch-Site": "same-origin",
            "X-Forwarded-For": xff, **BROWSER}
    with httpx.Client(timeout=30) as client:
        page = client.post(gateway.url + "/step-up/8", content="item=42&qty=1", headers=form)
        assert page.status_code == 403 and page.headers.get("x-clefgate-source") == "origin"
        resend = _pass(gateway, client, page, xff)
        assert resend.status_code == 200 and 'value="42"' in resend.text and 'action="/step-up/8"' in resend.text, resend.text[-600:]
        cookie = resend.headers["set-cookie"].split(";", 1)[0]
        acted = client.post(gateway.url + "/step-up/8", content="item=42&qty=1", headers={**form, "Cookie": cookie})
        assert acted.status_code == 200 and acted.json() == {"acted": True, "method": "POST", "body": "item=42&qty=1",
                                                             "origin": "step-up-origin"}


def test_a_client_cannot_claim_a_pass_to_the_site(gateway: Gateway) -> None:
    with httpx.Client(timeout=30) as client:
        forged = client.get(gateway.url + "/step-up/8", headers={"X-Forwarded-For": "198.51.100.9", "X-Clefgate-Pass": "difficulty=32",
                                                                 **BROWSER})
    assert forged.status_code == 403 and forged.headers.get("x-clefgate-source") == "origin"


def test_with_step_ups_off_the_site_s_answer_goes_through(origin: OriginProcess, tmp_path: Path) -> None:
    gw = _gateway(origin, tmp_path, step_up_header="")
    try:
        with httpx.Client(timeout=30) as client:
            r = client.get(gw.url + "/step-up/8", headers={"X-Forwarded-For": "198.51.100.10", **BROWSER})
        assert r.status_code == 403 and r.text == "step up first\n" and r.headers.get("x-clefgate-step-up") == "8"
    finally:
        gw.stop()


def test_the_step_up_field_is_read_and_cut_from_what_is_forwarded() -> None:
    scan = ResponseScan("X-Request-Id", "X-Clefgate-Step-Up")
    head = parse_response_head(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nx-clefgate-STEP-up:  14 \r\nX-Other: 1\r\n\r\n", scan)
    assert head.step_up == b"14" and b"step-up" not in head.block.lower() and b"x-other: 1" in head.block.lower()
    plain = parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", scan)
    assert plain.step_up is None
    off = parse_response_head(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nX-Clefgate-Step-Up: 14\r\n\r\n", ResponseScan("X-Request-Id"))
    assert off.step_up is None and b"step-up" in off.block.lower()


def test_the_step_up_field_is_documented() -> None:
    assert "step_up_header" in (ROOT / "docs" / "config.md").read_text()
