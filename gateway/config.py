"""The YAML config: load, validate (every error, with its path and a fix), defaults.

Load -> validate -> compile. The schema is a tree of dataclasses; every field is
declared with :func:`setting`, whose ``doc`` is the config reference printed by
``clefgate config-reference`` and written to docs/config.md (a test keeps them equal).
Validation never stops at the first problem: it collects every one as
``path: message`` and raises :class:`ConfigError` with all of them.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml


class ConfigError(Exception):
    """A config (or a file it names) is invalid; ``problems`` lists every issue."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"{source}: {len(problems)} problem(s):\n" + "\n".join(f"  {p}" for p in problems))


Check = Callable[[Any], "str | None"]


def setting(default: Any = dataclasses.MISSING, doc: str = "", *, check: Check | None = None,
            coerce: Callable[[Any], Any] | None = None, secret: bool = False,
            factory: Callable[[], Any] | None = None) -> Any:
    """Declare a config field with its documentation and an optional check.

    ``check(value)`` returns an error message (without the path) or None.
    ``coerce(raw)`` rewrites a raw YAML value before type validation (shorthands).
    ``secret`` fields are redacted in ``/admin/config``.
    """
    meta = {"doc": doc, "check": check, "coerce": coerce, "secret": secret}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    if isinstance(default, (list, dict)):
        frozen = default
        return field(default_factory=lambda: type(frozen)(frozen), metadata=meta)  # type: ignore[call-arg]
    return field(default=default, metadata=meta)


# ---------------------------------------------------------------------------- checks

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]i?[bB]?|[bB])?\s*$")
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "ki": 1024, "kib": 1024, "m": 1000**2, "mb": 1000**2,
               "mi": 1024**2, "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gi": 1024**3, "gib": 1024**3,
               "t": 1000**4, "tb": 1000**4, "ti": 1024**4, "tib": 1024**4}


def parse_size(raw: Any) -> Any:
    """Coerce ``"10MiB"``/``"1GB"``/``4096`` into an int of bytes (other values pass through)."""
    if isinstance(raw, str):
        m = _SIZE_RE.match(raw)
        if m:
            return int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower()])
    return raw


def positive(v: Any) -> str | None:
    return None if v > 0 else f"must be > 0 (got {v!r})"


def non_negative(v: Any) -> str | None:
    return None if v >= 0 else f"must be >= 0 (got {v!r})"


def fraction(v: Any) -> str | None:
    return None if 0.0 <= v <= 1.0 else f"must be between 0 and 1 (got {v!r})"


def host_port(v: str) -> str | None:
    try:
        split_host_port(v)
    except ValueError as exc:
        return str(exc)
    return None


def split_host_port(v: str) -> tuple[str, int]:
    """``"127.0.0.1:8080"`` / ``"[::1]:8080"`` / ``":8080"`` -> (host, port)."""
    if not isinstance(v, str) or ":" not in v:
        raise ValueError(f"{v!r} is not HOST:PORT (for example 127.0.0.1:8080)")
    host, _, port = v.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{v!r} has no valid port (0-65535)")
    return host, int(port)


