import sys, time, statistics
sys.path.insert(0, "/work/main")
import numpy as np, onnxruntime as ort
from pathlib import Path
from gateway import features as feat
from gateway.evaluate import read_rows, Skipped
from gateway.decider.onnx import OnnxScorer, OnnxOptions, DEFAULT_REPOSITORY
rows = read_rows(Path("/tmp/s20/calib101.jsonl"), Skipped())
inputs = feat.model_inputs([r.features for r in rows])[2000:]
base = OnnxScorer(OnnxOptions(repository=DEFAULT_REPOSITORY, name="clef-flash", version="1.7.0", variant="int8", providers=("cpu",), intra_op_threads=1))
def sess(path):
    so = base._session_options()
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"], disabled_optimizers=list(base.options.cpu_disabled_optimizers))
T = base.manifest.temperature["class"] if isinstance(base.manifest.temperature, dict) else None
files = {"fp32": "models/repository/clef-flash/1.7.0/model.onnx", "dyn-int8": "models/repository/clef-flash/1.7.0/model.int8.onnx"}
files.update({a: f"/tmp/s20/{a}.onnx" for a in sys.argv[1:]})
S = {k: sess(v) for k, v in files.items()}
def probs(s, items):
    ids, num = feat.pad_batch(items)
    lo = s.run(None, {"ids": ids, "numeric": num})[0]
    e = np.exp((lo - lo.max(1, keepdims=True)) / 0.81419); return e / e.sum(1, keepdims=True)
def grouped(s, items, bs=64):
    out = np.zeros((len(items), 4))
    for k in range(0, len(items), bs):
        g = {}
        for i in range(k, min(k+bs, len(items))): g.setdefault(feat.bucket_length(len(items[i].ids)), []).append(i)
        for idx in g.values(): out[idx] = probs(s, [items[i] for i in idx])
    return out
ref = grouped(S["fp32"], inputs)
for k, s in S.items():
    p = grouped(s, inputs)
    alone = np.array([probs(s, [x])[0] for x in inputs[:300]])
    d = np.abs(p - ref)
    print(f"{k:18s} vs fp32: max|dp| {d.max():.4f} mean {d.mean():.5f} argmax flips {int((p.argmax(1)!=ref.argmax(1)).sum())} "
          f"human<0.5 flips {int(((p[:,0]<0.5)!=(ref[:,0]<0.5)).sum())} | alone vs b64 max|dp| {np.abs(alone-p[:300]).max():.2e}")
# speed: interleaved rounds, grouped b64 inference only
batches = []
for k in range(0, 1920, 64):
    g = {}
    for i in range(k, k+64): g.setdefault(feat.bucket_length(len(inputs[i].ids)), []).append(i)
    batches.append([feat.pad_batch([inputs[i] for i in idx]) for idx in g.values()])
res = {k: [] for k in S}
for r in range(5):
    for k, s in S.items():
        t = time.perf_counter()
        for b in batches:
            for ids, num in b: s.run(None, {"ids": ids, "numeric": num})
        res[k].append(1920 / (time.perf_counter() - t))
for k, v in res.items():
    print(f"{k:18s} b64 infer/s " + " / ".join(f"{x:,.0f}" for x in v) + f"  median {statistics.median(v):,.0f}  x dyn-int8 {statistics.median(v)/statistics.median(res['dyn-int8']):.2f}")
