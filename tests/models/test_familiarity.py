"""The payload head's familiarity: Mahalanobis statistics fit after training, shipped in the payload graph, read by the runtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from gateway import features as feat
from gateway.decider import manifest as mf
from gateway.decider.onnx import DEFAULT_REPOSITORY, OnnxOptions, OnnxScorer
from gateway.features import split
from gateway.verdict import FAMILIARITY, distance_ratio
from models import train_split
from models.data.generate import generate, write_jsonl
from models.data.sources import Split
from models.export import convert_fp16, quantize_int8
from models.flash_split import (
    FAMILIARITY_OUTPUT,
    Familiarity,
    HalfConfig,
    PayloadGraph,
    SplitConfig,
    SplitNet,
    fit_familiarity,
    ledoit_wolf,
)
from tests.conftest import make_features

TINY_HALF = HalfConfig(width=16, layers=1, heads=2, ffn=32, embed=8, head_hidden=16, dropout=0.0, trigram_buckets=256)


def two_clusters(rows: int, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Two classes in 6 dimensions with a shared, strongly anisotropic covariance."""
    rng = np.random.default_rng(seed)
    scale = np.array([3.0, 2.0, 1.0, 0.5, 0.2, 0.05])
    labels = ["benign" if i % 3 else "attack" for i in range(rows)]
    means = {"benign": np.zeros(6), "attack": np.array([4.0, -3.0, 0, 0, 0, 0])}
    return np.stack([means[lab] + rng.normal(size=6) * scale for lab in labels]), labels


def mahalanobis(x: np.ndarray, reps: np.ndarray, labels: list[str], alpha: float) -> np.ndarray:
    """The textbook distance, with an explicit inverse: what the fit must compute."""
    classes = sorted(set(labels))
    y = np.array([classes.index(lab) for lab in labels])
    mus = np.stack([reps[y == k].mean(0) for k in range(len(classes))])
    resid = reps - mus[y]
    s = resid.T @ resid / len(reps)
    cov = (1 - alpha) * s + alpha * np.trace(s) / s.shape[0] * np.eye(s.shape[0])
    precision = np.linalg.inv(cov)
    d2 = np.stack([np.einsum("nd,de,ne->n", x - mu, precision, x - mu) for mu in mus], 1)
    return np.sqrt(d2.min(1))


def test_the_fit_is_the_mahalanobis_distance_to_the_nearest_class_mean() -> None:
    reps, labels = two_clusters(3000)
    fit = fit_familiarity(reps, labels, shrinkage=0.01)
    assert fit.classes == ("attack", "benign") and fit.rows == 3000 and fit.shrinkage == 0.01
    probe = np.concatenate([reps[:50], reps[:50] + np.array([0, 0, 0, 0, 0, 1.0])])
    assert fit.distance(probe) == pytest.approx(mahalanobis(probe, reps, labels, 0.01), rel=1e-9)


def test_an_in_distribution_vector_is_familiar_and_a_far_one_is_not() -> None:
    reps, labels = two_clusters(4000)
    fit = fit_familiarity(reps[:3000], labels[:3000])
    threshold = float(np.quantile(fit.distance(reps[3000:]), 0.995))  # calibration rows the fit did not see
    near = np.array([[0.5, -0.5, 0.2, 0.1, 0.0, 0.0], [4.0, -3.0, 0.0, 0.0, 0.0, 0.0]])
    # far along the direction the training rows hardly vary in, though close in plain Euclidean terms
    far = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 1.5], [2.0, -1.5, 0.0, 0.0, 3.0, 0.0]])
    assert (fit.distance(near) < threshold).all()
    assert (fit.distance(far) > threshold).all()
    assert np.linalg.norm(far[0]) < np.linalg.norm(near[1])


def test_shrinkage_is_chosen_by_ledoit_wolf_and_keeps_few_rows_invertible() -> None:
    sklearn = pytest.importorskip("sklearn.covariance")
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 12)) * np.linspace(0.1, 3, 12)
    x -= x.mean(0)
    assert ledoit_wolf(x) == pytest.approx(sklearn.ledoit_wolf_shrinkage(x, assume_centered=True), rel=1e-9)
    # fewer rows than dimensions: the sample covariance is singular, the shrunk one is not
    few = rng.normal(size=(5, 12))
    fit = fit_familiarity(few, ["benign"] * 5)
    assert 0 < fit.shrinkage <= 1 and np.isfinite(fit.distance(rng.normal(size=(3, 12)))).all()
    with pytest.raises(ValueError):
        fit_familiarity(few, ["benign"] * 4)


def tiny_net(seed: int = 0) -> SplitNet:
    torch.manual_seed(seed)
    return SplitNet(SplitConfig(TINY_HALF, TINY_HALF)).eval()


def random_rows(rows: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 300, (rows, length), dtype=torch.int64, generator=gen)
    return ids, torch.rand(rows, split.NUM_PAYLOAD, generator=gen)