def http_url(v: str) -> str | None:
    parts = urlsplit(v) if isinstance(v, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{v!r} is not an http(s) URL (for example http://127.0.0.1:8000)"
    try:
        _ = parts.port
    except ValueError:
        return f"{v!r} has an invalid port"
    return None


def parse_cidr(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """``"10.0.0.0/8"`` or a single address; ValueError with a readable message otherwise.

    A CIDR with host bits set (``10.0.0.5/8``) is refused rather than widened: whether
    it meant the one address or the whole network, an allow list or a trusted proxy
    must not quietly grant the larger of the two.
    """
    text = text.strip() if isinstance(text, str) else text
    try:
        return ipaddress.ip_network(text)
    except ValueError:
        pass
    try:
        net = ipaddress.ip_network(text, strict=False)
    except (ValueError, TypeError):
        raise ValueError(f"{text!r} is not an IP address or CIDR (for example 10.0.0.0/8)") from None
    address = str(text).split("/", 1)[0]
    raise ValueError(f"{text!r} has host bits set: write {str(net)!r} for the network "
                     f"or '{address}/{net.max_prefixlen}' for the one address") from None


def cidr(v: str) -> str | None:
    try:
        parse_cidr(v)
    except ValueError as exc:
        return str(exc)
    return None


def each(check: Check) -> Check:
    def run(values: Any) -> str | None:
        problems = [p for p in (check(v) for v in values) if p]
        return "; ".join(problems) or None
    return run


def one_of(*choices: str) -> Check:
    def run(v: Any) -> str | None:
        return None if v in choices else f"{v!r} is not one of {', '.join(choices)}"
    return run


def repository_name(v: str) -> str | None:
    """A model name or version: one folder name in the repository (letters, digits, ``.``, ``-``, ``_``), never a path."""
    if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", v) or ".." in v or v == ".":
        return f"{v!r} is not a repository name (letters, digits, '.', '-' and '_'; no '/', no '..')"
    return None


def status_range(v: str) -> str | None:
    if not re.fullmatch(r"\d{3}(-\d{3})?(,\d{3}(-\d{3})?)*", str(v)):
        return f"{v!r} is not a status list like '200-399' or '200,204'"
    return None


def _server_shorthand(raw: Any) -> Any:
    if isinstance(raw, list):
        return [{"url": s} if isinstance(s, str) else s for s in raw]
    return raw


def _csv_list(raw: Any) -> Any:
    if isinstance(raw, str):
        return [s.strip() for s in raw.split(",") if s.strip()]
    return raw


# ---------------------------------------------------------------------------- schema

@dataclass(kw_only=True)
class ServerConfig:
    """One upstream server of a backend pool."""

    url: str = setting(dataclasses.MISSING, "Base URL of the server (http://host:port); a path prefix is prepended to forwarded paths.", check=http_url)
    weight: int = setting(1, "Relative share of requests for weighted round-robin.", check=positive)


@dataclass(kw_only=True)
class HealthCheckConfig:
    """Active health checks of every server of a backend."""

    enabled: bool = setting(True, "Probe each server periodically; unhealthy servers get no traffic.")
    path: str = setting("/", "Path requested with GET by the probe.")
    interval_s: float = setting(5.0, "Seconds between probes of one server.", check=positive)
    timeout_s: float = setting(2.0, "Probe deadline in seconds.", check=positive)
    healthy_threshold: int = setting(2, "Consecutive successes that mark a server healthy again.", check=positive)
    unhealthy_threshold: int = setting(3, "Consecutive failures that mark a server unhealthy.", check=positive)
    expect_status: str = setting("200-399", "Status codes that count as healthy, e.g. '200-399' or '200,204'.", check=status_range)


@dataclass(kw_only=True)
class BackendConfig:
    """A named pool of upstream servers."""

    servers: list[ServerConfig] = setting(dataclasses.MISSING, "Servers of the pool: URLs, or {url, weight} maps.", coerce=_server_shorthand)
    balance: str = setting("round_robin", "Server selection: round_robin (weighted) or least_outstanding.", check=one_of("round_robin", "least_outstanding"))
    max_idle_connections: int = setting(128, "Idle keep-alive connections kept per server.", check=non_negative)
    max_connections: int = setting(1024, "Open connections allowed per server; further requests wait for one.", check=positive)
    retries: int = setting(1, "Retries of an idempotent request on another server when nothing was sent yet.", check=non_negative)
    eject_after_failures: int = setting(3, "Consecutive connection failures that eject a server (passive health).", check=positive)
    eject_s: float = setting(10.0, "Seconds an ejected server rests before it gets traffic again.", check=positive)
    health_check: HealthCheckConfig = setting(factory=HealthCheckConfig, doc="Active health checking.")


@dataclass(kw_only=True)
class RouteConfig:
    """Sends requests matching a host and path prefix to a backend."""

    name: str = setting("", "Route name used in metrics and logs (defaults to the backend name).")
    host: str = setting("", "Host to match (exact, or '*.example.com'); empty matches any host.")
    path_prefix: str = setting("/", "Path prefix to match, by whole segments, on the path as the rules read it (percent-decoded, ; parameters dropped, dot segments resolved); the longest matching prefix wins.")
    backend: str = setting(dataclasses.MISSING, "Backend that serves the route.")
    policy: str = setting("", "Named policy (under policy.routes) used when the model scores requests of this route.")


@dataclass(kw_only=True)
class LimitsConfig:
    """Request size limits; exceeding one gets a clear 4xx."""

    max_request_line_bytes: int = setting(8192, "Longest request line (method, target, version); longer gets 431 (414 semantics).", check=positive, coerce=parse_size)
    max_header_bytes: int = setting(65536, "Largest header block; larger gets 431.", check=positive, coerce=parse_size)
    max_headers: int = setting(100, "Most header fields in a request; more gets 431.", check=positive)
    max_body_bytes: int = setting(1 << 30, "Largest request body (accepts 10MiB style sizes); larger gets 413. 0 disables the limit.", check=non_negative, coerce=parse_size)
    body_prefix_bytes: int = setting(2048, "Bytes of a request body read before deciding, for rules and the model (then streamed).", check=non_negative, coerce=parse_size)
    max_pipelined: int = setting(16, "Pipelined requests buffered per connection before reading pauses.", check=positive)
    underscore_headers: str = setting("refuse", "Request header names with '_' that fold ('_' as '-', any case) onto a framing, host, forwarding or gateway field (Content_Length, X_Forwarded_For, ...): refuse (400) or drop (not forwarded); counted either way.",
                                      check=one_of("refuse", "drop"))


@dataclass(kw_only=True)
class TimeoutsConfig:
    """Deadlines, in seconds."""

    header_read_s: float = setting(10.0, "Time allowed to receive a complete request head; slower gets 408.", check=positive)
    keepalive_s: float = setting(75.0, "Idle client keep-alive connections are closed after this.", check=positive)
    client_body_s: float = setting(60.0, "Longest pause while reading a request body.", check=positive)
    upstream_connect_s: float = setting(3.0, "Upstream connect deadline; a failure is 502 (or a retry).", check=positive)
    upstream_response_s: float = setting(60.0, "Time to the first byte of the upstream response, counted from the last request byte sent (an upload still moving pushes it back); exceeded gets 504.", check=positive)
    upstream_idle_s: float = setting(60.0, "Longest pause inside an upstream response body.", check=positive)
    upstream_keepalive_s: float = setting(30.0, "Idle pooled upstream connections are closed after this.", check=positive)
    tunnel_idle_s: float = setting(3600.0, "Idle WebSocket/upgrade tunnels are closed after this.", check=positive)
    drain_s: float = setting(30.0, "On SIGTERM, in-flight requests get this long to finish.", check=non_negative)
    lingering_close_s: float = setting(2.0, "After an error or early response, unread request bytes are drained this long before closing, so the client sees the response instead of a reset.", check=non_negative)


@dataclass(kw_only=True)
class AdminConfig:
    """The admin/API listener (aiohttp): health, metrics, config, reload, decision API."""

    listen: str = setting("127.0.0.1:9090", "HOST:PORT of the admin listener; empty disables it.", check=lambda v: None if v == "" else host_port(v))
    token: str = setting("", "Bearer token for /admin/* (env:NAME or file:PATH accepted). State changes (POST /admin/reload, POST /admin/model) always need it: without one they are refused with 403; read-only /admin/config needs it when set.", secret=True)
    console: bool = setting(True, "Serve the operator's console at /console/ (signed in with admin.token; see docs/console.md).")
    console_decisions: int = setting(2000, "Recent decisions each worker keeps in memory for the console's Decisions, Lookup and What-if views.",
                                     check=positive)


@dataclass(kw_only=True)
class LoggingConfig:
    """Process logs and the per-request access log."""

    level: str = setting("info", "Log level: debug, info, warning, error.", check=one_of("debug", "info", "warning", "error"))
    access_log: str = setting("-", "Access log: '-' for stdout, a file path, or 'off'.")
    debug_headers: bool = setting(False, "Add X-Clefgate-Verdict/Rule/Score/Reason headers to responses sent to clients.")
    access_log_flush_s: float = setting(1.0, "Longest time an access-log line waits in the buffer before it is written.", check=positive)
    access_log_max_pending_bytes: int = setting(8 << 20, "Access-log bytes allowed to wait for a slow writer; beyond this lines are dropped and counted.", check=positive, coerce=parse_size)


@dataclass(kw_only=True)
class RulesConfig:
    """The deterministic rule table (rules/*.yaml)."""

    files: list[str] = setting(factory=list, doc="Rule files evaluated in order (first match wins); empty allows everything.")
    fallback_files: list[str] = setting(factory=list, doc="Rule files consulted only when the model cannot answer (timeout, error, open breaker, no model): a match decides, otherwise decider.fallback does. The shipped config puts the injection signatures (rules/injections.yaml) here; a rule whose only condition is inputs is read value by value, with the payload detectors' allowances.")
    lists_dir: str = setting("", "Folder of named lists referenced by rules (ip: list:NAME, <name>.txt or .json; user_agent: list:NAME, <name>.txt); defaults to lists/ beside each rule file.")
    default: str = setting("score", "What happens when no rule matches: score (ask the model; forwarded when no model is configured), allow, challenge or block.",
                           check=one_of("score", "allow", "challenge", "block"))
    disabled: list[str] = setting(factory=list, doc="Names of rules to skip, e.g. wordpress-paths when WordPress runs behind this gateway.",
                                  coerce=_csv_list)
    actions: dict[str, str] = setting(factory=dict, doc="Action overrides by rule name: {rule: allow/block/challenge/score}, e.g. {ai-training-crawlers: block}.")
    score_challenged: bool = setting(True, "A request a rule challenges (a crawler's name, a WordPress path, a login wave) that carries a "
                                     "payload (a query, body, cookie or header value that can hold one) is scored by the model as well: "
                                     "attack evidence blocks it whoever sends it, as the payload detectors' does; short of a block the "
                                     "rule's challenge stands. false: a rule's challenge is final once the payload detectors read it.")
    inspect: dict[str, bool] = setting(factory=dict, doc="inspect overrides by rule name for allow and route rules: {rule: true/false}, e.g. "
                                       "{allow-api-clients-with-credentials: false} trusts that rule's callers with any payload (the payload "
                                       "detectors do not read what it lets through).")


@dataclass(kw_only=True)
class RoutePolicyConfig:
    """A named model policy (routes name it in ``routes[].policy``, rules in ``policy:``); unset fields inherit from ``policy``."""

    block_attack: float | None = setting(None, "Block when P(attack) >= this and the request carries a payload; challenge when it carries none.", check=fraction)
    block_risk: float | None = setting(None, "Opt-in: block when P(bad_bot) + P(attack) >= this, on look alone (see policy.block_risk for the risk).", check=fraction)
    block_attack_corroborated: float | None = setting(None, "Block when P(attack) >= this and a fallback rule would block the request.", check=fraction)
    abstain_unfamiliar: bool | None = setting(None, "Challenge instead of a model-only block when the request is unfamiliar to the model "
                                              "(see policy.abstain_unfamiliar).")
    block_needs_syntax: bool | None = setting(None, "Challenge instead of a model-only block when no value of the request holds the syntax "
                                              "of the attack kind the model names (see policy.block_needs_syntax).")
    suspicion_needs_syntax: bool | None = setting(None, "Count P(attack) toward the challenge risk only when some value holds the syntax "
                                                  "of an attack (see policy.suspicion_needs_syntax).")
    challenge_risk: float | None = setting(None, "Challenge when P(bad_bot) + P(attack) >= this.", check=fraction)
    difficulty_min: int | None = setting(None, "Proof-of-work difficulty (bits) at challenge_risk.", check=lambda v: _bits(v))
    difficulty_max: int | None = setting(None, "Proof-of-work difficulty (bits) at risk 1.0.", check=lambda v: _bits(v))
    shadow: bool | None = setting(None, "Shadow mode for this policy: decide and log, enforce nothing.")
    rollout_percent: float | None = setting(None, "Enforce for this share of clients (0-100, stable hash of the client id); the rest run in shadow.",
                                            check=lambda v: _percent(v))


@dataclass(kw_only=True)
class PolicyConfig:
    """How the model's calibrated probabilities become actions: thresholds, shadow mode, rollout."""

    block_attack: float = setting(0.95, "Block when P(attack) >= this and the request carries a payload (query, body, a cookie value or "
                                  "header value that can hold one, a path with injection characters); the reason names where. A request "
                                  "with no payload is challenged instead, whatever P(attack) says.", check=fraction)
    block_risk: float | None = setting(None, "Opt-in, off by default: block when P(bad_bot) + P(attack) >= this, on the client's look alone. "
                                       "Risk: people behind shared addresses (NAT, CGNAT, corporate proxies) and people with unusual or older "
                                       "browsers (WebKit, Safari before 16.4, privacy tools) are then blocked with no payload in evidence; null "
                                       "(default) challenges bot-likeness and blocks only on evidence.", check=fraction)
    block_attack_corroborated: float | None = setting(0.4, "Block when P(attack) >= this and a fallback rule (rules.fallback_files: the injection "
                                                      "signatures in the shipped config) would block the request: two witnesses agreeing. "
                                                      "The rules are read only for requests in that band; null turns it off.", check=fraction)
    abstain_unfamiliar: bool = setting(True, "The model abstains where it cannot know: a block on P(attack) alone (no payload detector, rule "
                                       "or fallback rule witnessing the attack) is a challenge instead when the request's payload is "
                                       "unfamiliar to the model, i.e. its distance to everything the model was trained on exceeds the "
                                       "threshold in the model's manifest (familiarity). Counted in clefgate_model_abstained_total; a "
                                       "model without the statistics never abstains; false blocks on P(attack) alone as before.")
    block_needs_syntax: bool = setting(True, "A block on P(attack) alone (no payload detector, rule or fallback rule witnessing the attack) "
                                       "needs a value of the request holding a breakout of the attack kind the model names, not punctuation "
                                       "prose and ordinary markup use: a quote that closes a string followed by SQL, a SQL comment, "
                                       "tautology or union for SQL injection, script-capable markup, an event handler or a script URL "
                                       "for XSS, a separator or substitution followed by a command for command injection, a .. segment "
                                       "or a system path for traversal, a template expression, an entity, a header after a line break "
                                       "or a URL for the others (gateway.witness). Without it the request is challenged, counted in "
                                       "clefgate_model_unwitnessed_total; false blocks on P(attack) alone.")
    suspicion_needs_syntax: bool = setting(True, "P(attack) short of a block counts toward the challenge risk only where the request may "
                                           "hold attack syntax: when it is what would challenge a request (the look alone would not) "
                                           "and every place the application reads a value from was read whole without the syntax "
                                           "of any attack (gateway.witness.syntax_free, which gives up on whatever it cannot read "
                                           "as an application might), the client's look alone decides. A person posting code, a "
                                           "question about SQL or shell, or a password the model finds unusual is not challenged "
                                           "for it. So at a block's height: P(attack) >= block_attack with a payload none of whose values "
                                           "holds attack syntax is not counted either (the look alone decides, a challenge where it "
                                           "would challenge). Payload detectors, fallback-rule corroboration and a client's earned block apply "
                                           "as everywhere. Counted in clefgate_policy_syntaxless_total; false, or "
                                           "block_needs_syntax false, counts P(attack) whatever the request holds.")
    challenge_risk: float = setting(0.5, "Challenge when P(bad_bot) + P(attack) >= this; below it the request is forwarded (0.5: the value Clef-flash 2.1.0 and its 1.7.0 rollback were evaluated with, see models/README.md).", check=fraction)
    difficulty_min: int = setting(14, "Proof-of-work difficulty (leading zero bits of SHA-256) at challenge_risk; it rises with risk.", check=lambda v: _bits(v))
    difficulty_max: int = setting(20, "Proof-of-work difficulty at risk 1.0.", check=lambda v: _bits(v))
    shadow: bool = setting(False, "Shadow mode for every policy: decide and log what would happen, forward everything (one switch, also in metrics).")
    rollout_percent: float = setting(100.0, "Enforce model verdicts for this share of clients (stable hash of the client id); the others run in shadow.",
                                     check=lambda v: _percent(v))
    rollout_key: str = setting("ip", "Client id for the rollout hash: ip, or header:NAME (e.g. header:X-Api-Key; the IP when absent).",
                               check=lambda v: None if v == "ip" or (v.startswith("header:") and len(v) > 7) else f"{v!r} is not ip or header:NAME")
    block_ignored_challenges: int = setting(5, "A client (address + fingerprint) challenged this many times within ignored_challenges_window_s "
                                            "without solving is blocked instead of challenged again (source client); challenges less than a "
                                            "second apart, and those answered to fetch/XHR requests, count once or not at all; 0 disables.",
                                            check=lambda v: None if 0 <= v <= 64 else f"{v} is not 0-64")
    block_ignored_challenges_per_address: int = setting(20, "An address whose clients, whatever their fingerprint, were challenged this many "
                                                        "times within ignored_challenges_window_s with nobody there solving one has what "
                                                        "would be challenged blocked instead (a client rotating its user agent to shed its "
                                                        "history); a solve at the address clears it; 0 disables.",
                                                        check=lambda v: None if 0 <= v <= 64 else f"{v} is not 0-64")
    ignored_challenges_window_s: float = setting(60.0, "The window in which block_ignored_challenges unsolved challenges earn a block.", check=positive)
    block_after_attack_s: float = setting(600.0, "A client that showed attack evidence (a payload detector's block or a model block on "
                                          "P(attack) with its payload named) is blocked, not challenged, on any request the policy would "
                                          "challenge for this many seconds afterwards (source client); 0 disables.", check=non_negative)
    routes: dict[str, RoutePolicyConfig] = setting(factory=dict, doc="Named policies (e.g. checkout with lower thresholds); unset fields inherit the values above.")


@dataclass(kw_only=True)
class ChallengeKeyConfig:
    """One HMAC key; the first key of ``challenge.keys`` signs, all of them verify (rotation)."""

    id: str = setting(dataclasses.MISSING, "Key id written into tokens and cookies (letters, digits, - and _).",
                      check=lambda v: None if re.fullmatch(r"[A-Za-z0-9_-]{1,32}", v) else f"{v!r} is not 1-32 letters, digits, - or _")
    secret: str = setting(dataclasses.MISSING, "HMAC-SHA256 secret, at least 32 characters (env:NAME or file:PATH accepted).", secret=True)


@dataclass(kw_only=True)
class ChallengeConfig:
    """The proof-of-work challenge, its signed tokens and the pass cookie."""

    keys: list[ChallengeKeyConfig] = setting(factory=list, doc="HMAC keys; the first signs, all verify. Required when a rule or the policy can challenge.")
    dev_generate_secret: bool = setting(False, "Development only: generate a random key at start when none is configured (passes do not survive a restart "
                                        "and are not shared between workers).")
    difficulty: int = setting(16, "Difficulty (leading zero bits) of challenges from rules that name none.", check=lambda v: _bits(v))
    token_ttl_s: float = setting(300.0, "Seconds a challenge may take to be solved.", check=positive)
    pass_ttl_s: float = setting(86400.0, "Lifetime of the pass cookie in seconds.", check=positive)
    cookie_name: str = setting("clefgate_pass", "Name of the pass cookie.", check=lambda v: None if re.fullmatch(r"[A-Za-z0-9_-]+", v) else f"{v!r} is not a cookie name")
    cookie_secure: str = setting("auto", "Secure cookie flag: auto (when the client used https), always or never.", check=one_of("auto", "always", "never"))
    cookie_domain: str = setting("", "Domain attribute of the pass cookie; empty binds it to the host that set it. The gateway holds a pass to the same scope (a cookie replayed on another host is refused).")
    bind_ipv4_prefix: int = setting(24, "The pass is bound to the client's IPv4 network of this prefix length: 32 exact, 24 default, 0 any address "
                                    "(users behind CGNAT or roaming).", check=lambda v: None if 0 <= v <= 32 else f"{v} is not 0-32")
    bind_ipv6_prefix: int = setting(64, "Same for IPv6: 128 exact, 64 default, 0 any address.", check=lambda v: None if 0 <= v <= 128 else f"{v} is not 0-128")
    bind_user_agent: bool = setting(True, "Bind the pass to a hash of the User-Agent as well.")
    page_status: int = setting(403, "HTTP status of the challenge page.", check=lambda v: None if 200 <= v <= 599 else f"{v} is not an HTTP status")
    block_status: int = setting(403, "HTTP status of the block page (rules may set their own).", check=lambda v: None if 400 <= v <= 599 else f"{v} is not a 4xx/5xx status")
    nojs_max_difficulty: int = setting(32, "Challenges up to this difficulty also offer a no-JavaScript path (a signed, single-use, client-bound "
                                       "wait: a meta refresh and a Continue button); 32 offers it at every difficulty, 0 disables it.",
                                       check=non_negative)
    nojs_wait_s: float = setting(5.0, "Seconds the no-JavaScript path makes the client wait at challenge.difficulty or below; the wait doubles "
                                 "every 2 bits above it (difficulty 20 at the default 16: 20 s).", check=non_negative)
    nojs_max_wait_s: float = setting(120.0, "The longest no-JavaScript wait, whatever the difficulty (also kept under token_ttl_s).", check=non_negative)
    pass_max_rate_per_min: float = setting(600.0, "A client holding a pass is challenged again when its request rate exceeds this (0 disables).", check=non_negative)
    pass_max_error_ratio: float = setting(0.5, "A client holding a pass is challenged again when this share of its recent answers were 4xx (after at least 20 requests; 1 disables).", check=fraction)
    max_nonces: int = setting(100000, "Solved-challenge nonces remembered in memory for replay protection (when full, those whose tokens expire soonest are evicted, counted).", check=positive)
    keep_form_bytes: int = setting(16384, "A form a person posts from the site itself (URL-encoded, this many bytes at most, read whole "
                                   "before deciding) that is challenged is kept: the challenge page sends it back with the answer and "
                                   "posts it again once the check is passed; 0 keeps none (the page says to submit again). At most 20000; a form "
                                   "is kept only when the answer carrying it, escaped as a browser may escape it, fits the 64 KiB a gateway "
                                   "endpoint accepts.",
                                   check=lambda v: None if 0 <= v <= 20000 else f"{v} is not 0-20000")
    step_up_header: str = setting("X-Clefgate-Step-Up", "A response field with which the site asks for a challenge before it acts (a "
                                  "checkout, a password change, a form it finds abused): the gateway answers the client with the challenge "
                                  "instead of that response, at the difficulty the field names (bits; empty: challenge.difficulty), and "
                                  "tells the site on every request whose client holds a valid pass (X-Clefgate-Pass: difficulty=N), so the "
                                  "site acts once the client solved it; a client whose pass is already enough gets the site's answer. The "
                                  "field never reaches clients. Empty turns step-ups off.",
                                  check=lambda v: None if v == "" or re.fullmatch(r"[A-Za-z0-9-]+", v) else f"{v!r} is not a header name")
    contact: str = setting("", "How people can reach the site operator, shown on block and no-JavaScript pages (e.g. an e-mail address).")
    appeal_url: str = setting("", "A page where a blocked person asks for a review, linked from block pages; {request_id} in it is replaced "
                              "by the block's reference (e.g. https://example.com/appeal?ref={request_id}).",
                              check=lambda v: None if v == "" or re.match(r"(https?://|/)", v) else f"{v!r} is not an http(s) URL or a local path")


@dataclass(kw_only=True)
class LoginsConfig:
    """Credential submissions per login endpoint, and credential-stuffing waves (gateway.logins; the login_surge condition)."""

    enabled: bool = setting(True, "Count credential submissions (a POST, PUT or PATCH with a field named like a password) per endpoint.")
    window_s: float = setting(60.0, "Length of the windows submissions are counted in.", check=positive)
    min_submissions: int = setting(20, "Submissions in a window (per worker) below which an endpoint never surges.", check=positive)
    failure_share: float = setting(0.8, "Share of the submissions the site answered with a 4xx that makes a surge (at least half of "
                                   "min_submissions answered).", check=lambda v: None if 0.0 < v <= 1.0 else f"{v} is not in (0, 1]")
    rate_factor: float = setting(10.0, "A window with this many times the endpoint's usual submissions surges too (forms that fail with "
                                 "a 200); 0 turns this trigger off.", check=non_negative)
    warmup_windows: int = setting(30, "Windows with submissions an endpoint must have been seen in before rate_factor applies (a "
                                  "quiet site's usual number counts as a quarter of min_submissions at least).", check=positive)
    hold_s: float = setting(600.0, "How long an endpoint stays surging after the last window that surged or still held min_submissions.",
                            check=positive)
    max_endpoints: int = setting(4096, "Endpoints tracked at once: the least recently seen that neither surges nor has a usual number "
                                 "is dropped first; a submission the site answers 404, 405 or 410 adds none.", check=positive)


@dataclass(kw_only=True)
class ServedPagesConfig:
    """The pages the site serves (gateway.served): a bare request to one has its P(attack) short of a block not counted."""

    enabled: bool = setting(True, "Remember the pages the site serves (a GET or HEAD forwarded and answered with a 2xx or 304, by host "
                            "and path): a request to one that carries nothing but its path (no query, body, cookie or header value "
                            "that can hold a payload, and a path free of attack syntax) has its P(attack) short of a block not counted, "
                            "since the site itself serves that path; the look still counts (where policy.suspicion_needs_syntax "
                            "and policy.block_needs_syntax are on).")
    ttl_s: float = setting(86400.0, "How long a page is remembered after the site last served it.", check=positive)
    max_pages: int = setting(100000, "Pages remembered at once (per worker); the least recently served is dropped first.", check=positive)


@dataclass(kw_only=True)
class ClientsConfig:
    """Per-client sliding windows and rate-limit buckets (bounded, measured)."""

    window_s: float = setting(60.0, "Length of the per-client sliding window (rate, 4xx ratio, path diversity, timing).", check=positive)
    max_clients: int = setting(100000, "Clients tracked at once; the least recently seen is dropped first (counted).", check=positive)
    max_buckets: int = setting(100000, "Rate-limit buckets kept at once; the least recently used is dropped first (counted).", check=positive)
    ipv4_prefix: int = setting(24, "Prefix length of the 'prefix' rate-limit key for IPv4.", check=lambda v: None if 1 <= v <= 32 else f"{v} is not 1-32")
    ipv6_prefix: int = setting(64, "Prefix length of the 'prefix' rate-limit key for IPv6.", check=lambda v: None if 1 <= v <= 128 else f"{v} is not 1-128")
    shared_address_fingerprints: int = setting(8, "An address seen with at least this many client fingerprints (user agent family and "
                                               "version, header names and order, Accept-Language, pass cookie) counts as shared "
                                               "(clefgate_shared_addresses); per-client history is kept per address and fingerprint either way.",
                                               check=lambda v: None if 2 <= v <= 64 else f"{v} is not 2-64")
    reverse_dns_timeout_s: float = setting(2.0, "How long a request that claims a crawler's name verified by reverse DNS (a rule's reverse_dns) "
                                           "waits, the first time its address is seen, for the lookup (PTR, then the name resolved back "
                                           "to the address); past it the address is unanswered (such a claim is asked to come back later), and looked up "
                                           "again after a minute. 0 looks nothing up (a host without DNS): every address is unanswered.",
                                           check=lambda v: None if v >= 0 else f"{v} is negative")
    reverse_dns_ttl_s: float = setting(86400.0, "How long an address's forward-confirmed name is kept (an address with none: an hour, "
                                       "or this if shorter).", check=positive)
    logins: LoginsConfig = setting(factory=LoginsConfig, doc="Credential-stuffing waves per login endpoint.")
    served_pages: ServedPagesConfig = setting(factory=ServedPagesConfig, doc="The pages the site serves, which a bare request is not "
                                              "suspected of probing for.")


@dataclass(kw_only=True)
class RedisConfig:
    """Optional Redis for state shared by gateway replicas: windows, rate limits, challenge replay."""

    url: str = setting("", "redis://HOST:PORT/DB; empty keeps all state in this process (per worker).",
                       check=lambda v: None if v == "" or v.startswith(("redis://", "rediss://", "unix://")) else f"{v!r} is not a redis:// URL")
    password: str = setting("", "Redis password (env:NAME or file:PATH accepted).", secret=True)
    key_prefix: str = setting("clefgate:", "Prefix of every key the gateway writes.")
    sync_interval_s: float = setting(0.5, "How often local windows and buckets are reconciled with Redis (decisions never wait for Redis).", check=positive)
    timeout_s: float = setting(0.25, "Deadline of each Redis call; on failure local state decides (counted in clefgate_shared_state_fallback_total).",
                               check=positive)
    retry_s: float = setting(2.0, "After a failure, Redis is tried again after this long.", check=positive)


def _bits(v: int) -> str | None:
    return None if 1 <= v <= 32 else f"{v} is not a difficulty between 1 and 32 bits"


def _percent(v: float) -> str | None:
    return None if 0.0 <= v <= 100.0 else f"{v} is not a percentage (0-100)"


@dataclass(kw_only=True)
class ModelConfig:
    """Which Clef-flash model scores requests, and how its ONNX session runs."""

    enabled: bool = setting(False, "Load the model and score what the rules send to it; off, score outcomes are forwarded (counted). The demo and example configs turn it on.")
    repository: str = setting("", "Folder holding <name>/<version>/{model files, manifest.json}, relative to the config file; empty means the shipped models/repository.")
    name: str = setting("clef-flash", "Model name (a folder under the repository: letters, digits, '.', '-', '_').", check=repository_name)
    version: str = setting("latest", "Model version folder, or 'latest' for the highest stable version present; a version whose manifest channel is opt-in loads only when named here; roll back with '1.7.0'.", check=repository_name)
    variant: str = setting("auto", "Model file: auto (fp16 on CUDA, int8 on CPU), fp32, int8 or fp16. int8 scores move slightly with their batch-mates; fp32 ones do not.", check=one_of("auto", "fp32", "int8", "fp16"))
    providers: list[str] = setting(["cuda", "cpu"], "Execution providers in order of preference (cuda, cpu).", check=each(one_of("cuda", "cpu")), coerce=_csv_list)
    intra_op_threads: int = setting(1, "Threads onnxruntime uses inside one inference (per session).", check=positive)
    graph_optimization: str = setting("all", "onnxruntime graph optimisation level: disable, basic, extended, all.", check=one_of("disable", "basic", "extended", "all"))
    on_warmup_failure: str = setting("refuse", "A model that loads but fails its warm-up run: refuse (the default: start-up ends with exit 2 and the problem, a reload is refused) or fallback (serve with its circuit breaker open, so decider.fallback answers until half-open trials succeed).",
                                     check=one_of("refuse", "fallback"))


@dataclass(kw_only=True)
class DeciderConfig:
    """Micro-batching, the decision cache and the circuit breaker around the model."""

    timeout_ms: float = setting(800.0, "Deadline of one model decision; a slower one gets the fallback and counts as a failure.", check=positive)
    fallback: str = setting("forward", "What a request gets when the model times out, fails or the breaker is open: forward, challenge or rules-only.",
                            check=one_of("forward", "challenge", "rules-only"))
    failure_threshold: int = setting(5, "Failures within window_s that open the breaker.", check=positive)
    window_s: float = setting(10.0, "Sliding window in which failures are counted.", check=positive)
    cooldown_s: float = setting(5.0, "Seconds the open breaker skips the model before half-open trial calls.", check=positive)
    half_open_probes: int = setting(3, "Successful trial calls that close a half-open breaker (one failure re-opens it).", check=positive)
    max_batch: int = setting(64, "Most requests scored in one model run.", check=positive)
    max_wait_us: int = setting(0, "Extra wait (microseconds) for a fuller batch. 0 runs as soon as a model thread is free; batches still form from requests arriving while it is busy.", check=non_negative)
    max_queue: int = setting(4096, "Requests waiting for the model beyond which new ones get the fallback at once (load shedding).", check=positive)
    inference_threads: int = setting(1, "Worker threads running model batches; a batch of at most a few requests to a CPU model whose measured runs are short runs on the event loop instead, where handing it to a thread would cost as much as the run (gateway/decider/batching.py).", check=positive)
    cache_ttl_s: float = setting(600.0, "Lifetime of a cached decision.", check=non_negative)
    cache_size: int = setting(100_000, "Most cached decisions; 0 disables the cache.", check=non_negative)


# the most body the proxy buffers before a decision (gateway.proxy.exchange.BUFFER_MAX): the inspection limit's ceiling
PAYLOAD_BODY_CEILING = 64 * 1024
PAYLOAD_DETECTORS = ("libinjection-sqli", "libinjection-xss", "signatures")
PAYLOAD_HEADERS = ["referer", "user-agent", "origin", "x-forwarded-host", "x-forwarded-for", "x-forwarded-server", "x-original-url",
                   "x-rewrite-url", "x-real-ip", "x-client-ip", "true-client-ip", "x-http-method-override", "x-api-*", "x-custom-*",
                   "content-type"]


def _payload_header(v: str) -> str | None:
    if not isinstance(v, str) or not re.fullmatch(r"[a-z0-9!#$%&'.^_`|~-]+\*?", v):
        return f"{v!r} is not a lower-case header name (a trailing * matches a prefix, e.g. x-api-*)"
    return None


@dataclass(kw_only=True)
class PayloadConfig:
    """Deterministic payload detection (``gateway.payload``): libinjection and the injection signatures, per location.

    Runs on every request the rules leave open, with or without the model, before it.
    A hit blocks (``Source.DETECTOR``) under the request's policy mode (shadow, rollout).
    """

    enabled: bool = setting(True, "Inspect the path, query parameters, form, JSON and multipart fields, XML and YAML documents (for what their parsers act on), cookies and the headers below for SQL injection, XSS and the injection signatures; a hit blocks.")
    max_body_bytes: int = setting(16 * 1024, "Bytes of a request body inspected (accepts 16KiB style sizes, at most 64KiB: what the proxy buffers before deciding). "
                                  "The proxy reads max(this, limits.body_prefix_bytes, challenge.keep_form_bytes where something can challenge) before deciding; a longer body is inspected on that prefix, "
                                  "streamed on unbuffered, and counted in clefgate_payload_body_truncated_total. 0 inspects no bodies.",
                                  check=lambda v: None if 0 <= v <= PAYLOAD_BODY_CEILING else f"must be between 0 and {PAYLOAD_BODY_CEILING} (got {v!r})",
                                  coerce=parse_size)
    max_value_bytes: int = setting(4096, "Longest value inspected; a longer one is inspected on its first max_value_bytes.", check=positive, coerce=parse_size)
    max_values: int = setting(256, "Most values (parameters, fields, cookies, headers) inspected per request; the rest are skipped and counted (clefgate_payload_values_skipped_total).", check=positive)
    detectors: list[str] = setting(list(PAYLOAD_DETECTORS), "Detectors that run: libinjection-sqli, libinjection-xss, signatures (every block rule with an inputs condition in rules.files and rules.fallback_files).",
                                   check=each(one_of(*PAYLOAD_DETECTORS)), coerce=_csv_list)
    headers: list[str] = setting(list(PAYLOAD_HEADERS), "Request headers inspected (lower-case names, a trailing * matches a prefix). X-Forwarded-For entries that are addresses are skipped; cookies are inspected separately, except the pass cookie (challenge.cookie_name).",
                                 check=each(_payload_header), coerce=_csv_list)


@dataclass(kw_only=True)
class DecisionLogConfig:
    """The JSONL decision log: one line per scored or ruled request (the retraining feed)."""

    path: str = setting("", "File to append to; empty disables the decision log.")
    max_bytes: int = setting(100 << 20, "Rotate when the file passes this size (accepts 100MiB style sizes).", check=positive, coerce=parse_size)
    backups: int = setting(5, "Rotated files kept (path.1 ... path.N).", check=non_negative)
    queue_size: int = setting(10_000, "Lines waiting for the writer; when full, lines are dropped and counted, requests never wait.", check=positive)
    rules: str = setting("decisive", "Which rule decisions to log besides every model decision: all, decisive (challenge/block/route), none.",
                         check=one_of("all", "decisive", "none"))
    sample: float = setting(1.0, "Fraction of loggable decisions written (a stable hash of the request id).", check=fraction)


def rate_spec(v: str) -> str | None:
    if v in ("", "0", "off"):
        return None
    m = re.fullmatch(r"\s*\d+\s*/\s*(\d*)\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*", v)
    if not m or v.strip().startswith("0") or (m.group(1) and int(m.group(1)) == 0):
        return f"{v!r} is not a rate like 600/min (units: s, min, h, day; a period above 0), or 'off'"
    return None


@dataclass(kw_only=True)
class ClefConfig:
    """The zero-shot ``clef`` model behind the decision API (questions defined at request time)."""

    enabled: bool = setting(False, "Load clef for the decision API (about 100 MB of memory); off, only clef-flash's own questions are answered. The demo turns it on.")
    repository: str = setting("", "Folder holding clef/<version>/, relative to the config file; empty means the shipped models/repository.")
    name: str = setting("clef", "Model name (a folder under the repository: letters, digits, '.', '-', '_').", check=repository_name)
    version: str = setting("latest", "Model version folder, or 'latest' for the highest stable version (opt-in versions load only when named).",
                           check=repository_name)
    device: str = setting("auto", "auto (CUDA with fp16 when available, else CPU int8), cuda or cpu.", check=one_of("auto", "cuda", "cpu"))
    threads: int = setting(1, "onnxruntime threads per clef inference.", check=positive)
    timeout_ms: float = setting(2000.0, "Deadline of one clef call; a slower one fails with 503 and counts towards its circuit breaker.", check=positive)
    max_windows: int = setting(32, "Most 128-token windows read from one state; a longer state gets 413.", check=positive)


@dataclass(kw_only=True)
class ApiKeyConfig:
    """One API key of the decision API."""

    id: str = setting(dataclasses.MISSING, "Name of the key (in metrics and logs; never the key itself).")
    key: str = setting(dataclasses.MISSING, "The key; env:NAME or file:PATH accepted.", secret=True)
    rate: str = setting("", "Rate limit of this key, like 600/min; empty uses jev.rate.", check=rate_spec)


@dataclass(kw_only=True)
class JevConfig:
    """The Jev-compatible decision API (POST /v1/decision) on the admin listener."""

    enabled: bool = setting(True, "Serve /v1/decision, /v1/health, /health and /v1/openapi.json on the admin listener.")
    api_keys: list[ApiKeyConfig] = setting(factory=list, doc="When set, callers send 'Authorization: Bearer KEY' (or X-API-Key): 401 without a key, 403 with an unknown one.")
    rate: str = setting("600/min", "Rate limit per API key (per client address when no keys are set); 'off' disables it. Over it: 429 with Retry-After.", check=rate_spec)
    max_body_bytes: int = setting(1 << 20, "Largest request body; larger gets 413.", check=positive, coerce=parse_size)
    max_state_bytes: int = setting(64 << 10, "Largest state or input text (UTF-8 bytes); larger gets 413.", check=positive, coerce=parse_size)
    max_questions: int = setting(64, "Most questions in one request.", check=positive)
    max_batch: int = setting(64, "Most requests in one batch (a JSON array).", check=positive)
    labels: list[str] = setting(["forward", "challenge", "block"], "Label set of the 'input' request shape.", coerce=_csv_list)


@dataclass(kw_only=True)
class Config:
    """The whole gateway configuration."""

    listen: str = setting("127.0.0.1:8080", "HOST:PORT of the proxied (data) listener.", check=host_port)
    workers: int = setting(1, "Worker processes sharing the listener with SO_REUSEPORT.", check=positive)
    trusted_proxies: list[str] = setting(factory=list, doc="CIDRs whose X-Forwarded-For/Forwarded headers are believed (a CIDR with host bits set, such as 10.0.0.5/8, is refused).", check=each(cidr), coerce=_csv_list)
    public_scheme: str = setting("", "Scheme clients used (http/https) when a TLS terminator is in front; empty = trust X-Forwarded-Proto from trusted proxies, else http.", check=lambda v: None if v in ("", "http", "https") else f"{v!r} is not http or https")
    via: str = setting("clefgate", "Pseudonym added to the Via header.")
    request_id_header: str = setting("X-Request-Id", "Header carrying the request id; propagated when a client or proxy sent one, created otherwise.")
    backends: dict[str, BackendConfig] = setting(factory=dict, doc="Named backend pools.")
    routes: list[RouteConfig] = setting(factory=list, doc="Host/path-prefix routes to backends, longest prefix first.")
    default_backend: str = setting("", "Backend for requests no route matches (defaults to the only or first backend).")
    limits: LimitsConfig = setting(factory=LimitsConfig, doc="Request size limits.")
    timeouts: TimeoutsConfig = setting(factory=TimeoutsConfig, doc="Deadlines.")
    admin: AdminConfig = setting(factory=AdminConfig, doc="Admin/API listener.")
    logging: LoggingConfig = setting(factory=LoggingConfig, doc="Logs.")
    rules: RulesConfig = setting(factory=RulesConfig, doc="Rule table.")
    policy: PolicyConfig = setting(factory=PolicyConfig, doc="Model policy: thresholds, shadow mode, rollout.")
    challenge: ChallengeConfig = setting(factory=ChallengeConfig, doc="Proof-of-work challenge and pass cookie.")
    clients: ClientsConfig = setting(factory=ClientsConfig, doc="Per-client windows and rate limits.")
    redis: RedisConfig = setting(factory=RedisConfig, doc="Shared state in Redis (optional).")
    model: ModelConfig = setting(factory=ModelConfig, doc="The Clef-flash model.")
    decider: DeciderConfig = setting(factory=DeciderConfig, doc="Batching, cache and circuit breaker around the model.")
    decision_log: DecisionLogConfig = setting(factory=DecisionLogConfig, doc="The JSONL decision log.")
    payload: PayloadConfig = setting(factory=PayloadConfig, doc="Deterministic payload detection (SQL injection, XSS, injection signatures) on every request.")
    clef: ClefConfig = setting(factory=ClefConfig, doc="The zero-shot clef model of the decision API.")
    jev: JevConfig = setting(factory=JevConfig, doc="The Jev-compatible decision API.")

    # The file this config came from (not a YAML key).
    source: str = field(default="<defaults>", metadata={"internal": True})



# ---------------------------------------------------------------------------- validation engine

def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (list,):
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return "a map"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if _is_dataclass_type(tp):
        return "a map"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))


def _convert(value: Any, tp: Any, path: str, problems: list[str]) -> Any:
    """Convert a raw YAML value to ``tp``; append problems; return the value or None."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        sub: list[str] = []
        for a in args:
            sub = []
            out = _convert(value, a, path, sub)
            if not sub:
                return out
        problems.extend(sub)
        return None
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        problems.append(f"{path}: {value!r} is not {_type_name(tp)}")
        return None
    if origin is list:
        if not isinstance(value, list):
            problems.append(f"{path}: expected {_type_name(tp)}, got {type(value).__name__}")
            return None
        (item_tp,) = typing.get_args(tp)
        return [_convert(v, item_tp, f"{path}[{i}]", problems) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a map, got {type(value).__name__}")
            return None
        _, val_tp = typing.get_args(tp)
        return {str(k): _convert(v, val_tp, f"{path}.{k}", problems) for k, v in value.items()}
    if _is_dataclass_type(tp):
        return build(tp, value, path, problems)
    if tp is bool:
        if isinstance(value, bool):
            return value
        problems.append(f"{path}: expected true or false, got {value!r}")
        return None
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        problems.append(f"{path}: expected an integer, got {value!r}")
        return None
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        problems.append(f"{path}: expected a number, got {value!r}")
        return None
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        problems.append(f"{path}: expected a string, got {value!r}")
        return None
    raise TypeError(f"unsupported config type {tp!r} at {path}")


def build(cls: type, raw: Any, path: str, problems: list[str]) -> Any:
    """Build dataclass ``cls`` from a raw mapping, collecting every problem."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path or '<top>'}: expected a map, got {type(raw).__name__}")
        return None
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    kwargs: dict[str, Any] = {}
    for key in raw:
        if key not in fields:
            where = f"{path}.{key}" if path else str(key)
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(fields)})"
            problems.append(f"{where}: unknown key{hint}")
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name not in raw:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                doc = f.metadata.get("doc", "")
                problems.append(f"{where}: required ({doc})" if doc else f"{where}: required")
            continue
        value = raw[name]
        coerce = f.metadata.get("coerce")
        if coerce is not None:
            value = coerce(value)
        before = len(problems)
        out = _convert(value, hints[name], where, problems)
        if len(problems) == before:
            check = f.metadata.get("check")
            if check is not None and out is not None:
                msg = check(out)
                if msg:
                    problems.append(f"{where}: {msg}")
            kwargs[name] = out
    try:
        return cls(**kwargs)
    except TypeError:
        return None  # a required field was missing; already reported


