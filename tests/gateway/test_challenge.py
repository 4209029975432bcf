"""Challenge: signed tokens, binding, proof-of-work, pages, the verify/no-JS endpoints, pass cookies."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from html import escape as html_escape
from html import unescape as html_unescape
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlencode

import pytest

from gateway.challenge import ChallengeService, Signer, TokenError, load_signer, pow_ok, solve, tokens
from gateway.challenge import service as servicemod
from gateway.challenge.pages import CSP_STATIC, CSS, PAGE_JS, WORKER_JS
from gateway.challenge.strings import STRINGS, pick_language
from gateway.challenge.tokens import CHALLENGE, PASS, Binding, leading_zero_bits
from gateway.clients import ClientState
from gateway.config import ChallengeConfig, ChallengeKeyConfig
from gateway.features import Features
from gateway.verdict import LOCAL_BODY_MAX, Action, LocalResponse, Source, Verdict
from tests.conftest import make_features

KEY = b"k" * 32
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def browser(target: str = "/products/42?x=1", ip: str = "203.0.113.7", ua: str = UA, method: str = "GET", cookie: str = "",
            extra: list[tuple[str, str]] | None = None, body: bytes = b"", scheme: str = "http") -> Features:
    headers = [("Host", "shop.example"), ("User-Agent", ua), ("Accept", "text/html"), ("Accept-Language", "en-GB,en;q=0.8")]
    if cookie:
        headers.append(("Cookie", cookie))
    return make_features(method, target, headers + (extra or []), client_ip=ip, body=body, scheme=scheme, request_id="req-1")


def challenge_verdict(difficulty: int = 8) -> Verdict:
    return Verdict(Action.CHALLENGE, Source.RULE, "rule x: challenge", rule="x", difficulty=difficulty)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def svc(clock: Clock) -> ChallengeService:
    cfg = ChallengeConfig(nojs_max_difficulty=10, nojs_wait_s=3.0, contact="ops@shop.example")
    return ChallengeService(cfg, Signer([("k1", KEY)]), ClientState(), clock=clock)


def form_of(page: LocalResponse) -> dict[str, str]:
    html = page.body.decode()
    return {"token": re.search(r'name="token" value="([^"]+)"', html).group(1).replace("&amp;", "&"),  # type: ignore[union-attr]
            "nonce": re.search(r'data-nonce="([^"]+)"', html).group(1),  # type: ignore[union-attr]
            "difficulty": re.search(r'data-difficulty="(\d+)"', html).group(1)}  # type: ignore[union-attr]


def answer(svc: ChallengeService, f: Features, token: str, counter: int | str) -> LocalResponse:
    body = urlencode({"token": token, "counter": str(counter)}).encode()
    out = svc.handle(make_features("POST", "/.clefgate/verify", list(f.headers), client_ip=f.client_ip, body=body, scheme=f.scheme),
                     body)
    assert isinstance(out, LocalResponse)
    return out


def solved(svc: ChallengeService, f: Features, difficulty: int = 8) -> tuple[dict[str, str], int]:
    form = form_of(svc.challenge(challenge_verdict(difficulty), f))
    return form, solve(form["nonce"], int(form["difficulty"]))


def header(resp: LocalResponse, name: str) -> str | None:
    return next((v for k, v in resp.headers if k.lower() == name.lower()), None)


def cookie_of(resp: LocalResponse) -> str:
    set_cookie = header(resp, "Set-Cookie")
    assert set_cookie is not None
    return set_cookie.split(";", 1)[0]


# ----------------------------------------------------------------------------- tokens


def test_signer_round_trip_and_rotation(clock: Clock) -> None:
    old = Signer([("k1", KEY)])
    token = old.sign({"t": PASS, "e": clock.t + 60})
    rotated = Signer([("k2", b"n" * 32), ("k1", KEY)])
    assert rotated.verify(token, PASS, clock.t)["t"] == PASS       # old cookies still verify
    assert rotated.sign({"t": PASS, "e": 1}).startswith("k2.")      # the first key signs
    with pytest.raises(TokenError) as err:
        Signer([("k2", b"n" * 32)]).verify(token, PASS, clock.t)    # the old key retired
    assert err.value.reason == "unknown_key"


@pytest.mark.parametrize("mutate,reason", [
    (lambda t: t + "x", "bad_signature"),
    (lambda t: t.split(".")[0] + "." + base64.urlsafe_b64encode(b'{"t":"p","e":9999999999}').decode().rstrip("=") + "." + t.split(".")[2],
     "bad_signature"),
    (lambda t: "k1." + t, "malformed"),
    (lambda t: "k9" + t[2:], "unknown_key"),
    (lambda t: "", "malformed"),
    (lambda t: "k1.@@@.@@@", "bad_signature"),
])
def test_tampered_tokens_are_refused(clock: Clock, mutate: Callable[[str], str], reason: str) -> None:
    signer = Signer([("k1", KEY)])
    token = signer.sign({"t": PASS, "e": clock.t + 60})
    with pytest.raises(TokenError) as err:
        signer.verify(mutate(token), PASS, clock.t)
    assert err.value.reason == reason


def test_forged_expired_and_wrong_type(clock: Clock) -> None:
    signer = Signer([("k1", KEY)])
    forged = Signer([("k1", b"x" * 32)]).sign({"t": PASS, "e": clock.t + 60})  # right key id, wrong secret
    with pytest.raises(TokenError, match="signature"):
        signer.verify(forged, PASS, clock.t)
    with pytest.raises(TokenError) as err:
        signer.verify(signer.sign({"t": PASS, "e": clock.t - 1}), PASS, clock.t)
    assert err.value.reason == "expired"
    with pytest.raises(TokenError) as err:
        signer.verify(signer.sign({"t": CHALLENGE, "e": clock.t + 60}), PASS, clock.t)
    assert err.value.reason == "wrong_type"


@pytest.mark.parametrize("binding,a,b,same", [
    (Binding(24, 64, True), ("203.0.113.7", UA), ("203.0.113.99", UA), True),
    (Binding(24, 64, True), ("203.0.113.7", UA), ("203.0.114.7", UA), False),
    (Binding(32, 64, True), ("203.0.113.7", UA), ("203.0.113.8", UA), False),
    (Binding(0, 0, True), ("203.0.113.7", UA), ("198.51.100.1", UA), True),          # CGNAT / roaming: any address
    (Binding(0, 0, True), ("203.0.113.7", UA), ("198.51.100.1", "curl/8"), False),    # ... but the same browser
    (Binding(24, 64, False), ("203.0.113.7", UA), ("203.0.113.9", "curl/8"), True),
    (Binding(24, 64, True), ("2001:db8:1:2::5", UA), ("2001:db8:1:2:9::1", UA), True),
    (Binding(24, 64, True), ("2001:db8:1:2::5", UA), ("2001:db8:1:3::5", UA), False),
])
def test_binding(binding: Binding, a: tuple[str, str], b: tuple[str, str], same: bool) -> None:
    assert (binding.of(*a) == binding.of(*b)) is same
    assert a[0] not in binding.of(*a)  # the address itself is never in a token


def test_proof_of_work() -> None:
    assert leading_zero_bits(b"\x00\x0f" + b"\xff" * 30) == 12
    assert leading_zero_bits(b"\x00" * 32) == 256
    counter = solve("abc", 12)
    assert pow_ok("abc", str(counter), 12)
    digest = hashlib.sha256(f"abc:{counter}".encode()).digest()
    assert leading_zero_bits(digest) >= 12
    assert not pow_ok("abc", "-1", 1) and not pow_ok("abc", "12a", 1) and not pow_ok("abc", "1" * 17, 1)


# ----------------------------------------------------------------------------- keys


def test_load_signer_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CG_KEY", "s" * 40)
    monkeypatch.delenv("CG_MISSING", raising=False)
    problems: list[str] = []
    cfg = ChallengeConfig(keys=[ChallengeKeyConfig(id="new", secret="env:CG_KEY"), ChallengeKeyConfig(id="old", secret="short"),
                                ChallengeKeyConfig(id="gone", secret="env:CG_MISSING"), ChallengeKeyConfig(id="new", secret="x" * 40)])
    signer = load_signer(cfg, needed=True, why="rule x challenges", problems=problems)
    assert signer is not None and signer.signing_id == "new"
    assert problems == [
        "challenge.keys[1].secret: too short (5 bytes; at least 32, e.g. python -c 'import secrets; print(secrets.token_urlsafe(48))')",
        "challenge.keys[2].secret: 'env:CG_MISSING' resolves to nothing (unset variable or unreadable file)",
        "challenge.keys[3].id: duplicate key id 'new'",
    ]


def test_missing_key_is_an_error_unless_a_dev_flag_or_nothing_challenges(caplog: pytest.LogCaptureFixture) -> None:
    problems: list[str] = []
    assert load_signer(ChallengeConfig(), needed=True, why="rule x challenges", problems=problems) is None
    assert problems == ["challenge.keys: required because rule x challenges; set challenge.keys: [{id: k1, secret: "
                        "env:CLEFGATE_CHALLENGE_KEY}] (or challenge.dev_generate_secret: true for development only)"]
    problems.clear()
    assert load_signer(ChallengeConfig(dev_generate_secret=True), needed=True, why="x", problems=problems) is not None
    assert not problems and "dev_generate_secret" in caplog.text
    assert load_signer(ChallengeConfig(), needed=False, why="", problems=problems) is not None and not problems


# ----------------------------------------------------------------------------- pages


def test_challenge_page_is_self_contained_small_and_accessible(svc: ChallengeService) -> None:
    issued = servicemod.ISSUED.get()
    page = svc.challenge(challenge_verdict(16), browser())
    html = page.body.decode()
    assert page.status == 403 and servicemod.ISSUED.get() == issued + 1
    assert header(page, "Cache-Control") == "no-store" and header(page, "X-Clefgate-Challenge") == "pow; difficulty=16"
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing external
    assert '<html lang="en">' in html and 'role="status"' in html and 'aria-live="polite"' in html and "<noscript>" in html
    assert STRINGS["en"]["challenge_intro"] in html and "req-1" in html
    assert "http-equiv=\"refresh\"" not in html  # difficulty 16 > nojs_max_difficulty 10: no meta refresh
    assert STRINGS["en"]["nojs_required"] in html
    csp = header(page, "Content-Security-Policy") or ""
    for inline in (CSS, WORKER_JS, PAGE_JS):
        assert inline in html
        assert base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode() in csp
    assert "default-src 'none'" in csp and "worker-src blob:" in csp
    assert len(page.body) < 16_000


def test_low_risk_challenge_offers_a_meta_refresh_path(svc: ChallengeService, clock: Clock) -> None:
    page = svc.challenge(challenge_verdict(8), browser())
    html = page.body.decode()
    m = re.search(r'<noscript><meta http-equiv="refresh" content="3;url=(/\.clefgate/nojs\?token=[^"]+)"></noscript>', html)
    assert m, html[:600]
    url = m.group(1).replace("&amp;", "&")
    token = unquote(url.split("token=", 1)[1])
    # the same token in the Continue button's form
    assert re.search(r'<noscript><form method="get" action="/\.clefgate/nojs"[^>]*>.*<input type="hidden" name="token" value="'
                     + re.escape(token) + r'"><button type="submit">Continue</button>', html)
    nojs = make_features("GET", f"/.clefgate/nojs?token={quote(token)}", list(browser().headers), client_ip="203.0.113.7")
    early = svc.handle(nojs, b"")
    # too early: a page that says how long is left and comes back to the same link by itself
    assert isinstance(early, LocalResponse) and early.status == 403 and b"in 3 seconds" in early.body
    assert re.search(r'<meta http-equiv="refresh" content="3;url=/\.clefgate/nojs\?token=', early.body.decode())
    clock.t += 3.5
    ok = svc.handle(nojs, b"")
    assert isinstance(ok, LocalResponse) and ok.status == 303 and header(ok, "Location") == "/products/42?x=1"
    again = svc.handle(nojs, b"")
    assert isinstance(again, LocalResponse) and b"replayed" in again.body
    # another client (another network) cannot use the link
    other = make_features("GET", f"/.clefgate/nojs?token={quote(token)}", list(browser().headers), client_ip="198.51.100.9")
    refused = svc.handle(other, b"")
    assert isinstance(refused, LocalResponse) and b"wrong client" in refused.body


@pytest.mark.parametrize(("difficulty", "wait"), [(8, 3), (16, 3), (18, 6), (20, 12), (24, 48), (30, 384)])
def test_the_no_javascript_wait_grows_with_difficulty(clock: Clock, difficulty: int, wait: int) -> None:
    svc = ChallengeService(ChallengeConfig(nojs_wait_s=3.0, nojs_max_wait_s=1000.0, token_ttl_s=600.0), Signer([("k1", KEY)]),
                           ClientState(), clock=clock)
    assert svc.nojs_wait_s(difficulty) == min(wait, 480)  # within the token's lifetime
    html = svc.challenge(challenge_verdict(difficulty), browser()).body.decode()
    assert f'content="{min(wait, 480)};url=/.clefgate/nojs?token=' in html
    capped = ChallengeService(ChallengeConfig(nojs_wait_s=3.0), Signer([("k1", KEY)]), ClientState(), clock=clock)
    assert (capped.nojs_wait_s(difficulty) or 0) <= 120
    off = ChallengeService(ChallengeConfig(nojs_max_difficulty=0), Signer([("k1", KEY)]), ClientState(), clock=clock)
    assert off.nojs_wait_s(difficulty) is None and "http-equiv" not in off.challenge(challenge_verdict(difficulty), browser()).body.decode()


def test_without_javascript_the_page_never_says_it_is_working(svc: ChallengeService) -> None:
    """What the script does is hidden until it runs; the no-JavaScript text is only in <noscript>."""
    html = svc.challenge(challenge_verdict(8), browser()).body.decode()
    js_part = re.search(r'<div id="cg-js" hidden>(.*?)</div>', html, re.S)
    assert js_part and "cg-status" in js_part.group(1) and "cg-bar" in js_part.group(1) and "Working" in js_part.group(1)
    outside = html.replace(js_part.group(0), "")
    assert "Working" not in re.sub(r"<script.*?</script>", "", outside, flags=re.S).replace('data-progress="Working', "")
    assert 'getElementById("cg-js").hidden = false' in PAGE_JS


@pytest.mark.parametrize(("accept_language", "lang", "phrase"), [
    ("de-DE,de;q=0.9,en;q=0.5", "de", "Einen Moment bitte"), ("fr-CH, fr;q=0.9", "fr", "Un instant"),
    ("es-ES,es;q=0.9", "es", "Un momento, por favor"), ("pt-BR,pt;q=0.9", "en", "One moment, please"),
    ("en;q=0.2, es;q=0.8", "es", "Un momento"),
])
def test_pages_speak_the_visitors_language(svc: ChallengeService, accept_language: str, lang: str, phrase: str) -> None:
    f = browser()
    headers = [(n, v) for n, v in f.headers if n.lower() != "accept-language"] + [("Accept-Language", accept_language)]
    g = make_features("GET", "/p", headers, client_ip=f.client_ip, request_id="req-9")
    html = svc.challenge(challenge_verdict(8), g).body.decode()
    assert f'<html lang="{lang}">' in html and phrase in html
    block = svc.block(Verdict(Action.BLOCK, Source.RULE, "rule block-xss", rule="block-xss"), g).body.decode()
    assert f'<html lang="{lang}">' in block and STRINGS[lang]["reason_attack"] in block


def test_every_language_has_every_sentence_with_the_same_placeholders() -> None:
    english = STRINGS["en"]
    assert {"en", "de", "fr", "es"} <= set(STRINGS)
    for lang, strings in STRINGS.items():
        assert set(strings) == set(english), lang
        for key, text in strings.items():
            assert set(re.findall(r"{\w+}", text)) == set(re.findall(r"{\w+}", english[key])), (lang, key)


@pytest.mark.parametrize(("verdict", "expected"), [
    (Verdict(Action.BLOCK, Source.RULE, "rule rate-limit-per-ip", rule="rate-limit-per-ip", status=429), "rate"),
    (Verdict(Action.BLOCK, Source.RULE, "rule block-sql-injection", rule="block-sql-injection"), "attack"),
    (Verdict(Action.BLOCK, Source.DETECTOR, "libinjection found sqli in query:id"), "attack"),
    (Verdict(Action.BLOCK, Source.MODEL, "model", probabilities={"class": {"human": 0.01, "bad_bot": 0.9, "attack": 0.09}}), "automated"),
    (Verdict(Action.BLOCK, Source.MODEL, "model", probabilities={"class": {"human": 0.01, "bad_bot": 0.2, "attack": 0.79}}), "attack"),
    (Verdict(Action.BLOCK, Source.CLIENT, "ignored 5 challenges in 60 s"), "automated"),
    (Verdict(Action.BLOCK, Source.RULE, "rule block-crawler-spoofers", rule="block-crawler-spoofers"), "automated"),
    (Verdict(Action.BLOCK, Source.DEFAULT, "no rule matched; default block"), "policy"),
])
def test_block_pages_name_a_plain_reason(svc: ChallengeService, verdict: Verdict, expected: str) -> None:
    from gateway.challenge.service import reason_class

    assert reason_class(verdict) == expected
    html = svc.block(verdict, browser()).body.decode()
    assert html_escape(STRINGS["en"]["reason_" + expected]) in html and "<code>req-1</code>" in html and "ops@shop.example" in html


def test_block_page_links_the_appeal_url_with_its_reference(clock: Clock) -> None:
    svc = ChallengeService(ChallengeConfig(appeal_url="https://shop.example/appeal?ref={request_id}"), Signer([("k1", KEY)]),
                           ClientState(), clock=clock)
    html = svc.block(Verdict(Action.BLOCK, Source.RULE, "rule block-xss", rule="block-xss"), browser()).body.decode()
    assert '<a href="https://shop.example/appeal?ref=req-1">Ask for a review of this decision</a>' in html
    assert "contact" not in html.lower()  # no contact configured: none shown


@pytest.mark.parametrize("extra", [[("Sec-Fetch-Mode", "cors")], [("Sec-Fetch-Mode", "same-origin")], [("X-Requested-With", "XMLHttpRequest")],
                                   [("Accept", "application/json")]])
def test_a_challenged_script_gets_json_it_can_recover_from(svc: ChallengeService, extra: list[tuple[str, str]]) -> None:
    f = browser()
    names = {n.lower() for n, _ in extra}
    headers = [(n, v) for n, v in f.headers if n.lower() not in names] + extra + [("Referer", "http://shop.example/products/42?x=1")]
    xhr = make_features("GET", "/api/cart", headers, client_ip=f.client_ip, request_id="req-7")
    resp = svc.challenge(challenge_verdict(18), xhr)
    assert resp.status == 403 and resp.content_type == "application/json"
    body = json.loads(resp.body)
    assert body["error"] == "challenge" and body["request_id"] == "req-7"
    assert body["challenge_url"] == "/.clefgate/challenge?d=18&return=%2Fproducts%2F42%3Fx%3D1"
    assert header(resp, "X-Clefgate-Challenge") == f"pow; difficulty=18; url={body['challenge_url']}"
    # the top-level page goes there: a challenge page that comes back to the page once solved
    page = svc.handle(make_features("GET", body["challenge_url"], list(f.headers), client_ip=f.client_ip), b"")
    assert isinstance(page, LocalResponse) and page.status == 403 and page.content_type.startswith("text/html")
    form = form_of(page)
    assert form["difficulty"] == "18"
    done = answer(svc, f, form["token"], solve(form["nonce"], 18))
    assert done.status == 303 and header(done, "Location") == "/products/42?x=1"
    blocked = svc.block(Verdict(Action.BLOCK, Source.RULE, "rule block-xss", rule="block-xss"), xhr)
    assert blocked.content_type == "application/json" and json.loads(blocked.body)["request_id"] == "req-7"


def test_the_script_challenge_endpoint_never_lowers_the_difficulty_or_leaves_the_site(svc: ChallengeService) -> None:
    f = browser()
    page = svc.handle(make_features("GET", "/.clefgate/challenge?d=1&return=https://evil.example/x", list(f.headers),
                                    client_ip=f.client_ip), b"")
    assert isinstance(page, LocalResponse)
    form = form_of(page)
    assert int(form["difficulty"]) == svc.cfg.difficulty
    done = answer(svc, f, form["token"], solve(form["nonce"], int(form["difficulty"])))
    assert header(done, "Location") == "/x"


def test_a_challenge_page_template_is_kept_per_no_javascript_action() -> None:
    """The no-JavaScript form's action is part of the template: a second action gets its own page, not the first's."""
    from gateway.challenge.pages import challenge_page, render_challenge_page

    for action in ("/.clefgate/nojs", "/gate/nojs"):
        kw = dict(token="k1.a.b", nonce="bm9uY2U", difficulty=16, verify_url="/.clefgate/verify", post_lost=False, nojs_token="k1.c.d",
                  nojs_action=action, nojs_wait_s=3, request_id="req-1", contact="")
        page = challenge_page("en", **kw)  # type: ignore[arg-type]
        assert page == render_challenge_page("en", **kw)  # type: ignore[arg-type]
        assert f'action="{action}"'.encode() in page


@pytest.mark.parametrize("lang", sorted(STRINGS))
@pytest.mark.parametrize("post_lost", [False, True])
@pytest.mark.parametrize("nojs_token", [None, "k1.a-b_c.d", "x?a=<b>&c=\"d\"'"])
@pytest.mark.parametrize("request_id", ["", "req-1", "<id>&\"é'"])
@pytest.mark.parametrize("kept", [None, "comment=a+%3Cb%3E&x=\"'<>"])
def test_challenge_page_template_renders_the_renderers_bytes(lang: str, post_lost: bool, nojs_token: str | None, request_id: str,
                                                             kept: str | None) -> None:
    """Pages are filled into a pre-split template; every layout and escaped value gives the direct renderer's bytes."""
    from gateway.challenge.pages import challenge_page, render_challenge_page

    for token, nonce, difficulty in (("k1.eyJ0IjoiYyJ9.c2ln", "bm9uY2U", 16), ("<k>&\"'.x.y", "n<o>nce", 7)):
        kw = dict(token=token, nonce=nonce, difficulty=difficulty, verify_url="/.clefgate/verify", post_lost=post_lost,
                  nojs_token=nojs_token, nojs_action="/.clefgate/nojs", nojs_wait_s=3, request_id=request_id, contact="ops@shop.example",
                  kept=kept)
        page = challenge_page(lang, **kw)  # type: ignore[arg-type]
        assert page == render_challenge_page(lang, **kw)  # type: ignore[arg-type]
        assert page == challenge_page(lang, **kw)  # type: ignore[arg-type]  # the second fill of the same template
        if all(set(v) <= tokens.PLAIN_CHARS for v in (token, nonce, nojs_token or "")):  # the tokens a plain signer writes
            assert challenge_page(lang, **kw, plain=True) == page  # type: ignore[arg-type]
        text = page.decode()
        assert f'data-difficulty="{difficulty}"' in text and f'data-nonce="{html_escape(nonce)}"' in text
        assert f'name="token" value="{html_escape(token)}"' in text
        if request_id:
            assert f"<code>{html_escape(request_id)}</code>" in text
        assert ('http-equiv="refresh"' in text) == (nojs_token is not None)
        assert ('name="form"' in text) == (kept is not None)
        if kept is not None:
            assert f'name="form" value="{html_escape(kept)}"' in text
        assert "\x00" not in text


