import sys, time, statistics
sys.path.insert(0, "/work/main")
import numpy as np, onnxruntime as ort
from pathlib import Path
from gateway import features as feat
from gateway.evaluate import read_rows, Skipped
from gateway.decider.onnx import OnnxScorer, OnnxOptions, DEFAULT_REPOSITORY
rows = read_rows(Path("/tmp/s20/calib101.jsonl"), Skipped())
inputs = feat.model_inputs([r.features for r in rows])
base = OnnxScorer(OnnxOptions(repository=DEFAULT_REPOSITORY, name="clef-flash", version="1.7.0", variant="int8", providers=("cpu",), intra_op_threads=1))
def sess(path):
    return ort.InferenceSession(path, base._session_options(), providers=["CPUExecutionProvider"], disabled_optimizers=list(base.options.cpu_disabled_optimizers))
ref_path, new_path = sys.argv[1], sys.argv[2]
A, B = sess(ref_path), sess(new_path)
batches = []
for k in range(0, len(inputs), 64):
    g = {}
    for i in range(k, min(k+64, len(inputs))): g.setdefault(feat.bucket_length(len(inputs[i].ids)), []).append(i)
    batches.append([feat.pad_batch([inputs[i] for i in idx]) for idx in g.values()])
same = True; maxd = 0.0
for b in batches:
    for ids, num in b:
        for x, y in zip(A.run(None, {"ids": ids, "numeric": num}), B.run(None, {"ids": ids, "numeric": num})):
            if not np.array_equal(x, y): same = False; maxd = max(maxd, float(np.abs(x-y).max()))
print("bit-identical logits over", len(inputs), "rows:", same, "max diff", maxd)
sys.path.insert(0, "/tmp/s20")
from timing import paired, report
report(paired({"ref": A, "new": B}, batches[:30], reps=12))
