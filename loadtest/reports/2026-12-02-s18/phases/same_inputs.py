"""Session 18: model_inputs (step by step, batches of 64) makes exactly model_input's inputs, over a large corpus."""
import hashlib, sys
sys.path.insert(0, "/work/main")
from gateway import features as feat
from loadtest.samples import sample_features
from models.data.generate import generate

def digest(items):
    h = hashlib.sha256()
    for mi in items:
        h.update(mi.text.encode("utf-8", "surrogatepass")); h.update(mi.ids.tobytes()); h.update(str(mi.ids.dtype).encode())
        h.update(repr(mi.numeric).encode())
    return h.hexdigest()

corpus = []
for split, rows, seed in (("train", 6000, 3), ("calib", 4000, 4), ("eval", 4000, 5), ("exam", 3000, 7), ("exam3", 3000, 7),
                          ("exam4", 3000, 7)):
    corpus += [feat.from_record(r) for r in generate(split, rows, seed=seed)]
corpus += [f for _, f in sample_features(2000, seed=5)]
alone = digest(feat.model_input(f) for f in corpus)
batched = digest(mi for lo in range(0, len(corpus), 64) for mi in feat.model_inputs(corpus[lo:lo + 64]))
print(f"{len(corpus)} requests: request by request {alone[:16]}, step by step (batches of 64) {batched[:16]}: "
      f"{'identical' if alone == batched else 'DIFFERENT'}")
