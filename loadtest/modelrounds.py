"""The model benchmark's report: ``clefgate bench model`` for the shipped and the rollback Clef-flash, in interleaved rounds.

    python -m loadtest.modelrounds --out loadtest/reports/model      (make bench-model)

One run writes, into ``--out``: ``host.txt`` (CPU vendor and model, AVX-512 and VNNI, the commit), per round
``timeit-rN.txt`` (``python -m timeit "sum(range(1000))"``: how fast plain Python ran on the host at that moment) and
``clef-flash-V-rN.txt`` / ``.json`` for each version (the file each serves on the CPU: fp32 for the shipped 2.1.0,
int8 for the rollback 1.7.0; batch 1 and 64; the gateway's tuned CPU runtime and the plain one, and for the two-input
2.1.0 also ``uncached``: every request a client never seen, both halves run), then ``summary.txt``: batch-64
tokenize + infer decisions/s and single-request p50 per version, variant and runtime, round by round, with their
median. The rounds alternate the versions so that a host getting slower or faster during the run touches both alike:
compare the versions within one run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# version -> (variants, runtimes) measured: each version in the file it serves on the CPU; the shipped two-input version
# also with no client answer kept (a client never seen)
VERSIONS: dict[str, tuple[str, str]] = {"2.1.0": ("fp32", "tuned,uncached,plain"), "1.7.0": ("int8", "tuned,plain")}


def host_lines() -> list[str]:
    """The CPU the figures were measured on (the int8 kernels differ with VNNI) and the commit measured."""
    lines: list[str] = []
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    for key, label in (("vendor_id", "Vendor ID"), ("model name", "Model name")):
        value = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith(key)), platform.processor())
        lines.append(f"{label + ':':<41}{value}")
    flags = set(next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), []))
    vnni = " ".join(sorted(f for f in flags if f in ("avx512_vnni", "avx_vnni")))
    lines.append(f"avx512f: {'yes' if 'avx512f' in flags else 'no'}; vnni: {vnni}")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    lines.append(f"commit {commit.stdout.strip() or 'unknown'}")
    return lines


def summary_lines(out: Path) -> list[str]:
    """Batch-64 tokenize + infer decisions/s and single p50 per (model, variant, runtime), round by round."""
    rows: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for path in sorted(out.glob("clef-flash-*-r*.json")):
        result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        for cell in result["cells"]:
            if "error" in cell:
                continue
            key = (result["model"], cell["variant"], cell["runtime"])
            rows.setdefault(key, []).append((cell["batches"]["64"]["tokenize_infer_decisions_per_s"], cell["single_p50_ms"]))
    lines = []
    for (model, variant, runtime), values in sorted(rows.items()):
        b64 = [x for x, _ in values]
        p50 = [y for _, y in values]
        lines.append(f"{model} {variant} {runtime:8s}: b64 tok+inf " + " / ".join(f"{x:,.0f}" for x in b64)
                     + f"  median {statistics.median(b64):,.0f}; single tok+inf p50 ms " + " / ".join(f"{y:.3f}" for y in p50))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.modelrounds", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", default=str(ROOT / "loadtest" / "reports" / "model"), help="report folder (default loadtest/reports/model)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = p.parse_args(list(argv) if argv is not None else None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("clef-flash-*-r*.*"), *out.glob("timeit-r*.txt")]:
        old.unlink()
    (out / "host.txt").write_text("\n".join(host_lines()) + "\n", encoding="utf-8")
    for r in range(1, args.rounds + 1):
        timeit = subprocess.run([sys.executable, "-m", "timeit", "sum(range(1000))"], capture_output=True, text=True, check=False)
        (out / f"timeit-r{r}.txt").write_text(timeit.stdout, encoding="utf-8")
        for version, (variants, runtimes) in VERSIONS.items():
            stem = out / f"clef-flash-{version}-r{r}"  # no with_suffix: the version's dots are not a suffix
            bench = subprocess.run([sys.executable, "-m", "loadtest.modelbench", "--version", version, "--variants", variants,
                                    "--batches", "1,64", "--runtimes", runtimes, "--json", f"{stem}.json"],
                                   cwd=ROOT, capture_output=True, text=True, check=False)
            Path(f"{stem}.txt").write_text(bench.stdout + bench.stderr, encoding="utf-8")
            print(f"round {r}/{args.rounds}: clef-flash {version} exit {bench.returncode}", file=sys.stderr)
    timeits = [(out / f"timeit-r{r}.txt").read_text(encoding="utf-8").strip() for r in range(1, args.rounds + 1)]
    text = "\n".join([*summary_lines(out), *timeits, *host_lines()]) + "\n"
    (out / "summary.txt").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