def test_nonces_are_unique_random_and_fork_safe() -> None:
    import os

    from gateway.challenge import tokens

    nonces = [tokens.new_nonce() for _ in range(2000)]  # several pool refills
    assert len(set(nonces)) == len(nonces)
    assert all(len(base64.urlsafe_b64decode(n + "==")) == 16 for n in nonces)
    # a forked worker must not hand out the nonces still in its parent's pool
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its first nonce and leave at once
        os.write(write, tokens.new_nonce().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert len(child) == 22 and child != tokens.new_nonce()


def test_signatures_are_hmac_sha256_over_the_sorted_compact_payload() -> None:
    import hmac
    import json

    signer = Signer([("k1", KEY), ("k0", b"o" * 32)])
    payload = {"t": CHALLENGE, "n": "abc", "d": 12, "i": 1_800_000_000.25, "e": 1_800_000_300, "b": "bind", "u": "/ü?a=\"b\"", "p": 0}
    body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()).rstrip(b"=").decode()
    sig = base64.urlsafe_b64encode(hmac.new(KEY, f"k1.{body}".encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    assert signer.sign(payload) == f"k1.{body}.{sig}"
    assert signer.sign(payload) == signer.sign(payload)  # the precomputed key state is copied, never consumed
    assert signer.verify(signer.sign(payload), CHALLENGE, 1_800_000_000.0) == payload


@pytest.mark.parametrize("lang_header,lang", [("de-DE,de;q=0.9", "de"), ("fr-CA, en;q=0.5", "fr"), ("ja, zz", "en"),
                                              ("en;q=0.1, de;q=0.9", "de"), ("", "en")])
def test_language(lang_header: str, lang: str) -> None:
    assert pick_language(lang_header) == lang
    assert set(STRINGS[lang]) == set(STRINGS["en"])


def test_post_that_triggered_a_challenge_says_so_and_is_not_replayed(svc: ChallengeService) -> None:
    post = browser("/checkout", method="POST", extra=[("Referer", "http://shop.example/cart?step=2")], body=b"card=1")
    page = svc.challenge(challenge_verdict(8), post)
    assert STRINGS["en"]["post_lost"].encode() in page.body
    form = form_of(page)
    resp = answer(svc, post, form["token"], solve(form["nonce"], 8))
    assert resp.status == 200 and header(resp, "Set-Cookie")
    assert STRINGS["en"]["verified_resubmit"].encode() in resp.body and b'href="/cart?step=2"' in resp.body


COMMENT = "title=Notes&comment=" + quote_plus("line one\r\n>>> print('hi') & <b>bold</b>\r\nlast: é ✓") + "&empty="
SAME_ORIGIN = [("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://shop.example"), ("Sec-Fetch-Site", "same-origin"),
               ("Referer", "http://shop.example/posts/12")]


def kept_post(body: str = COMMENT, extra: list[tuple[str, str]] | None = None) -> Features:
    return browser("/posts/12/comments?sort=new", method="POST", extra=SAME_ORIGIN if extra is None else extra, body=body.encode())


def answer_with(svc: ChallengeService, f: Features, fields: dict[str, str], extra: list[tuple[str, str]] | None = None) -> LocalResponse:
    body = urlencode(fields).encode()
    headers = [h for h in f.headers if h[0].lower() not in ("content-type", "origin", "sec-fetch-site", "referer")]
    headers += extra if extra is not None else [("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://shop.example"),
                                                 ("Sec-Fetch-Site", "same-origin")]
    out = svc.handle(make_features("POST", "/.clefgate/verify", headers, client_ip=f.client_ip, body=body), body)
    assert isinstance(out, LocalResponse)
    return out


def resent_fields(page: LocalResponse) -> tuple[str, list[tuple[str, str]]]:
    """The action and the fields of a resend page's form, as a browser reads them (character references undone)."""
    text = page.body.decode()
    action = html_unescape(re.search(r'<form id="cg-resend" method="post" action="([^"]*)"', text).group(1))  # type: ignore[union-attr]
    fields = [(html_unescape(n), html_unescape(v)) for n, v in re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', text)]
    return action, fields


def test_a_form_posted_from_the_site_is_kept_and_sent_again_once_the_check_is_passed(svc: ChallengeService) -> None:
    before = {stage: servicemod.KEPT_FORMS.get(stage) for stage in ("kept", "resent", "refused")}
    post = kept_post()
    page = svc.challenge(challenge_verdict(8), post)
    text = page.body.decode()
    assert STRINGS["en"]["post_kept"] in text and f'name="form" value="{html_escape(COMMENT)}"' in text
    assert "<noscript><p class=\"note\">" + html_escape(STRINGS["en"]["post_lost"]) in text  # the no-JavaScript path keeps no form
    form = form_of(page)
    resp = answer_with(svc, post, {"token": form["token"], "counter": str(solve(form["nonce"], 8)), "form": COMMENT})
    assert resp.status == 200 and cookie_of(resp).startswith("clefgate_pass=")
    csp = header(resp, "Content-Security-Policy") or ""
    # no form-action: the origin's answer to the post may redirect to another site (a browser checks redirects against it)
    assert "script-src 'sha256-" in csp and "form-action" not in csp and "unsafe-inline" not in csp
    action, fields = resent_fields(resp)
    # to where it was going, with every field as the person typed it: line breaks, markup, non-ASCII, empty values
    assert action == "/posts/12/comments?sort=new"
    assert fields == parse_qsl(COMMENT, keep_blank_values=True) and fields[1][1].count("\r\n") == 2
    assert "&#13;&#10;" in resp.body.decode()  # written as references, which the HTML parser does not normalise
    assert [servicemod.KEPT_FORMS.get(stage) - before[stage] for stage in ("kept", "resent", "refused")] == [1, 1, 0]


@pytest.mark.parametrize("extra,body", [
    ([("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Site", "cross-site"), ("Origin", "http://evil.example")], COMMENT),
    ([("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Site", "same-site"), ("Origin", "http://blog.shop.example")], COMMENT),
    ([("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://evil.example")], COMMENT),  # no Fetch Metadata
    ([("Content-Type", "application/x-www-form-urlencoded")], COMMENT),  # neither: nothing says where it came from
    ([("Content-Type", "multipart/form-data; boundary=x"), ("Sec-Fetch-Site", "same-origin")], "--x\r\n"),
    ([("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Site", "same-origin")], "a=" + "b" * 17000),  # over the cap
    ([("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Site", "same-origin")], "a=%FF%FE"),  # not UTF-8
    ([("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Site", "same-origin")], "a=raw\nline"),
])
def test_a_form_from_another_site_or_one_that_cannot_come_back_as_it_went_is_not_kept(svc: ChallengeService, extra: list[tuple[str, str]],
                                                                                      body: str) -> None:
    post = kept_post(body, extra)
    page = svc.challenge(challenge_verdict(8), post)
    assert STRINGS["en"]["post_lost"].encode() in page.body and b'name="form"' not in page.body
    assert svc.kept_form(post) is None


def test_a_kept_form_is_sent_again_only_as_kept_and_only_from_the_challenge_page(svc: ChallengeService) -> None:
    post = kept_post()
    form = form_of(svc.challenge(challenge_verdict(8), post))
    counter = str(solve(form["nonce"], 8))
    refused = servicemod.KEPT_FORMS.get("refused")
    # another site posting the answer (a page that got hold of a token): the check passes, nothing is posted for it
    cross = answer_with(svc, post, {"token": form["token"], "counter": counter, "form": COMMENT},
                        [("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://evil.example"), ("Sec-Fetch-Site", "cross-site")])
    assert cross.status == 200 and b"cg-resend" not in cross.body and STRINGS["en"]["verified_resubmit"].encode() in cross.body
    assert header(cross, "Content-Security-Policy") == CSP_STATIC
    for other in ("title=Notes&comment=transfer+everything", ""):  # a form of another's choosing, or none
        form = form_of(svc.challenge(challenge_verdict(8), post))
        fields = {"token": form["token"], "counter": str(solve(form["nonce"], 8))}
        resp = answer_with(svc, post, {**fields, "form": other} if other else fields)
        assert resp.status == 200 and b"cg-resend" not in resp.body and STRINGS["en"]["verified_resubmit"].encode() in resp.body
    assert servicemod.KEPT_FORMS.get("refused") == refused + 3
    # a form whose answer, escaped by the browser, would not fit what the verify endpoint reads is not kept
    large = ChallengeService(ChallengeConfig(keep_form_bytes=20000), Signer([("k1", KEY)]), ClientState(), clock=svc.clock)
    spaced = "c=" + "+" * 19998  # every "+" goes back as %2B
    page = large.challenge(challenge_verdict(8), kept_post(spaced))
    assert b'name="form"' in page.body
    answer_body = urlencode({"token": form_of(page)["token"], "counter": "1234567890", "form": spaced})
    assert len(answer_body) <= LOCAL_BODY_MAX
    # the same form posted to a long address from a long one: both are in the token
    too_large = servicemod.KEPT_FORMS.get("too_large")
    for filters, kept in ((50, True), (200, False)):
        query = "&".join(f"filter{i}=value{i}" for i in range(filters))
        long_post = browser(f"/posts/12/comments?{query}", method="POST", body=spaced.encode(),
                            extra=[*SAME_ORIGIN[:3], ("Referer", f"http://shop.example/posts/12?{query}")])
        assert large.kept_form(long_post) == spaced
        page = large.challenge(challenge_verdict(8), long_post)
        assert (b'name="form"' in page.body) is kept and (STRINGS["en"]["post_kept"].encode() in page.body) is kept
        if kept:
            assert len(urlencode({"token": form_of(page)["token"], "counter": "1234567890", "form": spaced})) <= LOCAL_BODY_MAX
    assert servicemod.KEPT_FORMS.get("too_large") == too_large + 1
    # turned off: the page says to submit again, as for any other post
    off = ChallengeService(ChallengeConfig(keep_form_bytes=0), Signer([("k1", KEY)]), ClientState(), clock=svc.clock)
    assert b'name="form"' not in off.challenge(challenge_verdict(8), post).body


def test_block_pages(svc: ChallengeService) -> None:
    page = svc.block(Verdict(Action.BLOCK, Source.RULE, "r", status=None), browser())
    assert page.status == 403 and b"blocked by the site" in page.body and b"ops@shop.example" in page.body
    rate = svc.block(Verdict(Action.BLOCK, Source.RULE, "r", status=429), browser(extra=[("Accept-Language", "de")]))
    assert rate.status == 429 and header(rate, "Retry-After") == "60"
    as_json = svc.block(Verdict(Action.BLOCK, Source.RULE, "r"), make_features(headers=[("Host", "h"), ("Accept", "application/json")]))
    assert as_json.content_type == "application/json" and b'"error": "blocked"' in as_json.body
    head = svc.block(Verdict(Action.BLOCK, Source.RULE, "r"), make_features("HEAD", "/x"))
    assert head.status == 403 and head.body == b""


# ----------------------------------------------------------------------------- verify, pass, refusals


def test_solve_verify_and_pass(svc: ChallengeService) -> None:
    f = browser()
    passed, issued = servicemod.PASSED.get(), servicemod.SOLVE.count()
    form, counter = solved(svc, f)
    resp = answer(svc, f, form["token"], counter)
    assert resp.status == 303 and header(resp, "Location") == "/products/42?x=1"
    set_cookie = header(resp, "Set-Cookie") or ""
    assert set_cookie.startswith("clefgate_pass=k1.") and "HttpOnly" in set_cookie and "SameSite=Lax" in set_cookie
    assert "Path=/" in set_cookie and "Max-Age=86400" in set_cookie and "Secure" not in set_cookie
    assert servicemod.PASSED.get() == passed + 1 and servicemod.SOLVE.count() == issued + 1
    # counted for the client as it is from now on: its address, its browser and the pass it holds
    assert svc.state.stats(svc.state.key(browser(cookie=cookie_of(resp)))).challenges_passed == 1

    with_cookie = browser(cookie=f'theme=dark; prefs={{"a":[1,2]}}; {cookie_of(resp)}; z="q"')  # other apps' odd cookies
    assert svc.pass_for(with_cookie) is not None
    honoured = svc.honour(challenge_verdict(8), with_cookie)
    assert honoured.action is Action.FORWARD and honoured.rule == "x" and "challenge passed" in honoured.reason
    assert svc.honour(Verdict(Action.BLOCK, Source.RULE, "b"), with_cookie).action is Action.BLOCK  # a pass never lifts a block
    scored = Verdict(Action.CHALLENGE, Source.MODEL, "default policy: risk 0.7", probabilities={"class": {"bad_bot": 0.7}},
                     difficulty=8, model="clef-flash@1.7.0", decision_ms=0.4, model_input=object())
    lifted = svc.honour(scored, with_cookie)
    assert lifted.action is Action.FORWARD and lifted.difficulty is None
    # what the decision log (the retraining feed) records of the model is kept
    assert (lifted.model, lifted.decision_ms, lifted.model_input) == (scored.model, scored.decision_ms, scored.model_input)


def test_secure_cookie_behind_tls(svc: ChallengeService) -> None:
    f = browser(scheme="https")
    form, counter = solved(svc, f)
    assert "Secure" in (header(answer(svc, f, form["token"], counter), "Set-Cookie") or "")


def forged(token: str) -> str:
    """``token`` with one character of its signature changed, one that carries six whole bits: a token's last
    characters may hold padding bits a decoder ignores, or already be what a fixed replacement writes."""
    i = len(token) - 10
    return token[:i] + ("B" if token[i] == "A" else "A") + token[i + 1:]


def _refusal(svc: ChallengeService, f: Features, token: str, counter: int | str) -> str:
    resp = answer(svc, f, token, counter)
    assert resp.status == 403 and header(resp, "Set-Cookie") is None
    return resp.body.decode()


def test_refusals_are_counted_by_reason(svc: ChallengeService, clock: Clock) -> None:
    f = browser()

    def failed(reason: str) -> float:
        return servicemod.FAILED.get(reason)

    form, counter = solved(svc, f)
    before = {r: failed(r) for r in ("bad_solution", "wrong_client", "replayed", "expired", "bad_signature")}
    wrong = next(c for c in range(1000) if not pow_ok(form["nonce"], str(c), 8))
    assert "bad solution" in _refusal(svc, f, form["token"], wrong)
    assert "wrong client" in _refusal(svc, browser(ip="198.51.100.1"), form["token"], counter)
    assert "wrong client" in _refusal(svc, browser(ua="curl/8.5"), form["token"], counter)
    assert answer(svc, f, form["token"], counter).status == 303
    assert "replayed" in _refusal(svc, f, form["token"], counter)
    form2, counter2 = solved(svc, f)
    clock.t += 305
    assert "expired" in _refusal(svc, f, form2["token"], counter2)
    assert "bad signature" in _refusal(svc, f, forged(form2["token"]), counter2)
    for reason, value in before.items():
        assert failed(reason) == value + (2 if reason == "wrong_client" else 1)


@pytest.mark.parametrize("cookie_value,reason", [
    ("garbage", "malformed"),
    (Signer([("k1", b"z" * 32)]).sign({"t": PASS, "e": 4e9, "b": "x", "d": 8}), "bad_signature"),  # forged
    (Signer([("k1", KEY)]).sign({"t": PASS, "e": 1.0, "b": "x", "d": 8}), "expired"),
    (Signer([("k1", KEY)]).sign({"t": CHALLENGE, "e": 4e9, "b": "x", "d": 8}), "wrong_type"),
])
def test_bad_pass_cookies_are_refused(svc: ChallengeService, cookie_value: str, reason: str) -> None:
    before = servicemod.PASS_COOKIES.get(reason)
    f = browser(cookie=f"clefgate_pass={cookie_value}")
    assert svc.honour(challenge_verdict(), f).action is Action.CHALLENGE
    assert servicemod.PASS_COOKIES.get(reason) == before + 1


def test_pass_cookie_of_another_client_and_tampered_cookie(svc: ChallengeService) -> None:
    f = browser()
    form, counter = solved(svc, f)
    cookie = cookie_of(answer(svc, f, form["token"], counter))
    assert svc.pass_for(browser(ip="198.51.100.1", cookie=cookie)) is None         # stolen cookie, other network
    assert svc.pass_for(browser(ua="Other/1.0", cookie=cookie)) is None              # other browser
    assert svc.pass_for(browser(ip="203.0.113.200", cookie=cookie)) is not None      # same /24
    name, value = cookie.split("=", 1)
    kid, body, sig = value.split(".")
    payload = base64.urlsafe_b64decode(body + "==").replace(b'"d":8', b'"d":30')
    tampered = f"{name}={kid}.{base64.urlsafe_b64encode(payload).decode().rstrip('=')}.{sig}"
    assert svc.pass_for(browser(cookie=tampered)) is None


def test_rechallenge_when_risk_rose_or_behaviour_drifted(svc: ChallengeService, clock: Clock) -> None:
    mono = [5000.0]
    svc.state.windows.clock = lambda: mono[0]
    f = browser()
    form, counter = solved(svc, f, difficulty=8)
    cookie = cookie_of(answer(svc, f, form["token"], counter))
    with_cookie = browser(cookie=cookie)
    harder = svc.honour(challenge_verdict(12), with_cookie)
    assert harder.action is Action.CHALLENGE and "pass earned at difficulty 8, 12 now required" in harder.reason
    clock.t += 10
    mono[0] += 10  # the window's next slot: behaviour after the pass
    for _ in range(25):
        svc.state.record(svc.state.key(with_cookie), "/missing", 404)
    drifted = svc.honour(challenge_verdict(8), with_cookie)
    assert drifted.action is Action.CHALLENGE and "25 of the last 25 answers were 4xx" in drifted.reason


def test_the_behaviour_that_got_a_client_challenged_does_not_refuse_the_pass_it_earns(svc: ChallengeService, clock: Clock) -> None:
    """Solving must help: only what comes after the pass can send the client round again (no solve-challenge loop)."""
    mono = [5000.0]
    svc.state.windows.clock = lambda: mono[0]
    f = browser()
    for _ in range(25):
        svc.state.record(svc.state.key(f), "/missing", 404)
    form, counter = solved(svc, f)
    with_cookie = browser(cookie=cookie_of(answer(svc, f, form["token"], counter)))
    assert svc.honour(challenge_verdict(8), with_cookie).action is Action.FORWARD
    clock.t += 1
    mono[0] += 1
    assert svc.honour(challenge_verdict(8), with_cookie).action is Action.FORWARD
    # the pass records whole seconds: earned 0.8 s into a second but 0.3 s into a window slot, the slot it shares
    # with the burst before it is still left out
    other = browser(ip="198.51.100.20")
    clock.t, mono[0] = 1_800_000_100.8, 5010.1
    form, counter = solved(svc, other)
    passed = browser(ip="198.51.100.20", cookie=cookie_of(answer(svc, other, form["token"], counter)))
    mono[0] = 5010.1
    for _ in range(25):  # the burst that got it challenged, counted for the client it is with the pass
        svc.state.record(svc.state.key(passed), "/missing", 404)
    mono[0] = 5010.3
    assert svc.honour(challenge_verdict(8), passed).action is Action.FORWARD


def test_fast_clients_are_rechallenged(clock: Clock) -> None:
    svc = ChallengeService(ChallengeConfig(pass_max_rate_per_min=30), Signer([("k1", KEY)]), ClientState(), clock=clock)
    mono = [5000.0]
    svc.state.windows.clock = lambda: mono[0]
    f = browser()
    form, counter = solved(svc, f)
    with_cookie = browser(cookie=cookie_of(answer(svc, f, form["token"], counter)))
    clock.t += 15
    mono[0] += 15  # half a slot into the next one: its 31 requests are counted over a whole slot, 10 s
    for _ in range(31):
        svc.state.record(svc.state.key(with_cookie), "/p", 200)
    assert "request rate 186/min is above 30/min" in svc.honour(challenge_verdict(8), with_cookie).reason


@pytest.mark.parametrize("target,expected", [("//evil.example/x", "/x"), ("/\\evil.example", "/evil.example"),
                                             ("https://evil.example/p?q=1", "/p?q=1"), ("/ok?a=b", "/ok?a=b")])
def test_return_url_never_leaves_the_site(target: str, expected: str) -> None:
    assert ChallengeService._safe_target(target) == expected


def test_unknown_local_paths_are_404(svc: ChallengeService) -> None:
    out = svc.handle(make_features("GET", "/.clefgate/admin"), b"")
    assert isinstance(out, LocalResponse) and out.status == 404
    out = svc.handle(make_features("GET", "/.clefgate/verify"), b"")  # verify is POST only
    assert isinstance(out, LocalResponse) and out.status == 404


@pytest.mark.parametrize("kind,not_before", [(CHALLENGE, None), ("w", 1_800_000_003.5)])
@pytest.mark.parametrize("issued", [1_800_000_000.123456, 1_800_000_000, 0.1])
@pytest.mark.parametrize("url", ["/products/42?x=1", "/ü?q=\"a\\\\b\"&<x>", ""])
def test_challenge_tokens_are_signed_over_the_encoders_payload(kind: str, not_before: float | None, issued: float, url: str) -> None:
    """sign_challenge writes the payload JSON itself; the token must be sign() of the same payload, byte for byte."""
    signer = Signer([("k1", KEY)])
    fields = {"t": kind, "n": "bm9uY2Utbm9uY2U", "d": 14, "i": issued, "e": 1_800_000_301, "b": "YmluZA", "u": url, "p": 1}
    if not_before is not None:
        fields["nb"] = not_before
    made = signer.sign_challenge(kind, nonce="bm9uY2Utbm9uY2U", difficulty=14, issued=issued, expires=1_800_000_301, binding="YmluZA",
                                 url=url, post_lost=1, not_before=not_before)
    assert made == signer.sign(fields)
    # unusual types take the generic path and still sign the same payload
    assert signer.sign_challenge(kind, nonce="n", difficulty=True, issued=issued, expires=5, binding="b", url=url,  # type: ignore[arg-type]
                                 post_lost=0) == signer.sign({"t": kind, "n": "n", "d": True, "i": issued, "e": 5, "b": "b", "u": url, "p": 0})
    assert signer.sign_challenge(kind, nonce="n", difficulty=3, issued=float("inf"), expires=5, binding="b", url=url,
                                 post_lost=0) == signer.sign({"t": kind, "n": "n", "d": 3, "i": float("inf"), "e": 5, "b": "b", "u": url, "p": 0})


@pytest.mark.parametrize("issued,not_before", [(1_800_000_000.123456, 1_800_000_010.123456), (1_800_000_000, 1_800_000_010), (0.1, 3)])
@pytest.mark.parametrize("url,wait_url", [("/products/42?x=1", "/products/42?x=1"), ("/ü?q=\"a\\\\b\"&<x>", "/ü"), ("", "/")])
def test_the_token_pair_is_the_two_tokens_signed_alone(issued: float, not_before: float, url: str, wait_url: str) -> None:
    """sign_challenge_pair writes the shared fields once; each token must be sign_challenge's, byte for byte."""
    from gateway.challenge.tokens import WAIT

    signer = Signer([("k1", KEY), ("k0", KEY[::-1])])
    shared = {"nonce": "bm9uY2Utbm9uY2U", "difficulty": 14, "issued": issued, "expires": 1_800_000_301, "binding": "YmluZA", "post_lost": 1}
    pair = signer.sign_challenge_pair(**shared, url=url, wait_url=wait_url, not_before=not_before)  # type: ignore[arg-type]
    assert pair == (signer.sign_challenge(CHALLENGE, **shared, url=url),  # type: ignore[arg-type]
                    signer.sign_challenge(WAIT, **shared, url=wait_url, not_before=not_before))  # type: ignore[arg-type]
    odd = {**shared, "difficulty": True, "not_before": float("inf")}  # unusual types: each token by the generic path
    assert signer.sign_challenge_pair(**odd, url=url, wait_url=wait_url) == (  # type: ignore[arg-type]
        signer.sign({"t": CHALLENGE, "n": "bm9uY2Utbm9uY2U", "d": True, "i": issued, "e": 1_800_000_301, "b": "YmluZA", "u": url, "p": 1}),
        signer.sign({"t": WAIT, "n": "bm9uY2Utbm9uY2U", "d": True, "i": issued, "e": 1_800_000_301, "b": "YmluZA", "u": wait_url, "p": 1,
                     "nb": float("inf")}))


def test_tokens_are_plain_exactly_when_the_signing_key_id_is() -> None:
    """A plain signer's tokens are left as they are by HTML escaping and URL quoting (the page writes them so)."""
    from gateway.challenge.tokens import b64e, new_nonce

    for raw in (bytes(range(n)) for n in range(0, 70)):
        assert b64e(raw) == base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    for kid, plain in (("k1", True), ("key-2024_05.a~b", True), ("k/1", False), ('k"1', False), ("k<1>", False), ("k1 ", False),
                       ("ké", False), ("k%1", False), ("", False)):
        signer = Signer([(kid, KEY)])
        assert signer.plain is plain, kid
        token = signer.sign_challenge(CHALLENGE, nonce=new_nonce(), difficulty=14, issued=1.5, expires=9, binding="YmluZA", url="/<a>?b=\"c\"",
                                      post_lost=0)
        if plain:
            assert html_escape(token) == token == quote(token, safe="-_.~")
    nonce = new_nonce()
    assert html_escape(nonce) == nonce == quote(nonce, safe="-_.~")


def test_a_long_url_can_be_passed_and_its_no_javascript_link_stays_within_a_request_line(svc: ChallengeService) -> None:
    target = "/search?q=" + "x" * 6000  # a request line under the 8 KiB limit
    f = browser(target)
    page = svc.challenge(challenge_verdict(8), f)
    form, counter = form_of(page), 0
    counter = solve(form["nonce"], int(form["difficulty"]))
    resp = answer(svc, f, form["token"], counter)
    assert resp.status == 303 and header(resp, "Location") == target
    link = re.search(r'url=(/\.clefgate/nojs\?token=[^"]+)"', page.body.decode())
    assert link is not None and len(link.group(1)) < 4096


def test_an_answer_with_extra_fields_is_refused_not_an_error(svc: ChallengeService) -> None:
    f = browser()
    body = b"&".join(b"f%d=1" % i for i in range(12))
    resp = svc.handle(make_features("POST", "/.clefgate/verify", list(f.headers), client_ip=f.client_ip, body=body), body)
    assert isinstance(resp, LocalResponse) and resp.status == 403
    query = "&".join(f"f{i}=1" for i in range(12))
    resp = svc.handle(make_features("GET", "/.clefgate/nojs?" + query, list(f.headers), client_ip=f.client_ip), b"")
    assert isinstance(resp, LocalResponse) and resp.status == 403


def test_a_refused_answer_links_back_to_the_page_asked_for(svc: ChallengeService) -> None:
    f = browser("/products/42?x=1")
    form, counter = solved(svc, f)
    wrong = next(c for c in range(1000) if not pow_ok(form["nonce"], str(c), 8))
    assert 'href="/products/42?x=1"' in _refusal(svc, f, form["token"], wrong)
    assert 'href="/"' in _refusal(svc, f, forged(form["token"]), counter)  # a forged token tells us nothing


def test_the_nonce_store_forgets_the_soonest_to_expire_not_the_first_claimed() -> None:
    from gateway.challenge.nonces import NonceStore

    now = [1000.0]
    store = NonceStore(max_entries=2, clock=lambda: now[0])
    assert store.claim("fresh", 1300.0)
    assert store.claim("old-token-solved-late", 1006.0)
    now[0] = 1100.0
    assert store.claim("third", 1400.0)
    assert not store.claim("fresh", 1300.0)  # still valid until 1300: a replay
    bigger = store.resized(5)
    assert bigger is not store and store.max_entries == 2 and len(bigger) == len(store)
    assert store.resized(2) is store


def test_a_pass_holds_on_the_site_it_was_earned_on(clock: Clock) -> None:
    """Browsers keep a cookie to its host (or cookie_domain); a bot replaying it elsewhere must not be let through."""
    def on(svc: ChallengeService, host: str, cookie: str = "") -> Features:
        headers = [("Host", host), ("User-Agent", UA), ("Accept", "text/html")] + ([("Cookie", cookie)] if cookie else [])
        return make_features("GET", "/p", headers, client_ip="203.0.113.7")

    def earn(svc: ChallengeService, host: str) -> str:
        f = on(svc, host)
        form, counter = solved(svc, f)
        body = urlencode({"token": form["token"], "counter": str(counter)}).encode()
        resp = svc.handle(make_features("POST", "/.clefgate/verify", list(f.headers), client_ip=f.client_ip, body=body), body)
        assert isinstance(resp, LocalResponse) and resp.status == 303
        return cookie_of(resp)

    svc = ChallengeService(ChallengeConfig(), Signer([("k1", KEY)]), ClientState(), clock=clock)
    cookie = earn(svc, "shop.example")
    assert svc.pass_for(on(svc, "shop.example:8443", cookie)) is not None  # the port is not part of a cookie's scope
    assert svc.pass_for(on(svc, "blog.other.example", cookie)) is None
    shared = ChallengeService(ChallengeConfig(cookie_domain=".example.com"), Signer([("k1", KEY)]), ClientState(), clock=clock)
    cookie = earn(shared, "www.example.com")
    assert shared.pass_for(on(shared, "shop.example.com", cookie)) is not None  # the cookie's domain
    assert shared.pass_for(on(shared, "example.org", cookie)) is None


def test_a_pass_holds_its_difficulty_for_a_site_s_step_up_until_its_client_drifts(svc: ChallengeService, clock: Clock,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    f = browser()
    assert svc.pass_held(f) == 0
    form, counter = solved(svc, f, difficulty=9)
    cookie = cookie_of(answer(svc, f, form["token"], counter))
    held = browser(cookie=cookie)
    assert svc.pass_held(held) == 9
    assert svc.pass_held(browser(cookie=cookie, ip="198.51.100.200")) == 0  # another client's
    monkeypatch.setattr(svc, "drift", lambda client, issued: "request rate 900/min is above 120/min")
    assert svc.pass_held(held) == 0  # a pass whose client's behaviour drifted holds nothing

