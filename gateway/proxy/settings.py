"""What the data path needs from one Runtime, compiled once per reload.

Each request reads ``RuntimeRef.current`` once, and uses the matching
:class:`ProxySettings` (cached by identity of the Runtime) for its whole life:
limits, timeouts, trusted proxies, header spellings as bytes, the pipeline, the
backends and the access log all come from the same config version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from gateway.proxy.clientaddr import TrustedProxies
from gateway.proxy.head import HeadRules
from gateway.proxy.http1 import RESPONSE_HOP_BY_HOP, ResponseScan, header_stripper
from gateway.verdict import Verdict

if TYPE_CHECKING:
    from gateway.runtime import Runtime

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


class ProxySettings:
    """Everything per-config the data path reads on every request."""

    def __init__(self, runtime: Runtime) -> None:
        cfg = runtime.config
        pipeline = runtime.pipeline
        self.runtime = runtime
        self.pipeline = pipeline
        self.backends = runtime.backends
        self.pools = runtime.pools.by_server  # the server a backend chose -> the pool its connections come from
        self.access_log = runtime.access_log
        self.generation = runtime.generation
        self.trusted = TrustedProxies(cfg.trusted_proxies)
        self.has_trusted = bool(cfg.trusted_proxies)
        limits = cfg.limits
        self.max_request_line = limits.max_request_line_bytes
        self.max_body = limits.max_body_bytes or (1 << 62)
        self.max_pipelined = limits.max_pipelined
        # bytes of an unparsed head we hold before answering 431 (line + fields + slack)
        self.max_head_total = limits.max_request_line_bytes + limits.max_header_bytes + 1024
        t = cfg.timeouts
        self.header_read_s = t.header_read_s
        self.keepalive_s = t.keepalive_s
        self.client_body_s = t.client_body_s
        self.upstream_connect_s = t.upstream_connect_s
        self.upstream_response_s = t.upstream_response_s
        self.upstream_idle_s = t.upstream_idle_s
        self.upstream_keepalive_s = t.upstream_keepalive_s
        self.tunnel_idle_s = t.tunnel_idle_s
        self.lingering_s = t.lingering_close_s
        # the sweeper checks deadlines this often: fine enough for the shortest timeout
        self.tick_s = max(0.02, min(0.25, min(t.header_read_s, t.keepalive_s, t.client_body_s, t.upstream_response_s,
                                              t.upstream_idle_s, t.upstream_connect_s) / 4))
        self.id_header = cfg.request_id_header.lower()
        self.id_header_out = cfg.request_id_header.encode("latin-1")
        # what a request head is judged by (gateway.proxy.head.parse_head)
        self.head_rules = HeadRules(
            id_header=self.id_header, max_headers=limits.max_headers, max_header_bytes=limits.max_header_bytes,
            max_body=self.max_body, underscore_refuse=limits.underscore_headers == "refuse",
            pass_cookie=cfg.challenge.cookie_name,  # any spelling of the pair (name=v, name =v, a bare name) is found
        )

        # a site's step-up field is read where a challenge can answer it
        step_up = cfg.challenge.step_up_header if pipeline.pages is not None and pipeline.passes is not None else ""
        self.response_scan = ResponseScan(self.id_header, step_up)
        self.step_up = bool(step_up)
        self.upgrade_strip = header_stripper((RESPONSE_HOP_BY_HOP - {"connection", "upgrade"}) | {self.id_header}
                                             | ({cfg.challenge.step_up_header.lower()} if cfg.challenge.step_up_header else set()))
        self.via_11 = f"1.1 {cfg.via}".encode("latin-1")
        self.via_10 = f"1.0 {cfg.via}".encode("latin-1")
        self.via_id_11 = b"\r\nvia: " + self.via_11 + b"\r\n" + self.id_header_out + b": "
        self.via_id_10 = b"\r\nvia: " + self.via_10 + b"\r\n" + self.id_header_out + b": "
        # the same as whole lines, for response heads (Via names the protocol the upstream answered in)
        self.via_id_11_line = self.via_id_11[2:]
        self.via_id_10_line = self.via_id_10[2:]
        self.public_scheme = cfg.public_scheme
        # the scheme of requests whose peer is not a trusted proxy
        self.scheme = cfg.public_scheme or "http"
        self.scheme_b = self.scheme.encode("latin-1")
        self.debug_headers = cfg.logging.debug_headers
        self.body_prefix = pipeline.body_prefix_bytes
        self.local_prefix = pipeline.local.prefix if pipeline.local is not None else None
        # the per-client history key (address + client fingerprint), computed once per request
        self.client_key: Callable[[str, Mapping[str, str]], str] = pipeline.state.key_of if pipeline.state is not None else _no_key
        self._verdict_headers: dict[int, tuple[Verdict, bytes, bytes]] = {}

    def verdict_headers(self, verdict: Verdict) -> tuple[bytes, bytes]:
        """(headers for the upstream, debug headers for the client) describing a verdict.

        The upstream gets X-Clefgate-Verdict/-Source, -Rule and -Score when known, and
        the verdict's own ``headers``.

        Rule verdicts are long-lived objects, so the bytes are cached per verdict.
        """
        hit = self._verdict_headers.get(id(verdict))
        if hit is not None and hit[0] is verdict:
            return hit[1], hit[2]
        up = [b"x-clefgate-verdict: ", verdict.action.value.encode(), b"\r\nx-clefgate-source: ",
              verdict.source.value.encode(), b"\r\n"]
        if verdict.rule:
            up += (b"x-clefgate-rule: ", _header_value(verdict.rule), b"\r\n")
        score = verdict.score
        if score is not None:
            up.append(b"x-clefgate-score: %.3f\r\n" % score)
        for name, value in verdict.headers:
            # headers a stage attached for the backend (e.g. X-Clefgate-Pass after a solved challenge)
            if _TOKEN.fullmatch(name):
                up += (name.encode("latin-1"), b": ", _header_value(value), b"\r\n")
        up_b = b"".join(up)
        down_b = b""
        if self.debug_headers:
            down_b = up_b + b"x-clefgate-reason: " + _header_value(verdict.reason) + b"\r\n"
        if len(self._verdict_headers) > 512:
            self._verdict_headers.clear()
        self._verdict_headers[id(verdict)] = (verdict, up_b, down_b)
        return up_b, down_b


def _no_key(client_ip: str, header_map: Mapping[str, str]) -> str:
    """No per-client state in this pipeline: readers compute a key when they need one."""
    return ""


def _header_value(text: str) -> bytes:
    """A header-safe rendering of free text (no CR/LF/control characters, bounded)."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in text[:200])
    return clean.encode("ascii")
