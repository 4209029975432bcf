"""The flood path's cost: ``clefgate serve`` (rules + model, cache on) under a challenged flood, and its parts side by side.

    clefgate bench flood                         # the served flood: CPU per request of the gateway process
    clefgate bench flood --profile out.prof      # the same with the gateway under cProfile (its event loop thread)
    clefgate bench flood --parts                 # the flood path's parts, each against its reference, in one run
    clefgate bench flood --decide                # the flood's decisions in this process: no sockets, less noise

The served flood is the mixed benchmark's flood without the rest of its traffic: a
botnet's tool head from another residential address for every request (``X-Forwarded-For``, the
gateway trusting loopback as the benchmark's setups do) on the hot URLs, so nearly every
request is a decision-cache hit answered with a challenge page, plus a steady trickle of
cache misses (a search query never asked before) that the model scores. The gateway runs
the ``model`` setup's config (``loadtest.setups``) with one worker; the load generator is
this process. Printed: requests, statuses, the decision cache's hit ratio and the gateway
process's CPU time per request (user + system), the number the mixed benchmark's flood
column is bound by.

``--parts`` times, in this process, what a flood request costs beyond the rules and the
cache, each next to the reference it must equal (the same bytes, the same answer):
the ``X-Forwarded-For`` address test (against ``ipaddress``), the decision-log line
(``encode_line`` against ``json.dumps(line_of(...))``), the challenge page (against its
direct renderer) and the page's two signed tokens (against signing each alone).
``--decide`` answers a flood in this process through the real runtime (decide, the
challenge page, the observers, decision log included) and prints the event-loop thread's
CPU per request over rounds of 1000: the decision side of the served number, without the
sockets' and the load generator's noise. Ratios in
one run are what to compare; the machine is shared.
It is a benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import os
import random
import re
import secrets
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from loadtest.behaviours import PRODUCTS, _flood_tool
from loadtest.client import ConnectionPool, RequestFailed
from loadtest.identities import AddressBook, random_browser
from loadtest.proxybench import cpu_seconds
from loadtest.setups import ROOT, SETUPS, Running, _env, _wait_http, clefgate_config, pinned, start_origin

HOST = "shop.example"
_HOT = ("/", "/", "/search?q=lamp", "/shop", *(f"/shop/{p}" for p in PRODUCTS), "/forum")


# ---------------------------------------------------------------------------- the served flood


def start_gateway(workdir: Path, origin_port: int, *, cpu: int | None, profile: str | None, decision_log: bool) -> Running:
    setup = SETUPS["model" if decision_log else "model-nolog"]
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = clefgate_config(setup, origin_port, workdir)
    path = workdir / "clefgate.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    log = workdir / "clefgate.stderr"
    profiler = ["-m", "cProfile", "-o", profile] if profile else []
    with open(log, "wb") as err:
        proc = subprocess.Popen(pinned(cpu, [sys.executable, *profiler, "-m", "gateway", "serve", "--config", str(path)]),
                                stdout=subprocess.DEVNULL, stderr=err, env=_env(), cwd=ROOT)
    from loadtest.proxybench import Service

    admin = f"http://{cfg['admin']['listen']}"
    _wait_http(admin + "/readyz", proc, "clefgate", 180.0, log)
    port = int(cfg["listen"].rpartition(":")[2])
    return Running(setup, Service("clefgate", proc, port, workdir), admin, workdir / "decisions.jsonl")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of ``pid``'s main thread (its event loop) and of its other threads together
    (inference, the decision-log writer: Python does not name its threads for the system)."""
    out: dict[str, float] = collections.Counter()
    tick = os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                name = "event loop" if int(tid) == pid else "other threads"
                fields = stat.rsplit(")", 1)[1].split()
                out[name] += (int(fields[11]) + int(fields[12])) / tick
    return out


def _cache_counts(text: str) -> dict[str, float]:
    out: dict[str, float] = collections.Counter()
    for m in re.finditer(r'^clefgate_decision_cache_requests_total\{result="(\w+)"\} ([\d.e+]+)$', text, re.M):
        out[m.group(1)] += float(m.group(2))
    return out