def test_the_onnx_payload_graph_computes_the_distance_in_fp32_in_every_file(tmp_path: Path) -> None:
    net = tiny_net()
    with torch.no_grad():
        train_ids, train_num = random_rows(300, feat.BUCKET, 1)
        logits, reps = net.payload.outputs(train_ids, train_num)
        assert torch.equal(logits[0], net.payload(train_ids, train_num)[0])  # the refactored head answers as before
        fit = fit_familiarity(reps.numpy(), ["benign" if i % 2 else "attack" for i in range(300)])
        graph = PayloadGraph(net.payload, Familiarity(fit)).eval()
        ids, numeric = random_rows(64, 2 * feat.BUCKET, 2)
        want_logits, want_reps = net.payload.outputs(ids, numeric)
        torch_distance = graph(ids, numeric)[-1].numpy()
    want = fit.distance(want_reps.numpy())
    np.testing.assert_allclose(torch_distance, want, rtol=1e-4)
    fp32 = tmp_path / "model.onnx"
    outputs = ["payload_logits", "attack_kind_logits", FAMILIARITY_OUTPUT]
    axes = {"ids": {0: "batch", 1: "tokens"}, "numeric": {0: "batch"}} | {o: {0: "batch"} for o in outputs}
    torch.onnx.export(graph, (ids[:2], numeric[:2]), str(fp32), input_names=["ids", "numeric"], output_names=outputs,
                      opset_version=train_split.OPSET, dynamic_axes=axes, dynamo=False)
    keep = train_split.familiarity_nodes(fp32)
    assert keep and any(n.endswith("MatMul") for n in keep)
    quantize_int8(fp32, tmp_path / "model.int8.onnx", exclude=keep)
    convert_fp16(fp32, tmp_path / "model.fp16.onnx", exclude=keep)
    session = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"])
    got_logits, _, got = session.run(outputs, {"ids": ids.numpy(), "numeric": numeric.numpy()})
    np.testing.assert_allclose(got, want, rtol=1e-4)
    np.testing.assert_allclose(got_logits, want_logits[0].numpy(), atol=1e-4)
    # without the extra output asked for, the graph answers the questions alone (what an older runtime asks)
    alone = session.run(outputs[:2], {"ids": ids.numpy(), "numeric": numeric.numpy()})
    np.testing.assert_allclose(alone[0], got_logits, atol=1e-6)
    int8 = onnx.load(str(tmp_path / "model.int8.onnx")).graph
    assert [n.op_type for n in int8.node if n.name in keep and "MatMul" in n.op_type] == ["MatMul"]
    assert any(n.op_type == "MatMulInteger" for n in int8.node)  # the encoder is quantized
    half = onnx.load(str(tmp_path / "model.fp16.onnx")).graph
    floats = {i.name: i.data_type for i in half.initializer}
    assert floats["familiarity.whiten"] == onnx.TensorProto.FLOAT and floats["familiarity.means"] == onnx.TensorProto.FLOAT
    for name in ("model.int8.onnx", "model.fp16.onnx"):
        other = ort.InferenceSession(str(tmp_path / name), providers=["CPUExecutionProvider"])
        (distance,) = other.run([FAMILIARITY_OUTPUT], {"ids": ids.numpy(), "numeric": numeric.numpy()})
        assert distance.dtype == np.float32 and distance.shape == (64,) and np.isfinite(distance).all()


def split_config(tmp_path: Path) -> Path:
    config = tmp_path / "tiny-split.yaml"
    half = "\n".join(f"  {k}: {v}" for k, v in TINY_HALF.__dict__.items())
    config.write_text(f"name: clef-flash-tiny\nversion: \"0.0.3\"\nseed: 5\nrepository: {tmp_path / 'repo'}\n"
                      f"payload:\n{half}\nclient:\n{half}\n"
                      "train:\n  epochs: 1\n  batch_size: 32\n  warmup_steps: 5\n  validation_share: 0.1\n  max_minutes: 2\n"
                      "familiarity:\n  quantile: 0.99\n  min_rows: 10\n")
    return config