def _cross_check(cfg: Config, problems: list[str]) -> None:
    names = set(cfg.backends)
    if cfg.default_backend and cfg.default_backend not in names:
        problems.append(f"default_backend: unknown backend {cfg.default_backend!r} (known: {', '.join(sorted(names)) or 'none'})")
    for i, route in enumerate(cfg.routes):
        if route.backend not in names:
            problems.append(f"routes[{i}].backend: unknown backend {route.backend!r} (known: {', '.join(sorted(names)) or 'none'})")
        if not route.path_prefix.startswith("/"):
            problems.append(f"routes[{i}].path_prefix: {route.path_prefix!r} must start with '/'")
    for name, b in cfg.backends.items():
        if not b.servers:
            problems.append(f"backends.{name}.servers: a backend needs at least one server")
    secrets = [("admin.token", cfg.admin.token)] + [(f"jev.api_keys[{i}].key", k.key) for i, k in enumerate(cfg.jev.api_keys)]
    for where, value in secrets:
        if value.startswith(("env:", "file:")) and not resolve_secret(value):
            what = f"environment variable {value[4:]} is not set or empty" if value.startswith("env:") else f"file {value[5:]} is missing, unreadable or empty"
            problems.append(f"{where}: {value!r}: {what} (a secret that cannot be read would leave the API open)")
    ids = [k.id for k in cfg.jev.api_keys]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"jev.api_keys: id {dup!r} is used more than once")
    if not cfg.jev.labels or len(set(cfg.jev.labels)) != len(cfg.jev.labels) or len(cfg.jev.labels) < 2:
        problems.append(f"jev.labels: {cfg.jev.labels!r} must be at least two distinct labels")
    if cfg.admin.listen and cfg.admin.listen == cfg.listen:
        problems.append(f"admin.listen: {cfg.admin.listen!r} is also the data listener; give the admin its own port")


