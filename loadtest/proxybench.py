"""The proxy benchmark of issue 2: direct origin vs nginx ``proxy_pass`` vs clefgate.

    python -m loadtest.proxybench                      # 3 rounds of 5 s per cell
    python -m loadtest.proxybench --duration 3 --rounds 5
    clefgate bench proxy --quick                       # 1 round of 2 s, a smoke run

In one invocation it starts a static nginx origin (1 KiB and 100 KiB files), nginx
as a reverse proxy with upstream keep-alive, and ``clefgate serve`` (allow-all
pipeline, access log off unless ``--access-log``), all on loopback. wrk and the
origin are pinned to CPU ``--load-cpu`` and the proxy under test to CPU
``--proxy-cpu`` with ``taskset``, the same for every target. Rounds interleave the
targets (origin, nginx, clefgate, origin, ...) so that noise from other jobs on
the machine spreads evenly, and the table shows the median of the rounds.

Printed: req/s, p50 and p99 latency, and the ratio to nginx for 1 KiB and 100 KiB
responses at ``--connections`` connections; and at one connection, each proxy's
p50 minus the direct origin's p50 (the latency a proxy adds).
It is a benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NGINX_DIR = Path(__file__).resolve().parent / "nginx"
SIZES = {"1k": 1024, "100k": 100 * 1024}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx_binary() -> str | None:
    """Path of Debian's nginx (it lives in /usr/sbin, often not on PATH)."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout}s")


def _pinned(cpu: int | None, cmd: list[str]) -> list[str]:
    if cpu is None or not shutil.which("taskset"):
        return cmd
    return ["taskset", "-c", str(cpu), *cmd]


@dataclass
class Service:
    """A process the benchmark (or a test) started."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_nginx(template: str, workdir: Path, *, cpu: int | None = None, **values: object) -> Service:
    """Render ``loadtest/nginx/<template>.conf.tmpl`` into ``workdir`` and run nginx in the foreground."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed (run .ci/system-deps)")
    workdir.mkdir(parents=True, exist_ok=True)
    port = int(values.get("port") or free_port())
    user_line = "user root;" if os.geteuid() == 0 else ""
    text = (NGINX_DIR / f"{template}.conf.tmpl").read_text()
    conf = workdir / f"{template}.conf"
    conf.write_text(text.format(prefix=workdir, user_line=user_line, **{**values, "port": port}))
    log = open(workdir / f"{template}.stderr", "wb")
    proc = subprocess.Popen(_pinned(cpu, [binary, "-p", str(workdir), "-c", str(conf)]), stdout=log, stderr=log)
    log.close()
    try:
        _wait_port(port, proc, f"nginx ({template})")
    except RuntimeError:
        proc.kill()
        raise RuntimeError(f"nginx ({template}) failed:\n{(workdir / f'{template}.stderr').read_text()}") from None
    return Service(f"nginx-{template}", proc, port, workdir)


def start_static_origin(workdir: Path, *, cpu: int | None = None) -> Service:
    """nginx serving /1k.bin and /100k.bin."""
    docroot = workdir / "www"
    docroot.mkdir(parents=True, exist_ok=True)
    for name, size in SIZES.items():
        (docroot / f"{name}.bin").write_bytes(bytes(i % 251 for i in range(size)))
    return start_nginx("origin", workdir, cpu=cpu, docroot=docroot)


def start_clefgate(workdir: Path, origin_port: int, *, cpu: int | None = None, access_log: bool = False) -> Service:
    """``clefgate serve`` with an allow-all pipeline in front of the origin."""
    import yaml

    port, admin = free_port(), free_port()
    cfg = {
        "listen": f"127.0.0.1:{port}",
        "admin": {"listen": f"127.0.0.1:{admin}"},
        "backends": {"origin": {"servers": [f"http://127.0.0.1:{origin_port}"],
                                "health_check": {"path": "/healthz", "interval_s": 5.0}}},
        "logging": {"level": "warning", "access_log": str(workdir / "access.log") if access_log else "off"},
    }
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "clefgate.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    err = open(workdir / "clefgate.stderr", "wb")
    proc = subprocess.Popen(_pinned(cpu, [sys.executable, "-m", "gateway", "serve", "--config", str(path)]),
                            stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=ROOT)
    err.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"clefgate exited:\n{(workdir / 'clefgate.stderr').read_text()}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=1) as r:
                if r.status == 200:
                    return Service("clefgate", proc, port, workdir, {"admin": str(admin)})
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("clefgate did not become ready")


