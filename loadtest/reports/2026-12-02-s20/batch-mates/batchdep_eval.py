import sys, random
sys.path.insert(0, "/work/main")
import numpy as np
from pathlib import Path
from gateway import evaluate as ev
from gateway.decider.onnx import OnnxScorer, OnnxOptions, DEFAULT_REPOSITORY
cfg = ev.load_config(None)
variant = sys.argv[2]
base = OnnxScorer(OnnxOptions(repository=DEFAULT_REPOSITORY, name="clef-flash", version="1.7.0", variant=variant, providers=("cpu",), intra_op_threads=1))
class Rebatch:
    def __init__(self, size, shuffle_seed=None): self.size, self.seed = size, shuffle_seed
    def run_inputs(self, items):
        idx = list(range(len(items)))
        if self.seed is not None: random.Random(self.seed).shuffle(idx)
        out = [None] * len(items)
        for k in range(0, len(idx), self.size):
            part = idx[k:k + self.size]
            for i, p in zip(part, base.run_inputs([items[i] for i in part])): out[i] = p
        return out
    def __getattr__(self, k): return getattr(base, k)
rows = ev.read_rows(Path(sys.argv[1]), ev.Skipped())
import gateway.evaluate as E
captured = {}
orig = E.system_metrics
def grab(actions, labels, verified):
    captured.setdefault("a", []).append(actions.copy()); return orig(actions, labels, verified)
E.system_metrics = grab
res = {}
for name, sc in (("b256 (eval)", base), ("b1", Rebatch(1)), ("b64 shuffled s1", Rebatch(64, 1)), ("b64 shuffled s2", Rebatch(64, 2))):
    captured.clear(); r = ev.evaluate(rows, cfg, sc)
    res[name] = captured["a"]; m = r["systems"]["rules_model"] if "systems" in r else r
    print(name, {k: m.get(k) for k in ("humans_blocked", "humans_challenged", "attacks_blocked", "bad_bots_stopped")} if isinstance(m, dict) else "")
ref = res["b256 (eval)"]
for name, acts in res.items():
    print(name, "actions differing from eval batching (per system):", [int((a != b).sum()) for a, b in zip(acts, ref)], "of", len(rows))
