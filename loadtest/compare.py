"""``clefgate bench`` / ``clefgate bench mixed``: one scenario against every setup, side by side, then the report.

    clefgate bench                                   # default scenario, all setups (make bench)
    clefgate bench mixed --setups rules,model --scale 0.5
    clefgate bench mixed --target 127.0.0.1:8080 --via-gateway --scenario smoke

For each setup in turn (origin, nginx, clefgate rules only, rules + model with and
without the decision cache) a fresh system under test is started, pinned to
``--sut-cpu``, in front of the same origin; the simulator (this process, pinned to
``--load-cpu`` with the origin) runs the scenario against it; the SUT's CPU time is
sampled all along, its metrics are read before and after, and its decision log is
kept. Then ``loadtest.report`` writes ``summary.md``, ``results.json`` and the plots
into ``loadtest/results/<timestamp>/`` and the comparison table is printed.

With ``--target`` the simulator runs once against something already running (a
gateway you started yourself), and only its own measurements are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import os
import platform
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from loadtest import report, setups
from loadtest.client import ConnectionPool, RequestFailed
from loadtest.proxybench import Service
from loadtest.scenario import Scenario, ScenarioError
from loadtest.scenario import load as load_scenario
from loadtest.simulator import PowSolver, merge_runs, run_scenario, stderr_progress

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text -> {sample name: [(labels, value), ...]}."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    if not text:
        return out
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def metric_delta(before: dict[str, list[tuple[dict[str, str], float]]], after: dict[str, list[tuple[dict[str, str], float]]],
                 name: str, by: str | None = None, **match: str) -> dict[str, float]:
    """after - before of a counter, summed, optionally grouped by one label (``{"": total}`` when ungrouped)."""
    def collect(samples: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, value in samples.get(name, []):
            if any(labels.get(k) != v for k, v in match.items()):
                continue
            key = labels.get(by, "") if by else ""
            out[key] = out.get(key, 0.0) + value
        return out
    a, b = collect(after), collect(before)
    return {k: v - b.get(k, 0.0) for k, v in a.items() if v - b.get(k, 0.0) != 0.0}


def gateway_figures(before: str, after: str) -> dict[str, Any]:
    """What the gateway's own metrics say about the run (deltas)."""
    b, a = parse_metrics(before), parse_metrics(after)
    if not a:
        return {}
    batch_sum = metric_delta(b, a, "clefgate_model_batch_size_sum").get("", 0.0)
    batch_count = metric_delta(b, a, "clefgate_model_batch_size_count").get("", 0.0)
    cache = metric_delta(b, a, "clefgate_decision_cache_requests_total", by="result")
    lookups = sum(cache.values())
    return {
        "model_decisions": metric_delta(b, a, "clefgate_model_decisions_total", by="source"),
        "model_fallbacks": metric_delta(b, a, "clefgate_model_fallbacks_total", by="cause"),
        "model_failures": metric_delta(b, a, "clefgate_model_failures_total", by="kind"),
        "model_runs": batch_count,
        "batch_sum": batch_sum,
        "mean_batch": batch_sum / batch_count if batch_count else 0.0,
        "cache": cache,
        "cache_hit_ratio": (cache.get("hit", 0.0) + cache.get("coalesced", 0.0)) / lookups if lookups else None,
        "rule_matches": metric_delta(b, a, "clefgate_rule_matches_total", by="rule"),
        "rule_defaults": metric_delta(b, a, "clefgate_rule_defaults_total", by="outcome"),
        "challenges_issued": metric_delta(b, a, "clefgate_challenges_issued_total").get("", 0.0),
        "challenges_passed": metric_delta(b, a, "clefgate_challenges_passed_total").get("", 0.0),
        "challenges_failed": metric_delta(b, a, "clefgate_challenges_failed_total", by="reason"),
        "rate_limited": sum(metric_delta(b, a, "clefgate_rate_limited_total").values()),
        "decision_log_lines": metric_delta(b, a, "clefgate_decision_log_lines_total").get("", 0.0),
        "decision_log_drops": metric_delta(b, a, "clefgate_decision_log_drops_total", by="reason"),
        "policy_decisions": metric_delta(b, a, "clefgate_policy_decisions_total", by="action"),
    }


