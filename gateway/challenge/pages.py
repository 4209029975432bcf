"""The HTML the gateway answers with itself: challenge, block, rate-limit and result pages.

Every page is one self-contained response: CSS and scripts inline, no fonts, images or
third-party resources, so it works behind any path rewrite and leaks nothing to anyone.
Its Content-Security-Policy allows exactly those inline blocks (by hash) and blob:
workers. Text comes from ``strings.py``; every dynamic value is HTML-escaped.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections.abc import Callable, Sequence
from importlib import resources
from urllib.parse import quote

from gateway.challenge.strings import STRINGS

_STATIC = resources.files("gateway") / "static"
CSS = _STATIC.joinpath("page.css").read_text(encoding="utf-8")
WORKER_JS = _STATIC.joinpath("pow-worker.js").read_text(encoding="utf-8")
PAGE_JS = _STATIC.joinpath("challenge.js").read_text(encoding="utf-8")


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode() + "'"


# Only the inline blocks above may run; the worker is created from a blob of WORKER_JS.
CSP = (f"default-src 'none'; style-src {_hash(CSS)}; script-src {_hash(WORKER_JS)} {_hash(PAGE_JS)}; worker-src blob:; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
CSP_STATIC = f"default-src 'none'; style-src {_hash(CSS)}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
# the page that sends a kept form again once its check is passed: this one inline line may run. The form's own method
# is called: a field named "submit" (a comment form's button, WordPress's among them) hides form.submit. No form-action:
# the action is a local path the gateway writes, and a browser applies form-action to the redirect the origin answers the
# post with (to a payment or sign-in site), which would stop the page after the origin took the form, inviting a second send.
RESEND_JS = 'HTMLFormElement.prototype.submit.call(document.getElementById("cg-resend"));'
CSP_RESEND = f"default-src 'none'; style-src {_hash(CSS)}; script-src {_hash(RESEND_JS)}; base-uri 'none'; frame-ancestors 'none'"

_e = html.escape
# the fixed strings of every language, escaped once (a challenge page is rendered per challenged request)
_ESCAPED = {lang: {key: html.escape(text) for key, text in strings.items()} for lang, strings in STRINGS.items()}


def _page(lang: str, title: str, body: Sequence[str], *, head: str = "", scripts: bool = False) -> bytes:
    return _page_text(lang, title, body, head=head, scripts=scripts).encode("utf-8")


def _page_text(lang: str, title: str, body: Sequence[str], *, head: str = "", scripts: bool = False) -> str:
    parts = [
        "<!doctype html>",
        f'<html lang="{_e(lang)}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        '<meta name="robots" content="noindex,nofollow">',
        f"<title>{_e(title)}</title><style>{CSS}</style>{head}</head>",
        "<body><main>",
        *body,
        "</main>",
    ]
    if scripts:
        parts.append(f'<script id="cg-worker">{WORKER_JS}</script><script>{PAGE_JS}</script>')
    parts.append("</body></html>")
    return "\n".join(parts)


def _footer(s: dict[str, str], request_id: str, contact: str, *, escaped: bool = False) -> str:
    bits = []
    if request_id:
        bits.append(f"{_e(s['request_id'])}: <code>{request_id if escaped else _e(request_id)}</code>")
    if contact:
        bits.append(f"{_e(s['contact'])} {_e(contact)}.")
    return f'<p class="meta">{"<br>".join(bits)}</p>' if bits else ""


class _Template:
    """A page rendered once with markers in place of its per-request values, split at them.

    Filling it joins the pre-encoded static parts with the values, each escaped (and
    encoded) exactly as the renderer would have done, so the bytes are the renderer's.
    """

    _MARK = re.compile("\x00([0-9]+)\x00")

    def __init__(self, render: Callable[..., str], slots: Sequence[str], **fixed: object) -> None:
        marked = render(**fixed, **{name: f"\x00{i}\x00" for i, name in enumerate(slots)})
        pieces = self._MARK.split(marked)
        self.static = [piece.encode("utf-8") for piece in pieces[0::2]]
        self.order = [int(i) for i in pieces[1::2]]

    def fill(self, values: Sequence[bytes]) -> bytes:
        static = self.static
        out = [static[0]]
        for i, slot in enumerate(self.order, 1):
            out.append(values[slot])
            out.append(static[i])
        return b"".join(out)


_CHALLENGE_SLOTS = ("token", "nonce", "difficulty", "nojs_token", "nojs_url", "request_id", "kept")
_CHALLENGE_TEMPLATES: dict[tuple[str, str, bool, bool, str, int, int, bool, str, bool], _Template] = {}
# SHA-256 tries per second the page's workers make on a slow phone: what the page's time estimate assumes
HASH_RATE = 1_000_000.0


def solve_estimate_s(difficulty: int) -> int:
    """Seconds within which a slow device solves ``difficulty`` 19 times in 20 (3 x the expected tries), at least 2."""
    return max(2, math.ceil(3.0 * 2.0 ** int(difficulty) / HASH_RATE))


def nojs_url_of(nojs_action: str, nojs_token: str) -> str:
    """The no-JavaScript path's link: the wait token in the query (base64url and key ids need no quoting, others are quoted)."""
    return f"{nojs_action}?token={quote(nojs_token, safe='-_.~')}"


