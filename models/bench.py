"""Latency and throughput of a Clef-flash version on this machine (one intra-op thread).

    python -m models.bench [--repository models/repository] [--version latest] [--data eval.jsonl]

For each precision (fp32, int8; fp16 too on a CUDA machine) it measures, over real
held-out requests:

- **batch 1**: featurize (serialize + encode + numeric vector) and infer, one request
  at a time: p50 / p99 in milliseconds, and the featurization share alone;
- **batch 64**: featurize and infer 64 requests per run: decisions per second, with
  rows grouped by padded length (as the runtime does) and without grouping; and the
  inference alone on inputs featurized beforehand (``run_inputs``);
- **a client never seen** (two-input versions): batch 1 p50 and batch 64 decisions per
  second with no client answer kept, so every request runs both halves.

Numbers are printed, never asserted: shared machines are noisy (run it twice).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gateway import features as feat
from gateway.decider.onnx import OnnxOptions, OnnxScorer


def _records(path: Path | None, rows: int) -> list[dict[str, Any]]:
    if path is not None:
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for _, line in zip(range(rows), fh, strict=False)]
    from models.data.generate import generate
    return list(generate("eval", rows, seed=21))


def _batch1(scorer: OnnxScorer, features: Sequence[feat.Features], single: int) -> tuple[list[float], list[float]]:
    """Featurize and infer one request at a time: (featurize seconds, featurize + infer seconds) per request."""
    t_feat: list[float] = []
    t_total: list[float] = []
    for i in range(single):
        f = features[i % len(features)]
        t0 = time.perf_counter()
        mi = scorer.model_input(f)
        t1 = time.perf_counter()
        scorer.run_inputs([mi])
        t2 = time.perf_counter()
        t_feat.append(t1 - t0)
        t_total.append(t2 - t0)
    return t_feat, t_total


def _batch64(model: OnnxScorer, features: Sequence[feat.Features], batches: int) -> int:
    """Decisions per second featurizing and inferring 64 requests per run (median run)."""
    timings = []
    for b in range(batches):
        chunk = [features[(b * 64 + j) % len(features)] for j in range(64)]
        t0 = time.perf_counter()
        model.run_batch(chunk)
        timings.append(time.perf_counter() - t0)
    return round(64 / float(np.median(timings)))


def measure(scorer: OnnxScorer, ungrouped: OnnxScorer, records: Sequence[dict[str, Any]], single: int = 600,
            batches: int = 40, uncached: OnnxScorer | None = None) -> dict[str, Any]:
    """Batch-1 latency percentiles and batch-64 throughput (``ungrouped``: the same model without length grouping;
    ``uncached``: the same two-input model keeping no client answer, measured as a client never seen)."""
    features = [feat.from_record(r) for r in records]
    t_feat, t_total = _batch1(scorer, features, single)
    out: dict[str, Any] = {
        "batch1_p50_ms": round(float(np.percentile(t_total, 50)) * 1e3, 3),
        "batch1_p99_ms": round(float(np.percentile(t_total, 99)) * 1e3, 3),
        "featurize_p50_us": round(float(np.percentile(t_feat, 50)) * 1e6, 1),
    }
    if uncached is not None:
        out["batch1_new_client_p50_ms"] = round(float(np.percentile(_batch1(uncached, features, single)[1], 50)) * 1e3, 3)
    out["batch64_decisions_per_s"] = _batch64(scorer, features, batches)
    out["batch64_decisions_per_s_ungrouped"] = _batch64(ungrouped, features, batches)
    if uncached is not None:
        out["batch64_new_client_decisions_per_s"] = _batch64(uncached, features, batches)
    # inference only: inputs featurized beforehand (as when the decider already holds them)
    inputs = [scorer.model_input(f) for f in features]
    timings = []
    for b in range(batches):
        chunk = [inputs[(b * 64 + j) % len(inputs)] for j in range(64)]
        t0 = time.perf_counter()
        scorer.run_inputs(chunk)
        timings.append(time.perf_counter() - t0)
    out["batch64_inference_only_per_s"] = round(64 / float(np.median(timings)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.bench", description="Clef-flash latency and throughput on one core.")
    ap.add_argument("--repository", type=Path, default=None)
    ap.add_argument("--name", default="clef-flash")
    ap.add_argument("--version", default="latest")
    ap.add_argument("--data", type=Path, default=None, help="JSONL records (default: generated held-out requests)")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--providers", default="cpu")
    args = ap.parse_args(argv)
    records = _records(args.data, args.rows)
    lengths = [len(feat.model_input(feat.from_record(r)).ids) for r in records]
    results: dict[str, Any] = {"rows": len(records), "ids_p50": int(np.median(lengths)), "ids_p90": int(np.percentile(lengths, 90))}
    for precision in args.precisions.split(","):
        opts = OnnxOptions(name=args.name, version=args.version, variant=precision, providers=tuple(args.providers.split(",")),
                           intra_op_threads=1, **({"repository": args.repository} if args.repository else {}))
        scorer = OnnxScorer(opts)
        ungrouped = OnnxScorer(dataclasses.replace(opts, group_by_length=False))
        uncached = OnnxScorer(dataclasses.replace(opts, client_cache_ttl_s=0.0)) if scorer.two_inputs else None
        results[f"{scorer.provider}-{precision}"] = {"model": scorer.label, "file_bytes": scorer.manifest.path(precision).stat().st_size,
                                                     **measure(scorer, ungrouped, records, uncached=uncached)}
        print(json.dumps({f"{scorer.provider}-{precision}": results[f"{scorer.provider}-{precision}"]}), file=sys.stderr)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