async def _drive(port: int, seconds: float, concurrency: int, misses_per_s: float, seed: int) -> collections.Counter[str]:
    """Flood workers and a miss sender until ``seconds`` pass; statuses counted."""
    rng = random.Random(seed)
    addresses = AddressBook.build(random.Random(seed + 1)).residential
    tools = [_flood_tool(random.Random(seed + i), HOST) for i in range(4)]
    statuses: collections.Counter[str] = collections.Counter()
    stop = time.monotonic() + seconds
    seq = 0

    async def flood(i: int) -> None:
        nonlocal seq
        pool = ConnectionPool("127.0.0.1", port, max_connections=1)
        tool = tools[i % len(tools)]
        try:
            while time.monotonic() < stop:
                seq += 1
                headers = [*tool, ("X-Forwarded-For", addresses.draw()), ("X-Request-Id", f"flood.{seq}")]
                try:
                    r = await pool.request("GET", rng.choice(_HOT), headers)
                    statuses[str(r.status)] += 1
                except RequestFailed as exc:
                    statuses[exc.kind] += 1
        finally:
            pool.close()

    async def misses() -> None:
        nonlocal seq
        pool = ConnectionPool("127.0.0.1", port, max_connections=1)
        head = random_browser(random.Random(seed + 99)).navigate(HOST)
        try:
            while time.monotonic() < stop:
                seq += 1
                headers = [*head, ("X-Forwarded-For", addresses.draw()), ("X-Request-Id", f"miss.{seq}")]
                try:
                    r = await pool.request("GET", f"/search?q={secrets.token_hex(6)}", headers)
                    statuses["miss " + str(r.status)] += 1
                except RequestFailed as exc:
                    statuses["miss " + exc.kind] += 1
                await asyncio.sleep(1.0 / misses_per_s)
        finally:
            pool.close()

    tasks = [flood(i) for i in range(concurrency)] + ([misses()] if misses_per_s > 0 else [])
    await asyncio.gather(*tasks)
    return statuses


