"""Whether onnxruntime's default CPU int8 kernel computes exact products on this CPU (asked once per process).

The int8 models' ``MatMulInteger`` runs onnxruntime's uint8 x int8 GEMM. With AVX-512 VNNI or AVX-VNNI its products are
exact; on AVX2-only CPUs the kernel adds pairs of products in saturating 16-bit arithmetic, and the model serves other
answers than the ones it was measured with (on an AVX2-only AMD EPYC 1.7.0 blocked 14.30% of the REST-writes
set, 14.47% measured). The session entry ``session.x64quantprecision`` makes the products exact there, but it is not
free where the default kernel is already exact: 18-26% of batch-64 inference on an AVX-512 VNNI AMD EPYC, with not one
logit changed. So the runtime asks for it only where this probe finds the default kernel wrong.

The probe (``gateway/data/int8probe.onnx``, built by ``python -m models.int8probe``) is one ``MatMulInteger`` node shaped
like the models' products, over large operands that a saturating kernel gets wrong; it also returns its weights, so the
check is a numpy integer product and needs no onnx package. Any failure to run it counts as "not exact", which only
costs speed.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np
import onnxruntime as ort

log = logging.getLogger("clefgate.decider.int8probe")

# onnxruntime's session config entry for exact uint8 x int8 GEMM on x86 CPUs without VNNI
EXACT_INT8_ENTRY = "session.x64quantprecision"
PROBE_PATH = Path(__file__).resolve().parents[1] / "data" / "int8probe.onnx"


def probe_activations(rows: int = 64, k: int = 96) -> np.ndarray:
    """Large uint8 activations (200..255, no RNG): pairs of their products with int8 weights overflow 16 bits."""
    i, j = np.indices((rows, k))
    return (200 + (i * 7 + j * 13) % 56).astype(np.uint8)


def wrong_products(extra: dict[str, str] | None = None, path: Path = PROBE_PATH) -> int:
    """How many of the probe's products a CPU session (with ``extra`` config entries) gets wrong; raises if it cannot run."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    for key, value in (extra or {}).items():
        so.add_session_config_entry(key, value)
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    a = probe_activations(k=session.get_inputs()[0].shape[1])  # the inner dimension as the probe file has it
    y, weights = session.run(["y", "weights"], {"a": a})
    expected = a.astype(np.int64) @ weights.astype(np.int64)
    return int(np.count_nonzero(y.astype(np.int64) != expected))


@functools.cache
def default_kernel_exact() -> bool:
    """True when onnxruntime's default CPU int8 products are exact here (then no extra setting is needed)."""
    try:
        wrong = wrong_products()
    except Exception as exc:  # a missing or unreadable probe: ask for exact products, which only costs speed
        log.warning("int8 probe could not run (%s: %s); asking onnxruntime for exact int8 products", type(exc).__name__, exc)
        return False
    if wrong:
        log.info("onnxruntime's default int8 kernel got %d probe products wrong on this CPU (no VNNI); "
                 "CPU sessions run with %s", wrong, EXACT_INT8_ENTRY)
    return wrong == 0


def session_entry(session: ort.InferenceSession, key: str = EXACT_INT8_ENTRY) -> str | None:
    """A session's config entry, or None when it was never set (onnxruntime raises for those)."""
    try:
        return session.get_session_options().get_session_config_entry(key)
    except Exception:
        return None


def applies(options: ort.SessionOptions) -> bool:
    """Whether the entry can act under these options: onnxruntime applies it in a graph rewrite (int8 weights to uint8)
    that runs only at graph optimization level ``extended`` or ``all``."""
    return int(options.graph_optimization_level) >= int(ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)


def kernel(session: ort.InferenceSession) -> str | None:
    """Which int8 kernel a session runs, for ``/health``: ``x64quantprecision`` (asked for, because the default one is
    wrong on this CPU, and in effect), ``default``, or None for a session off the CPU."""
    if session.get_providers()[0] != "CPUExecutionProvider":
        return None
    in_effect = session_entry(session) is not None and applies(session.get_session_options())
    return "x64quantprecision" if in_effect else "default"


def products_exact(session: ort.InferenceSession) -> bool:
    """Whether a CPU session's int8 products are exact: the default kernel is, here, or the exact one is in effect."""
    return kernel(session) == "x64quantprecision" or default_kernel_exact()


def exact_int8_entries() -> dict[str, str]:
    """The CPU session config entries that make int8 products exact on this CPU (none where they already are)."""
    return {} if default_kernel_exact() else {EXACT_INT8_ENTRY: "1"}
