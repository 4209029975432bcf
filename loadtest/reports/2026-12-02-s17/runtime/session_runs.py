import sys, time, ctypes, ctypes.util
sys.path.insert(0, "/work/main")
import numpy as np, onnxruntime as ort
from models.bench import _records
from gateway import features as feat
libm = ctypes.CDLL(ctypes.util.find_library("m"))
saved = (ctypes.c_ubyte * 32)(); libm.fegetenv(ctypes.byref(saved))
ftz = (ctypes.c_ubyte * 32)(); ctypes.memmove(ftz, saved, 32); ctypes.c_uint32.from_buffer(ftz, 28).value |= 0x8040
def on(): libm.fesetenv(ctypes.byref(ftz))
def off(): libm.fesetenv(ctypes.byref(saved))
paths = {"1.5.0": "models/repository/clef-flash/1.5.0/model.int8.onnx", "1.7.0": "models/repository/clef-flash/1.7.0/model.int8.onnx",
         "Y": "/tmp/s16/repo_Y1w/clef-flash/1.8.0/model.int8.onnx", "1.7.0fp32": "models/repository/clef-flash/1.7.0/model.onnx"}
recs = _records(None, 2000)
inputs = [feat.model_input(feat.from_record(r)) for r in recs]
pre = []
for b in range(30):
    c = inputs[b*64:(b+1)*64]; groups = {}
    for i, it in enumerate(c): groups.setdefault(feat.bucket_length(len(it.ids)), []).append(i)
    pre.append([feat.pad_batch([c[i] for i in rows]) for rows in groups.values()])
def mk(path, dis=()):
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"], disabled_optimizers=list(dis))
def runall(s):
    outs = [o.name for o in s.get_outputs()]
    return [s.run(outs, {"ids": a, "numeric": n}) for p in pre for a, n in p]
V = {}
for k, p in paths.items():
    V[k + " fused"] = mk(p); V[k + " unfused"] = mk(p, ["SkipLayerNormFusion"])
for k in V:
    off(); r0 = runall(V[k]); on(); r1 = runall(V[k]); off()
    d = max(float(np.abs(u - v).max()) for x, y in zip(r0, r1) for u, v in zip(x, y))
    print(k, "max |dlogit| ftz vs default:", d)
res = {(k, f): [] for k in V for f in ("default", "ftz")}
for r in range(3):
    for k, s in V.items():
        for f in ("default", "ftz"):
            on() if f == "ftz" else off()
            t0 = time.perf_counter(); runall(s); res[(k, f)].append((time.perf_counter() - t0) / 1920 * 1e6)
            off()
for (k, f), v in res.items(): print(f"{k:18s} {f:8s} " + " ".join(f"{x:6.1f}" for x in v) + f"  median {sorted(v)[1]:.1f} us/req")
