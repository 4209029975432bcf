"""The GPU check of issue 5: CUDA provider active, fp16 matches the CPU, batch throughput.

    python -m loadtest.gpu_check                     # results to $OUT/gpu_check.json (or loadtest/results/)
    python -m loadtest.gpu_check --out DIR --seconds 5 --batches 256,1024,4096

On a machine with an NVIDIA GPU it

1. confirms the CUDA driver sees a device, and that onnxruntime really runs the
   model on ``CUDAExecutionProvider`` (it silently falls back to the CPU otherwise;
   the runtime reads the provider in use back from the session);
2. scores the same realistic requests (``loadtest.samples``) with the fp16 model on
   CUDA and the fp32 model on the CPU, and checks that every probability agrees within
   ``--tolerance`` (and reports how often the predicted class agrees);
3. measures batch throughput on the GPU — inference alone on pre-tokenized inputs,
   and tokenize + infer — against the target of 50,000 decisions/s;

and writes everything as JSON. Without CUDA it says so and exits 3 without
measuring anything. Exit codes: 0 all checks passed, 1 a check failed (parity, or
the session is not on CUDA), 2 the model cannot be loaded, 3 CUDA is unavailable.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TARGET_DECISIONS_PER_S = 50_000.0
CUDA_UNAVAILABLE = 3


def cuda_devices() -> tuple[int, str]:
    """(number of CUDA devices the driver reports, problem) — (0, why) when there is no usable driver or device."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return 0, f"no NVIDIA driver (libcuda.so.1 cannot be loaded: {exc})"
    status = lib.cuInit(0)
    if status != 0:
        return 0, f"the NVIDIA driver did not initialise (cuInit returned {status})"
    count = ctypes.c_int(0)
    status = lib.cuDeviceGetCount(ctypes.byref(count))
    if status != 0:
        return 0, f"cuDeviceGetCount returned {status}"
    if count.value == 0:
        return 0, "the NVIDIA driver reports no CUDA device"
    return count.value, ""


def gpu_names() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def _out_dir(arg: str) -> Path:
    if arg:
        return Path(arg)
    if os.environ.get("OUT"):
        return Path(os.environ["OUT"])
    return Path(__file__).resolve().parent / "results"


def parity(gpu: Any, cpu: Any, features: Sequence[Any], tolerance: float) -> dict[str, Any]:
    """Largest probability difference per question between the two scorers, and class agreement."""
    from gateway import features as feat

    inputs = [feat.model_input(f) for f in features]
    a, b = gpu.probabilities(inputs), cpu.probabilities(inputs)
    out: dict[str, Any] = {"rows": len(inputs), "tolerance": tolerance, "questions": {}}
    worst = 0.0
    for question in a:
        diff = float(abs(a[question] - b[question]).max())
        agree = float((a[question].argmax(axis=1) == b[question].argmax(axis=1)).mean())
        out["questions"][question] = {"max_abs_diff": diff, "argmax_agreement": agree}
        worst = max(worst, diff)
    out["max_abs_diff"] = worst
    out["passed"] = worst <= tolerance
    return out


def throughput(scorer: Any, features: Sequence[Any], batches: Sequence[int], seconds: float) -> dict[str, Any]:
    """Decisions/s per batch size: inference alone (pre-tokenized) and tokenize + infer."""
    from gateway import features as feat

    inputs = [feat.model_input(f) for f in features]
    out: dict[str, Any] = {}
    for size in batches:
        size = min(size, len(inputs))
        chunks = [inputs[i:i + size] for i in range(0, len(inputs) - size + 1, size)]
        scorer.probabilities(chunks[0])  # first run at this shape: not timed
        runs: list[float] = []
        deadline = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            scorer.probabilities(chunks[i % len(chunks)])
            runs.append(time.perf_counter() - t)
            i += 1
        raw = features[:size]
        t = time.perf_counter()
        scorer.run_batch(list(raw))
        e2e = time.perf_counter() - t
        out[str(size)] = {"runs": len(runs), "infer_decisions_per_s": size * len(runs) / sum(runs),
                          "infer_p50_ms": statistics.median(runs) * 1e3, "tokenize_infer_decisions_per_s": size / e2e}
    return out