# ---------------------------------------------------------------------------- wrk

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_us: float = 0.0  # CPU time of the proxy (all its processes) per request


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_tree(pid: int) -> list[int]:
    """``pid`` and its children (nginx's workers), from /proc."""
    pids = [pid]
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                        pids.append(int(entry))
    return pids


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds used so far by ``pids`` (0 for those gone)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"cannot read wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def run_wrk(url: str, connections: int, duration: float, cpu: int | None, measure: Sequence[int] = ()) -> WrkResult:
    """One wrk run (one thread) with its latency distribution; ``measure``: pids whose CPU time to count."""
    cmd = _pinned(cpu, ["wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", "--latency", url])
    before = cpu_seconds(measure)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30, check=True).stdout
    used = cpu_seconds(measure) - before
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    lat = dict(re.findall(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+(?:us|ms|s))\s*$", out, re.M))
    if "50" not in lat or "99" not in lat:
        raise RuntimeError(f"wrk printed no latency distribution for {url}:\n{out}")
    errors = 0
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if m:
        errors += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errors += sum(int(x) for x in m.groups())
    total = float(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return WrkResult(rps, _ms(lat["50"]), _ms(lat["99"]), errors, used / total * 1e6 if measure and total else 0.0)


# ---------------------------------------------------------------------------- the run


def _median(results: Sequence[WrkResult]) -> WrkResult:
    return WrkResult(statistics.median(r.rps for r in results), statistics.median(r.p50_ms for r in results),
                     statistics.median(r.p99_ms for r in results), sum(r.errors for r in results),
                     statistics.median(r.cpu_us for r in results))


@contextlib.contextmanager
def _services(workdir: Path, load_cpu: int | None, proxy_cpu: int | None, access_log: bool) -> Iterator[dict[str, Service]]:
    started: list[Service] = []
    try:
        origin = start_static_origin(workdir / "origin", cpu=load_cpu)
        started.append(origin)
        nginx = start_nginx("proxy", workdir / "nginx", cpu=proxy_cpu, origin_port=origin.port)
        started.append(nginx)
        gate = start_clefgate(workdir / "clefgate", origin.port, cpu=proxy_cpu, access_log=access_log)
        started.append(gate)
        yield {"origin": origin, "nginx": nginx, "clefgate": gate}
    finally:
        for service in reversed(started):
            service.stop()


def run(args: argparse.Namespace) -> dict[str, object]:
    """Run every cell; return the medians (also printed as a table)."""
    cpus = os.cpu_count() or 1
    load_cpu, proxy_cpu = (args.load_cpu, args.proxy_cpu) if cpus >= 2 and not args.no_pin else (None, None)
    targets = ("origin", "nginx", "clefgate")
    cells = [(size, args.connections) for size in SIZES] + [("1k", 1)]
    raw: dict[tuple[str, str, int], list[WrkResult]] = {}
    with tempfile.TemporaryDirectory(prefix="clefgate-proxybench-") as tmp, \
            _services(Path(tmp), load_cpu, proxy_cpu, args.access_log) as services:
        # warm-up: fill both proxies' upstream pools and let Python settle
        for name in targets:
            run_wrk(f"{services[name].url}/1k.bin", args.connections, 1.0, load_cpu)
        pids = {name: process_tree(services[name].proc.pid) for name in targets}
        for rnd in range(args.rounds):
            for size, conns in cells:
                for name in targets:
                    res = run_wrk(f"{services[name].url}/{size}.bin", conns, args.duration, load_cpu, pids[name])
                    raw.setdefault((name, size, conns), []).append(res)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    med = {key: _median(vals) for key, vals in raw.items()}
    print(f"\nproxy benchmark: wrk -t1 on CPU {load_cpu} with the nginx origin, proxy on CPU {proxy_cpu}; "
          f"{args.rounds} round(s) x {args.duration:g}s per cell, medians; clefgate access log "
          f"{'on (file)' if args.access_log else 'off'}; CPU us/req: user+system time of the target's "
          f"processes (the origin's own for 'origin') per request\n")
    print(f"{'target':<10} {'size':>5} {'conns':>5} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'x nginx':>8} "
          f"{'CPU us/req':>10} {'errors':>6}")
    for size, conns in cells:
        nginx_rps = med[("nginx", size, conns)].rps
        for name in targets:
            r = med[(name, size, conns)]
            ratio = f"{r.rps / nginx_rps:.2f}" if name != "origin" else "-"
            print(f"{name:<10} {size:>5} {conns:>5} {r.rps:>10.0f} {r.p50_ms:>8.3f} {r.p99_ms:>8.3f} {ratio:>8} "
                  f"{r.cpu_us:>10.1f} {r.errors:>6}")
    base = med[("origin", "1k", 1)].p50_ms
    added = {name: med[(name, "1k", 1)].p50_ms - base for name in ("nginx", "clefgate")}
    print(f"\nadded p50 at 1 connection (1 KiB): nginx {added['nginx']:+.3f} ms, clefgate {added['clefgate']:+.3f} ms")
    ratio_1k = med[("clefgate", "1k", args.connections)].rps / med[("nginx", "1k", args.connections)].rps
    print(f"clefgate / nginx req/s at 1 KiB, {args.connections} connections: {ratio_1k:.2f} (target >= 0.60); "
          f"added p50 target <= 0.15 ms")
    summary = {
        "cells": {f"{n}/{s}/{c}": vars(r) for (n, s, c), r in med.items()},
        "ratio_1k": ratio_1k,
        "added_p50_ms": added,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clefgate bench proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the table shows medians (default 3)")
    parser.add_argument("--connections", type=int, default=16, help="connections of the throughput cells (default 16)")
    parser.add_argument("--load-cpu", type=int, default=0, help="CPU for wrk and the origin (default 0)")
    parser.add_argument("--proxy-cpu", type=int, default=1, help="CPU for the proxy under test (default 1)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--access-log", action="store_true", help="clefgate writes its access log to a file")
    parser.add_argument("--quick", action="store_true", help="one round of 2 s (a smoke run, numbers are rough)")
    parser.add_argument("--json", help="also write the medians to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.rounds = 2.0, 1
    for tool in ("wrk",):
        if not shutil.which(tool):
            print(f"{tool} is not installed (run .ci/system-deps)", file=sys.stderr)
            return 2
    if nginx_binary() is None:
        print("nginx is not installed (run .ci/system-deps)", file=sys.stderr)
        return 2
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
