import sys
sys.path.insert(0, "/work/main")
import numpy as np
from gateway import features as feat
from loadtest.samples import sample_features
from loadtest.modelbench import load_scorer
from gateway.decider.onnx import DEFAULT_REPOSITORY
sample = [f for _, f in sample_features(1920, seed=1)]
inputs = feat.model_inputs(sample)
for variant in ("int8", "fp32"):
    s = load_scorer(DEFAULT_REPOSITORY, "clef-flash", "1.7.0", "cpu", variant, 1, "tuned")
    alone = np.array([s.probabilities([x])["class"][0] for x in inputs[:640]])
    b64 = np.concatenate([s.probabilities(inputs[k:k+64])["class"] for k in range(0, 640, 64)])
    d = np.abs(alone - b64)
    flips = int(((alone[:, 0] >= 0.5) != (b64[:, 0] >= 0.5)).sum())
    print(variant, "max |dp| alone vs in batch of 64:", d.max(), "mean", d.mean(), "rows changed", int((d.max(1) > 0).sum()), "of 640; argmax flips", int((alone.argmax(1) != b64.argmax(1)).sum()))
