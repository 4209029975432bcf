import sys, time, statistics
sys.path.insert(0, "/work/main")
from gateway.features import numeric as N
from gateway.features.serialization import decoded_target, body_text
from loadtest.samples import sample_features
sample = [f for _, f in sample_features(1920, seed=1)]
decs = [decoded_target(f)[:1024] for f in sample]; bodies = [body_text(f) for f in sample]
def t(fn, reps=15):
    xs = []
    for _ in range(reps):
        a = time.perf_counter(); fn(); xs.append((time.perf_counter() - a) / len(sample) * 1e6)
    return round(statistics.median(xs), 2)
print("numeric_vector", t(lambda: [N.numeric_vector(f) for f in sample]))
print("decoded_target", t(lambda: [decoded_target(f) for f in sample]))
print("body_text", t(lambda: [body_text(f) for f in sample]))
print("entropy(dec)", t(lambda: [N._entropy(d) for d in decs]))
print("entropy(body)", t(lambda: [N._entropy(b) for b in bodies]))
print("suspicious x2", t(lambda: [(N._suspicious(d), N._suspicious(b)) for d, b in zip(decs, bodies)]))
print("name_facts", t(lambda: [N._name_facts(tuple(h[0] for h in f.headers)) for f in sample]))
print("mean dec len", statistics.mean(map(len, decs)), "mean body len", statistics.mean(map(len, bodies)))
