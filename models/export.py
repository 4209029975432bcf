"""Export Clef-flash to ONNX (fp32, int8, fp16), check parity, write the repository version.

``python -m models.export --checkpoint models/work/clef-flash/model.pt`` re-exports a
trained checkpoint; training calls :func:`export_version` at its end.

- **fp32**: the reference graph, dynamic ``batch`` and ``tokens`` axes (opset 17).
- **int8**: dynamic quantization of every MatMul/Gemm weight, per output channel
  (per-tensor scales cost accuracy on the small projections). The trigram table
  stays fp32: a Gather costs nothing to run and its int8 version saves little.
- **fp16**: every float weight and op in half precision for CUDA, inputs and
  outputs kept fp32 so callers feed the same tensors.

The parity check runs onnxruntime on held-out inputs: fp32 must match torch to 1e-4
in probability; int8 and fp16 are compared with fp32 by probability (tolerance ~0.03)
and by the top class.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from gateway import features as feat
from gateway.decider import manifest as mf
from models.calibrate import softmax
from models.flash import QUESTIONS, FlashConfig, Net, build, input_names, output_names

OPSET = 17
FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx", "fp16": "model.fp16.onnx"}
QUESTION_DOCS = {
    "class": "What sent this request: a person in a browser, a crawler or client operators want, "
             "an unwanted bot (scraper, spoofed browser, AI/SEO crawler, credential stuffing), or an attack.",
    "attack_kind": "If it is an attack, which kind. Trained on attacks only: weigh it by P(class = attack).",
}


def export_fp32(net: Net, path: Path, opset: int = OPSET) -> None:
    """Trace ``net`` into an ONNX file with dynamic batch and token axes."""
    net = net.eval()
    ids = torch.randint(1, 300, (2, 2 * feat.BUCKET), dtype=torch.int64)
    numeric = torch.rand(2, net.cfg.numeric)
    dynamic = {"ids": {0: "batch", 1: "tokens"}, "numeric": {0: "batch"}}
    dynamic.update({name: {0: "batch"} for name in output_names()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (ids, numeric), str(path), input_names=list(input_names()), output_names=list(output_names()),
                          dynamic_axes=dynamic, opset_version=opset, dynamo=False, do_constant_folding=True)


def quantize_int8(src: Path, dst: Path, exclude: Sequence[str] = ()) -> None:
    """Per-channel dynamic int8 quantization of MatMul/Gemm weights (for CPU); the nodes named in ``exclude`` stay fp32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        quantize_dynamic(str(pre), str(dst), per_channel=True, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul", "Gemm"], nodes_to_exclude=list(exclude))


def convert_fp16(src: Path, dst: Path, exclude: Sequence[str] = ()) -> None:
    """Half-precision weights and ops (for CUDA); fp32 inputs and outputs, and the nodes named in ``exclude``."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(src))
    half = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=False, node_block_list=list(exclude) or None)
    onnx.save(half, str(dst))


def session(path: Path, providers: Sequence[str] = ("CPUExecutionProvider",), threads: int = 1) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=list(providers))


def _probs(outputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [softmax(np.asarray(o, dtype=np.float32)) for o in outputs]


def parity(net: Net, directory: Path, ids: np.ndarray, numeric: np.ndarray) -> dict[str, Any]:
    """Compare onnxruntime (each precision) with torch on the same inputs."""
    net = net.eval()
    with torch.no_grad():
        ref = _probs([t.numpy() for t in net(torch.from_numpy(ids), torch.from_numpy(numeric))])
    feed = {"ids": ids, "numeric": numeric}
    out: dict[str, Any] = {"rows": len(ids)}
    fp32 = None
    for precision, name in FILES.items():
        path = directory / name
        if not path.is_file():
            continue
        try:
            got = _probs(session(path).run(list(output_names()), feed))
        except Exception as exc:  # fp16 needs kernels the CPU provider may lack
            out[precision] = {"checked": False, "reason": f"{type(exc).__name__}: {str(exc)[:160]}"}
            continue
        if precision == "fp32":
            fp32 = got
        base = ref if precision == "fp32" else (fp32 or ref)
        diff = max(float(np.abs(a - b).max()) for a, b in zip(got, base, strict=True))
        agree = float(np.mean(got[0].argmax(1) == base[0].argmax(1)))
        out[precision] = {"checked": True, "max_abs_prob_diff": round(diff, 6), "class_agreement": round(agree, 5),
                          "against": "torch" if precision == "fp32" else "onnx fp32"}
    return out


def explain_block(net: Net) -> dict[str, Any]:
    """The linear numeric path of the class head: what ``explain`` multiplies."""
    w = net.explain_weight().detach().numpy()
    return {"question": "class", "numeric_names": list(feat.NUMERIC_NAMES),
            "weights": [[round(float(v), 6) for v in row] for row in w]}


def manifest_dict(*, name: str, version: str, cfg: FlashConfig, files: Mapping[str, Path], temperature: Mapping[str, float],
                  training_data: Mapping[str, Any], metrics: Mapping[str, Any], explain: Mapping[str, Any],
                  parity_report: Mapping[str, Any], opset: int = OPSET, channel: str = "stable",
                  policy: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """The manifest.json of one version (see ``gateway.decider.manifest``; ``channel``: stable or opt-in; ``policy``: the
    thresholds it was evaluated with, which the gateway compares with its config)."""
    questions: list[dict[str, Any]] = []
    for qid, options in QUESTIONS:
        q: dict[str, Any] = {"id": qid, "options": list(options), "description": QUESTION_DOCS[qid]}
        if qid == "attack_kind":
            q["given"] = {"question": "class", "option": "attack"}
        questions.append(q)
    return {
        "name": name,
        "version": version,
        "channel": channel,
        "family": mf.FAMILY,
        "feature_version": feat.V1_VERSION,
        "feature_fingerprint": feat.V1_FINGERPRINT,
        "tokenizer": {"kind": "bytes+phrases", "vocab_size": feat.VOCAB_SIZE, "phrases": len(feat.PHRASES),
                      "max_tokens": feat.MAX_TOKENS, "patch": feat.PATCH, "bucket": feat.BUCKET, "pad_id": feat.PAD_ID,
                      "encoder": "gateway.features.model_input"},
        "architecture": {"kind": "clef-flash", **cfg.to_dict()},
        "files": {p: {"path": path.name, "sha256": mf.file_sha256(path), "size": path.stat().st_size} for p, path in files.items()},
        "inputs": [{"name": "ids", "dtype": "int64", "shape": ["batch", "tokens"]},
                   {"name": "numeric", "dtype": "float32", "shape": ["batch", feat.NUM_FEATURES]}],
        "outputs": [{"name": f"{qid}_logits", "question": qid} for qid, _ in QUESTIONS],
        "questions": questions,
        "temperature": {k: round(float(v), 5) for k, v in temperature.items()},
        "explain": dict(explain),
        "training_data": dict(training_data),
        "metrics": dict(metrics),
        "parity": dict(parity_report),
        "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "opset": opset,
        **({"policy": dict(policy)} if policy else {}),
    }


def export_version(checkpoint: Mapping[str, Any], repository: Path, *, sample: tuple[np.ndarray, np.ndarray],
                   precisions: Sequence[str] = ("fp32", "int8", "fp16"), extra_files: Mapping[str, Path] | None = None,
                   opset: int = OPSET) -> Path:
    """Write ``repository/<name>/<version>/`` atomically: model files, manifest, extra files.

    The version is built in a temporary folder beside it and renamed into place, so a
    reader never sees half a model; an existing folder of the same version is replaced.
    The checkpoint's ``channel`` ("opt-in" keeps the version out of ``latest``, see
    ``gateway.decider.manifest.resolve``) and ``policy`` (the thresholds it was evaluated with) go
    into the manifest.
    """
    cfg = FlashConfig(**checkpoint["config"])
    net = build(cfg)
    net.load_state_dict(checkpoint["state_dict"])
    net.eval()
    name, version = checkpoint["name"], checkpoint["version"]
    final = repository / name / version
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=final.parent))
    try:
        files: dict[str, Path] = {}
        export_fp32(net, tmp / FILES["fp32"], opset)
        files["fp32"] = tmp / FILES["fp32"]
        if "int8" in precisions:
            quantize_int8(files["fp32"], tmp / FILES["int8"])
            files["int8"] = tmp / FILES["int8"]
        if "fp16" in precisions:
            convert_fp16(files["fp32"], tmp / FILES["fp16"])
            files["fp16"] = tmp / FILES["fp16"]
        if "fp32" not in precisions:
            files.pop("fp32").unlink()
        for target, src in (extra_files or {}).items():
            shutil.copyfile(src, tmp / target)
        report = parity(net, tmp, *sample)
        manifest = manifest_dict(name=name, version=version, cfg=cfg, files=files, temperature=checkpoint["temperature"],
                                 training_data=checkpoint.get("training_data", {}), metrics=checkpoint.get("metrics", {}),
                                 explain=explain_block(net), parity_report=report, opset=opset,
                                 channel=checkpoint.get("channel", "stable"), policy=checkpoint.get("policy") or None)
        (tmp / mf.MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o755)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def sample_inputs(inputs: Sequence[feat.ModelInput], rows: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """A parity batch: up to ``rows`` inputs, padded like the runtime pads them."""
    return feat.pad_batch(list(inputs[:rows]))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m models.export``: re-export a checkpoint written by ``models.train``."""
    ap = argparse.ArgumentParser(prog="python -m models.export", description="Export a Clef-flash checkpoint to the model repository.")
    ap.add_argument("--checkpoint", type=Path, required=True, help="model.pt written by models.train")
    ap.add_argument("--repository", type=Path, default=Path("models/repository"), help="model repository folder")
    ap.add_argument("--version", default=None, help="version folder to write (default: the checkpoint's)")
    ap.add_argument("--sample", type=Path, default=None, help="JSONL records for the parity check (default: generated)")
    ap.add_argument("--channel", choices=mf.CHANNELS, default=None,
                    help="default: the checkpoint's (its training config's export.channel). opt-in: configs must name the "
                         "version; 'latest' keeps resolving to the highest stable one")
    args = ap.parse_args(argv)
    checkpoint = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    if args.version:
        checkpoint["version"] = args.version
    if args.channel is not None:
        checkpoint["channel"] = args.channel
    if args.sample is not None:
        from models.data.formats import read_jsonl
        records = list(read_jsonl(args.sample))[:256]
    else:
        from models.data.generate import generate
        records = list(generate("eval", 256, seed=11))
    inputs = [feat.model_input(feat.from_record(r)) for r in records]
    path = export_version(checkpoint, args.repository, sample=sample_inputs(inputs))
    report = json.loads((path / mf.MANIFEST_FILE).read_text())["parity"]
    print(f"exported {checkpoint['name']}@{checkpoint['version']} to {path}; parity {json.dumps(report)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