def challenge_page(lang: str, *, token: str, nonce: str, difficulty: int, verify_url: str, post_lost: bool,
                   nojs_token: str | None, nojs_action: str, nojs_wait_s: int, request_id: str, contact: str, plain: bool = False,
                   kept: str | None = None) -> bytes:
    """The proof-of-work page, and its no-JavaScript path when ``nojs_token`` is given.

    Progressive enhancement: what the script does (the puzzle's progress and status) is
    hidden until the script runs and shows it; without JavaScript, ``<noscript>`` holds a
    meta refresh to the signed wait path after ``nojs_wait_s`` seconds and a Continue
    button doing the same, so the page never says it is working when nothing runs.

    Pages are filled into a template split once per layout (language, difficulty, options), since
    a flood gets one per request; the bytes are :func:`render_challenge_page`'s. ``plain`` says that
    ``token``, ``nonce`` and ``nojs_token`` are made of ``tokens.PLAIN_CHARS`` only (a ``Signer.plain``
    signer's tokens and ``new_nonce``'s nonces), which escaping and quoting leave as they are.

    ``kept``: the body of a form post the page keeps (URL-encoded text), answered with the puzzle's
    solution so that the form is sent again once the check is passed (``ChallengeService.kept_form``);
    the no-JavaScript path does not carry it, and says the form was not sent.
    """
    layout = (lang, verify_url, post_lost, nojs_token is not None, nojs_action, nojs_wait_s, int(difficulty), bool(request_id), contact,
              kept is not None)
    template = _CHALLENGE_TEMPLATES.get(layout)
    if template is None:
        if len(_CHALLENGE_TEMPLATES) >= 512:  # layouts are few (languages x difficulties x options); never grow without bound
            _CHALLENGE_TEMPLATES.clear()
        template = _CHALLENGE_TEMPLATES[layout] = _Template(
            _challenge_text, _CHALLENGE_SLOTS, lang=lang, verify_url=verify_url, post_lost=post_lost, nojs_wait_s=nojs_wait_s,
            contact=contact, nojs_action=nojs_action, estimate_s=solve_estimate_s(difficulty), marked_nojs=nojs_token is not None,
            marked_request_id=bool(request_id), marked_kept=kept is not None)
    kept_value = b"" if kept is None else _e(kept).encode("utf-8")
    if plain:
        nojs = (b"", b"") if nojs_token is None else (nojs_token.encode("ascii"), f"{_e(nojs_action)}?token={nojs_token}".encode())
        return template.fill((token.encode("ascii"), nonce.encode("ascii"), str(int(difficulty)).encode("ascii"), *nojs,
                              _e(request_id).encode("utf-8"), kept_value))
    nojs = (_e(nojs_token).encode("utf-8"), _e(nojs_url_of(nojs_action, nojs_token)).encode("utf-8")) if nojs_token is not None \
        else (b"", b"")
    return template.fill((_e(token).encode("utf-8"), _e(nonce).encode("utf-8"), str(int(difficulty)).encode("ascii"), *nojs,
                          _e(request_id).encode("utf-8"), kept_value))


