"""exact_int8 on/off, everything else the shipped (tuned) runtime; interleaved rounds, b64 inference, ratios."""
import sys, time, statistics, numpy as np
sys.path.insert(0, "/work/main")
import onnxruntime; onnxruntime.set_default_logger_severity(4)
from gateway import features as feat
from gateway.decider.onnx import OnnxOptions, OnnxScorer, DEFAULT_REPOSITORY
from loadtest.samples import sample_features
sample = [f for _, f in sample_features(1920, seed=1)]
inputs = [feat.model_input(f) for f in sample]
sc = {}
for v in ("1.5.0", "1.7.0"):
    for ex in (True, False):
        # as run (before the probe): exact_int8=True always set session.x64quantprecision; since the probe, force it
        from gateway.decider import int8probe
        int8probe.default_kernel_exact = (lambda: False) if ex else (lambda: True)
        sc[(v, ex)] = OnnxScorer(OnnxOptions(repository=DEFAULT_REPOSITORY, version=v, variant="int8", providers=("cpu",), exact_int8=ex))
        assert (int8probe.session_entry(sc[(v, ex)].session) == "1") == ex
# outputs: same or not
for v in ("1.5.0", "1.7.0"):
    a = sc[(v, True)]; b = sc[(v, False)]
    la = a.logits(inputs); lb = b.logits(inputs)
    d = max(float(np.abs(la[q] - lb[q]).max()) for q in la)
    print(v, "exact flag", a.options.exact_int8, b.options.exact_int8, "max |d logit| exact vs saturating:", d, flush=True)
def rate(s, secs=1.5):
    n = 0; t0 = time.perf_counter(); i = 0; dl = t0 + secs
    while time.perf_counter() < dl:
        s.run_inputs(inputs[i:i+64]); n += 64; i = (i + 64) % (len(inputs) - 64)
    return n / (time.perf_counter() - t0)
rows = {k: [] for k in sc}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 7):
    order = list(sc) if r % 2 == 0 else list(reversed(list(sc)))
    for k in order:
        rows[k].append(rate(sc[k]))
    print(f"round {r+1}: " + "  ".join(f"{k[0]} {'exact' if k[1] else 'sat'} {rows[k][-1]:,.0f}" for k in sc), flush=True)
for v in ("1.5.0", "1.7.0"):
    ratios = [a / b for a, b in zip(rows[(v, True)], rows[(v, False)])]
    print(f"{v} b64 infer exact/sat per round: " + " ".join(f"{x:.2f}" for x in ratios) + f"  median {statistics.median(ratios):.2f}x;"
          f" medians exact {statistics.median(rows[(v, True)]):,.0f} sat {statistics.median(rows[(v, False)]):,.0f}")
