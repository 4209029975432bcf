"""Session 18: batch-64 inference of the int8 files with and without session.x64quantprecision (exact uint8 x int8
products on AVX2), five interleaved rounds, pinned to one CPU; and the largest logit change on one batch."""
import os, sys, time, statistics, collections
sys.path.insert(0, "/work/main"); os.sched_setaffinity(0, {1})
import numpy as np, onnxruntime as ort
from gateway import features as feat
from gateway.decider import fpenv
from loadtest.samples import sample_features
inputs = [feat.model_input(f) for _, f in sample_features(2000, seed=5)]
batches = []
for lo in range(0, 1920, 64):
    g = collections.defaultdict(list)
    for x in inputs[lo:lo+64]: g[feat.bucket_length(len(x.ids))].append(x)
    batches += [feat.pad_batch(r) for r in g.values()]
def sess(ver, exact):
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    if exact: so.add_session_config_entry("session.x64quantprecision", "1")
    return ort.InferenceSession(f"models/repository/clef-flash/{ver}/model.int8.onnx", so, providers=["CPUExecutionProvider"], disabled_optimizers=["SkipLayerNormFusion"])
for ver in ("1.7.0", "1.5.0"):
    S = {"default": sess(ver, False), "x64quantprecision": sess(ver, True)}
    outs = [o.name for o in S["default"].get_outputs()]
    res = collections.defaultdict(list)
    for r in range(5):
        for k, s in S.items():
            t = time.perf_counter()
            with fpenv.flush_denormals():
                for ids, num in batches: s.run(outs, {"ids": ids, "numeric": num})
            res[k].append(1920 / (time.perf_counter() - t))
    d, x = statistics.median(res["default"]), statistics.median(res["x64quantprecision"])
    ids, num = batches[0]
    a = S["default"].run(outs, {"ids": ids, "numeric": num})[0]; b = S["x64quantprecision"].run(outs, {"ids": ids, "numeric": num})[0]
    print(f"{ver} b64 infer/s default " + " / ".join(f"{v:,.0f}" for v in res["default"]) + f" | x64quantprecision " + " / ".join(f"{v:,.0f}" for v in res["x64quantprecision"]) + f"  ratio {x/d:.2f}; max|dlogit| first batch {np.abs(a-b).max():.4f}")