def render_challenge_page(lang: str, *, token: str, nonce: str, difficulty: int, verify_url: str, post_lost: bool,
                          nojs_token: str | None, nojs_action: str, nojs_wait_s: int, request_id: str, contact: str,
                          kept: str | None = None) -> bytes:
    """:func:`challenge_page` rendered directly, without a template (the reference its templates are split from)."""
    return _challenge_text(lang, token=_e(token), nonce=_e(nonce), difficulty=str(int(difficulty)), verify_url=verify_url,
                           post_lost=post_lost, nojs_token=None if nojs_token is None else _e(nojs_token),
                           nojs_url=None if nojs_token is None else _e(nojs_url_of(nojs_action, nojs_token)), nojs_action=nojs_action,
                           nojs_wait_s=nojs_wait_s, estimate_s=solve_estimate_s(difficulty), request_id=_e(request_id),
                           contact=contact, kept=None if kept is None else _e(kept)).encode("utf-8")


def _challenge_text(lang: str, *, token: str, nonce: str, difficulty: str, verify_url: str, post_lost: bool, nojs_token: str | None,
                    nojs_url: str | None, nojs_action: str, nojs_wait_s: int, estimate_s: int, request_id: str, contact: str,
                    kept: str | None = None, marked_nojs: bool | None = None, marked_request_id: bool | None = None,
                    marked_kept: bool | None = None) -> str:
    """The challenge page as text; ``token``, ``nonce``, ``nojs_token``, ``nojs_url``, ``request_id`` and ``kept`` come in
    already HTML-escaped.

    A template renders it with markers as values: ``marked_nojs``, ``marked_request_id`` and
    ``marked_kept`` then say whether those parts are present (a marker is never empty).
    """
    if marked_nojs is False:
        nojs_token = nojs_url = None
    if marked_request_id is False:
        request_id = ""
    if marked_kept is False:
        kept = None
    s = _ESCAPED[lang]
    head = f'<noscript><meta http-equiv="refresh" content="{nojs_wait_s};url={nojs_url}"></noscript>' if nojs_url else ""
    if nojs_url:
        nojs = (f'<noscript><form method="get" action="{_e(nojs_action)}" class="note">'
                f"<p>{s['nojs_wait'].format(seconds=nojs_wait_s)}</p><p>{s['nojs_button'].format(seconds=nojs_wait_s)}</p>"
                f'<input type="hidden" name="token" value="{nojs_token}"><button type="submit">{s["nojs_continue"]}</button>'
                "</form></noscript>")
    else:
        nojs = f"<noscript><p class=\"note\">{s['nojs_required']}</p></noscript>"
    body = [
        f"<h1>{s['challenge_heading']}</h1>",
        f"<p>{s['challenge_intro']}</p>",
        f"<p class=\"note\">{s['post_lost']}</p>" if post_lost else "",
        # a kept form goes with the puzzle's answer, which only the script sends: without it the form is lost
        f"<noscript><p class=\"note\">{s['post_lost']}</p></noscript>" if kept is not None else "",
        # shown by the script when it runs: without JavaScript nothing here is true
        f'<div id="cg-js" hidden><p>{s["challenge_js"].format(seconds=estimate_s)}</p>'
        + (f"<p class=\"note\">{s['post_kept']}</p>" if kept is not None else "") +
        f'<progress id="cg-bar" max="100" value="0" aria-label="{s["challenge_working"]}"></progress>'
        f'<p id="cg-status" role="status" aria-live="polite">{s["challenge_working"]}</p></div>',
        f'<form id="cg-form" method="post" action="{_e(verify_url)}" data-nonce="{nonce}" data-difficulty="{difficulty}" '
        f'data-progress="{s["challenge_progress"]}" data-done="{s["challenge_done"]}" data-failed="{s["challenge_failed"]}">'
        f'<input type="hidden" name="token" value="{token}"><input type="hidden" name="counter" id="cg-counter" value="">'
        + (f'<input type="hidden" name="form" value="{kept}">' if kept is not None else "") + "</form>",
        nojs,
        _footer(STRINGS[lang], request_id, "", escaped=True),
    ]
    return _page_text(lang, STRINGS[lang]["challenge_title"], [b for b in body if b], head=head, scripts=True)