def warm_up(port: int, host: str, seconds: float = 1.5) -> int:
    """A little traffic before measuring: fills the proxy's upstream pool and warms caches (TEST-NET addresses)."""
    import asyncio

    async def run() -> int:
        pool = ConnectionPool("127.0.0.1", port, max_connections=8)
        done = 0
        deadline = time.monotonic() + seconds
        rng = random.Random(1)

        async def one() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                target = rng.choice(("/", "/shop", "/static/site.css", "/healthz"))
                headers = [("Host", host), ("User-Agent", "clefgate-bench-warmup/1.0"), ("Accept", "*/*"),
                           ("X-Forwarded-For", f"192.0.2.{rng.randint(1, 254)}")]
                with contextlib.suppress(RequestFailed):
                    await pool.request("GET", target, headers, timeout_s=5.0)
                done += 1
        await asyncio.gather(*(one() for _ in range(8)))
        pool.close()
        return done

    return asyncio.run(run())


def _pin_self(cpu: int | None) -> set[int] | None:
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return None
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    return previous


@contextlib.contextmanager
def _pinned_self(cpu: int | None) -> Iterator[None]:
    previous = _pin_self(cpu)
    try:
        yield
    finally:
        if previous is not None:
            os.sched_setaffinity(0, previous)


def machine() -> dict[str, Any]:
    """What the run ran on (for the report)."""
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    nginx = ""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        nginx = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=5).stderr.strip()
    load = ""
    with contextlib.suppress(OSError):
        load = Path("/proc/loadavg").read_text().split(" ")[0]
    return {"cpus": os.cpu_count(), "cpu_model": cpu_model, "python": platform.python_version(), "nginx": nginx,
            "loadavg_1m_at_start": load, "platform": platform.platform()}


def run_setup(setup: setups.Setup, scenario: Scenario, origin: Service, workdir: Path, out_dir: Path, *, load_cpu: int | None,
              sut_cpu: int | None, model_overrides: Mapping[str, Mapping[str, Any]], solver: PowSolver, round_no: int = 1,
              rounds: int = 1, warmup_s: float = 1.5) -> dict[str, Any]:
    """Start one setup, warm it, run the scenario against it, collect everything; always stops it."""
    tag = f" (round {round_no}/{rounds})" if rounds > 1 else ""
    log(f"== {setup.title}{tag}: starting")
    started = time.perf_counter()
    workdir = workdir / f"{setup.name}-r{round_no}"
    try:
        running = setups.start_setup(setup, workdir, origin, cpu=sut_cpu, model_overrides=model_overrides)
    except (RuntimeError, OSError) as exc:
        # one line: the exit status and what the gateway printed (its config problems, e.g. a missing model)
        why = " | ".join(line.strip() for line in (str(exc) or repr(exc)).splitlines() if line.strip())[:800]
        log(f"== {setup.title}: could not start: {why}")
        return {"setup": setup.name, "title": setup.title, "status": "skipped", "reason": f"did not start: {why}"}
    result: dict[str, Any] = {"setup": setup.name, "title": setup.title, "kind": setup.kind, "pipeline": running.pipeline,
                              "start_s": time.perf_counter() - started}
    suffix = f"-r{round_no}" if rounds > 1 else ""
    try:
        missing = setups.model_missing(running)
        if missing:
            log(f"== {setup.title}: skipped: {missing}")
            return {**result, "status": "skipped", "reason": missing}
        warm = warm_up(running.port, scenario.host, warmup_s)
        before = running.metrics()
        sut_pids = running.pids()
        with setups.CpuSampler(sut_pids) as sut_cpu_samples, setups.CpuSampler([os.getpid()]) as own_cpu:
            sim = run_scenario(scenario, "127.0.0.1", running.port, via_gateway=setup.via_gateway, label=setup.name,
                               progress=stderr_progress, solver=solver)
        after = running.metrics()
        result.update(status="ok", warmup_requests=warm, sim=sim,
                      cpu=_cpu_figures(sim, sut_cpu_samples, own_cpu),
                      gateway=gateway_figures(before, after))
        log(f"== {setup.title}{tag}: {sim['requests']} requests in {sim['duration_s']:.1f}s, {sim['errors']} errors, "
            f"SUT CPU {result['cpu']['us_per_request']:.0f} us/request")
    finally:
        running.stop()
        if running.decision_log is not None and running.decision_log.exists():
            target = out_dir / f"decisions-{setup.name}{suffix}.jsonl"
            shutil.copyfile(running.decision_log, target)
            result["decision_logs"] = [target.name]
        stderr_tail = workdir / "clefgate.stderr"
        if stderr_tail.exists():
            shutil.copyfile(stderr_tail, out_dir / f"clefgate-{setup.name}{suffix}.stderr")
    return result


