"""Credential submissions per login endpoint, and when an endpoint is under a credential-stuffing wave.

Credential stuffing spreads leaked passwords over thousands of addresses, each trying one or two: no client's
window shows anything, and each request alone looks like a person logging in. What shows is the endpoint: a
wave of submissions that nearly all fail. :class:`LoginWatch` counts the credential submissions each login
endpoint (host and path as the site routes them: ``/Login/`` is ``/login``) answered in tumbling windows of
``window_s`` and how the site answered them: a 4xx is a
failure, a 2xx or 3xx is an answer that may be a success (a form that re-renders on failure answers 200). An
endpoint surges when a window holds at least ``min_submissions`` submissions and

* ``failure_share`` of those the site answered failed, or
* their number is ``rate_factor`` times the endpoint's usual one (a moving average of the windows before it, once
  ``warmup_windows`` of them held submissions; a quiet site's usual number counts as a quarter of
  ``min_submissions`` at least), for forms that fail with a 200;

it stays surging ``hold_s`` after the last window that met either, or that still held ``min_submissions``
submissions (those the gateway challenged count too: a surge the challenges hold back goes on while the
wave does). The rule condition ``login_surge`` reads it: the shipped ``challenge-logins-under-attack`` rule
challenges credential submissions to a surging endpoint, which a person with a pass passes, and a person
without one passes once (the form is kept and sent again, ``challenge.keep_form_bytes``).

A credential submission (:func:`credential_submission`) is a POST, PUT or PATCH whose form, JSON or multipart
body has a field named like a password (``password``, ``passwd``, ``pwd``, ``user[password]``,
``j_password``, ...). Each worker watches what it answers (the windows are not shared through Redis): behind
N workers, ``min_submissions`` is per worker. Endpoints are bounded (``max_endpoints``: the least recently seen
that neither surges nor has a usual number goes first), and a submission the site answers 404, 405 or 410 adds
none, so posts to made-up paths cannot push a surge out.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable

from gateway import metrics
from gateway.config import LoginsConfig
from gateway.features import Features
from gateway.served import site_host

SURGES = metrics.counter("clefgate_login_surges_total",
                         "Login endpoints that began a surge of credential submissions, by trigger (failures, rate).", ("trigger",))

# a field named like a password, the last name of the field's location (form:user[password], json:$.auth.password, form:
# ctl00$Main$txtPassword): password, passwd, pwd or passphrase anywhere in it (newPassword, j_password), or pass as a word
# of its own (userPass, pass); not passport nor passenger
_PASSWORD = re.compile(r"(?i:passw(?:or)?d|pwd|passphrase)|(?:^|[^A-Za-z])(?i:pass)(?:$|[^A-Za-z])|(?<=[a-z])Pass(?:$|[^a-z])")
_METHODS = frozenset({"POST", "PUT", "PATCH"})
# the last request asked about, and its answer: the rule condition and the observer ask about the same request
_last: list[object] = [None, False]


def credential_submission(features: Features) -> bool:
    """True when the request submits a password: a POST, PUT or PATCH with a body field named like one."""
    if features.method not in _METHODS or not features.body_prefix:
        return False
    if _last[0] is features:
        return bool(_last[1])
    from gateway.payload.locations import body_values  # gateway.payload imports the rules, whose state holds a LoginWatch

    ctype = features.header_map.get("content-type", "")
    found = False
    for location, _, _, _, _ in body_values(ctype, features.body_prefix):
        name = location.partition(":")[2]
        if name and _PASSWORD.search(re.split(r"[.$]", name)[-1]):
            found = True
            break
    _last[0], _last[1] = features, found
    return found


class _Endpoint:
    __slots__ = ("base", "busy", "count", "fails", "oks", "start", "until")

    def __init__(self, start: float) -> None:
        self.start = start  # when the current window began
        self.count = self.fails = self.oks = 0
        self.base = 0.0  # moving average of submissions per window, outside surges
        self.busy = 0  # windows with submissions seen (the usual rate is known after warmup_windows of them)
        self.until = 0.0  # surging until then


# answers that say the site has no login there: a submission to a path it does not serve adds no endpoint (a flood of
# posts to made-up paths cannot push the real ones out)
_NOT_THERE = frozenset({404, 405, 410})


class LoginWatch:
    """Credential submissions per endpoint (module docstring). ``observe`` after each answer, ``surging`` to ask."""

    def __init__(self, cfg: LoginsConfig | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg or LoginsConfig()
        self.clock = clock
        self._endpoints: OrderedDict[str, _Endpoint] = OrderedDict()

    @staticmethod
    def endpoint(features: Features) -> str:
        """The endpoint a request submits to, as the site routes it: its host (lower case, no port, no trailing dot) and its
        path normalised as the rules read it (percent-decoded, ``//`` collapsed, segment parameters dropped), in lower case
        and without a trailing slash: ``/Login/``, ``//login`` and ``/login;jsessionid=x`` are ``/login``."""
        from gateway.rules.patterns import normalize_path  # the rules import this module's state

        return site_host(features) + (normalize_path(features.path).lower().rstrip("/") or "/")

    def observe(self, features: Features, status: int, forwarded: bool) -> None:
        """Count a credential submission the gateway answered: ``forwarded`` ones with the site's ``status``."""
        if not self.cfg.enabled or not credential_submission(features):
            return
        now = self.clock()
        key = self.endpoint(features)
        e = self._endpoints.get(key)
        if e is None:
            if not forwarded or status in _NOT_THERE:
                return
            e = self._add(key, now)
        else:
            self._endpoints.move_to_end(key)
            self._roll(e, now)
        e.count += 1
        if forwarded:
            if 400 <= status < 500:
                e.fails += 1
            elif 200 <= status < 400:
                e.oks += 1
        self._judge(e, now)

    def surging(self, features: Features) -> bool:
        """True when the request is a credential submission to an endpoint in a surge."""
        if not self.cfg.enabled or not self._endpoints or features.method not in _METHODS:
            return False
        e = self._endpoints.get(self.endpoint(features))
        return e is not None and e.until > self.clock() and credential_submission(features)

    def _add(self, key: str, now: float) -> _Endpoint:
        endpoints = self._endpoints
        if len(endpoints) >= self.cfg.max_endpoints:
            # the least recently seen endpoint that neither surges nor has a usual rate goes first; failing that, the oldest
            victim = next((k for k, e in endpoints.items() if e.until <= now and e.busy < self.cfg.warmup_windows), None)
            if victim is None:
                endpoints.popitem(last=False)
            else:
                del endpoints[victim]
        e = endpoints[key] = _Endpoint(now)
        return e

    def _roll(self, e: _Endpoint, now: float) -> None:
        """Close the windows that ended before ``now``: one with submissions outside a surge feeds the endpoint's usual
        rate, and so does a quiet one after it (a quiet hour lowers it); quiet windows do not count toward the warm-up."""
        window = self.cfg.window_s
        gone = int((now - e.start) // window)
        if gone <= 0:
            return
        for i in range(min(gone, 64)):  # the window that held the count, then quiet ones
            if e.until <= e.start + (i + 1) * window:
                count = e.count if i == 0 else 0
                e.base = count if e.busy == 0 else 0.8 * e.base + 0.2 * count
            if i == 0 and e.count:
                e.busy += 1
        e.start += gone * window
        e.count = e.fails = e.oks = 0

    def _judge(self, e: _Endpoint, now: float) -> None:
        cfg = self.cfg
        if e.count < cfg.min_submissions:
            return
        answered = e.fails + e.oks
        trigger = None
        if answered >= cfg.min_submissions // 2 and e.fails >= cfg.failure_share * answered:
            trigger = "failures"
        elif cfg.rate_factor and e.busy >= cfg.warmup_windows and e.count >= cfg.rate_factor * max(e.base, cfg.min_submissions / 4):
            # a quiet site's usual rate is at least a quarter of min_submissions: a morning's rush of logins is no wave
            trigger = "rate"
        elif e.until > now:
            trigger = "held"  # still a wave: the surge goes on
        if trigger is None:
            return
        if e.until <= now and trigger != "held":
            SURGES.inc(trigger)
        e.until = now + cfg.hold_s
