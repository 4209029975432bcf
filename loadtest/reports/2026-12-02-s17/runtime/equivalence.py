"""Equivalence of the tuned CPU runtime (rule (b), session 17): calibration-side gate sets only."""
import sys
from pathlib import Path
import numpy as np
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/tmp/s12")
from ens import act, DS
from gateway import evaluate as ev
from gateway import features as feat
from gateway.decider.onnx import OnnxOptions, OnnxScorer
ver = sys.argv[1] if len(sys.argv) > 1 else "1.7.0"
base = dict(version=ver, variant="int8", providers=("cpu",))
S = {"plain": OnnxScorer(OnnxOptions(**base, flush_denormals=False, cpu_disabled_optimizers=())),
     "ftz": OnnxScorer(OnnxOptions(**base, cpu_disabled_optimizers=())),
     "tuned": OnnxScorer(OnnxOptions(**base))}
def probs(s, inputs):
    P = []
    for lo in range(0, len(inputs), 256):
        for p in s.run_inputs(inputs[lo:lo + 256]):
            c = p["class"]; P.append([c["human"], c["good_bot"], c["bad_bot"], c["attack"]])
    return np.array(P)
cal = ["C3", "C4", "C5", "N6", "N9"]
tot = flips = jflips = ftzflips = 0; dmax = jmax = fmax = 0.0; worst = 0.0
for d in DS:
    rows = ev.read_rows(Path(f"/tmp/ev/{d}.jsonl"), ev.Skipped())
    inputs = [r.logged_input or feat.model_input(r.features) for r in rows]
    Pp = probs(S["plain"], inputs); Pt = probs(S["tuned"], inputs); Pf = probs(S["ftz"], inputs)
    Pr = probs(S["plain"], inputs[::-1])[::-1]
    b = np.load(f"/tmp/s16/base/base_{d}.npz"); lab = b["lab"]
    acts = {}
    for k, P in (("plain", Pp), ("tuned", Pt), ("rev", Pr), ("ftz", Pf)):
        a = act(b, P, ch=0.5); acts[k] = np.where(b["fixed"] >= 0, b["fixed"], a)
    figs = {}
    for k in ("plain", "tuned"):
        a = acts[k]
        f = [(a[lab == 0] == 2).mean() * 100, (a[lab == 0] == 1).mean() * 100]
        if d in cal: f += [(a[lab == 3] == 2).mean() * 100, (a[lab == 2] >= 1).mean() * 100]
        figs[k] = f
    mv = max(abs(x - y) for x, y in zip(figs["plain"], figs["tuned"])); worst = max(worst, mv)
    n = len(lab); tot += n
    fl = int((acts["plain"] != acts["tuned"]).sum()); jf = int((acts["plain"] != acts["rev"]).sum()); ff = int((acts["plain"] != acts["ftz"]).sum())
    flips += fl; jflips += jf; ftzflips += ff
    dm = float(np.abs(Pp - Pt).max()); jm = float(np.abs(Pp - Pr).max()); fm = float(np.abs(Pp - Pf).max())
    dmax, jmax, fmax = max(dmax, dm), max(jmax, jm), max(fmax, fm)
    print(f"{d:10s} n={n:6d} flips tuned {fl} / ftz-only {ff} / plain-reversed {jf}; max|dP| tuned {dm:.4f} ftz {fm:.1e} reversed {jm:.4f}; "
          f"figures plain {'/'.join(f'{x:.3f}' for x in figs['plain'])} tuned {'/'.join(f'{x:.3f}' for x in figs['tuned'])}", flush=True)
print(f"TOTAL {tot} rows: action flips tuned vs plain {flips} ({flips / tot * 100:.4f}%), ftz-only {ftzflips}, plain reversed-batches {jflips} "
      f"({jflips / tot * 100:.4f}%); max|dP(class)| tuned {dmax:.4f}, ftz {fmax:.1e}, reversed {jmax:.4f}; largest figure move {worst:.3f} points")
