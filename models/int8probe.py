"""Build ``gateway/data/int8probe.onnx``: the probe that tells whether onnxruntime's default CPU int8 kernel is exact.

onnxruntime's uint8 x int8 GEMM (the ``MatMulInteger`` the int8 export writes) is exact on CPUs with AVX-512 VNNI or
AVX-VNNI, but on AVX2-only CPUs it adds pairs of products in saturating 16-bit arithmetic. ``session.x64quantprecision``
makes it exact there, and costs 18-26% of batch-64 inference on a VNNI CPU where it changes no output. So the
gateway asks for it only where the default kernel is wrong: it runs this probe once per process
(``gateway.decider.int8probe``). The probe is one ``MatMulInteger`` node over constant int8 weights, shaped like the
model's (a [64, 96] x [96, 96] product), whose weights are also returned as a second output (cast to int32) so the
gateway can check the product against numpy without onnx. On an AVX2-only AMD EPYC, the default kernel gets
all 6,144 products of large operands wrong.

    python -m models.int8probe            # rewrites gateway/data/int8probe.onnx (seeded: the same file every time)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

PROBE_PATH = Path(__file__).resolve().parents[1] / "gateway" / "data" / "int8probe.onnx"
K = N = 96
SEED = 5


def probe_weights() -> np.ndarray:
    """The probe's int8 weights [K, N] (uniform over the whole int8 range)."""
    return np.random.default_rng(SEED).integers(-128, 128, size=(K, N), dtype=np.int8)


def build(path: Path = PROBE_PATH) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w", "a_zero"], ["y"]),
         helper.make_node("Cast", ["w"], ["weights"], to=TensorProto.INT32)],
        "int8probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, ["batch", K])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["batch", N]),
         helper.make_tensor_value_info("weights", TensorProto.INT32, [K, N])],
        initializer=[numpy_helper.from_array(probe_weights(), "w"), numpy_helper.from_array(np.array(0, dtype=np.uint8), "a_zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8, producer_name="clefgate-int8probe")
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=PROBE_PATH)
    args = p.parse_args(argv)
    print(build(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
