"""Rule evaluation cost per request, for a rule set over a realistic request mix.

    python -m loadtest.rulesbench                     # the shipped rules/default.yaml
    python -m loadtest.rulesbench --rules my.yaml --seconds 3

Prints µs per request (median of several rounds) for the whole mix and per kind of
request, two ways side by side in one run: the rules alone, and the rules followed by the
payload detectors (``gateway.payload``) on what the rules leave open, challenge or let
through with ``inspect: true``, as ``Pipeline.decide`` runs them. It is a benchmark, not a test: nothing is asserted.
Requests are built once, so only ``RuleTable.evaluate`` and ``PayloadInspector.inspect``
are timed, exactly as the proxy calls them; the two ways alternate round by round.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gateway import config as configmod
from gateway.clients import ClientState
from gateway.config import ClientsConfig
from gateway.features import Features, make_header_map
from gateway.payload import PayloadInspector, signatures_for
from gateway.rules import RuleOptions, load
from gateway.verdict import Action, Verdict

ROOT = Path(__file__).resolve().parent.parent
CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
GPTBOT = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"

# kind -> share of the mix (roughly a content site's traffic after a CDN)
MIX = {"page": 0.45, "asset": 0.30, "api": 0.08, "feed": 0.03, "crawler": 0.05, "spoofer": 0.02,
       "ai_crawler": 0.03, "scanner": 0.04}


def _features(method: str, target: str, ua: str, ip: str, extra: Sequence[tuple[str, str]] = (), body: bytes = b"") -> Features:
    headers = (("Host", "shop.example"), ("User-Agent", ua), ("Accept", "text/html,application/xhtml+xml"),
               ("Accept-Language", "en-GB,en;q=0.5"), ("Accept-Encoding", "gzip, deflate, br"), *extra)
    hmap = make_header_map(headers)
    path, _, query = target.partition("?")
    return Features(method=method, path=path, query=query, headers=headers, header_map=hmap, client_ip=ip, peer_ip=ip,
                    host="shop.example", user_agent=ua, body_prefix=body, content_length=len(body) if body else None)


def build_mix(n: int, seed: int = 7) -> list[tuple[str, Features]]:
    """``n`` requests drawn from MIX with a fixed seed: (kind, features)."""
    rnd = random.Random(seed)
    kinds = list(MIX)
    weights = [MIX[k] for k in kinds]
    out = []
    for _ in range(n):
        kind = rnd.choices(kinds, weights)[0]
        ip = f"198.51.{rnd.randrange(256)}.{rnd.randrange(1, 255)}"
        ua = rnd.choice((CHROME, FIREFOX))
        if kind == "page":
            f = _features("GET", rnd.choice(("/", "/products/1234", "/search?q=red+shoes&page=2", "/cart", "/blog/2024/06/a-post")), ua, ip,
                          (("Cookie", "session=abc"), ("Referer", "https://shop.example/")))
        elif kind == "asset":
            f = _features("GET", rnd.choice(("/static/app.3f2a.js", "/static/site.css", "/img/p/1234.webp", "/favicon.ico")), ua, ip)
        elif kind == "api":
            f = _features("POST", "/api/v1/cart/items", ua, ip, (("Authorization", "Bearer eyJhbGciOi"), ("Content-Type", "application/json")),
                          b'{"sku": "A-1234", "qty": 2, "options": {"size": "M", "colour": "navy"}, "note": "gift wrap, please"}')
        elif kind == "feed":
            f = _features("GET", "/blog/feed", "FreshRSS/1.23.1 (Linux; https://freshrss.org)", ip)
        elif kind == "crawler":
            f = _features("GET", "/products/1234", GOOGLEBOT, f"66.249.66.{rnd.randrange(1, 30)}")
        elif kind == "spoofer":
            f = _features("GET", "/products/1234", GOOGLEBOT, ip)
        elif kind == "ai_crawler":
            f = _features("GET", "/blog/2024/06/a-post", GPTBOT, ip)
        else:
            f = _features("GET", rnd.choice(("/.env", "/wp-login.php", "/.git/config", "/phpmyadmin/index.php", "/vendor/phpunit/x")),
                          "Mozilla/5.0 zgrab/0.x", ip)
        out.append((kind, f))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.rulesbench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", action="append", help="rule file(s) (default: rules/default.yaml)")
    parser.add_argument("--requests", type=int, default=20000, help="requests in the mix")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (median reported)")
    args = parser.parse_args(list(argv) if argv is not None else None)

    files = args.rules or [str(ROOT / "rules" / "default.yaml")]
    # a limit no request reaches: every request pays for its rate check, none is cut off
    # no DNS lookups: a claimed crawler's address is unverified by name (a kept answer costs the same dictionary read)
    state = ClientState(ClientsConfig(max_buckets=1_000_000, max_clients=1_000_000, reverse_dns_timeout_s=0))
    table = load(files, RuleOptions(), state)
    mix = build_mix(args.requests)
    evaluate = table.evaluate
    cfg = configmod.validate({"backends": {"bench": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"files": files}})
    inspect = PayloadInspector(cfg, signatures_for(cfg)).inspect

    inspected, challenge, forward = table.inspected, Action.CHALLENGE, Action.FORWARD

    def with_payload(f: Features) -> object:
        # as the pipeline: what a rule challenges, or lets through with inspect: true, is read as what no rule decided
        out = evaluate(f)
        if isinstance(out, Verdict) and out.action is not challenge and not (out.action is forward and out.rule in inspected):
            return out
        return inspect(f) or out

    ways = {"rules": evaluate, "rules+payload": with_payload}
    for _, f in mix:  # warm-up: buckets created, regex caches hot
        with_payload(f)

    def timed(run: Callable[[Features], object], requests: list[Features]) -> float:
        t0 = time.perf_counter()
        for f in requests:
            run(f)
        return (time.perf_counter() - t0) / len(requests) * 1e6

    everything = [f for _, f in mix]
    rounds: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.rounds):
        for way, run in ways.items():
            rounds[way].append(timed(run, everything))
    per_kind: dict[str, dict[str, list[float]]] = {}
    for kind in MIX:
        subset = [f for k, f in mix if k == kind]
        if not subset:
            continue
        per_kind[kind] = {way: [] for way in ways}
        for _ in range(args.rounds):
            for way, run in ways.items():
                per_kind[kind][way].append(timed(run, subset))

    # the per-client key (address + client fingerprint) the proxy computes once per request, outside the rules
    key_of = state.key_of
    keys = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for _, f in mix:
            key_of(f.client_ip, f.header_map)
        keys.append((time.perf_counter() - t0) / len(mix) * 1e6)

    outcomes: dict[str, int] = {}
    for _, f in mix:
        out = evaluate(f)
        name = getattr(out, "rule", None) or "none"
        outcomes[name] = outcomes.get(name, 0) + 1

    print(f"rules: {', '.join(files)} ({len(table)} rules); {len(mix)} requests x {args.rounds} rounds; Python {sys.version.split()[0]}")
    print(f"{'µs/request':<12} {'rules':>9} {'+payload':>9} {'ratio':>7}")

    def row(name: str, samples: dict[str, list[float]], note: str = "") -> None:
        a, b = statistics.median(samples["rules"]), statistics.median(samples["rules+payload"])
        print(f"{name:<12} {a:9.2f} {b:9.2f} {b / a:6.2f}x{note}")

    row("mix", rounds, f"  (min {min(rounds['rules']):.2f} / {min(rounds['rules+payload']):.2f})")
    for kind, samples in per_kind.items():
        row(kind, samples, f"  ({MIX[kind]:.0%} of the mix)")
    print(f"{'client key':<12} {statistics.median(keys):9.2f} µs/request  (address + fingerprint, computed once per request by the proxy)")
    print("decided by: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