def served(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="clefgate-floodbench-") as tmp:
        work = Path(tmp)
        origin = start_origin(work / "origin", cpu=args.load_cpu)
        gate: Running | None = None
        try:
            gate = start_gateway(work / "clefgate", origin.port, cpu=args.gateway_cpu, profile=args.profile,
                                 decision_log=not args.no_decision_log)
            asyncio.run(_drive(gate.port, args.warmup, args.concurrency, args.misses, args.seed))
            pids = gate.pids()
            before_cache = _cache_counts(gate.metrics())
            before = cpu_seconds(pids)
            threads_before = thread_cpu(gate.service.proc.pid)
            started = time.monotonic()
            statuses = asyncio.run(_drive(gate.port, args.duration, args.concurrency, args.misses, args.seed + 7))
            wall = time.monotonic() - started
            used = cpu_seconds(pids) - before
            threads = thread_cpu(gate.service.proc.pid)
            after_cache = _cache_counts(gate.metrics())
        finally:
            if gate is not None:
                gate.stop()
            origin.stop()
    total = sum(statuses.values())
    hits = after_cache.get("hit", 0) - before_cache.get("hit", 0)
    lookups = sum(after_cache.values()) - sum(before_cache.values())
    result = {"requests": total, "req_s": total / wall, "cpu_us_per_request": used / total * 1e6 if total else 0.0,
              "cache_hit_ratio": hits / lookups if lookups else 0.0}
    print(f"served flood: {total} requests in {wall:.1f} s ({result['req_s']:.0f}/s), gateway CPU {result['cpu_us_per_request']:.0f} us/request, "
          f"decision cache hits {result['cache_hit_ratio']:.1%}; decision log {'off' if args.no_decision_log else 'on'}")
    by_thread = {name: (used_s - threads_before.get(name, 0.0)) / total * 1e6 for name, used_s in threads.items()} if total else {}
    print("CPU us/request: " + ", ".join(f"{name} {us:.0f}" for name, us in sorted(by_thread.items(), key=lambda kv: -kv[1])
                                                   if us >= 0.5))
    print("statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    if args.profile:
        print(f"profile of the gateway's event loop thread: {args.profile} (python -m pstats)")
    return result


# ---------------------------------------------------------------------------- the parts


def _per_call_us(fn: Callable[[], object], number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def compare(name: str, reference: Callable[[], object], candidate: Callable[[], object], *, number: int = 2000,
            repeat: int = 5) -> tuple[float, float]:
    """Time both (interleaved repeats, best of each) and print the ratio; the two must give the same answer."""
    same = reference() == candidate()
    ref_us = cand_us = float("inf")
    for _ in range(repeat):
        ref_us = min(ref_us, _per_call_us(reference, number, 1))
        cand_us = min(cand_us, _per_call_us(candidate, number, 1))
    print(f"{name:<48} reference {ref_us:8.2f} us   in use {cand_us:8.2f} us   x{ref_us / cand_us:5.2f}"
          f"{'' if same else '   (ANSWERS DIFFER)'}")
    return ref_us, cand_us


def flood_request(address: str = "151.15.73.122", seq: int = 5000) -> Any:
    """A flood request as the gateway reads it: a tool's head, from a residential address, on a hot URL."""
    from gateway.features import from_record

    head = _flood_tool(random.Random(1), HOST)
    record = {"method": "GET", "path": "/search?q=lamp", "http_version": "1.1", "headers": [*head, ["X-Forwarded-For", address]],
              "client_ip": address}
    return dataclasses.replace(from_record(record), request_id=f"flood.{seq}", peer_ip="127.0.0.1", received_at=1_800_000_000.0)


def cached_challenge() -> Any:
    """The verdict a flood request gets from the decision cache (the shape ``Policy.verdict`` gives a cached answer)."""
    from gateway.verdict import Action, Source, Verdict

    probs = {"payload": {"benign": 0.9950583547861944, "attack": 0.004941645213805548},
             "attack_kind": {"sqli": 0.03019630623695942, "xss": 0.008732921540784496, "traversal": 0.044218730374029847,
                             "cmdi": 0.1984323345759294, "probe": 0.6663550952997748, "other": 0.05206461197252215},
             "client": {"human": 0.008185540830025657, "good_bot": 0.00778427369789495, "bad_bot": 0.9840301854720793},
             "familiarity": {"familiar": 0.7553660684053254, "unfamiliar": 0.24463393159467456}}
    reason = "default policy: P(bad_bot)+P(attack)=0.99 >= 0.5"
    return Verdict(Action.CHALLENGE, Source.CACHE, reason, rule="score-everything-else", probabilities=probs, explanation=(reason,),
                   model="clef-flash@2.1.0", decision_ms=0.053, difficulty=16)


def parts(args: argparse.Namespace) -> None:
    """Each part of a flood request's answer beside the plain form it must equal."""
    from gateway.challenge.pages import challenge_page, render_challenge_page
    from gateway.challenge.tokens import CHALLENGE, WAIT, Signer
    from gateway.decisionlog import _encode, encode_line, line_of
    from gateway.payload.locations import is_address, read_address

    number = args.number
    features, verdict = flood_request(), cached_challenge()
    print(f"the flood path's parts, each beside its plain form (best of 5 x {number} calls, per call)\n")
    for entry in ("151.15.73.122", "2a01:cb24:b01e:b020:de92:96d6:3149:adf0", "151.15.73.122:4711"):
        compare(f"X-Forwarded-For entry {entry[:24]!r}", lambda e=entry: read_address(e), lambda e=entry: is_address(e), number=number)
    compare("decision-log line (cached challenge)", lambda: _encode(line_of(features, verdict, 403, 1_800_000_000.25)),
            lambda: encode_line(features, verdict, 403, 1_800_000_000.25), number=number)
    token = "bench." + "eyJiIjoiWW1sdVpBIiwiZCI6MTZ9" * 8 + ".c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU"
    page = dict(token=token, nonce="bm9uY2Utbm9uY2Utbm9uY2U", difficulty=16, verify_url="/.clefgate/verify", post_lost=False,
                nojs_token=token.replace("eyJ", "eyK"), nojs_action="/.clefgate/nojs", nojs_wait_s=10, request_id="flood.5000", contact="")
    compare("challenge page (en, no-JS path)", lambda: render_challenge_page("en", **page), lambda: challenge_page("en", **page),
            number=number)
    compare("challenge page, a plain signer's tokens", lambda: render_challenge_page("en", **page),
            lambda: challenge_page("en", **page, plain=True), number=number)
    signer = Signer([("bench", bytes(range(48)))])
    fields = dict(nonce="bm9uY2Utbm9uY2Utbm9uY2U", difficulty=16, issued=1_800_000_000.25, expires=1_800_000_301,
                  binding="YmluZGluZ2JpbmQ", post_lost=0)
    compare("challenge token and its no-JS twin", lambda: (
        signer.sign_challenge(CHALLENGE, **fields, url="/search?q=lamp"),
        signer.sign_challenge(WAIT, **fields, url="/search?q=lamp", not_before=1_800_000_010.25)),
        lambda: signer.sign_challenge_pair(**fields, url="/search?q=lamp", wait_url="/search?q=lamp", not_before=1_800_000_010.25),
        number=number)


async def _decided(args: argparse.Namespace) -> list[float]:
    from gateway import config as configmod
    from gateway.runtime import build_runtime, close_runtime
    from gateway.verdict import Action, Verdict

    with tempfile.TemporaryDirectory(prefix="clefgate-floodbench-") as tmp:
        cfg = clefgate_config(SETUPS["model" if not args.no_decision_log else "model-nolog"], 9, Path(tmp))
        (Path(tmp) / "clefgate.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
        runtime = await build_runtime(configmod.load(str(Path(tmp) / "clefgate.yaml")))
        try:
            pipeline, pages = runtime.pipeline, runtime.pipeline.pages
            assert pages is not None and pipeline.state is not None
            rng = random.Random(args.seed)
            addresses = AddressBook.build(random.Random(args.seed + 1)).residential
            tools = [_flood_tool(random.Random(args.seed + i), HOST) for i in range(4)]
            requests = []
            for i in range(args.requests):
                address = addresses.draw()
                record = {"method": "GET", "path": rng.choice(_HOT), "http_version": "1.1",
                          "headers": [*tools[i % len(tools)], ["X-Forwarded-For", address]], "client_ip": address}
                from gateway.features import from_record

                f = from_record(record)
                requests.append(dataclasses.replace(f, request_id=f"flood.{i}", peer_ip="127.0.0.1", received_at=time.time(),
                                                    client_key=pipeline.state.key_of(f.client_ip, f.header_map)))
            for f in requests[:200]:  # the hot URLs' answers into the decision cache
                outcome = pipeline.decide(f)
                if not isinstance(outcome, Verdict):
                    await outcome

            def answer(batch: Sequence[Any]) -> None:
                for f in batch:
                    verdict = pipeline.decide(f)
                    if not isinstance(verdict, Verdict):
                        continue  # a miss the model has to score: not the flood's path
                    status = pages.challenge(verdict, f).status if verdict.action is Action.CHALLENGE else 200
                    pipeline.observe(f, verdict, status)

            answer(requests[200:1000])
            rounds = []
            for at in range(1000, len(requests) - 999, 1000):
                started = time.thread_time()
                answer(requests[at:at + 1000])
                rounds.append((time.thread_time() - started) / 1000 * 1e6)
            return sorted(rounds)
        finally:
            await close_runtime(runtime)


def decided(args: argparse.Namespace) -> None:
    """The flood's decisions in this process: decide, challenge page, observers (decision log, client state, console)."""
    rounds = asyncio.run(_decided(args))
    print(f"decided in process: {len(rounds)} rounds of 1000 flood requests (an address each, cache hits), event-loop thread CPU per "
          f"request: best {rounds[0]:.1f} us, median {rounds[len(rounds) // 2]:.1f} us; decision log "
          f"{'off' if args.no_decision_log else 'on'}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clefgate bench flood", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of measured flood (default 8)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of flood before measuring (default 3)")
    parser.add_argument("--concurrency", type=int, default=32, help="flood connections (default 32)")
    parser.add_argument("--misses", type=float, default=20.0, help="cache misses sent per second beside the flood (default 20)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load-cpu", type=int, default=None, help="pin the origin to this CPU (default: not pinned)")
    parser.add_argument("--gateway-cpu", type=int, default=None, help="pin the gateway to this CPU (default: not pinned)")
    parser.add_argument("--profile", help="run the gateway under cProfile and write its stats here")
    parser.add_argument("--no-decision-log", action="store_true", help="the gateway without its decision log")
    parser.add_argument("--parts", action="store_true", help="time the flood path's parts against their references instead")
    parser.add_argument("--number", type=int, default=2000, help="calls per timing of --parts (default 2000)")
    parser.add_argument("--decide", action="store_true",
                        help="answer a flood in this process instead (decide, page, observers; no sockets): CPU of that path per request")
    parser.add_argument("--requests", type=int, default=20_000, help="flood requests answered by --decide (default 20000)")
    args = parser.parse_args(argv)
    if args.parts:
        parts(args)
        return 0
    if args.decide:
        decided(args)
        return 0
    if args.profile:
        args.profile = os.path.abspath(args.profile)
    served(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
