"""Signed challenge tokens and pass cookies: HMAC-SHA256 with a key id, expiry and client binding.

A token is ``<key id>.<payload>.<signature>``: the payload is compact JSON in base64url,
the signature HMAC-SHA256 over ``<key id>.<payload>`` with the key of that id. Several
keys verify (rotation: add the new key first, keep the old one until its cookies have
expired); the first one signs. Tokens carry their type (challenge, no-JS wait, pass),
issue and expiry times, the proof-of-work difficulty, and a binding to the client: a
hash of its network (prefix length configurable, or none for CGNAT/roaming users) and,
optionally, of its user agent. Nothing secret is inside; the signature makes it
tamper-proof.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.clients import network_of

MIN_SECRET_BYTES = 32

CHALLENGE = "c"   # a proof-of-work challenge handed out with the page
WAIT = "w"        # the no-JavaScript variant: valid once its wait is over
PASS = "p"        # the pass cookie


class TokenError(Exception):
    """A token or cookie was refused; ``reason`` is the metrics label (malformed, unknown_key, ...)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(detail or reason)


_URLSAFE = bytes.maketrans(b"+/", b"-_")
_b2a = binascii.b2a_base64
# what base64url, and so every token whose key id is made of these, is written with: nothing in it is escaped in
# HTML or quoted in a URL
PLAIN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def b64e(raw: bytes) -> str:
    """``base64.urlsafe_b64encode`` without its padding (the same steps, without two calls around them)."""
    return _b2a(raw, newline=False).translate(_URLSAFE).rstrip(b"=").decode("ascii")


def b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# the payload encoding of json.dumps(payload, separators=(",", ":"), sort_keys=True), built once
_payload_json = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
_ascii = json.encoder.encode_basestring_ascii  # that encoder's string escaping (ensure_ascii)
_CHALLENGE_JSON, _WAIT_JSON = _ascii(CHALLENGE), _ascii(WAIT)


def _plain_time(value: float) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _plain_fields(difficulty: int, expires: int, post_lost: int, issued: float, not_before: float | None) -> bool:
    """Whether a challenge token's numbers are of the types whose JSON :func:`_challenge_json` writes as the encoder would."""
    return (type(difficulty) is int and type(expires) is int and type(post_lost) is int and _plain_time(issued)
            and (not_before is None or _plain_time(not_before)))


def _leading_json(binding: str, difficulty: int, expires: int, issued: float, nonce: str) -> str:
    """The first fields of a challenge token's payload, in the encoder's key order: a token and its twin share them."""
    return f'{{"b":{_ascii(binding)},"d":{difficulty!r},"e":{expires!r},"i":{issued!r},"n":{_ascii(nonce)}'


def _challenge_json(leading: str, not_before: float | None, post_lost: int, kind_json: str, url_json: str) -> str:
    """A challenge token's payload JSON after its leading fields (``kind_json`` and ``url_json`` already JSON strings)."""
    nb = "" if not_before is None else f',"nb":{not_before!r}'
    return f'{leading}{nb},"p":{post_lost!r},"t":{kind_json},"u":{url_json}}}'


