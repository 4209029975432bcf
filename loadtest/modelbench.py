"""``clefgate bench model``: Clef-flash decisions per second and latency, per provider and variant.

    clefgate bench model                                   # the shipped model, CPU, fp32 and int8
    clefgate bench model --providers cpu,cuda --variants fp32,int8,fp16 --batches 1,8,64,256
    clefgate bench model --repository models/work/repository --name clef-flash-tiny --json out.json
    clefgate bench model --variants int8 --batches 1,64 --runtimes tuned,plain   # the CPU tuning's gain, side by side
    clefgate bench model --version 2.1.0,1.7.0 --variants int8 --runtimes tuned,uncached   # two versions in one run

It loads the model exactly as the gateway does (``gateway.decider.onnx.OnnxScorer``,
one session per provider and variant, ``--threads`` intra-op threads) and feeds it a
fixed sample of realistic requests (``loadtest.samples``). Per cell it measures:

* *tokenize*: the model's featurizer (``OnnxScorer.model_input``: serialize, encode, numeric
  vectors for its feature version) per request;
* *single*: one request per run — inference alone, and tokenize + infer end to end
  (the gateway's per-request cost when nothing batches), with decisions/s;
* *batched*: decisions/s at each batch size, inference alone (pre-tokenized inputs)
  and tokenize + infer (``run_batch``, which featurizes a batch one step at a time:
  ``features.model_inputs``; the proxy featurizes each request as it arrives, at the
  *tokenize* cost above).

``--runtimes plain`` loads the session without the runtime's CPU tuning (denormals
flushed to zero, slow fusions left out) and without exact int8 products on AVX2-only
CPUs (see ``gateway.decider.onnx``), as onnxruntime runs by default, so
``tuned,plain`` measures what the tuning buys in one run, as a ratio. ``--runtimes uncached``
loads a two-input model (Clef-flash 2) without its kept client answers, so every request
pays its client half too (what a request from a client never seen costs).

``--version`` takes several versions (``2.1.0,1.7.0``): each is measured in turn, in
the same run, on the same sample.

The process is pinned to one CPU (``--cpu``) so per-core figures mean what they say. A
provider that cannot run here (no CUDA device) is reported, not fatal. It is a
benchmark: numbers are printed and written, nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gateway import features as feat

# the serving budget (issue 34, item 8): one core, the client half's answer kept per client key
TARGETS = {"single_p50_ms": 0.5, "batch64_decisions_per_s": 5000.0}


def _percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100.0 * len(ordered)))]


def _timed(fn: Callable[[], object], seconds: float, max_runs: int = 200_000) -> list[float]:
    """Run ``fn`` repeatedly for about ``seconds``; return each run's duration in seconds."""
    out: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline and len(out) < max_runs:
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def bench_cell(scorer: Any, features: Sequence[feat.Features], *, batches: Sequence[int], seconds: float) -> dict[str, Any]:
    """Measure one loaded scorer (see the module docstring)."""
    featurize = getattr(scorer, "model_input", feat.model_input)
    inputs = [featurize(f) for f in features]
    n = len(features)
    cursor = [0]

    def next_slice(size: int) -> slice:
        start = cursor[0]
        cursor[0] = (start + size) % max(1, n - size)
        return slice(start, start + size)

    def tokenize_one() -> None:
        featurize(features[next_slice(1).start])

    def infer_one() -> None:
        scorer.run_inputs(inputs[next_slice(1)])

    def end_to_end_one() -> None:
        scorer.run_batch(list(features[next_slice(1)]))

    third = seconds / 3
    tok = _timed(tokenize_one, third)
    single = _timed(infer_one, third)
    e2e = _timed(end_to_end_one, third)
    out: dict[str, Any] = {
        "tokenize_p50_us": statistics.median(tok) * 1e6, "tokenize_p99_us": _percentile(tok, 99) * 1e6,
        "single_infer_p50_ms": statistics.median(single) * 1e3, "single_infer_p99_ms": _percentile(single, 99) * 1e3,
        "single_p50_ms": statistics.median(e2e) * 1e3, "single_p99_ms": _percentile(e2e, 99) * 1e3,
        "single_decisions_per_s": len(e2e) / sum(e2e) if e2e else 0.0,
        "batches": {},
    }
    for size in batches:
        size = min(size, n)

        def infer(size: int = size) -> None:
            scorer.run_inputs(inputs[next_slice(size)])

        def both(size: int = size) -> None:
            scorer.run_batch(list(features[next_slice(size)]))

        runs = _timed(infer, seconds / len(batches) / 2)
        runs_e2e = _timed(both, seconds / len(batches) / 2)
        out["batches"][str(size)] = {
            "infer_decisions_per_s": size * len(runs) / sum(runs) if runs else 0.0,
            "tokenize_infer_decisions_per_s": size * len(runs_e2e) / sum(runs_e2e) if runs_e2e else 0.0,
            "infer_p50_ms": statistics.median(runs) * 1e3 if runs else 0.0,
        }
    return out


