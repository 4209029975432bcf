"""Session 18: batch featurization step by step (feat.model_inputs) against request by request (feat.model_input).

One process, pinned to one CPU, the load-test sample (2,000 requests, seed 5), interleaved rounds. Per round and
batch size: featurization alone (us per request), then 1.7.0 int8 (the gateway's tuned runtime) tokenize + infer in
decisions/s -- OnnxScorer.run_inputs over request-by-request inputs against run_batch (which now featurizes step by
step). Prints each round and the ratio of medians. A benchmark: nothing asserted.
"""
import os, statistics, sys, time
sys.path.insert(0, "/work/main")
os.sched_setaffinity(0, {1})
from gateway import features as feat
from gateway.decider.onnx import DEFAULT_REPOSITORY
from loadtest.modelbench import load_scorer
from loadtest.samples import sample_features

fs = [f for _, f in sample_features(2000, seed=5)]
sc = load_scorer(DEFAULT_REPOSITORY, "clef-flash", "1.7.0", "cpu", "int8", 1)
n = 1920
cases = {
    "featurize, request by request": lambda b: [feat.model_input(f) for f in b],
    "featurize, step by step": feat.model_inputs,
    "tok+inf, request by request": lambda b: sc.run_inputs([feat.model_input(f) for f in b]),
    "tok+inf, step by step (run_batch)": sc.run_batch,
}
for b in [fs[i:i + 64] for i in range(0, n, 64)]:
    sc.run_batch(b)
res = {}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
for r in range(rounds):
    for size in (1, 8, 64):
        batches = [fs[i:i + size] for i in range(0, n, size)]
        for name, fn in cases.items():
            t = time.perf_counter()
            for b in batches:
                fn(b)
            res.setdefault((size, name), []).append((time.perf_counter() - t) / n)
for size in (1, 8, 64):
    for name in cases:
        v = res[(size, name)]
        shown = " / ".join(f"{x * 1e6:.1f}" if name.startswith("featurize") else f"{1 / x:,.0f}" for x in v)
        unit = "us/request" if name.startswith("featurize") else "decisions/s"
        print(f"batch {size:>2} {name:36s} {shown}  median {statistics.median(v) * 1e6 if unit[0] == 'u' else 1 / statistics.median(v):,.1f} {unit}")
    f_old, f_new = statistics.median(res[(size, 'featurize, request by request')]), statistics.median(res[(size, 'featurize, step by step')])
    t_old, t_new = statistics.median(res[(size, 'tok+inf, request by request')]), statistics.median(res[(size, 'tok+inf, step by step (run_batch)')])
    print(f"batch {size:>2} step by step / request by request: featurize {f_old / f_new:.2f}x faster, tok+inf {t_old / t_new:.2f}x decisions/s")
