#!/bin/bash
# usage: closure.sh DIR  -- the closure rule (session 17, restated in session 18): 3 interleaved rounds, 1.5.0 and 1.7.0, tuned and plain runtimes
cd /work/main; D=$1; mkdir -p $D
# the host, recorded with the figures: the guard reads host speed, and int8 kernels differ by CPU (VNNI or not)
{ lscpu | grep -E 'Model name|Vendor ID'; echo "avx512f: $(grep -q avx512f /proc/cpuinfo && echo yes || echo no); vnni: $(grep -oE 'avx512_vnni|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"; git log --oneline -1; } > $D/HOST.txt
for r in 1 2 3; do
  python3 -m timeit "sum(range(1000))" > $D/timeit-r$r.txt
  .venv/bin/clefgate bench model --version 1.5.0 --variants int8 --batches 1,64 --runtimes tuned,plain --json $D/150-r$r.json > $D/150-r$r.txt 2>&1
  .venv/bin/clefgate bench model --version 1.7.0 --variants int8,fp32 --batches 1,64 --runtimes tuned,plain --json $D/170-r$r.json > $D/170-r$r.txt 2>&1
done
cd $D && /work/main/.venv/bin/python - > $D/SUMMARY.txt <<'PY'
import json, glob, statistics
rows = {}
for f in sorted(glob.glob("1[57]0-r*.json")):
    res = json.load(open(f))
    for c in res["cells"]:
        if "error" in c: continue
        k = (res["model"], c["variant"], c["runtime"])
        rows.setdefault(k, []).append((c["batches"]["64"]["tokenize_infer_decisions_per_s"], c["single_p50_ms"]))
for k, v in sorted(rows.items()):
    b64 = [x for x, _ in v]; p50 = [y for _, y in v]
    print(f"{k[0]} {k[1]} {k[2]:5s}: b64 tok+inf " + " / ".join(f"{x:,.0f}" for x in b64) + f"  median {statistics.median(b64):,.0f};"
          f" single tok+inf p50 ms " + " / ".join(f"{y:.3f}" for y in p50))
PY
cat $D/timeit-r*.txt $D/HOST.txt >> $D/SUMMARY.txt; cat $D/SUMMARY.txt
