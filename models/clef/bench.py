"""Latency of clef on this machine: ``python -m models.clef.bench --model DIR``.

Measures, per precision present in the model folder and on one thread: the encoder
alone on one 128-token window, and a whole single request (tokenize, window, encode,
score one cached 4-option question) on a state of 126 content tokens, as p50/p99 over
``--runs`` calls after a warm-up; plus batch-8 throughput. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gateway.clef import Question, QuestionSet, ZeroShotModel

STATE_SENTENCE = "Users in the west region report that checkout pages time out after the latest deploy of the payment service. "
QUESTION = Question("urgency", ("P0_Critical", "P1_High", "P2_Medium", "P3_Low"), "how much of the system is unavailable")


def state_of(model: ZeroShotModel, tokens: int) -> str:
    """A state of exactly ``tokens`` content tokens (one full window at 126)."""
    text = STATE_SENTENCE * 12
    enc = model.tokenizer.encode(text, add_special_tokens=False)
    return text[: enc.offsets[tokens - 1][1]]


def percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.array(samples) * 1000
    return {"p50_ms": round(float(np.percentile(arr, 50)), 2), "p99_ms": round(float(np.percentile(arr, 99)), 2)}


def measure(model: ZeroShotModel, runs: int) -> dict[str, object]:
    state = state_of(model, model.window_tokens - 2)
    windows = model.segmenter.windows(state)
    assert len(windows) == 1
    ids = list(windows[0].ids)
    for _ in range(10):
        model.embed([ids])
        model.answer([QuestionSet(state, (QUESTION,))])
    enc, req = [], []
    for _ in range(runs):
        t = time.perf_counter()
        model.embed([ids])
        enc.append(time.perf_counter() - t)
        t = time.perf_counter()
        model.answer([QuestionSet(state, (QUESTION,))])
        req.append(time.perf_counter() - t)
    batch = [QuestionSet(state, (QUESTION,))] * 8
    t = time.perf_counter()
    n = max(runs // 8, 5)
    for _ in range(n):
        model.answer(batch)
    rate = 8 * n / (time.perf_counter() - t)
    return {"encoder_128": percentiles(enc), "request_128": percentiles(req), "batch8_requests_per_s": round(rate, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.clef.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args(argv)
    manifest = json.loads((args.model / "manifest.json").read_text())
    results = {}
    for prec in [p.strip() for p in args.precisions.split(",") if p.strip()]:
        entry = manifest["files"].get(prec)
        if not entry or not (args.model / entry["path"]).is_file():
            print(f"{prec}: no file in {args.model} (export it first)", file=sys.stderr)
            continue
        model = ZeroShotModel.load(args.model, device=args.device, precision=prec, threads=args.threads)
        results[f"{prec}@{model.provider}"] = measure(model, args.runs)
        print(prec, model.provider, json.dumps(results[f"{prec}@{model.provider}"]), flush=True)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
