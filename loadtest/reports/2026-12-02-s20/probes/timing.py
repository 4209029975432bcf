import time, statistics
def paired(sessions, batches, reps=10):
    """Per rep: every batch run on each session back to back (order alternating), times summed per session.
    Returns {name: [decisions/s per rep]} and per-rep ratios vs the first session."""
    names = list(sessions)
    tot = {k: [] for k in names}
    n = sum(len(ids) for b in batches for ids, _ in b)
    for r in range(reps):
        acc = {k: 0.0 for k in names}
        for bi, b in enumerate(batches):
            order = names if (bi + r) % 2 == 0 else names[::-1]
            for k in order:
                s = sessions[k]; t = time.perf_counter()
                for ids, num in b: s.run(None, {"ids": ids, "numeric": num})
                acc[k] += time.perf_counter() - t
        for k in names: tot[k].append(n / acc[k])
    return tot
def report(tot):
    names = list(tot); ref = names[0]
    for k in names:
        v = tot[k]; ratios = [a / b for a, b in zip(v, tot[ref])]
        print(f"{k:10s} b64 infer/s median {statistics.median(v):7,.0f} (min {min(v):,.0f} max {max(v):,.0f})  / {ref}: median {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