def _cpu_figures(sim: dict[str, Any], sut: setups.CpuSampler, own: setups.CpuSampler) -> dict[str, Any]:
    """SUT CPU per request (whole run and per phase), utilisation over time, how long the SUT and the load
    generator waited for a CPU (held up by other processes), and the load generator's own CPU."""
    start = sim["clock_start"]
    total_cpu = sut.between(start, start + sim["duration_s"])
    per_second = sim["per_second"]
    phases = {}
    for phase in sim["phases"]:
        lo, hi = phase["start_s"], min(phase["end_s"], sim["duration_s"])
        if hi <= lo:
            continue
        requests = sum(sum(c.values()) for c in per_second[int(lo):int(hi)])
        cpu = sut.between(start + lo, start + hi)
        gen = own.between(start + lo, start + hi)
        phases[phase["name"]] = {"cpu_s": cpu, "requests": requests, "seconds": hi - lo,
                                 "us_per_request": cpu / requests * 1e6 if requests else 0.0,
                                 "sut_util": cpu / (hi - lo), "generator_util": gen / (hi - lo),
                                 "sut_waited": sut.waited_between(start + lo, start + hi) / (hi - lo),
                                 "generator_waited": own.waited_between(start + lo, start + hi) / (hi - lo)}
    timeline = []
    samples = sut.samples
    for (t0, c0), (t1, c1) in itertools.pairwise(samples):
        if t1 > t0:
            timeline.append([t1 - start, (c1 - c0) / (t1 - t0)])
    return {"cpu_s": total_cpu, "requests": sim["requests"], "us_per_request": total_cpu / sim["requests"] * 1e6 if sim["requests"] else 0.0,
            "phases": phases, "timeline": timeline, "generator_cpu_s": own.between(start, start + sim["duration_s"])}


def _sum_figures(parts: Sequence[Any]) -> Any:
    """Numbers added up, dicts merged key by key (gateway metric deltas of several rounds)."""
    if all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in parts):
        return sum(parts)
    if all(isinstance(p, dict) for p in parts):
        keys = {k for p in parts for k in p}
        return {k: _sum_figures([p[k] for p in parts if k in p and p[k] is not None]) for k in keys}
    return parts[0] if parts else None