class Signer:
    """Signs with the first key, verifies with any (key rotation)."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        if not keys:
            raise ValueError("a Signer needs at least one key")
        self.keys = dict(keys)
        self.signing_id = keys[0][0]
        self._signing_key = keys[0][1]
        # the key schedule (padded key, inner and outer hash state) is done once; each signature copies it
        self._mac = hmac.new(self._signing_key, digestmod=hashlib.sha256)
        # every token signed here is made of PLAIN_CHARS (the key id's, then base64url): pages need not escape it
        self.plain = bool(self.signing_id) and set(self.signing_id) <= PLAIN_CHARS

    def sign(self, payload: dict[str, Any]) -> str:
        return self._sign_json(_payload_json(payload))

    def sign_challenge(self, kind: str, *, nonce: str, difficulty: int, issued: float, expires: int, binding: str, url: str,
                       post_lost: int, not_before: float | None = None) -> str:
        """``sign({"t": kind, "n": nonce, "d": difficulty, "i": issued, "e": expires, "b": binding, "u": url, "p": post_lost}``
        (plus ``"nb": not_before`` when given)), with the payload's JSON written directly: the same bytes as
        the encoder's for these types (a test compares them), without a dict, a key sort and the encoder per page.
        """
        if not (_plain_fields(difficulty, expires, post_lost, issued, not_before) and type(kind) is str and type(nonce) is str
                and type(binding) is str and type(url) is str):
            payload: dict[str, Any] = {"t": kind, "n": nonce, "d": difficulty, "i": issued, "e": expires, "b": binding, "u": url,
                                       "p": post_lost}
            if not_before is not None:
                payload["nb"] = not_before
            return self.sign(payload)
        return self._sign_json(_challenge_json(_leading_json(binding, difficulty, expires, issued, nonce), not_before, post_lost,
                                               _ascii(kind), _ascii(url)))

    def sign_challenge_pair(self, *, nonce: str, difficulty: int, issued: float, expires: int, binding: str, url: str,
                            post_lost: int, wait_url: str, not_before: float) -> tuple[str, str]:
        """``(sign_challenge(CHALLENGE, ...), sign_challenge(WAIT, ..., url=wait_url, not_before=not_before))``: the page's
        token and its no-JavaScript twin, whose payloads share their first fields, written once."""
        if not (_plain_fields(difficulty, expires, post_lost, issued, not_before) and type(nonce) is str and type(binding) is str
                and type(url) is str and type(wait_url) is str):
            return (self.sign_challenge(CHALLENGE, nonce=nonce, difficulty=difficulty, issued=issued, expires=expires, binding=binding,
                                        url=url, post_lost=post_lost),
                    self.sign_challenge(WAIT, nonce=nonce, difficulty=difficulty, issued=issued, expires=expires, binding=binding,
                                        url=wait_url, post_lost=post_lost, not_before=not_before))
        leading = _leading_json(binding, difficulty, expires, issued, nonce)
        shown = _ascii(url)
        return (self._sign_json(_challenge_json(leading, None, post_lost, _CHALLENGE_JSON, shown)),
                self._sign_json(_challenge_json(leading, not_before, post_lost, _WAIT_JSON,
                                                shown if wait_url == url else _ascii(wait_url))))

    def _sign_json(self, text: str) -> str:
        body = b64e(text.encode())
        head = f"{self.signing_id}.{body}"
        mac = self._mac.copy()
        mac.update(head.encode())
        return f"{head}.{b64e(mac.digest())}"

    def verify(self, token: str, kind: str, now: float | None = None) -> dict[str, Any]:
        """The payload of a valid, unexpired token of ``kind``; raises TokenError otherwise."""
        parts = token.split(".")
        if len(parts) != 3 or len(token) > MAX_TOKEN:
            raise TokenError("malformed", "not a clefgate token")
        kid, body, sig = parts
        key = self.keys.get(kid)
        if key is None:
            raise TokenError("unknown_key", f"signed with unknown key {kid!r}")
        try:
            given = b64d(sig)
        except (binascii.Error, ValueError):
            raise TokenError("malformed", "signature is not base64") from None
        expected = hmac.new(key, f"{kid}.{body}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(given, expected):
            raise TokenError("bad_signature", "signature does not match")
        try:
            payload = json.loads(b64d(body))
        except (binascii.Error, ValueError):
            raise TokenError("malformed", "payload is not JSON") from None
        if not isinstance(payload, dict) or payload.get("t") != kind:
            raise TokenError("wrong_type", f"not a {kind!r} token")
        expires = payload.get("e")
        if not isinstance(expires, (int, float)) or (now if now is not None else time.time()) > expires:
            raise TokenError("expired", "token expired")
        return payload


@dataclass(frozen=True)
class Binding:
    """How a token is tied to its client: network prefix lengths (0 = any address) and the user agent."""

    v4_prefix: int = 24
    v6_prefix: int = 64
    user_agent: bool = True

    def of(self, client_ip: str, user_agent: str, site: str = "") -> str:
        """A short hash naming the client as far as the binding cares (never the address itself), on ``site`` (the
        host or cookie domain a pass is for: a cookie's scope is kept by browsers, not by a bot replaying it)."""
        v6 = ":" in client_ip and not client_ip.startswith("::ffff:")
        prefix = self.v6_prefix if v6 else self.v4_prefix
        network = network_of(client_ip, self.v4_prefix, self.v6_prefix) if prefix else "*"
        ua = user_agent if self.user_agent else ""
        return b64e(hashlib.sha256(f"{network}|{ua}|{site}".encode("utf-8", "surrogateescape")).digest()[:12])


_NONCE_BYTES = 16
# A token carries its return URL, and a request line may be up to 8 KiB (limits.max_request_line_bytes):
# base64 makes that about 11 KiB, with room for the rest of the payload and the signature.
MAX_TOKEN = 16384
_POOL_BYTES = 4096
_pool = b""
_pool_at = 0


def _drop_pool() -> None:
    global _pool, _pool_at
    _pool, _pool_at = b"", 0


# a forked worker must never hand out the nonces its parent already has in its pool
os.register_at_fork(after_in_child=_drop_pool)


_pool_lock = threading.Lock()


def new_nonce() -> str:
    """16 random bytes (base64url) from the OS CSPRNG, read 4 KiB at a time: one system call per 256 challenges."""
    global _pool, _pool_at
    with _pool_lock:  # no two callers ever get the same bytes
        at = _pool_at
        if at + _NONCE_BYTES > len(_pool):
            _pool, at = os.urandom(_POOL_BYTES), 0
        _pool_at = at + _NONCE_BYTES
        pool = _pool
    return b64e(pool[at:at + _NONCE_BYTES])


def leading_zero_bits(digest: bytes) -> int:
    bits = 0
    for byte in digest:
        if byte == 0:
            bits += 8
            continue
        return bits + 8 - byte.bit_length()
    return bits


def pow_ok(nonce: str, counter: str, difficulty: int) -> bool:
    """True when SHA-256("<nonce>:<counter>") starts with ``difficulty`` zero bits (the page's puzzle)."""
    if not counter.isdigit() or len(counter) > 16:
        return False
    return leading_zero_bits(hashlib.sha256(f"{nonce}:{counter}".encode()).digest()) >= difficulty


def solve(nonce: str, difficulty: int, start: int = 0) -> int:
    """Find a counter solving the puzzle (tests and the benchmark; browsers use the page's worker)."""
    counter = start
    while not pow_ok(nonce, str(counter), difficulty):
        counter += 1
    return counter