def check(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    result: dict[str, Any] = {"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "host": platform.node(),
                              "target_decisions_per_s": TARGET_DECISIONS_PER_S}
    devices, problem = cuda_devices()
    result["cuda_devices"] = devices
    if not devices:
        result["error"] = f"CUDA is unavailable: {problem}"
        return CUDA_UNAVAILABLE, result
    result["gpus"] = gpu_names()
    import onnxruntime

    result["onnxruntime"] = onnxruntime.__version__
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        result["error"] = f"CUDA is unavailable: this onnxruntime ({onnxruntime.__version__}) has no CUDA provider (install onnxruntime-gpu)"
        return CUDA_UNAVAILABLE, result

    from gateway.decider.onnx import DEFAULT_REPOSITORY, ModelLoadError, OnnxOptions, OnnxScorer
    from loadtest.samples import sample_features

    repository = Path(args.repository) if args.repository else DEFAULT_REPOSITORY
    base = OnnxOptions(repository=repository, name=args.name, version=args.version, intra_op_threads=args.threads)
    try:
        gpu = OnnxScorer(dataclasses.replace(base, providers=("cuda",), variant=args.variant))
    except ModelLoadError as exc:
        result["error"] = f"CUDA is unavailable to onnxruntime: {'; '.join(exc.problems)}"
        return CUDA_UNAVAILABLE, result
    except Exception as exc:  # the model itself (missing, refused manifest)
        problems = getattr(exc, "problems", None)
        result["error"] = f"cannot load the model: {'; '.join(problems) if problems else exc}"
        return 2, result
    session_provider = gpu.session.get_providers()[0]
    result["model"] = {"label": gpu.label, "variant": gpu.precision, "provider": gpu.provider, "session_provider": session_provider,
                       "io_binding": gpu.provider == "cuda"}
    cpu = OnnxScorer(dataclasses.replace(base, providers=("cpu",), variant="fp32"))
    features = [f for _, f in sample_features(args.requests, seed=args.seed)]
    result["parity"] = parity(gpu, cpu, features[: args.parity_rows], args.tolerance)
    result["throughput"] = throughput(gpu, features, [int(b) for b in args.batches.split(",")], args.seconds)
    best = max(v["infer_decisions_per_s"] for v in result["throughput"].values())
    result["best_infer_decisions_per_s"] = best
    result["target_met"] = best >= TARGET_DECISIONS_PER_S
    on_cuda = session_provider == "CUDAExecutionProvider"
    result["checks"] = {"cuda_provider_active": on_cuda, "fp16_matches_cpu": result["parity"]["passed"],
                        "throughput_target": result["target_met"]}
    return (0 if on_cuda and result["parity"]["passed"] else 1), result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.gpu_check", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", default="", help="folder for gpu_check.json (default: $OUT, else loadtest/results/)")
    p.add_argument("--repository", default="", help="model repository (default: the shipped models/repository)")
    p.add_argument("--name", default="clef-flash")
    p.add_argument("--version", default="latest")
    p.add_argument("--variant", default="fp16", help="model file on the GPU (default fp16)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tolerance", type=float, default=0.02, help="largest allowed probability difference to the CPU (default 0.02)")
    p.add_argument("--batches", default="256,1024,4096", help="batch sizes for the throughput runs")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per batch size (default 5)")
    p.add_argument("--requests", type=int, default=8192, help="sample requests (default 8192)")
    p.add_argument("--parity-rows", type=int, default=2048)
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args(list(argv) if argv is not None else None)
    code, result = check(args)
    out = _out_dir(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gpu_check.json"
    result["exit_code"] = code
    path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    if "error" in result:
        print(f"gpu_check: {result['error']}", file=sys.stderr)
    else:
        m, par = result["model"], result["parity"]
        print(f"gpu_check: {m['label']} ({m['variant']}) on {m['session_provider']} — GPUs: {', '.join(result['gpus']) or 'unknown'}")
        print(f"  fp16 vs CPU fp32: max |Δp| {par['max_abs_diff']:.5f} (tolerance {par['tolerance']:g}) -> "
              f"{'ok' if par['passed'] else 'FAILED'}; class agreement {par['questions'].get('class', {}).get('argmax_agreement', 0):.4f}")
        for size, t in result["throughput"].items():
            print(f"  batch {size:>5}: {t['infer_decisions_per_s']:>12,.0f} decisions/s (inference), p50 {t['infer_p50_ms']:.3f} ms; "
                  f"{t['tokenize_infer_decisions_per_s']:>10,.0f}/s with tokenization")
        print(f"  target {TARGET_DECISIONS_PER_S:,.0f} decisions/s: {'met' if result['target_met'] else 'NOT met'}")
    print(f"gpu_check: results in {path}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