def merge_rounds(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One setup's rounds as one result: simulator results merged, CPU and metrics added up, per-round figures kept."""
    ok = [r for r in results if r.get("status") == "ok"]
    if not ok:
        return results[0]
    if len(ok) == 1 and len(results) == 1:
        return {**ok[0], "sim": merge_runs([ok[0]["sim"]]), "round_figures": [_round_figures(ok[0])]}
    first = ok[0]
    cpus = [r["cpu"] for r in ok]
    cpu_s = sum(c["cpu_s"] for c in cpus)
    requests = sum(c["requests"] for c in cpus)
    phases: dict[str, Any] = {}
    for name in first["cpu"]["phases"]:
        parts = [c["phases"][name] for c in cpus if name in c["phases"]]
        p_cpu, p_req, p_sec = sum(p["cpu_s"] for p in parts), sum(p["requests"] for p in parts), sum(p["seconds"] for p in parts)
        def weighted(key: str, parts: list[dict[str, Any]] = parts, p_sec: float = p_sec) -> float:
            return sum(p[key] * p["seconds"] for p in parts) / p_sec if p_sec else 0.0
        phases[name] = {"cpu_s": p_cpu, "requests": p_req, "seconds": p_sec, "us_per_request": p_cpu / p_req * 1e6 if p_req else 0.0,
                        "sut_util": p_cpu / p_sec if p_sec else 0.0, "generator_util": weighted("generator_util"),
                        "sut_waited": weighted("sut_waited"), "generator_waited": weighted("generator_waited")}
    gateway = _sum_figures([r["gateway"] for r in ok]) if all(r.get("gateway") for r in ok) else {}
    if gateway:
        gateway["mean_batch"] = gateway["batch_sum"] / gateway["model_runs"] if gateway.get("model_runs") else 0.0
        cache = gateway.get("cache") or {}
        lookups = sum(cache.values())
        gateway["cache_hit_ratio"] = (cache.get("hit", 0.0) + cache.get("coalesced", 0.0)) / lookups if lookups else None
    merged = {**first, "sim": merge_runs([r["sim"] for r in ok]),
              "cpu": {"cpu_s": cpu_s, "requests": requests, "us_per_request": cpu_s / requests * 1e6 if requests else 0.0,
                      "phases": phases, "timeline": first["cpu"]["timeline"],
                      "generator_cpu_s": sum(c["generator_cpu_s"] for c in cpus)},
              "gateway": gateway, "decision_logs": [n for r in ok for n in r.get("decision_logs", [])],
              "round_figures": [_round_figures(r) for r in ok], "warmup_requests": sum(r.get("warmup_requests", 0) for r in ok)}
    if len(ok) < len(results):
        merged["partial"] = f"{len(results) - len(ok)} of {len(results)} rounds did not run: " + "; ".join(
            r.get("reason", "") for r in results if r.get("status") != "ok")
    return merged


def _round_figures(result: dict[str, Any]) -> dict[str, Any]:
    sim, cpu = result["sim"], result["cpu"]
    flood = next((p["name"] for p in sim["phases"] if p["flood"]), None)
    flood_cpu = cpu["phases"].get(flood or "", {})
    return {"flood_rps": report.phase_throughput(sim, flood) if flood else None, "cpu_us": cpu["us_per_request"],
            "flood_cpu_us": flood_cpu.get("us_per_request"), "flood_sut_waited": flood_cpu.get("sut_waited")}


def _scenario(args: argparse.Namespace) -> Scenario | None:
    """The scenario the flags ask for (scaled, shortened), or None after logging why it cannot load."""
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        log(str(exc))
        return None
    if args.scale != 1.0:
        scenario = scenario.scaled(args.scale)
    if args.seconds:
        scenario = scenario.shortened(args.seconds)
    if cut := scenario.cut_phases():
        log(f"warning: scenario {scenario.name}: limits.max_duration_s ({scenario.max_duration_s:g}s) stops the run before the "
            f"planned end of phase(s) {', '.join(cut)}")
    return scenario


def compare(args: argparse.Namespace, argv: Sequence[str], prog: str = "clefgate bench") -> int:
    scenario = _scenario(args)
    if scenario is None:
        return 2
    names = [n.strip() for n in args.setups.split(",") if n.strip()]
    overrides = model_overrides(args)  # checked by main
    unknown = [n for n in names if n not in setups.SETUPS]
    if unknown:
        log(f"unknown setup(s): {', '.join(unknown)} (known: {', '.join(setups.SETUPS)})")
        return 2
    if site_missing := _missing_tools():
        log(site_missing)
        return 2
    cpus = os.cpu_count() or 1
    pin = cpus >= 2 and not args.no_pin
    load_cpu, sut_cpu = (args.load_cpu, args.sut_cpu) if pin else (None, None)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.out) if args.out else RESULTS_DIR / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    command = " ".join([prog, *(shlex.quote(a) for a in argv)])
    log(f"clefgate bench: scenario {scenario.name} ({scenario.duration_s:.0f}s per setup and round, {args.rounds} round(s)), "
        f"setups {', '.join(names)}; "
        f"load generator + origin on CPU {load_cpu}, system under test on CPU {sut_cpu}; results in {out_dir}")
    results: list[dict[str, Any]] = []
    info = machine()
    solver = PowSolver()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="clefgate-bench-") as tmp, _pinned_self(load_cpu):
        workdir = Path(tmp)
        origin = setups.start_origin(workdir / "origin", cpu=load_cpu)
        try:
            by_setup: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
            for round_no in range(1, args.rounds + 1):
                # every other round runs the setups in reverse order, so slow drifts in the machine's load even out
                order = names if round_no % 2 else list(reversed(names))
                for name in order:
                    if by_setup[name] and by_setup[name][-1].get("status") != "ok" and "did not start" in by_setup[name][-1].get("reason", ""):
                        continue  # a setup that cannot start will not start next round either
                    by_setup[name].append(run_setup(setups.SETUPS[name], scenario, origin, workdir, out_dir, load_cpu=load_cpu,
                                                    sut_cpu=sut_cpu, model_overrides=overrides,
                                                    solver=solver, round_no=round_no, rounds=args.rounds, warmup_s=args.warmup))
            results = [merge_rounds(by_setup[n]) for n in names]
        finally:
            origin.stop()
            solver.close()
    run = {"command": command, "started": stamp, "wall_s": time.monotonic() - began, "machine": info,
           "pinning": {"load_cpu": load_cpu, "sut_cpu": sut_cpu}, "rounds": args.rounds,
           "scenario": {"name": scenario.name, "source": scenario.source, "seed": scenario.seed, "description": scenario.description,
                        "duration_s": scenario.duration_s, "max_requests": scenario.max_requests, "scale": args.scale,
                        "phases": [vars(p) for p in scenario.phases],
                        "clients": [{"kind": c.kind, "sessions_per_s": c.sessions_per_s, "concurrency": c.concurrency,
                                     "requests": list(c.requests), "gap_s": list(c.gap_s), "phases": list(c.phases)}
                                    for c in scenario.clients]},
           "setups": results}
    paths = report.write(out_dir, run, plots=not args.no_plots)
    print(paths["table"])
    log(f"report: {paths['summary']}")
    for plot in paths.get("plots", []):
        log(f"plot: {plot}")
    return 0 if any(r.get("status") == "ok" for r in results) else 1


