"""Soak under faults: mixed traffic through one clefgate while its world breaks, on loopback only.

``python -m loadtest.soak --minutes 10`` (``make soak``; at most 30 minutes, bounded in requests too) starts the demo
site on nginx (``loadtest.setups.start_origin``), a throwaway redis-server, and clefgate as the ``model`` setup runs
(``loadtest.setups``: shipped rules, the model, the decision log) with Redis shared state, debug headers and an
admin token. Then, while ``--clients`` keep-alive clients (``loadtest.client.ConnectionPool``) send a fixed mix of
browser pages, a form post, secret-file probes and injection attempts:

- the origin restarts (stopped, down for a few seconds, started on the same port) every ``origin_every_s``;
- Redis restarts the same way every ``redis_every_s``;
- the model times out: every other reload sets ``decider.timeout_ms`` to 0.05 ms, so every model call misses its
  deadline, the breaker opens and ``decider.fallback`` with the fallback signatures decides, until the next reload
  puts 800 ms back;
- a reload (POST /admin/reload) happens every ``reload_every_s``.

Each request is **answered** (a complete response) or **lost** (no response: connect error, reset, timeout; must be
0). An answer is **wrong** when it breaks the gateway's promises (a browser page or form blocked, an answer without
the request id), and **missed** when a probe or an injection was forwarded to a 200 while the origin served (a
detection miss, with the deciding source, rule and score from the debug headers). Every
``sample_every_s`` the gateway's RSS and open file descriptors (its process tree) are sampled. One current report
is written, overwritten each run: ``loadtest/reports/soak/soak.json`` and ``soak.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadtest import setups, site
from loadtest.client import ConnectionPool, RequestFailed, Response
from loadtest.proxybench import Service, free_port, process_tree

ROOT = Path(__file__).resolve().parent.parent
REPORT_DIR = ROOT / "loadtest" / "reports" / "soak"
MAX_MINUTES = 30.0
ADDRESSES = 2000  # visitor addresses per client
CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
BROWSER = [("Host", "shop.example"), ("User-Agent", CHROME), ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
           ("Accept-Language", "en-GB,en;q=0.9"), ("Accept-Encoding", "gzip, deflate, br"), ("Sec-Fetch-Dest", "document"),
           ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-Site", "same-origin"), ("Connection", "keep-alive")]


@dataclass(frozen=True)
class Kind:
    """One kind of request in the mix and what may answer it."""

    name: str
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    hostile: bool = False  # a probe or an injection: never forwarded to a 200


MIX = (
    Kind("page", "GET", "/", tuple(BROWSER)),
    Kind("page", "GET", "/shop", tuple(BROWSER)),
    Kind("page", "GET", "/shop/2", tuple(BROWSER)),
    Kind("page", "GET", "/forum", tuple(BROWSER)),
    Kind("form", "POST", "/cart", (*BROWSER, ("Content-Type", "application/x-www-form-urlencoded")), b"item=3&qty=1"),
    Kind("probe", "GET", "/.env", (("Host", "shop.example"), ("User-Agent", "python-requests/2.31"), ("Accept", "*/*")), hostile=True),
    Kind("probe", "GET", "/.git/config", (("Host", "shop.example"), ("User-Agent", "Go-http-client/1.1")), hostile=True),
    Kind("injection", "GET", "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--",
         (("Host", "shop.example"), ("User-Agent", "sqlmap/1.7.2#stable (https://sqlmap.org)"), ("Accept", "*/*")), hostile=True),
)


@dataclass
class Tally:
    sent: int = 0
    answered: int = 0
    wrong: int = 0
    missed: int = 0
    lost: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    by_kind: dict[str, Counter[str]] = field(default_factory=dict)
    lost_kinds: Counter[str] = field(default_factory=Counter)
    wrong_examples: list[str] = field(default_factory=list)
    missed_examples: list[str] = field(default_factory=list)


class Faults:
    """The origin, Redis and the gateway's config, broken and mended on a schedule."""

    def __init__(self, workdir: Path, origin: Service, redis: subprocess.Popen[bytes], redis_port: int, gateway: setups.Running,
                 config: dict[str, Any], token: str) -> None:
        self.workdir = workdir
        self.origin = origin
        self.redis = redis
        self.redis_port = redis_port
        self.gateway = gateway
        self.config = config
        self.token = token
        self.origin_up = True
        self.events: list[dict[str, Any]] = []
        self.reloads_ok = 0
        self.reloads_refused = 0
        self.model_slow = False

    def note(self, t0: float, what: str, **detail: Any) -> None:
        self.events.append({"t_s": round(time.monotonic() - t0, 2), "event": what, **detail})

    async def restart_origin(self, t0: float, down_s: float) -> None:
        self.origin_up = False
        self.origin.proc.send_signal(signal.SIGQUIT)  # nginx: graceful stop, in-flight requests finish
        await asyncio.to_thread(self.origin.proc.wait, 15)
        self.note(t0, "origin stopped")
        await asyncio.sleep(down_s)
        # the pages and nginx config start_origin rendered are still there: the same command serves them again
        binary = site.nginx_binary() or "nginx"
        proc = await asyncio.to_thread(_spawn, [binary, "-p", str(self.origin.workdir), "-c", str(self.origin.workdir / "site.conf")])
        self.origin = Service("origin", proc, self.origin.port, self.origin.workdir)
        await asyncio.to_thread(_wait_port, self.origin.port, 15.0)
        await asyncio.sleep(1.5)  # the gateway's health check sees it back
        self.origin_up = True
        self.note(t0, "origin started")

    async def restart_redis(self, t0: float, down_s: float) -> None:
        self.redis.terminate()
        await asyncio.to_thread(self.redis.wait, 10)
        self.note(t0, "redis stopped")
        await asyncio.sleep(down_s)
        self.redis = await asyncio.to_thread(start_redis, self.workdir, self.redis_port)
        self.note(t0, "redis started")

    async def reload(self, t0: float) -> None:
        self.model_slow = not self.model_slow
        cfg = dict(self.config)
        cfg["decider"] = {**cfg.get("decider", {}), "timeout_ms": 0.05 if self.model_slow else 800.0}
        (self.gateway.service.workdir / "clefgate.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        req = urllib.request.Request(self.gateway.admin_url + "/admin/reload", data=b"{}", method="POST",
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            answer = await asyncio.to_thread(_read_json, req)
        except OSError as exc:
            answer = {"reloaded": False, "problems": [str(exc)]}
        if answer.get("reloaded"):
            self.reloads_ok += 1
        else:
            self.reloads_refused += 1
        self.note(t0, "reload", model_times_out=self.model_slow, reloaded=bool(answer.get("reloaded")),
                  generation=answer.get("generation"), problems=answer.get("problems"))


def _spawn(cmd: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _read_json(req: urllib.request.Request) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return dict(json.loads(r.read()))
    except urllib.error.HTTPError as e:
        return dict(json.loads(e.read()))


def _wait_port(port: int, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout}s")


def start_redis(workdir: Path, port: int) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (run .ci/system-deps)")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(port, 10.0)
    return proc


def judge(kind: Kind, response: Response, origin_up: bool) -> str | None:
    """Why an answer breaks a promise (None: it keeps them)."""
    verdict = response.headers.get("x-clefgate-verdict", "")
    if not response.headers.get("x-request-id"):
        return f"{kind.name} {kind.target}: {response.status} without a request id"
    if kind.name in ("page", "form") and (verdict == "block" or (response.status == 403 and "x-clefgate-challenge" not in response.headers)):
        return f"{kind.name} {kind.target}: a person blocked ({response.status}, verdict {verdict or '-'})"
    if kind.hostile and origin_up and response.status == 200 and verdict in ("", "allow", "forward"):
        why = ", ".join(f"{h} {response.headers[h]}" for h in ("x-clefgate-source", "x-clefgate-rule", "x-clefgate-score",
                                                                  "x-clefgate-reason") if h in response.headers)
        return f"{kind.name} {kind.target}: forwarded with 200 (verdict {verdict or '-'}; {why})"
    return None


async def client(index: int, port: int, faults: Faults, tally: Tally, stop_at: float, max_requests: int) -> None:
    pool = ConnectionPool("127.0.0.1", port, max_connections=1)
    i = index
    try:
        while time.monotonic() < stop_at and tally.sent < max_requests:
            kind = MIX[i % len(MIX)]
            i += 7
            # a crowd of ADDRESSES visitors (the rate rules count per address), not one client hammering
            n = (tally.sent * 7919 + index) % ADDRESSES
            headers = [*kind.headers, ("X-Forwarded-For", f"10.{index % 250}.{n // 250}.{n % 250 + 1}")]
            tally.sent += 1
            origin_up = faults.origin_up
            try:
                response = await pool.request(kind.method, kind.target, headers, kind.body, timeout_s=30.0)
            except RequestFailed as exc:
                tally.lost += 1
                tally.lost_kinds[exc.kind] += 1
                continue
            tally.answered += 1
            tally.statuses[str(response.status)] += 1
            verdict = response.headers.get("x-clefgate-verdict", "-")
            tally.by_kind.setdefault(kind.name, Counter())[f"{response.status} {verdict}"] += 1
            why = judge(kind, response, origin_up and faults.origin_up)
            if why and kind.hostile:
                tally.missed += 1
                if len(tally.missed_examples) < 20:
                    tally.missed_examples.append(why)
            elif why:
                tally.wrong += 1
                if len(tally.wrong_examples) < 20:
                    tally.wrong_examples.append(why)
    finally:
        pool.close()


def sample(pids: list[int]) -> tuple[int, int]:
    rss = fds = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                rss += next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS:"))
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, StopIteration, ValueError):
            continue
    return rss, fds


def soak(minutes: float, clients: int, max_requests: int, origin_every_s: float, redis_every_s: float, reload_every_s: float,
         sample_every_s: float, workdir: Path) -> dict[str, Any]:
    origin = setups.start_origin(workdir / "origin", cpu=None)
    redis_port = free_port()
    redis = start_redis(workdir, redis_port)
    token = secrets.token_urlsafe(24)
    setup = setups.Setup("soak", "clefgate under faults", "clefgate", model=True, overrides={
        "admin": {"token": token},
        "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "timeout_s": 0.1, "retry_s": 1.0},
        "logging": {"debug_headers": True},
        "rules": {"fallback_files": [str(ROOT / "rules" / "injections.yaml")]},
        "decider": {"fallback": "forward"},
        "timeouts": {"drain_s": 2.0},
    })
    try:
        gateway = setups.start_setup(setup, workdir / "gateway", origin, cpu=None)
    except BaseException:
        origin.stop()
        redis.terminate()
        raise
    config = yaml.safe_load((gateway.service.workdir / "clefgate.yaml").read_text())
    faults = Faults(workdir, origin, redis, redis_port, gateway, config, token)
    try:
        return asyncio.run(drive(faults, minutes, clients, max_requests, origin_every_s, redis_every_s, reload_every_s, sample_every_s))
    finally:
        gateway.stop()
        faults.origin.stop()
        faults.redis.terminate()


async def drive(faults: Faults, minutes: float, clients: int, max_requests: int, origin_every_s: float, redis_every_s: float,
                reload_every_s: float, sample_every_s: float) -> dict[str, Any]:
    gateway = faults.gateway
    tally = Tally()
    samples: list[dict[str, float]] = []
    t0 = time.monotonic()
    stop_at = t0 + minutes * 60.0

    async def schedule(every_s: float, first_s: float, action: Any) -> None:
        next_at = t0 + first_s
        while next_at < stop_at - 5:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            if time.monotonic() >= stop_at - 5:
                return
            await action(t0)
            next_at += every_s

    async def sampler() -> None:
        while time.monotonic() < stop_at:
            rss, fds = sample(process_tree(gateway.service.proc.pid))
            samples.append({"t_s": round(time.monotonic() - t0, 1), "rss_mib": round(rss / 2**20, 1), "fds": fds,
                            "sent": tally.sent, "lost": tally.lost, "wrong": tally.wrong})
            await asyncio.sleep(sample_every_s)

    tasks = [asyncio.create_task(client(i, gateway.port, faults, tally, stop_at, max_requests)) for i in range(clients)]
    background = [asyncio.create_task(c) for c in (
        sampler(),
        schedule(origin_every_s, origin_every_s / 2, lambda t: faults.restart_origin(t, 3.0)),
        schedule(redis_every_s, redis_every_s / 3, lambda t: faults.restart_redis(t, 3.0)),
        schedule(reload_every_s, reload_every_s, faults.reload))]
    await asyncio.gather(*tasks)
    for task in background:
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    elapsed = time.monotonic() - t0
    metrics_text = await asyncio.to_thread(gateway.metrics)
    steady = [s for s in samples if s["t_s"] >= min(60.0, elapsed / 3)]
    slope = _slope([(s["t_s"], s["rss_mib"]) for s in steady]) * 60.0 if len(steady) > 2 else 0.0
    return {
        "minutes": round(elapsed / 60.0, 2), "clients": clients,
        "requests": {"sent": tally.sent, "answered": tally.answered, "wrong": tally.wrong, "missed": tally.missed, "lost": tally.lost,
                     "by_status": dict(sorted(tally.statuses.items())),
                     "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(tally.by_kind.items())}, "lost_by_kind": dict(tally.lost_kinds),
                     "wrong_examples": tally.wrong_examples, "missed_examples": tally.missed_examples, "per_second": round(tally.sent / max(elapsed, 1e-9), 1)},
        "faults": {"origin_restarts": sum(1 for e in faults.events if e["event"] == "origin stopped"),
                   "redis_restarts": sum(1 for e in faults.events if e["event"] == "redis stopped"),
                   "reloads_ok": faults.reloads_ok, "reloads_refused": faults.reloads_refused,
                   "model_timeout_windows": sum(1 for e in faults.events if e["event"] == "reload" and e["model_times_out"])},
        "rss_mib": {"first": samples[0]["rss_mib"] if samples else None, "last": samples[-1]["rss_mib"] if samples else None,
                    "max": max((s["rss_mib"] for s in samples), default=None), "slope_mib_per_min_after_warmup": round(slope, 3)},
        "fds": {"first": samples[0]["fds"] if samples else None, "last": samples[-1]["fds"] if samples else None,
                "max": max((s["fds"] for s in samples), default=None)},
        "gateway_counters": _counters(metrics_text),
        "events": faults.events, "samples": samples,
    }


def _slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def _counters(text: str) -> dict[str, float]:
    keep = ("clefgate_breaker_transitions_total", "clefgate_model_failures_total", "clefgate_config_reloads_total",
            "clefgate_shared_state_fallback_total", "clefgate_upstream_errors_total", "clefgate_upstream_retries_total")
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(keep):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                continue
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = report["samples"]
    t = [s["t_s"] / 60.0 for s in samples]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    ax1.plot(t, [s["rss_mib"] for s in samples], color="tab:blue")
    ax1.set_ylabel("gateway RSS (MiB)")
    ax2.plot(t, [s["fds"] for s in samples], color="tab:green")
    ax2.set_ylabel("open file descriptors")
    ax3.plot(t, [s["sent"] for s in samples], label="sent")
    ax3.plot(t, [s["lost"] for s in samples], label="lost")
    ax3.plot(t, [s["wrong"] for s in samples], label="wrong")
    ax3.set_ylabel("requests (cumulative)")
    ax3.set_xlabel("minutes")
    ax3.legend(loc="upper left")
    colours = {"origin stopped": "tab:red", "redis stopped": "tab:purple", "reload": "tab:gray"}
    for event in report["events"]:
        colour = colours.get(event["event"])
        if colour:
            for ax in (ax1, ax2, ax3):
                ax.axvline(event["t_s"] / 60.0, color=colour, alpha=0.3, linewidth=0.8)
    r = report["requests"]
    fig.suptitle(f"soak {report['minutes']} min: sent {r['sent']}, answered {r['answered']}, wrong {r['wrong']}, lost {r['lost']} "
                 "(red: origin restart, purple: Redis restart, grey: reload)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def table(report: dict[str, Any]) -> str:
    r, f = report["requests"], report["faults"]
    rows = [("minutes", report["minutes"]), ("requests sent", r["sent"]), ("answered", r["answered"]), ("wrong", r["wrong"]),
            ("missed (hostile forwarded)", r["missed"]),
            ("lost", r["lost"]), ("requests/s", r["per_second"]), ("origin restarts", f["origin_restarts"]),
            ("redis restarts", f["redis_restarts"]), ("reloads (ok/refused)", f"{f['reloads_ok']}/{f['reloads_refused']}"),
            ("model-timeout windows", f["model_timeout_windows"]),
            ("RSS MiB first/last/max", f"{report['rss_mib']['first']}/{report['rss_mib']['last']}/{report['rss_mib']['max']}"),
            ("RSS slope after warm-up (MiB/min)", report["rss_mib"]["slope_mib_per_min_after_warmup"]),
            ("fds first/last/max", f"{report['fds']['first']}/{report['fds']['last']}/{report['fds']['max']}")]
    return "\n".join(["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help=f"how long (default 10, at most {MAX_MINUTES:g})")
    ap.add_argument("--clients", type=int, default=8, help="concurrent keep-alive clients (default 8)")
    ap.add_argument("--max-requests", type=int, default=3_000_000, help="stop after this many requests as well")
    ap.add_argument("--origin-every", type=float, default=75.0, help="seconds between origin restarts")
    ap.add_argument("--redis-every", type=float, default=90.0, help="seconds between Redis restarts")
    ap.add_argument("--reload-every", type=float, default=60.0, help="seconds between reloads (every other one makes the model time out)")
    ap.add_argument("--sample-every", type=float, default=5.0, help="seconds between RSS/fd samples")
    ap.add_argument("--out", type=Path, default=REPORT_DIR, help="report folder (soak.json, soak.png; overwritten)")
    args = ap.parse_args(argv)
    minutes = min(max(args.minutes, 0.5), MAX_MINUTES)
    with tempfile.TemporaryDirectory(prefix="clefgate-soak-") as tmp:
        report = soak(minutes, max(1, args.clients), max(1, args.max_requests), args.origin_every, args.redis_every,
                      args.reload_every, args.sample_every, Path(tmp))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    plot(report, args.out / "soak.png")
    print(table(report))
    for key in ("wrong_examples", "missed_examples"):
        if report["requests"][key]:
            print(key.split("_")[0] + ":", *report["requests"][key][:10], sep="\n  ")
    return 0 if report["requests"]["lost"] == 0 and report["requests"]["wrong"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
