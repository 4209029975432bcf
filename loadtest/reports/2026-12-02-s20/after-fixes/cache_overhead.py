"""Per-miss cost of CachedScorer.score: the new cache-owned task vs the old inline call (same inner, same keys)."""
import asyncio, sys, time, statistics, subprocess, importlib.util
sys.path.insert(0, "/work/main")
from gateway.decider.scoring import Scored
from gateway.features import ModelInput
import numpy as np

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
new = load("/work/main/gateway/decider/cache.py", "cache_new")
subprocess.run("git -C /work/main show bb9c977:gateway/decider/cache.py > /tmp/s20/cache_old.py", shell=True, check=True)
old = load("/tmp/s20/cache_old.py", "cache_old")
P = {"class": {"human": 0.7, "good_bot": 0.1, "bad_bot": 0.1, "attack": 0.1}}
class Inner:
    async def score(self, item): return Scored(P, model="m@1")
items = [ModelInput(f"t{i}", np.zeros(8, np.int64), (0.0,)) for i in range(20000)]
async def run(mod):
    c = mod.CachedScorer(Inner(), key=lambda it: it.text, maxsize=100000) if False else mod.CachedScorer(Inner(), lambda it: it.text, maxsize=100000)
    t = time.perf_counter()
    for it in items: await c.score(it)
    return (time.perf_counter() - t) / len(items) * 1e6
res = {"old": [], "new": []}
for r in range(5):
    for k, m in (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old)):
        res[k].append(asyncio.run(run(m)))
for k, v in res.items(): print(k, "us per miss, median", round(statistics.median(v), 2), [round(x, 2) for x in v])
print("new - old:", round(statistics.median(res["new"]) - statistics.median(res["old"]), 2), "us per miss")
