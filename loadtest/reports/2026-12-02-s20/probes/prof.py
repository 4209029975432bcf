import sys, json, collections
sys.path.insert(0, "/work/main")
import onnxruntime as ort, numpy as np
from gateway import features as feat
from loadtest.samples import sample_features
from gateway.decider.onnx import OnnxScorer, OnnxOptions, DEFAULT_REPOSITORY
sample = [f for _, f in sample_features(1920, seed=1)]
inputs = feat.model_inputs(sample)
sc = OnnxScorer(OnnxOptions(repository=DEFAULT_REPOSITORY, name="clef-flash", version="1.7.0", variant="int8", providers=("cpu",), intra_op_threads=1))
so = sc._session_options(); so.enable_profiling=True; so.profile_file_prefix="/tmp/s20/ortprof"
sess = ort.InferenceSession(str(sc.manifest.path("int8")), so, providers=["CPUExecutionProvider"], disabled_optimizers=list(sc.options.cpu_disabled_optimizers))
L=int(sys.argv[1]); n=int(sys.argv[2])
rows=[i for i in inputs if feat.bucket_length(len(i.ids))==L][:n]
ids, num = feat.pad_batch(rows)
for _ in range(300): sess.run(None, {"ids": ids, "numeric": num})
f = sess.end_profiling()
ev = json.load(open(f))
by = collections.Counter(); byn = collections.Counter(); tot=0
for e in ev:
    if e.get("cat")=="Node" and e["name"].endswith("_kernel_time"):
        by[e["args"]["op_name"]] += e["dur"]; byn[e["name"]] += e["dur"]; tot+=e["dur"]
runs=[e["dur"] for e in ev if e.get("name")=="model_run"]
print("model_run median us", sorted(runs)[len(runs)//2], "node sum per run", tot/300)
for k,v in by.most_common(20): print(f"{k:28s} {100*v/tot:5.1f}% {v/300:8.1f} us")
print("top nodes")
for k,v in byn.most_common(15): print(f"{k:60s} {v/300:8.1f} us")
