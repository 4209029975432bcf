import sys, time
sys.path.insert(0, "/work/main")
import numpy as np
from models.bench import _records
from gateway import features as feat
from gateway.decider.onnx import OnnxOptions, OnnxScorer
from loadtest.samples import sample_features
ver = sys.argv[1]
s = OnnxScorer(OnnxOptions(version=ver, variant="int8", providers=("cpu",)))
fs = [f for _, f in sample_features(2000, seed=5)]
inputs = [feat.model_input(f) for f in fs]
chunks = [inputs[b*64:(b+1)*64] for b in range(31)]
def plan_bucket(c, bucket):
    g = {}
    for i, it in enumerate(c): g.setdefault(min(512, max(bucket, -(-len(it.ids) // bucket) * bucket)), []).append(i)
    return list(g.values())
def plan_merge(c, min_rows):
    g = {}
    for i, it in enumerate(c): g.setdefault(feat.bucket_length(len(it.ids)), []).append(i)
    out, cur = [], []
    for L in sorted(g):
        cur += g[L]
        if len(cur) >= min_rows: out.append(cur); cur = []
    if cur:
        if out: out[-1] += cur
        else: out.append(cur)
    return out
plans = {"bucket64": lambda c: plan_bucket(c, 64), "bucket32": lambda c: plan_bucket(c, 32), "bucket128": lambda c: plan_bucket(c, 128),
         "merge8": lambda c: plan_merge(c, 8), "merge16": lambda c: plan_merge(c, 16), "one": lambda c: [list(range(len(c)))]}
pre = {k: [[feat.pad_batch([c[i] for i in rows]) for rows in p(c)] for c in chunks] for k, p in plans.items()}
for k, v in pre.items(): print(k, "runs/batch", sum(len(x) for x in v) / len(v), "padded ids/row", sum(a.size for x in v for a, _ in x) / (31*64))
res = {k: [] for k in pre}
for r in range(3):
    for k, v in pre.items():
        t0 = time.perf_counter()
        for x in v:
            for a, n in x: s._run(a, n)
        res[k].append((time.perf_counter() - t0) / (31*64) * 1e6)
for k, v in res.items(): print(f"{k:10s} " + " ".join(f"{x:6.1f}" for x in v) + f"  median {sorted(v)[1]:.1f} us/req")