def resend_page(lang: str, *, action: str, fields: Sequence[tuple[str, str]], request_id: str = "") -> bytes:
    """The page that sends a kept form again once its check is passed: the form's fields as hidden inputs, posted to
    ``action`` by the one inline line ``CSP_RESEND`` allows, or by its button without JavaScript.

    Line breaks are written as character references, which the HTML parser does not normalise, so a textarea's CRLF
    is sent as it was."""
    s = STRINGS[lang]
    inputs = "".join(f'<input type="hidden" name="{_attr(name)}" value="{_attr(value)}">' for name, value in fields)
    body = [f"<h1>{_e(s['verified_heading'])}</h1>", f"<p>{_e(s['post_resend'])}</p>",
            f'<form id="cg-resend" method="post" action="{_e(action)}">{inputs}<button type="submit">{_e(s["post_send"])}</button></form>',
            _footer(s, request_id, ""), f"<script>{RESEND_JS}</script>"]
    return _page(lang, s["verified_title"], [b for b in body if b])


def _attr(text: str) -> str:
    return _e(text).replace("\r", "&#13;").replace("\n", "&#10;")


# the plain reason classes a block page can name (``strings.py`` keys ``reason_<class>``)
REASON_CLASSES = ("automated", "attack", "rate", "policy")


def message_page(lang: str, kind: str, *, request_id: str = "", contact: str = "", link: str | None = None,
                 extra: str = "", reason: str = "", reason_class: str = "", appeal_url: str = "", refresh: tuple[int, str] | None = None,
                 seconds: int = 0) -> bytes:
    """A static page: kind is block, rate, verified, verified_post, failed, wait or not_found.

    ``reason_class`` (block and rate pages) names the plain reason (one of ``REASON_CLASSES``);
    ``appeal_url`` adds a link to ask for a review (``{request_id}`` in it is replaced by the
    reference); ``refresh`` (seconds, URL) adds a meta refresh (the wait page).
    """
    s = STRINGS[lang]
    if kind == "block":
        title, heading, text = s["block_title"], s["block_heading"], s["block_text"]
    elif kind == "rate":
        title, heading, text = s["rate_title"], s["rate_heading"], s["rate_text"]
    elif kind in ("verified", "verified_post"):
        title, heading = s["verified_title"], s["verified_heading"]
        text = s["verified_resubmit"] if kind == "verified_post" else ""
    elif kind == "failed":
        title, heading, text = s["failed_title"], s["failed_heading"], s["failed_text"].format(reason=reason)
    elif kind == "wait":
        title, heading, text = s["wait_title"], s["wait_heading"], s["wait_text"].format(seconds=seconds)
    else:
        title = heading = s["not_found"]
        text = ""
    body = [f"<h1>{_e(heading)}</h1>"]
    if text:
        body.append(f"<p>{_e(text)}</p>")
    if reason_class in REASON_CLASSES and kind in ("block", "rate"):
        body.append(f'<p><strong>{_e(s["reason"])}:</strong> {_e(s["reason_" + reason_class])}.</p>')
    if extra:
        body.append(f"<p>{_e(extra)}</p>")
    if link is not None:
        label = s["failed_link"] if kind == "failed" else s["nojs_continue"] if kind == "wait" else s["verified_link"]
        body.append(f'<p><a href="{_e(link)}">{_e(label)}</a></p>')
    shown_contact = contact if kind in ("block", "rate", "failed") else ""
    footer = _footer(s, request_id, shown_contact)
    if appeal_url and kind in ("block", "rate"):
        target = appeal_url.replace("{request_id}", quote(request_id, safe=""))
        body.append(f'<p><a href="{_e(target)}">{_e(s["appeal"])}</a></p>')
    if footer:
        body.append(footer)
    head = f'<meta http-equiv="refresh" content="{int(refresh[0])};url={_e(refresh[1])}">' if refresh is not None else ""
    return _page(lang, title, body, head=head)
