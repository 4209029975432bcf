"""The same request as it arrives behind the fronts users deploy.

Each front's rewriting follows its documented default behaviour (with the common configuration choices
drawn): which headers it adds and where, what it does to ``Connection`` and ``Host``, whether it keeps the
client's name case, and which HTTP version it speaks upstream. A client that reaches a front over HTTP/2
sends lower-case names and ``:authority``; the front turns ``:authority`` into ``Host``.
"""

from __future__ import annotations

import random
import uuid

FRONTS = ("none", "nginx", "envoy", "haproxy", "caddy", "aws-alb", "gcp-lb", "cloudflare")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "upgrade", "transfer-encoding",
                        "http2-settings"})


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _drop(headers: list[list[str]], names: frozenset[str] | set[str]) -> list[list[str]]:
    return [h for h in headers if h[0].lower() not in names]


def _canonical(name: str) -> str:
    """Go's canonical MIME header key (what Caddy's Go transport writes)."""
    return "-".join(p[:1].upper() + p[1:].lower() for p in name.split("-"))


def _proxy_ip(rng: random.Random) -> str:
    return f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def apply(front: str, rng: random.Random, headers: list[list[str]], client_ip: str, host: str,
          http_version: str) -> tuple[list[list[str]], str]:
    """``headers`` (as the client sent them to the front) as the front forwards them, and the upstream
    HTTP version."""
    if front == "none":
        return headers, http_version
    others = [h for h in headers if h[0].lower() != "host"]
    if front == "nginx":
        host_value = host if rng.random() < 0.8 else rng.choice(("backend", "127.0.0.1:8080", "app_upstream"))
        keepalive = rng.random() < 0.5   # proxy_http_version 1.1 with Connection "" vs the 1.0 default
        added = [["Host", host_value]]
        style = rng.random()
        if style < 0.8:
            added += [["X-Real-IP", client_ip], ["X-Forwarded-For", client_ip]]
            if rng.random() < 0.7:
                added.append(["X-Forwarded-Proto", "https"])
            if rng.random() < 0.3:
                added.append(["X-Forwarded-Host", host])
        if not keepalive:
            added.append(["Connection", "close"])
        rest = _drop(others, HOP_BY_HOP)
        rest = [h for h in rest if "_" not in h[0]]   # underscores_in_headers off
        return added + rest, "1.1" if keepalive else "1.0"
    if front == "envoy":
        rest = [[h[0].lower(), h[1]] for h in _drop(others, HOP_BY_HOP | {"x-request-id"})]   # regenerated at the edge
        request_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        out = [["host", host], *rest, ["x-forwarded-proto", "https"], ["x-request-id", request_id]]
        if rng.random() < 0.7:
            out.append(["x-envoy-expected-rq-timeout-ms", rng.choice(("15000", "30000", "60000"))])
        if rng.random() < 0.8:
            out.append(["x-forwarded-for", client_ip])
        return out, "1.1"
    if front == "haproxy":
        rest = [[h[0].lower(), h[1]] for h in others]
        rest = [h for h in rest if h[0] not in ("connection", "keep-alive", "proxy-connection")]
        out = [["host", host], *rest, ["x-forwarded-for", client_ip]]
        if rng.random() < 0.5:
            out.append(["x-forwarded-proto", "https"])
        if rng.random() < 0.3:
            out.append(["connection", "close"])
        return out, "1.1"
    if front == "caddy":
        rest = [[_canonical(h[0]), h[1]] for h in _drop(others, HOP_BY_HOP)]
        rest += [["X-Forwarded-For", client_ip], ["X-Forwarded-Proto", "https"], ["X-Forwarded-Host", host]]
        ua = [h for h in rest if h[0] == "User-Agent"]
        tail = sorted((h for h in rest if h[0] != "User-Agent"), key=lambda h: h[0])
        return [["Host", host], *ua, *tail], "1.1"
    if front == "aws-alb":
        rest = _drop(others, HOP_BY_HOP)
        trace = f"Root=1-{_hex(rng, 8)}-{_hex(rng, 24)}"
        out = [["X-Forwarded-For", client_ip], ["X-Forwarded-Proto", "https"], ["X-Forwarded-Port", "443"],
               ["Host", host], ["X-Amzn-Trace-Id", trace], *rest]
        return out, "1.1"
    if front == "gcp-lb":
        rest = _drop(others, HOP_BY_HOP)
        lb = f"{rng.randint(34, 35)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        trace = f"{_hex(rng, 32)}/{rng.getrandbits(60)};o=1"
        out = [["Host", host], *rest, ["Via", "1.1 google"], ["X-Forwarded-For", f"{client_ip}, {lb}"],
               ["X-Forwarded-Proto", "https"], ["X-Cloud-Trace-Context", trace]]
        return out, "1.1"
    if front == "cloudflare":
        rest = _drop(others, HOP_BY_HOP | {"accept-encoding"})
        ray = f"{_hex(rng, 16)}-{rng.choice(('FRA', 'LHR', 'IAD', 'SJC', 'NRT', 'SIN', 'GRU', 'CDG'))}"
        country = rng.choice(("DE", "US", "GB", "FR", "JP", "BR", "IN", "NL", "ES", "KR"))
        out = [["Host", host], ["Connection", "Keep-Alive"], ["Accept-Encoding", "gzip, br"],
               ["X-Forwarded-For", client_ip], ["CF-RAY", ray], ["X-Forwarded-Proto", "https"],
               ["CF-Visitor", '{"scheme":"https"}'], *rest,
               ["CF-Connecting-IP", client_ip], ["CDN-Loop", "cloudflare"], ["CF-IPCountry", country]]
        return out, "1.1"
    raise ValueError(f"unknown front {front!r}")