def validate(raw: Any, source: str = "<inline>", extra_checks: list[Callable[[Config, list[str]], None]] | None = None) -> Config:
    """Validate a raw config mapping; raise ConfigError listing every problem."""
    problems: list[str] = []
    cfg = build(Config, raw, "", problems)
    if cfg is not None:
        _cross_check(cfg, problems)
        for check in extra_checks or ():
            check(cfg, problems)
    if problems or cfg is None:
        raise ConfigError(problems or ["<top>: invalid config"], source)
    if not cfg.backends:
        raise ConfigError(["backends: no backend configured (add one, or pass --upstream URL)"], source)
    if not cfg.default_backend:
        cfg.default_backend = next(iter(cfg.backends))
    cfg.source = source
    base = Path(source).parent if source and not source.startswith("<") else Path.cwd()
    cfg.rules.files = [str((base / f).resolve()) if not os.path.isabs(f) else f for f in cfg.rules.files]
    cfg.rules.fallback_files = [str((base / f).resolve()) if not os.path.isabs(f) else f for f in cfg.rules.fallback_files]
    if cfg.clef.repository and not os.path.isabs(cfg.clef.repository):
        cfg.clef.repository = str((base / cfg.clef.repository).resolve())
    if cfg.model.repository and not os.path.isabs(cfg.model.repository):
        cfg.model.repository = str((base / cfg.model.repository).resolve())
    if cfg.decision_log.path and not os.path.isabs(cfg.decision_log.path):
        cfg.decision_log.path = str((base / cfg.decision_log.path).resolve())
    if cfg.rules.lists_dir and not os.path.isabs(cfg.rules.lists_dir):
        cfg.rules.lists_dir = str((base / cfg.rules.lists_dir).resolve())
    return cfg