def test_a_training_run_fits_thresholds_and_ships_the_familiarity(tmp_path: Path) -> None:
    sides: tuple[tuple[Split, int, int], ...] = (("train", 360, 1), ("calib", 160, 2), ("eval", 160, 3))
    for side, rows, seed in sides:
        write_jsonl(generate(side, rows, seed=seed), tmp_path / f"{side}.jsonl")
    report = tmp_path / "report.json"
    assert train_split.main(["--config", str(split_config(tmp_path)), "--train", str(tmp_path / "train.jsonl"),
                             "--calib", str(tmp_path / "calib.jsonl"), "--eval", str(tmp_path / "eval.jsonl"),
                             "--report", str(report)]) == 0
    directory = tmp_path / "repo" / "clef-flash-tiny" / "0.0.3"
    raw = json.loads((directory / mf.MANIFEST_FILE).read_text())
    block = raw["familiarity"]
    assert block["output"] == FAMILIARITY_OUTPUT and block["threshold"] > 0 and block["quantile"] == 0.99
    assert "benign" in block["classes"] and any(c.startswith("attack") for c in block["classes"])
    assert block["calibration_rows"] == 160 and 0 < block["training_rows"] <= 360
    assert raw["outputs"] == [{"name": f"{q}_logits", "question": q} for q in ("payload", "attack_kind", "client")]
    assert raw["metrics"]["parity"]["distance_fp32"] <= 1e-3
    assert raw["metrics"]["familiarity"]["calibration_unfamiliar"] <= 0.02
    assert "unfamiliar" in next(iter(json.loads(report.read_text())["tables"]["attack_family"].values()))
    m = mf.load(directory, feature_version=feat.FEATURE_VERSION, feature_fingerprint=feat.FEATURE_FINGERPRINT)
    assert m.familiarity is not None and m.familiarity.threshold == block["threshold"]
    for precision in ("fp32", "int8", "fp16"):
        outputs = [o.name for o in ort.InferenceSession(str(m.path(precision)), providers=["CPUExecutionProvider"]).get_outputs()]
        assert outputs == ["payload_logits", "attack_kind_logits", FAMILIARITY_OUTPUT]
    scorer = OnnxScorer(OnnxOptions(repository=tmp_path / "repo", name="clef-flash-tiny", providers=("cpu",), variant="fp32",
                                    warmup_runs=1))
    requests = [make_features("GET", "/search?q=shoes"), make_features("POST", "/wp-json/beacon", body=b"\x00" * 300)]
    answers = scorer.run_batch(requests)
    for p in answers:
        assert set(p[FAMILIARITY]) == {"familiar", "unfamiliar"} and sum(p[FAMILIARITY].values()) == pytest.approx(1.0)
        assert distance_ratio(p) is not None
    # the runtime's share d / (d + threshold) is the graph's distance, read back
    inputs = scorer.model_inputs(requests)
    ids, numeric = feat.pad_ids([i.ids for i in inputs]), np.array([i.numeric for i in inputs], dtype=np.float32)
    (distance,) = scorer.session.run([FAMILIARITY_OUTPUT], {"ids": ids, "numeric": numeric})
    got = np.array([distance_ratio(p) for p in answers], dtype=np.float64)
    np.testing.assert_allclose(got, distance / block["threshold"], rtol=1e-5)


def _shipped_copy(tmp_path: Path, edit: dict[str, Any], drop: tuple[str, ...] = ()) -> Path:
    """The shipped default's fp32 graphs under ``tmp_path`` as version 2.0.1, its manifest with ``edit`` applied."""
    source = mf.resolve(DEFAULT_REPOSITORY, "clef-flash")
    copy = tmp_path / "clef-flash" / "2.0.1"
    copy.mkdir(parents=True)
    raw = json.loads((source / mf.MANIFEST_FILE).read_text())
    for spec in (*raw["files"].values(), *raw["client_files"].values()):
        if spec["path"].endswith(".onnx") and ".int8." not in spec["path"] and ".fp16." not in spec["path"]:
            shutil.copyfile(source / spec["path"], copy / spec["path"])
    raw["files"] = {"fp32": raw["files"]["fp32"]}
    raw["client_files"] = {"fp32": raw["client_files"]["fp32"]}
    raw = {k: v for k, v in raw.items() if k not in drop}
    (copy / mf.MANIFEST_FILE).write_text(json.dumps({**raw, "version": "2.0.1", **edit}))
    return tmp_path


def _scorer(repository: Path) -> OnnxScorer:
    return OnnxScorer(OnnxOptions(repository=repository, name="clef-flash", version="2.0.1", providers=("cpu",),
                                  variant="fp32", warmup_runs=1))


def test_the_shipped_default_answers_with_its_familiarity() -> None:
    scorer = OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1))
    assert scorer.manifest.familiarity is not None
    (p,) = scorer.run_batch([make_features("GET", "/search?q=shoes")])
    ratio = distance_ratio(p)
    assert ratio is not None and 0 < ratio < 1     # a plain search is familiar


def test_a_manifest_without_the_field_serves_no_familiarity(tmp_path: Path) -> None:
    """A manifest from before the statistics (2.0.0 had none): it loads, and its answers carry no familiarity
    (so nothing abstains)."""
    scorer = _scorer(_shipped_copy(tmp_path, {}, drop=("familiarity",)))
    assert scorer.manifest.familiarity is None
    (p,) = scorer.run_batch([make_features("GET", "/search?q=shoes")])
    assert FAMILIARITY not in p and distance_ratio(p) is None


def test_a_manifest_that_names_an_output_its_graph_lacks_is_refused(tmp_path: Path) -> None:
    repository = _shipped_copy(tmp_path, {"familiarity": {"output": "no_such_output", "threshold": 5.0}})
    with pytest.raises(mf.ManifestError, match=r"familiarity\.output: the payload graph has no output 'no_such_output'"):
        _scorer(repository)
