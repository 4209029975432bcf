import sys, time, statistics, collections
sys.path.insert(0, "/work/main")
import numpy as np
from gateway import features as feat
from loadtest.samples import sample_features
from loadtest.modelbench import load_scorer
from gateway.decider.onnx import DEFAULT_REPOSITORY
sample = [f for _, f in sample_features(1920, seed=1)]
inputs = feat.model_inputs(sample)
s = load_scorer(DEFAULT_REPOSITORY, "clef-flash", "1.7.0", "cpu", "int8", 1, "tuned")
lens = collections.Counter(feat.bucket_length(len(i.ids)) for i in inputs)
print("bucket lengths", sorted(lens.items()))
# groups per batch of 64
g = [len({feat.bucket_length(len(i.ids)) for i in inputs[k:k+64]}) for k in range(0, 1920, 64)]
print("groups per b64: mean", statistics.mean(g))
def t(fn, n=200):
    xs=[]
    for _ in range(n):
        a=time.perf_counter(); fn(); xs.append(time.perf_counter()-a)
    return statistics.median(xs)*1e6
for L in (128, 192, 256, 320):
    rows=[i for i in inputs if feat.bucket_length(len(i.ids))==L]
    for n in (1, 4, 16, 64):
        if len(rows) < n: continue
        ids, num = feat.pad_batch(rows[:n])
        us = t(lambda: s._run(ids, num))
        print(f"L={L} n={n}: {us:8.1f} us/run  {us/n:7.1f} us/row")
