import sys, time
root = sys.argv[1]; sys.path.insert(0, root)
from gateway import features as feat
from loadtest.samples import sample_features
fs = [f for _, f in sample_features(2000, seed=5)]
for f in fs: feat.model_input(f)
best = []
for _ in range(7):
    t0 = time.perf_counter()
    for f in fs: feat.model_input(f)
    best.append((time.perf_counter() - t0) / len(fs) * 1e6)
texts = [feat.serialize(f) for f in fs]
enc = []
for _ in range(7):
    t0 = time.perf_counter()
    for t in texts: feat.encode(t)
    enc.append((time.perf_counter() - t0) / len(fs) * 1e6)
num = []
for _ in range(7):
    t0 = time.perf_counter()
    for f in fs: feat.numeric_vector(f)
    num.append((time.perf_counter() - t0) / len(fs) * 1e6)
print(f"{root}: model_input {sorted(best)[3]:.1f} us, encode {sorted(enc)[3]:.1f}, numeric {sorted(num)[3]:.1f}")