def read_yaml(path: str) -> Any:
    """Read a YAML file; a syntax error becomes a ConfigError with line and column."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read: {exc.strerror}"], path) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError([f"{where}{getattr(exc, 'problem', None) or exc}"], path) from exc


def apply_overrides(raw: dict[str, Any], *, upstream: str | None = None, listen: str | None = None,
                    admin: str | None = None, workers: int | None = None,
                    trusted_proxies: str | None = None, model: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply ``clefgate serve`` flags (and an admin model swap) on top of a raw config mapping; they win."""
    raw = dict(raw or {})
    if model:
        raw["model"] = {**(raw.get("model") or {}), **model}
    if upstream:
        raw["backends"] = {"default": {"servers": [upstream]}}
        raw["default_backend"] = "default"
        raw["routes"] = []
    if listen:
        raw["listen"] = listen
    if admin is not None:
        raw["admin"] = {**(raw.get("admin") or {}), "listen": admin}
    if workers is not None:
        raw["workers"] = workers
    if trusted_proxies is not None:
        raw["trusted_proxies"] = _csv_list(trusted_proxies)
    return raw


def load(path: str | None, **overrides: Any) -> Config:
    """Load, override and validate a config file (None: flags and defaults only)."""
    raw = read_yaml(path) if path else {}
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError([f"<top>: expected a map, got {type(raw).__name__}"], path or "<flags>")
    return validate(apply_overrides(raw or {}, **overrides), path or "<flags>")