RUNTIMES = ("tuned", "plain", "uncached")


def _runtimes(value: str) -> str:
    bad = [r for r in value.split(",") if r.strip() not in RUNTIMES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown runtime {', '.join(bad)} (choose from {', '.join(RUNTIMES)})")
    return value


def load_scorer(repository: Path, name: str, version: str, provider: str, variant: str, threads: int, runtime: str = "tuned") -> Any:
    """The scorer the gateway loads (``tuned``), or the same without its CPU tuning (``plain``)."""
    from gateway.decider.onnx import OnnxOptions, OnnxScorer

    plain: dict[str, Any] = {"flush_denormals": False, "cpu_disabled_optimizers": (), "exact_int8": False} if runtime == "plain" else {}
    if runtime == "uncached":
        plain["client_cache_ttl_s"] = 0.0
    return OnnxScorer(OnnxOptions(repository=repository, name=name, version=version, variant=variant, providers=(provider,),
                                  intra_op_threads=threads, **plain))


def run(args: argparse.Namespace) -> dict[str, Any]:
    import onnxruntime

    from gateway.decider.onnx import DEFAULT_REPOSITORY
    from loadtest.samples import sample_features

    onnxruntime.set_default_logger_severity(4)  # the runtime reports unusable providers itself
    repository = Path(args.repository) if args.repository else DEFAULT_REPOSITORY
    sample = [f for _, f in sample_features(args.requests, seed=args.seed)]
    lengths = [len(feat.model_input(f).ids) for f in sample[:500]]
    result: dict[str, Any] = {"repository": str(repository), "name": args.name, "version": args.version, "threads": args.threads,
                              "cpu": args.cpu, "requests": len(sample), "mean_ids": statistics.mean(lengths), "cells": []}
    cells = [(m.strip(), p.strip(), v.strip(), r.strip()) for m in args.version.split(",") for p in args.providers.split(",")
             for v in args.variants.split(",") for r in args.runtimes.split(",")]
    for version, provider, variant, runtime in cells:
        cell: dict[str, Any] = {"provider": provider, "variant": variant, "runtime": runtime}
        try:
            scorer = load_scorer(repository, args.name, version, provider, variant, args.threads, runtime)
        except Exception as exc:  # no such provider here, or no such file: reported, the others still run
            problems = getattr(exc, "problems", None)
            cell["error"] = "; ".join(problems) if problems else str(exc).splitlines()[0]
            print(f"{provider}/{variant}/{runtime}: not measured: {cell['error']}", file=sys.stderr, flush=True)
            result["cells"].append(cell)
            continue
        result["model"] = scorer.label
        cell["model"] = scorer.label
        cell["session_provider"] = scorer.session.get_providers()[0]
        cell["int8_kernel"] = scorer.int8_kernel  # int8 on the CPU: default, or the exact one where this CPU needs it
        kernel = f", int8 kernel {cell['int8_kernel']}" if cell["int8_kernel"] else ""
        print(f"{provider}/{variant}/{runtime}: measuring {scorer.label} on {cell['session_provider']}{kernel}...", file=sys.stderr, flush=True)
        cell.update(bench_cell(scorer, sample, batches=[int(b) for b in args.batches.split(",")], seconds=args.seconds))
        scorer.close()
        result["cells"].append(cell)
    return result


def table(result: dict[str, Any]) -> str:
    batches = sorted({int(b) for c in result["cells"] for b in c.get("batches", {})})
    lines = [f"model {result.get('model', result['name'])} from {result['repository']}; {result['threads']} intra-op thread(s); "
             f"CPU {result['cpu'] if result['cpu'] is not None else 'unpinned'}; {result['requests']} sample requests "
             f"(mean {result['mean_ids']:.0f} token ids)", ""]
    head = (f"{'model':<17} {'provider':<8} {'variant':<7} {'runtime':<7} {'tokenize p50/p99 us':>20} {'infer p50/p99 ms':>17} {'tok+infer p50/p99 ms':>21} "
            f"{'single dec/s':>12}" + "".join(f" {f'b{b} infer/s':>11} {f'b{b} tok+inf/s':>13}" for b in batches))
    lines.append(head)
    for c in result["cells"]:
        if "error" in c:
            lines.append(f"{c.get('model', '?'):<17} {c['provider']:<8} {c['variant']:<7} {c.get('runtime', 'tuned'):<7} not measured: {c['error']}")
            continue
        row = (f"{c.get('model', '?'):<17} {c['provider']:<8} {c['variant']:<7} {c.get('runtime', 'tuned'):<7} {c['tokenize_p50_us']:>9.1f} / {c['tokenize_p99_us']:<8.1f} "
               f"{c['single_infer_p50_ms']:>7.3f} / {c['single_infer_p99_ms']:<7.3f} {c['single_p50_ms']:>9.3f} / {c['single_p99_ms']:<9.3f} "
               f"{c['single_decisions_per_s']:>12,.0f}")
        for b in batches:
            cell = c["batches"].get(str(b))
            row += f" {cell['infer_decisions_per_s']:>11,.0f} {cell['tokenize_infer_decisions_per_s']:>13,.0f}" if cell else " " * 26
        lines.append(row)
    lines += _ratios(result["cells"], batches)
    lines += ["", f"targets (issue 34 item 8, one CPU core): tokenize + infer p50 <= {TARGETS['single_p50_ms']:g} ms single request; "
              f">= {TARGETS['batch64_decisions_per_s']:,.0f} decisions/s at batch 64"]
    return "\n".join(lines)


def _ratios(cells: Sequence[dict[str, Any]], batches: Sequence[int]) -> list[str]:
    """``uncached / tuned`` (a two-input model's new client against a kept one: p50 and decisions/s) and ``tuned / plain``
    per variant and batch size on the CPU, where both runtimes were measured (one after the other: run the bench twice,
    or interleave runs, before reading a small ratio)."""
    by = {(c.get("model", ""), c["provider"], c["variant"], c.get("runtime", "tuned")): c for c in cells if "error" not in c}
    lines = []
    for (model, provider, variant, runtime), uncached in by.items():
        kept = by.get((model, provider, variant, "tuned"))
        if runtime != "uncached" or kept is None or not kept["single_p50_ms"]:
            continue  # a two-input model's client never seen against its kept answers
        parts = [f"b{b} tok+inf {uncached['batches'][str(b)]['tokenize_infer_decisions_per_s'] / kept['batches'][str(b)]['tokenize_infer_decisions_per_s']:.2f}x"
                 for b in batches if str(b) in kept["batches"] and str(b) in uncached["batches"]
                 and kept["batches"][str(b)]["tokenize_infer_decisions_per_s"] > 0]
        lines.append(f"uncached / tuned runtime (a client never seen / its answer kept), {provider} {variant}: single p50 "
                     f"{uncached['single_p50_ms'] / kept['single_p50_ms']:.2f}x, " + ", ".join(parts) + f" ({model})")
    for (model, provider, variant, runtime), tuned in by.items():
        plain = by.get((model, provider, variant, "plain"))
        if runtime != "tuned" or plain is None or provider != "cpu" or not plain["single_decisions_per_s"]:
            continue  # the tuning is the CPU provider's; elsewhere the two runtimes are the same
        parts = [f"b{b} tok+inf {tuned['batches'][str(b)]['tokenize_infer_decisions_per_s'] / plain['batches'][str(b)]['tokenize_infer_decisions_per_s']:.2f}x"
                 for b in batches if str(b) in tuned["batches"] and str(b) in plain["batches"]
                 and plain["batches"][str(b)]["tokenize_infer_decisions_per_s"] > 0]
        lines.append(f"tuned / plain runtime, {provider} {variant}: single {tuned['single_decisions_per_s'] / plain['single_decisions_per_s']:.2f}x, "
                     + ", ".join(parts) + f" ({model})")
    return ["", *lines] if lines else []


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="clefgate bench model", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repository", default="", help="model repository (default: the shipped models/repository)")
    p.add_argument("--name", default="clef-flash", help="model name (default clef-flash)")
    p.add_argument("--version", default="latest", help="model version, or several separated by commas (default latest)")
    p.add_argument("--providers", default="cpu", help="comma-separated providers to try: cpu, cuda (default cpu)")
    p.add_argument("--variants", default="fp32,int8", help="comma-separated model files: fp32, int8, fp16 (default fp32,int8)")
    p.add_argument("--batches", default="1,8,64,256", help="batch sizes (default 1,8,64,256)")
    p.add_argument("--runtimes", default="tuned", type=_runtimes,
                   help="comma-separated: tuned (the gateway's CPU tuning, default), plain (without it), uncached (tuned, no kept "
                        "client answers); tuned with either prints their ratio")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (default 1, as the gateway)")
    p.add_argument("--seconds", type=float, default=6.0, help="measuring time per provider/variant (default 6)")
    p.add_argument("--requests", type=int, default=2000, help="sample requests (default 2000)")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--cpu", type=int, default=1 if (os.cpu_count() or 1) >= 2 else None,
                   help="pin this process to one CPU (default 1 on a machine with two or more)")
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    from gateway.decider.manifest import ManifestError, resolve
    from gateway.decider.onnx import DEFAULT_REPOSITORY

    try:
        for version in args.version.split(","):
            resolve(Path(args.repository) if args.repository else DEFAULT_REPOSITORY, args.name, version.strip())
    except ManifestError as exc:
        print(f"clefgate bench model: {'; '.join(exc.problems)}", file=sys.stderr)
        return 2
    result = run(args)
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0 if any("error" not in c for c in result["cells"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
