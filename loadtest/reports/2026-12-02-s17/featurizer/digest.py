"""Per-record digest of model_input over a large corpus: text, ids and numeric, exactly."""
import sys, hashlib, json, glob
root = sys.argv[1]; out = sys.argv[2]
sys.path.insert(0, root)
from gateway import features as feat
from models.data.generate import generate
from loadtest.samples import sample_features
h = hashlib.sha256(); n = 0
def add(f):
    global n
    mi = feat.model_input(f)
    h.update(mi.text.encode("utf-8", "surrogatepass")); h.update(mi.ids.tobytes()); h.update(str(mi.ids.dtype).encode())
    h.update(repr(mi.numeric).encode()); n += 1
for split, rows, seed in (("train", 6000, 3), ("calib", 4000, 4), ("eval", 4000, 5), ("exam", 3000, 7), ("exam3", 3000, 7)):
    for r in generate(split, rows, seed=seed):
        add(feat.from_record(r))
for path in sorted(glob.glob("/tmp/ev/*.jsonl"))[:8] + ["/tmp/s15/restwrites2.jsonl"]:
    with open(path) as fh:
        for i, line in enumerate(fh):
            if i >= 3000: break
            add(feat.from_record(json.loads(line)))
for _, f in sample_features(2000, seed=5):
    add(f)
# hand-made oddities: non-latin-1, control characters, long targets, empty
from tests.conftest import make_features
for target in ("/ü?q=é", "/\u4e2d\u6587?x=\u2603", "/" + "a" * 2000, "/%00%0d%0a", "/?" + "'\"<>;|`$(){}\\*" * 20):
    add(make_features("GET", target))
open(out, "w").write(f"{n} {h.hexdigest()}\n")
print(n, h.hexdigest())