def resolve_secret(value: str) -> str:
    """``env:NAME`` reads an environment variable, ``file:PATH`` a file; anything else is literal."""
    if value.startswith("env:"):
        return os.environ.get(value[4:], "")
    if value.startswith("file:"):
        try:
            return Path(value[5:]).read_text(encoding="utf-8").strip()
        except OSError:
            return ""
    return value


def redacted(cfg: Any) -> Any:
    """The config as plain data with secret fields replaced by '***'."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        out = {}
        for f in dataclasses.fields(cfg):
            if f.metadata.get("internal"):
                continue
            v = getattr(cfg, f.name)
            out[f.name] = "***" if f.metadata.get("secret") and v else redacted(v)
        return out
    if isinstance(cfg, dict):
        return {k: redacted(v) for k, v in cfg.items()}
    if isinstance(cfg, list):
        return [redacted(v) for v in cfg]
    return cfg


def reference(cls: type = Config, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(path, type, default, doc) for every field: the config reference."""
    rows: list[tuple[str, str, str, str]] = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        path = f"{prefix}{f.name}"
        tp = hints[f.name]
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            d = f.default_factory()
            default = "" if dataclasses.is_dataclass(d) else repr(d)
        else:
            default = "required"
        rows.append((path, _short_type(tp), default, f.metadata.get("doc", "")))
        origin = typing.get_origin(tp)
        if _is_dataclass_type(tp):
            rows.extend(reference(tp, path + "."))
        elif origin is dict and _is_dataclass_type(typing.get_args(tp)[1]):
            rows.extend(reference(typing.get_args(tp)[1], path + ".<name>."))
        elif origin is list and _is_dataclass_type(typing.get_args(tp)[0]):
            rows.extend(reference(typing.get_args(tp)[0], path + "[]."))
    return rows


def _short_type(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is list:
        return f"list[{_short_type(typing.get_args(tp)[0])}]"
    if origin is dict:
        return f"map[str, {_short_type(typing.get_args(tp)[1])}]"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_short_type(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp)).replace("Config", "")


def reference_markdown() -> str:
    """The config reference as a Markdown table (docs/config.md)."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for path, tp, default, doc in reference():
        d, t = default.replace("|", "\\|"), tp.replace("|", "\\|")  # a bare | would end the cell
        lines.append(f"| `{path}` | {t} | {f'`{d}`' if d else ''} | {doc.replace('|', '/')} |")
    return "\n".join(lines) + "\n"
