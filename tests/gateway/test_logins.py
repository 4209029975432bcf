"""Credential-stuffing waves per login endpoint (gateway.logins) and the shipped rule that challenges them."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from gateway.clients import ClientState
from gateway.config import LoginsConfig
from gateway.features import Features
from gateway.logins import LoginWatch, credential_submission
from gateway.rules import RuleOptions, load
from tests.conftest import make_features
from tests.harness import ROOT, Gateway, config_for

FORM = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
        ("Content-Type", "application/x-www-form-urlencoded")]
JSON = [("Host", "shop.example:8443"), ("User-Agent", "okhttp/4.12.0"), ("Content-Type", "application/json")]


def login(user: str = "ana@example.org", path: str = "/login", host: str = "shop.example") -> Features:
    body = urlencode({"user": user, "password": "Summer2024!"}).encode()
    return make_features("POST", path, [(n, host if n == "Host" else v) for n, v in FORM], body=body)


@pytest.mark.parametrize("method,headers,body,submits", [
    ("POST", FORM, b"user=ana&password=x", True),
    ("POST", FORM, b"login%5Busername%5D=ana&login%5Bpassword%5D=x", True),
    ("POST", FORM, b"j_username=ana&j_password=x", True),
    ("PUT", JSON, json.dumps({"auth": {"email": "a@b.c", "passwd": "x"}}).encode(), True),
    ("POST", JSON, json.dumps({"current_password": "x", "new_password": "y"}).encode(), True),
    ("POST", JSON, json.dumps({"loginName": "ana", "newPassword": "y"}).encode(), True),
    ("POST", FORM, b"ctl00%24Main%24txtUser=ana&ctl00%24Main%24txtPassword=x", True),
    ("POST", FORM, b"USER_NAME=ana&USER_PASS=x", True),
    ("POST", [("Host", "h"), ("Content-Type", "multipart/form-data; boundary=b")],
     b'--b\r\nContent-Disposition: form-data; name="pwd"\r\n\r\nx\r\n--b--\r\n', True),
    # no password field: a search, a passport number, a passenger list, a comment about passwords
    ("POST", FORM, b"q=reset+my+password", False),
    ("POST", FORM, b"passport_number=X123&passengers=2&bypass=1&compass=n", False),
    ("POST", JSON, json.dumps({"comment": "my password manager"}).encode(), False),
    ("GET", FORM, b"password=x", False),
])
def test_a_credential_submission_is_a_body_field_named_like_a_password(method: str, headers: list[tuple[str, str]], body: bytes,
                                                                        submits: bool) -> None:
    assert credential_submission(make_features(method, "/login", headers, body=body)) is submits


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def submit(watch: LoginWatch, clock: Clock, n: int, status: int, *, gap: float = 0.0, forwarded: bool = True, **where: str) -> None:
    """``n`` credential submissions from as many users, ``gap`` seconds apart, answered ``status``."""
    for i in range(n):
        watch.observe(login(f"u{i}", **where), status, forwarded)
        clock.now += gap


def test_an_endpoint_surges_when_nearly_every_answered_submission_fails() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=20), clock)
    submit(watch, clock, 19, 401, gap=1)
    assert not watch.surging(login())
    watch.observe(login("u19"), 401, True)
    assert watch.surging(login())
    # only credential submissions to that endpoint: not its form, nor another endpoint, nor another site
    assert not watch.surging(make_features("GET", "/login", FORM))
    assert not watch.surging(login(path="/admin/login"))
    assert not watch.surging(login(host="blog.example"))
    # the host's port is not part of the endpoint
    assert watch.surging(login(host="SHOP.example:443"))


def test_people_logging_in_and_mistyping_do_not_make_a_surge() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=20), clock)
    for i in range(200):  # a busy minute: most get in (a redirect), some mistype (401)
        watch.observe(login(f"u{i}"), 303 if i % 3 else 401, True)
        clock.now += 0.25
    assert not watch.surging(login())


def test_a_wave_ten_times_the_usual_rate_surges_where_the_form_fails_with_a_200() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=20, warmup_windows=30), clock)
    for _ in range(40):  # forty minutes of usual traffic: five logins a minute
        for i in range(5):
            watch.observe(login(f"u{i}"), 200, True)
            clock.now += 12
    assert not watch.surging(login())
    for i in range(49):
        watch.observe(login(f"w{i}"), 200, True)
        clock.now += 1
    assert not watch.surging(login())
    watch.observe(login("w49"), 200, True)
    assert watch.surging(login())


def test_the_rate_trigger_waits_for_the_endpoint_s_usual_rate_and_can_be_turned_off() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=20, warmup_windows=30), clock)
    submit(watch, clock, 100, 200, gap=0.5)  # a new gateway in front of a busy login: no usual rate known yet
    assert not watch.surging(login())
    off = LoginWatch(LoginsConfig(min_submissions=20, warmup_windows=1, rate_factor=0), clock)
    submit(off, clock, 100, 200, gap=5)
    assert not off.surging(login())


def test_a_surge_lasts_while_the_wave_does_and_hold_s_after_it() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=20, hold_s=600), clock)
    submit(watch, clock, 20, 401)
    for _minute in range(30):  # the wave goes on, each try challenged (not forwarded): the surge holds
        clock.now += 60
        submit(watch, clock, 20, 403, forwarded=False)
        assert watch.surging(login())
    clock.now += 599
    assert watch.surging(login())
    clock.now += 2
    assert not watch.surging(login())


def test_endpoints_are_bounded_and_a_flood_of_made_up_paths_pushes_no_surge_out() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=2, max_endpoints=3), clock)
    for _ in range(2):
        watch.observe(login(path="/login"), 401, True)
    assert watch.surging(login(path="/login"))
    # posts to paths the site does not serve add nothing; ones it answers take the places that neither surge nor are known
    for n in range(50):
        watch.observe(login(path=f"/x{n}/login"), 404, True)
    for n in range(50):
        watch.observe(login(path=f"/y{n}/login"), 200, True)
    assert watch.surging(login(path="/login")) and len(watch._endpoints) == 3
    assert "shop.example/x0/login" not in watch._endpoints and "shop.example/y49/login" in watch._endpoints


def test_an_endpoint_is_the_path_the_site_routes_whatever_its_spelling() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=20), clock)
    spellings = ["/login", "/login/", "/Login", "//login", "/login;jsessionid=A1", "/%6Cogin", "/auth/../login"]
    for i in range(20):
        watch.observe(login(f"u{i}", path=spellings[i % len(spellings)], host="SHOP.example."), 401, True)
    assert all(watch.surging(login(path=spelling)) for spelling in spellings)


def test_a_quiet_site_s_morning_rush_is_no_wave() -> None:
    clock = Clock()
    watch = LoginWatch(LoginsConfig(min_submissions=20, warmup_windows=30), clock)
    for _ in range(60):  # an hour at one login a minute
        watch.observe(login(), 303, True)
        clock.now += 60
    for i in range(45):  # then 45 people log in within a minute, all in
        watch.observe(login(f"u{i}"), 303, True)
        clock.now += 1
    assert not watch.surging(login())


def test_a_reload_that_tunes_the_watch_keeps_every_client_s_state_and_the_surges() -> None:
    from gateway.config import ClientsConfig, validate
    from gateway.pipeline import build

    base = {"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"files": [str(ROOT / "rules" / "default.yaml")]},
            "challenge": {"dev_generate_secret": True}, "model": {"enabled": False}}
    first = build(validate(base, "<test>"))
    assert first.state is not None
    for i in range(20):
        first.state.logins.observe(login(f"u{i}"), 401, True)
    tuned = build(validate({**base, "clients": {"logins": {"min_submissions": 40, "hold_s": 900}}}, "<test>"), previous=first)
    assert tuned.state is first.state and tuned.state.logins.cfg.min_submissions == 40
    assert tuned.rules is not None and getattr(tuned.rules.evaluate(login()), "rule", None) == "challenge-logins-under-attack"
    assert first.state.compatible(ClientsConfig(window_s=30), first.state.redis_cfg) is False  # windows of another length: a new state


def test_the_shipped_rule_challenges_submissions_to_a_surging_endpoint_only() -> None:
    state = ClientState()
    table = load([str(ROOT / "rules" / "default.yaml")], RuleOptions(), state)
    for i in range(20):
        state.logins.observe(login(f"u{i}"), 401, True)
    out = table.evaluate(login())
    assert out is not None and getattr(out, "rule", None) == "challenge-logins-under-attack"
    assert out.action.value == "challenge" and out.difficulty == 16  # type: ignore[union-attr]
    other = table.evaluate(login(path="/account/login"))
    assert getattr(other, "rule", None) != "challenge-logins-under-attack"


@pytest.fixture(scope="module")
def gateway(demo_origin: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cfg = config_for(demo_origin.url, rules={"files": [str(ROOT / "rules" / "default.yaml")]},
                     challenge={"dev_generate_secret": True}, logging={"level": "info", "access_log": "-", "debug_headers": True})
    gw = Gateway(tmp_path_factory.mktemp("logins") / "gw", cfg)
    yield gw
    gw.stop()


@pytest.mark.timeout(120)
def test_a_stuffing_wave_through_the_gateway_is_challenged_and_the_login_page_still_loads(gateway: Gateway) -> None:
    """Leaked passwords tried from 25 addresses against the demo site's /login (401 to each): from the 21st try on, the gateway
    challenges password submissions to that endpoint; the login page and other posts are untouched."""
    rules = []
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        for i in range(25):
            r = client.post("/login", data={"user": f"u{i}@mail.example", "password": "123456"},
                            headers={"X-Forwarded-For": f"198.51.100.{i + 1}", "User-Agent": "python-requests/2.32.3"})
            rules.append((r.status_code, r.headers.get("x-clefgate-rule")))
        page = client.get("/login", headers={"X-Forwarded-For": "198.51.100.200"})
        cart = client.post("/cart", data={"sku": "A1"}, headers={"X-Forwarded-For": "198.51.100.201"})
    assert all(status == 401 for status, _ in rules[:20]), rules
    assert all(rule == "challenge-logins-under-attack" for _, rule in rules[20:]), rules
    assert page.status_code == 200 and page.headers.get("x-clefgate-rule") != "challenge-logins-under-attack"
    assert cart.headers.get("x-clefgate-rule") != "challenge-logins-under-attack"
    metrics = gateway.metrics()
    assert 'clefgate_login_surges_total{trigger="failures"} 1' in metrics