def target_run(args: argparse.Namespace) -> int:
    """Run the simulator once against a running target; print its own measurements."""
    scenario = _scenario(args)
    if scenario is None:
        return 2
    host, _, port = args.target.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]") or not port.isdigit():
        log(f"--target must be a loopback HOST:PORT (this load generator only sends to this machine), got {args.target!r}")
        return 2
    with _pinned_self(None if args.no_pin else args.load_cpu if (os.cpu_count() or 1) >= 2 else None):
        sim = run_scenario(scenario, host.strip("[]"), int(port), via_gateway=args.via_gateway, label=args.target, progress=stderr_progress)
    print(report.target_table(sim))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        report.write_json(Path(args.out) / "results.json", {"target": args.target, "sim": sim})
    return 0


def _missing_tools() -> str | None:
    from loadtest.site import nginx_binary

    if nginx_binary() is None:
        return "nginx is not installed (run .ci/system-deps): it serves the benchmark's origin and is the reference proxy"
    return None


def parser(prog: str = "clefgate bench mixed") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Mixed realistic traffic against origin, nginx and clefgate, side by side.")
    p.add_argument("--scenario", default="default", help="scenario name (loadtest/scenarios/NAME.yaml) or file (default: default)")
    p.add_argument("--setups", default=",".join(setups.DEFAULT_SETUPS), help=f"comma-separated setups (default: all: "
                                                                             f"{', '.join(setups.DEFAULT_SETUPS)})")
    p.add_argument("--scale", type=float, default=1.0, help="multiply arrival rates and flood concurrency (default 1)")
    p.add_argument("--rounds", type=int, default=2, help="run every setup this many times, interleaved (default 2); the report "
                                                          "merges the rounds and shows each round's flood throughput")
    p.add_argument("--seconds", type=float, default=0.0, help="shrink the phases to last this many seconds in all")
    p.add_argument("--warmup", type=float, default=1.5, help="seconds of warm-up traffic before each measured run (default 1.5)")
    p.add_argument("--out", default="", help="results folder (default: loadtest/results/<timestamp>/)")
    p.add_argument("--load-cpu", type=int, default=0, help="CPU for the load generator and the origin (default 0)")
    p.add_argument("--sut-cpu", type=int, default=1, help="CPU for the system under test (default 1)")
    p.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    p.add_argument("--model-repository", default="", help="model repository for the model setups (default: the shipped one)")
    p.add_argument("--model-name", default="", help="model name in the repository (default: clef-flash)")
    p.add_argument("--model-version", default="", help="model version for the model setups (default: the config's, latest; "
                                                        "an opt-in version must be named)")
    p.add_argument("--policy", action="append", default=[], metavar="KEY=VALUE",
                   help="a policy setting for the model setups, e.g. challenge_risk=0.5 (repeat for more)")
    p.add_argument("--no-plots", action="store_true", help="write the Markdown and JSON only")
    p.add_argument("--target", default="", help="run once against an already running HOST:PORT on loopback instead of the setups")
    p.add_argument("--via-gateway", action="store_true", help="with --target: the target is a clefgate (classify its verdicts)")
    return p


def _policy_value(item: str) -> tuple[str, float | None]:
    key, eq, text = item.partition("=")
    value = text.strip()
    if not eq or not key.strip():
        raise ValueError(f"{item!r}: expected KEY=VALUE, e.g. challenge_risk=0.5")
    if value == "null":
        return key.strip(), None
    try:
        return key.strip(), float(value)
    except ValueError:
        raise ValueError(f"{item!r}: the value is not a number or null") from None


def model_overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The config sections the model setups get from the command line (ValueError on a malformed --policy; the
    gateway checks the keys and ranges when a setup starts)."""
    model = {k: v for k, v in (("repository", args.model_repository), ("name", args.model_name), ("version", args.model_version)) if v}
    policy = dict(map(_policy_value, args.policy))
    return {k: v for k, v in (("model", model), ("policy", policy)) if v}


def main(argv: Sequence[str], prog: str = "clefgate bench mixed") -> int:
    p = parser(prog)
    args = p.parse_args(list(argv))
    try:
        overrides = model_overrides(args)
    except ValueError as exc:
        p.error(f"--policy: {exc}")
    if args.target and overrides:
        p.error("--target measures a running gateway: --model-repository, --model-name, --model-version and --policy "
                "apply to the setups this command starts")
    if args.target:
        return target_run(args)
    return compare(args, argv, prog)
