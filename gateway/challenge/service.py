"""ChallengeService: the pages for CHALLENGE and BLOCK verdicts, and the ``/.clefgate/`` endpoints.

Flow for a challenged browser::

    GET /page            -> 403 (challenge.page_status) challenge page with a signed token
    (page solves SHA-256 proof-of-work in Web Workers)
    POST /.clefgate/verify  token=...&counter=...
                         -> 303 to /page, Set-Cookie: clefgate_pass=<signed pass>
    GET /page  (cookie)  -> the pipeline sees a valid pass: the CHALLENGE becomes FORWARD

The token and the pass are bound to the client (network prefix + user-agent hash), expire,
and a solved nonce is accepted once. A form a person posted from the site itself
(``application/x-www-form-urlencoded``, whole, at most ``challenge.keep_form_bytes``, and
same-origin by ``Sec-Fetch-Site`` or ``Origin``) is kept: the page sends it back with the
puzzle's answer, and once the check is passed a page posts it again to where it was going
(:meth:`ChallengeService.kept_form`). Any other POST is not replayed (its body is gone): the
page says so, and after passing the client is told to submit again. Browsers without
JavaScript get a signed wait instead (``/.clefgate/nojs``,
a meta refresh and a Continue button): it costs waiting time instead of CPU, longer the
higher the difficulty (:meth:`ChallengeService.nojs_wait_s`), and its token is single-use
and bound to the client exactly like the puzzle's.

A challenged XHR/fetch (``Sec-Fetch-Mode: cors``/``same-origin``, ``Accept: application/json``
or ``X-Requested-With``) gets JSON instead of a page, ``{"error": "challenge", "challenge_url":
..., "request_id": ...}``, and the header ``X-Clefgate-Challenge: pow; difficulty=N; url=...``:
the front end sends the top-level page to ``challenge_url`` (``GET /.clefgate/challenge``),
which comes back to the page once solved (docs/challenge.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

from gateway import metrics
from gateway.challenge.nonces import NonceStore
from gateway.challenge.pages import CSP, CSP_RESEND, CSP_STATIC, challenge_page, message_page, nojs_url_of, resend_page
from gateway.challenge.strings import STRINGS, pick_language
from gateway.challenge.tokens import CHALLENGE, MIN_SECRET_BYTES, PASS, WAIT, Binding, Signer, TokenError, b64e, new_nonce, pow_ok
from gateway.clients import ClientState
from gateway.config import ChallengeConfig, resolve_secret
from gateway.features import Features
from gateway.verdict import LOCAL_BODY_MAX, Action, LocalResponse, Source, Verdict, attack_probability, bot_probability

log = logging.getLogger("clefgate.challenge")

ISSUED = metrics.counter("clefgate_challenges_issued_total", "Challenge pages served.")
PASSED = metrics.counter("clefgate_challenges_passed_total", "Challenges solved and verified (a pass cookie was issued).")
FAILED = metrics.counter("clefgate_challenges_failed_total",
                         "Challenge answers refused, by reason (malformed, unknown_key, bad_signature, wrong_type, expired, "
                         "wrong_client, bad_solution, replayed, too_early).", ("reason",))
SOLVE = metrics.histogram("clefgate_challenge_solve_seconds", "Time from issuing a challenge to its verified answer.",
                          buckets=(0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 60.0, 120.0, 300.0))
KEPT_FORMS = metrics.counter("clefgate_challenge_kept_forms_total",
                             "Form posts a challenge kept and sent again once passed, by stage: kept (the challenge page carries it), "
                             "resent (the check was passed and the form posted again), refused (an answer whose form was not the "
                             "one kept, or that came from another site: the form was not sent), too_large (a form whose answer "
                             "would not fit what the verify endpoint reads: not kept).", ("stage",))
PASS_COOKIES = metrics.counter("clefgate_pass_cookies_total",
                               "Pass cookies presented on challenged requests, by result (accepted, rechallenged, or the refusal reason).",
                               ("result",))
BLOCK_PAGES = metrics.counter("clefgate_block_pages_total", "Block pages served, by status.", ("status",))

PREFIX = "/.clefgate/"
_CONTROL = re.compile("[\x00-\x1f]")
# the longest return URL a no-JavaScript link carries (its token must fit a request line, 8 KiB by default)
_NOJS_URL_MAX = 2048
# the answer's bytes besides the token and the kept form: its field names, separators and the counter
_ANSWER_FIELDS = 64
_COMMON_HEADERS = (("Cache-Control", "no-store"), ("X-Robots-Tag", "noindex, nofollow"), ("Referrer-Policy", "same-origin"),
                   ("X-Content-Type-Options", "nosniff"))


def load_signer(cfg: ChallengeConfig, *, needed: bool, why: str, problems: list[str]) -> Signer | None:
    """The Signer for ``challenge.keys``; problems for missing, short or unresolved secrets.

    With no keys: a config error when something can challenge (``why`` says what),
    unless ``dev_generate_secret`` asks for a random one (logged as a warning); when
    nothing can challenge, an ephemeral key is made silently (it signs nothing that
    must survive).
    """
    keys: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for i, key in enumerate(cfg.keys):
        where = f"challenge.keys[{i}]"
        if key.id in seen:
            problems.append(f"{where}.id: duplicate key id {key.id!r}")
            continue
        seen.add(key.id)
        secret = resolve_secret(key.secret)
        if not secret:
            problems.append(f"{where}.secret: {key.secret!r} resolves to nothing (unset variable or unreadable file)"
                            if key.secret.startswith(("env:", "file:")) else f"{where}.secret: empty")
            continue
        if len(secret.encode()) < MIN_SECRET_BYTES:
            problems.append(f"{where}.secret: too short ({len(secret.encode())} bytes; at least {MIN_SECRET_BYTES}, e.g. "
                            "python -c 'import secrets; print(secrets.token_urlsafe(48))')")
            continue
        keys.append((key.id, secret.encode()))
    if keys:
        return Signer(keys)
    if cfg.keys:
        return None  # every key had a problem, already reported
    if needed and not cfg.dev_generate_secret:
        problems.append(f"challenge.keys: required because {why}; set challenge.keys: [{{id: k1, secret: env:CLEFGATE_CHALLENGE_KEY}}] "
                        "(or challenge.dev_generate_secret: true for development only)")
        return None
    if needed:
        log.warning("challenge.dev_generate_secret: signing with a random key made at start; passes do not survive a restart "
                    "and are not shared between workers or replicas. Configure challenge.keys for production.")
    return Signer([("dev", secrets.token_bytes(32))])


class ChallengeService:
    """PageRenderer (challenge and block pages) + LocalEndpoints (``/.clefgate/``) + pass-cookie checks."""

    prefix = PREFIX

    def __init__(self, cfg: ChallengeConfig, signer: Signer, state: ClientState | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.signer = signer
        self.state = state or ClientState()
        self.clock = clock
        self.binding = Binding(cfg.bind_ipv4_prefix, cfg.bind_ipv6_prefix, cfg.bind_user_agent)
        self.nonces = NonceStore(cfg.max_nonces, clock)
        self._cookie_marker = cfg.cookie_name + "="
        self._url_safe_ids = frozenset(kid for kid in signer.keys if quote(kid) == kid)

    # ------------------------------------------------------------------ helpers

    def _bind(self, features: Features) -> str:
        return self.binding.of(features.client_ip, features.user_agent, self._site(features.host))

    def _site(self, host: str) -> str:
        """Where a pass holds: the cookie domain for hosts inside it, else the host itself (port aside)."""
        if host.startswith("["):  # an IPv6 literal, with or without a port
            end = host.find("]")
            name = host[:end + 1] if end > 0 else host
        else:
            name = host.split(":", 1)[0]
        name = name.lower().rstrip(".")
        domain = self.cfg.cookie_domain.lower().lstrip(".")
        if domain and (name == domain or name.endswith("." + domain)):
            return domain
        return name

    def _lang(self, features: Features) -> str:
        return pick_language(features.header_map.get("accept-language", ""))

    @staticmethod
    def _wants_json(features: Features) -> bool:
        """A script's request (XHR/fetch), not a page the person sees: it gets JSON it can act on."""
        headers = features.header_map
        if headers.get("sec-fetch-mode", "").lower() in ("cors", "same-origin") or "x-requested-with" in headers:
            return True
        accept = headers.get("accept", "")
        return "json" in accept and "html" not in accept

    def nojs_wait_s(self, difficulty: int) -> int | None:
        """Seconds the no-JavaScript path makes a client wait at ``difficulty``, or None when it offers none.

        ``nojs_wait_s`` at ``challenge.difficulty`` or below, doubled every 2 bits above it (the puzzle's
        expected work doubles every bit), at most ``nojs_max_wait_s`` and well inside the token's lifetime.
        """
        cfg = self.cfg
        if not cfg.nojs_max_difficulty or difficulty > cfg.nojs_max_difficulty:
            return None
        wait = cfg.nojs_wait_s * 2.0 ** (max(0, difficulty - cfg.difficulty) / 2.0)
        return math.ceil(min(wait, cfg.nojs_max_wait_s, cfg.token_ttl_s * 0.8))

    def challenge_url(self, features: Features, difficulty: int) -> str:
        """Where a script sends the top-level page to be challenged: back to that page (the Referer on this host) once solved."""
        back = "/"
        referer = features.header_map.get("referer", "")
        if referer:
            parts = urlsplit(referer)
            if parts.netloc and parts.netloc.lower() == features.host.lower():
                back = self._safe_target(parts.path + (f"?{parts.query}" if parts.query else ""))
        if len(back) > _NOJS_URL_MAX:
            back = "/"
        return f"{PREFIX}challenge?" + urlencode({"d": difficulty, "return": back})

    def _secure(self, features: Features) -> bool:
        return self.cfg.cookie_secure == "always" or (self.cfg.cookie_secure == "auto" and features.scheme == "https")

    @staticmethod
    def _safe_target(target: str) -> str:
        """A local URL to send the client back to: never another host (no open redirect)."""
        if not target.startswith("/") or target.startswith("//") or "\\" in target or _CONTROL.search(target) is not None:
            parts = urlsplit(target)
            path = "/" + (parts.path or "").lstrip("/\\")
            return path + (f"?{parts.query}" if parts.query else "")
        return target

    def _return_url(self, features: Features) -> tuple[str, bool]:
        """(where to go after passing, whether the original request's body was lost)."""
        if features.method in ("GET", "HEAD"):
            return self._safe_target(features.target), False
        referer = features.header_map.get("referer", "")
        if referer:
            parts = urlsplit(referer)
            if parts.netloc and parts.netloc.lower() == features.host.lower():
                return self._safe_target(parts.path + (f"?{parts.query}" if parts.query else "")), True
        return "/", True

    def kept_form(self, features: Features) -> str | None:
        """The body of a form post the challenge keeps and sends again once passed, or None.

        Kept: a ``POST`` of ``application/x-www-form-urlencoded`` that arrived whole (its length known, at most
        ``challenge.keep_form_bytes``, all of it read before deciding), in ASCII with its fields in UTF-8, posted
        from this site itself (``Sec-Fetch-Site: same-origin``, or without Fetch Metadata an ``Origin`` naming this
        host). A form posted from another site is never kept: sending it again from the gateway's own page would
        carry the site's SameSite cookies that the cross-site post did not (request forgery).
        """
        cap = self.cfg.keep_form_bytes
        body = features.body_prefix
        if (not cap or features.method != "POST" or not body or len(body) > cap or features.chunked
                or features.content_length != len(body) or not _same_origin(features)):
            return None
        headers = features.header_map
        if headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/x-www-form-urlencoded":
            return None
        try:
            text = body.decode("ascii")
            if not text.isprintable():  # a browser escapes line breaks; a raw one would not come back as it went
                return None
            parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict", max_num_fields=1000)
        except (UnicodeDecodeError, ValueError):
            return None
        return text

    def _response(self, status: int, body: bytes, features: Features, *, csp: str = CSP_STATIC,
                  extra: tuple[tuple[str, str], ...] = ()) -> LocalResponse:
        headers = (*_COMMON_HEADERS, ("Content-Security-Policy", csp), *extra)
        if features.method == "HEAD":
            body = b""
        return LocalResponse(status, body, headers)

    def _json(self, status: int, payload: dict[str, Any], extra: tuple[tuple[str, str], ...] = ()) -> LocalResponse:
        return LocalResponse(status, json.dumps(payload).encode(), (*_COMMON_HEADERS, *extra), "application/json")

    # ------------------------------------------------------------------ PageRenderer

    def challenge(self, verdict: Verdict, features: Features) -> LocalResponse:
        """The proof-of-work page for a CHALLENGE verdict (status ``challenge.page_status``)."""
        cfg = self.cfg
        now = self.clock()
        difficulty = verdict.difficulty or cfg.difficulty
        url, post_lost = self._return_url(features)
        nonce = new_nonce()
        binding = self._bind(features)
        expires = int(now + cfg.token_ttl_s) + 1
        wait_s = self.nojs_wait_s(difficulty)
        wants_json = self._wants_json(features)
        kept = self.kept_form(features) if post_lost and not wants_json else None
        nojs_token: str | None
        if kept is not None:
            # the page's token names where the form goes and its body's digest; the no-JavaScript twin keeps no form
            token = self.signer.sign({"t": CHALLENGE, "n": nonce, "d": difficulty, "i": now, "e": expires, "b": binding, "u": url,
                                      "p": 1, "pu": self._safe_target(features.target), "k": _digest(kept)})
            # the answer carries the token and the form, each character of which the browser may escape as %XX: kept only
            # when that still fits what the gateway's endpoint reads
            if len(token) + 3 * len(kept) + _ANSWER_FIELDS > LOCAL_BODY_MAX:
                KEPT_FORMS.inc("too_large")
                kept = None
        if kept is not None:
            nojs_token = None if wait_s is None else self.signer.sign_challenge(
                WAIT, nonce=nonce, difficulty=difficulty, issued=now, expires=expires, binding=binding,
                url=url if len(url) <= _NOJS_URL_MAX else "/", post_lost=1, not_before=now + wait_s)
            KEPT_FORMS.inc("kept")
        elif wait_s is None:
            token = self.signer.sign_challenge(CHALLENGE, nonce=nonce, difficulty=difficulty, issued=now, expires=expires, binding=binding,
                                               url=url, post_lost=int(post_lost))
            nojs_token = None
        else:
            # this token travels in a link's query: a very long return URL goes back without its query, so the
            # link stays within a request line
            nojs_back = url if len(url) <= _NOJS_URL_MAX else url.split("?", 1)[0]
            if len(nojs_back) > _NOJS_URL_MAX:
                nojs_back = "/"
            token, nojs_token = self.signer.sign_challenge_pair(nonce=nonce, difficulty=difficulty, issued=now, expires=expires,
                                                                binding=binding, url=url, post_lost=int(post_lost), wait_url=nojs_back,
                                                                not_before=now + wait_s)
        ISSUED.inc()
        if wants_json:
            where = self.challenge_url(features, difficulty)
            s = STRINGS["en"]
            return self._json(cfg.page_status, {"error": "challenge", "message": s["challenge_intro"], "challenge_url": where,
                                                "request_id": features.request_id, "difficulty": difficulty},
                              (("X-Clefgate-Challenge", f"pow; difficulty={difficulty}; url={where}"),))
        extra = (("X-Clefgate-Challenge", f"pow; difficulty={difficulty}"),)
        lang = self._lang(features)
        body = challenge_page(lang, token=token, nonce=nonce, difficulty=difficulty, verify_url=f"{PREFIX}verify",
                              post_lost=post_lost and kept is None, nojs_token=nojs_token, nojs_action=f"{PREFIX}nojs", nojs_wait_s=wait_s or 0,
                              request_id=features.request_id, contact=cfg.contact, plain=self.signer.plain, kept=kept)
        return self._response(cfg.page_status, body, features, csp=CSP, extra=extra)

    def block(self, verdict: Verdict, features: Features) -> LocalResponse:
        """The block page for a BLOCK verdict: its own status (e.g. 429 from a rate rule) or ``challenge.block_status``.

        It names a plain reason class (:func:`reason_class`), the reference (request id), and the
        operator's contact and appeal link when configured.
        """
        status = verdict.status or self.cfg.block_status
        BLOCK_PAGES.inc(str(status))
        kind = "rate" if status == 429 else "block"
        extra = (("Retry-After", "60"),) if status == 429 else ()
        why = reason_class(verdict)
        if self._wants_json(features):
            s = STRINGS["en"]
            payload = {"error": "rate_limited" if kind == "rate" else "blocked", "message": s["rate_text" if kind == "rate" else "block_text"],
                       "reason": s["reason_" + why], "request_id": features.request_id}
            if self.cfg.contact:
                payload["contact"] = self.cfg.contact
            if self.cfg.appeal_url:
                payload["appeal_url"] = self.cfg.appeal_url.replace("{request_id}", quote(features.request_id, safe=""))
            return self._json(status, payload, extra)
        body = message_page(self._lang(features), kind, request_id=features.request_id, contact=self.cfg.contact, reason_class=why,
                            appeal_url=self.cfg.appeal_url)
        return self._response(status, body, features, extra=extra)

    # ------------------------------------------------------------------ LocalEndpoints

    def handle(self, features: Features, body: bytes) -> LocalResponse | Awaitable[LocalResponse]:
        """Requests under ``/.clefgate/``: ``POST verify`` (the page's answer), ``GET nojs`` (the no-JavaScript path) and
        ``GET challenge`` (the page a script sends its top-level page to)."""
        name = features.path[len(PREFIX):] if features.path.startswith(PREFIX) else ""
        if name == "verify" and features.method == "POST":
            try:
                form = parse_qs(body.decode("latin-1"), max_num_fields=8)
            except ValueError:  # more fields than an answer has
                return self._refused(features, "malformed", None)
            kept = form.get("form")
            return self._answer(features, CHALLENGE, (form.get("token") or [""])[0], (form.get("counter") or [""])[0],
                                kept[0] if kept else None)
        if name == "challenge" and features.method in ("GET", "HEAD"):
            return self._challenge_for_script(features)
        if name == "nojs" and features.method in ("GET", "HEAD"):
            try:
                query = parse_qs(features.query, max_num_fields=8)
            except ValueError:
                return self._refused(features, "malformed", None)
            return self._answer(features, WAIT, (query.get("token") or [""])[0], "")
        lang = self._lang(features)
        return self._response(404, message_page(lang, "not_found", request_id=features.request_id), features)

    def _answer(self, features: Features, kind: str, token: str, counter: str,
                kept: str | None = None) -> LocalResponse | Awaitable[LocalResponse]:
        now = self.clock()
        payload: dict[str, Any] | None = None
        try:
            payload = self.signer.verify(token, kind, now)
            if payload.get("b") != self._bind(features):
                raise TokenError("wrong_client", "issued to another client")
            if kind == CHALLENGE and not pow_ok(str(payload.get("n", "")), counter, int(payload.get("d", 99))):
                raise TokenError("bad_solution", "the answer does not solve the puzzle")
            if kind == WAIT and now < float(payload.get("nb", 0)):
                return self._wait_more(features, float(payload.get("nb", 0)) - now)
        except TokenError as exc:
            # once the signature held, the retry link goes back to the page the client asked for
            return self._refused(features, exc.reason, payload)
        nonce = str(payload.get("n", ""))
        ttl = max(1.0, float(payload["e"]) - now)
        expires = now + ttl

        def local() -> bool:
            return self.nonces.claim(nonce, expires)

        if self.state.backend is None:
            return self._passed(features, payload, local(), now, kept)
        return self._shared_claim(features, payload, nonce, ttl, local, now, kept)

    async def _shared_claim(self, features: Features, payload: dict[str, Any], nonce: str, ttl: float, local: Callable[[], bool],
                            now: float, kept: str | None) -> LocalResponse:
        first = await self.state.claim(nonce, ttl, local)
        return self._passed(features, payload, first, now, kept)

    def _passed(self, features: Features, payload: dict[str, Any], first: bool, now: float, kept: str | None = None) -> LocalResponse:
        if not first:
            return self._refused(features, "replayed", payload)
        cfg = self.cfg
        difficulty = int(payload.get("d", cfg.difficulty))
        cookie = self.signer.sign({"t": PASS, "i": int(now), "e": int(now + cfg.pass_ttl_s), "b": self._bind(features),
                                   "d": difficulty, "id": b64e(secrets.token_bytes(6))})
        PASSED.inc()
        SOLVE.observe(max(0.0, now - float(payload.get("i", now))))
        self.state.passed(self.state.key(features, pass_value=cookie))
        set_cookie = ("Set-Cookie", self._cookie_header(cookie, features))
        url = self._safe_target(str(payload.get("u", "/")))
        if payload.get("p"):
            lang = self._lang(features)
            if "k" in payload:
                # the form this page kept goes again only as it was kept, and only from the challenge page itself:
                # an answer posted from another site cannot make the gateway's page post a form of its choosing
                if kept is not None and _digest(kept) == payload["k"] and _same_origin(features):
                    KEPT_FORMS.inc("resent")
                    fields = parse_qsl(kept, keep_blank_values=True, encoding="utf-8", max_num_fields=1000)
                    body = resend_page(lang, action=self._safe_target(str(payload.get("pu", "/"))), fields=fields,
                                       request_id=features.request_id)
                    return self._response(200, body, features, csp=CSP_RESEND, extra=(set_cookie,))
                KEPT_FORMS.inc("refused")
            body = message_page(lang, "verified_post", link=url)
            return self._response(200, body, features, extra=(set_cookie,))
        return LocalResponse(303, b"", (*_COMMON_HEADERS, ("Location", url), set_cookie), "text/plain; charset=utf-8")

    def _challenge_for_script(self, features: Features) -> LocalResponse:
        """``GET /.clefgate/challenge?d=N&return=/page``: the challenge page for a top-level page whose script was challenged.

        The difficulty asked for is never below ``challenge.difficulty`` (and a pass earned below what a
        request needs is challenged again anyway); the return URL is local only.
        """
        try:
            query = parse_qs(features.query, max_num_fields=8)
        except ValueError:
            return self._refused(features, "malformed", None)
        try:
            asked = int((query.get("d") or ["0"])[0])
        except ValueError:
            asked = 0
        difficulty = min(32, max(self.cfg.difficulty, asked))
        back = self._safe_target((query.get("return") or ["/"])[0] or "/")
        path, _, query_text = back.partition("?")
        headers = {k: v for k, v in features.header_map.items() if k not in ("sec-fetch-mode", "x-requested-with", "accept")}
        page = dataclasses.replace(features, method="GET", path=path, query=query_text, header_map={**headers, "accept": "text/html"})
        verdict = Verdict(Action.CHALLENGE, Source.DEFAULT, "challenge asked for by a challenged script", difficulty=difficulty)
        return self.challenge(verdict, page)

    def _wait_more(self, features: Features, left_s: float) -> LocalResponse:
        """The no-JavaScript path followed before its wait is over: a page that comes back to the same link when it is."""
        FAILED.inc("too_early")
        seconds = max(1, math.ceil(left_s))
        again = nojs_url_of(f"{PREFIX}nojs", (parse_qs(features.query).get("token") or [""])[0])
        body = message_page(self._lang(features), "wait", request_id=features.request_id, link=again, refresh=(seconds, again),
                            seconds=seconds)
        return self._response(403, body, features)

    def _refused(self, features: Features, reason: str, payload: dict[str, Any] | None) -> LocalResponse:
        FAILED.inc(reason)
        retry = self._safe_target(str(payload.get("u", "/"))) if payload else "/"
        body = message_page(self._lang(features), "failed", request_id=features.request_id, contact=self.cfg.contact,
                            link=retry, reason=reason.replace("_", " "))
        return self._response(403, body, features)

    def _cookie_header(self, value: str, features: Features) -> str:
        cfg = self.cfg
        parts = [f"{cfg.cookie_name}={value}", "Path=/", f"Max-Age={int(cfg.pass_ttl_s)}", "HttpOnly", "SameSite=Lax"]
        if cfg.cookie_domain:
            parts.append(f"Domain={cfg.cookie_domain}")
        if self._secure(features):
            parts.append("Secure")
        return "; ".join(parts)

    # ------------------------------------------------------------------ pass cookies

    def pass_for(self, features: Features, *, counted: bool = True) -> dict[str, Any] | None:
        """The payload of the client's valid pass cookie, or None (absent, forged, tampered, expired, another client's);
        ``counted``: a refusal is counted in ``clefgate_pass_cookies_total`` (a challenged request's pass)."""
        header = features.header_map.get("cookie", "")
        if self._cookie_marker not in header:
            return None
        # Split by hand: http.cookies stops at the first cookie it finds illegal (another
        # application's JSON cookie, say), which would hide ours and re-challenge forever.
        value = None
        for part in header.split(";"):
            name, _, candidate = part.strip().partition("=")
            if name == self.cfg.cookie_name:
                value = candidate.strip().strip('"')
        if not value:
            if counted:
                PASS_COOKIES.inc("malformed")
            return None
        try:
            payload = self.signer.verify(value, PASS, self.clock())
        except TokenError as exc:
            if counted:
                PASS_COOKIES.inc(exc.reason)
            return None
        if payload.get("b") != self._bind(features):
            if counted:
                PASS_COOKIES.inc("wrong_client")
            return None
        return payload

    def pass_held(self, features: Features) -> int:
        """The difficulty the client's pass holds for a site that asks (a step-up), 0 for none: a pass whose client's
        request rate or 4xx share drifted since it was earned holds nothing (:meth:`drift`), as for a challenge."""
        payload = self.pass_for(features, counted=False)
        if payload is None or self.drift(self.state.key(features), float(payload.get("i", 0.0))):
            return 0
        return int(payload.get("d", 0))

    def drift(self, client_ip: str, issued: float) -> str | None:
        """Why a client holding a pass issued at ``issued`` (this service's clock) should be challenged again, or None.

        Only what the client did after earning the pass counts (the window's slots after the one it was earned
        in): the behaviour that got it challenged cannot refuse the pass it just earned, which would send it
        round the challenge again and again.
        """
        cfg = self.cfg
        windows = self.state.windows
        # the pass records its issue time in whole seconds: the moment is rounded up, never into an earlier slot
        requests, errors, covered = windows.counts_since(client_ip, windows.clock() - max(0.0, self.clock() - issued - 1.0))
        rate = requests * 60.0 / max(covered, windows.slot_s)
        if cfg.pass_max_rate_per_min and rate > cfg.pass_max_rate_per_min:
            return f"request rate {rate:.0f}/min is above {cfg.pass_max_rate_per_min:g}/min"
        if cfg.pass_max_error_ratio < 1.0 and requests >= 20 and errors / requests > cfg.pass_max_error_ratio:
            return f"{errors} of the last {requests} answers were 4xx"
        return None

    def honour(self, verdict: Verdict, features: Features) -> Verdict:
        """A CHALLENGE verdict for a client with a valid pass becomes FORWARD, unless the risk or its behaviour rose since.

        A pass earned at a lower difficulty than the one now required, or a client whose
        request rate or 4xx share drifted past ``challenge.pass_max_*``, is challenged
        again (the reason says why).
        """
        if verdict.action is not Action.CHALLENGE:
            return verdict
        payload = self.pass_for(features)
        if payload is None:
            return verdict
        required = verdict.difficulty or self.cfg.difficulty
        held = int(payload.get("d", 0))
        if held < required:
            why: str | None = f"pass earned at difficulty {held}, {required} now required"
        else:
            why = self.drift(self.state.key(features), float(payload.get("i", 0.0)))
        if why:
            PASS_COOKIES.inc("rechallenged")
            return dataclasses.replace(verdict, reason=f"{verdict.reason}; challenged again: {why}",
                                       explanation=(*verdict.explanation, f"challenged again: {why}"))
        PASS_COOKIES.inc("accepted")
        # the model's fields (version, latency, input) stay: the decision log is the retraining feed
        return dataclasses.replace(verdict, action=Action.FORWARD, reason=f"challenge passed (pass cookie); would otherwise: {verdict.reason}",
                                   status=None, difficulty=None, shadow_action=None, headers=(("X-Clefgate-Pass", f"difficulty={held}"),))


