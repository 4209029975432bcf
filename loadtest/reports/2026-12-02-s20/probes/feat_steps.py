import sys, time, statistics
sys.path.insert(0, "/work/main")
from gateway import features as feat
from gateway.features.serialization import serialize
from gateway.features.encoding import encode
from gateway.features.numeric import numeric_vector
from loadtest.samples import sample_features
sample = [f for _, f in sample_features(1920, seed=1)]
texts = [serialize(f) for f in sample]
def t(fn, reps=15):
    xs = []
    for _ in range(reps):
        a = time.perf_counter(); fn(); xs.append((time.perf_counter() - a) / len(sample) * 1e6)
    return statistics.median(xs)
print("serialize  us/req", round(t(lambda: [serialize(f) for f in sample]), 2))
print("encode     us/req", round(t(lambda: [encode(x) for x in texts]), 2))
print("numeric    us/req", round(t(lambda: [numeric_vector(f) for f in sample]), 2))
print("model_inputs b64 us/req", round(t(lambda: [feat.model_inputs(sample[k:k+64]) for k in range(0, 1920, 64)]), 2))
print("mean text len", statistics.mean(map(len, texts)), "mean ids", statistics.mean(len(encode(x)) for x in texts))