def _digest(text: str) -> str:
    """A kept form's digest, as its challenge token names it."""
    return b64e(hashlib.sha256(text.encode("utf-8")).digest()[:18])


def _same_origin(features: Features) -> bool:
    """Whether the browser says the request comes from a page of this site: ``Sec-Fetch-Site: same-origin``, or without
    Fetch Metadata (Safari before 16.4) an ``Origin`` naming this host. Neither can be set by a page's script."""
    headers = features.header_map
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site.strip().lower() == "same-origin"
    origin = headers.get("origin", "")
    return bool(features.host) and urlsplit(origin).netloc.lower() == features.host.lower()


_ATTACK_WORDS = re.compile(r"(?i)inject|sql|xss|travers|exploit|log4shell|entit|ssrf|crlf|evasion|secret|vcs|probe|attack|payload|smuggl|shell")


def reason_class(verdict: Verdict) -> str:
    """The plain reason a block page names: ``rate`` (too many requests), ``attack`` (the request looked like an attack),
    ``automated`` (automated traffic) or ``policy`` (the site's access policy, when nothing more is known).

    From the verdict's evidence: its status (429), payload hits and detector source, the rule's name,
    the model's probabilities (attack against bad bot), the client's own history.
    """
    rule = verdict.rule or ""
    if verdict.status == 429 or "rate" in rule.lower():
        return "rate"
    if verdict.payload or verdict.source is Source.DETECTOR:
        return "attack"
    if _ATTACK_WORDS.search(rule) or _ATTACK_WORDS.search(verdict.reason):
        return "attack"
    if verdict.probabilities:
        return "attack" if attack_probability(verdict.probabilities) >= bot_probability(verdict.probabilities) else "automated"
    if verdict.source in (Source.RULE, Source.CLIENT, Source.MODEL, Source.CACHE, Source.FALLBACK):
        return "automated"
    return "policy"
