"""Model files for tests: a Clef-flash manifest in the shape the runtime reads, and a toy model that fits it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gateway import features as feat
from gateway.decider import manifest as mf


def write_flash_manifest(directory: Path, name: str, version: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``manifest.json`` for a ``model.onnx`` already in ``directory`` (fields override the defaults)."""
    raw: dict[str, Any] = {
        "name": name, "version": version, "family": "clef", "feature_version": feat.V1_VERSION,
        "feature_fingerprint": feat.V1_FINGERPRINT,
        "files": {"fp32": {"path": "model.onnx", "sha256": mf.file_sha256(directory / "model.onnx")}},
        "inputs": [{"name": "ids", "dtype": "int64", "shape": ["batch", "tokens"]},
                   {"name": "numeric", "dtype": "float32", "shape": ["batch", feat.NUM_FEATURES]}],
        "outputs": [{"name": "class_logits", "question": "class"}, {"name": "attack_kind_logits", "question": "attack_kind"}],
        "questions": [{"id": "class", "options": ["human", "good_bot", "bad_bot", "attack"]},
                      {"id": "attack_kind", "options": ["sqli", "xss", "traversal", "cmdi", "probe", "other"],
                       "given": {"question": "class", "option": "attack"}}],
        "temperature": {"class": 1.0, "attack_kind": 1.0},
        "opset": 17,
    }
    raw.update(fields or {})
    (directory / mf.MANIFEST_FILE).write_text(json.dumps(raw), encoding="utf-8")
    return raw


QUOTE_ID = ord("'") + feat.BYTE_OFFSET


def write_quote_model(root: Path, name: str, version: str, *, w_quote: Sequence[float] = (-8.0, -8.0, -8.0, 12.0),
                      b_kind: Sequence[float] = (2.0, 0.0, 0.0, 0.0, 0.0, 0.0), single_row: bool = False) -> Path:
    """A real ONNX model with the Clef-flash contract and its manifest, in ``root/name/version``.

    Its class logits are ``b_class`` (human) plus ``w_quote`` when the request text holds a single quote, and its
    attack kind logits are ``b_kind``. Built with onnx's helpers (no training), so tests of the model path are fast
    and their expected answers are known. ``single_row`` reshapes the class logits to one row: the model loads and
    scores one request, but fails on any larger batch (the warm-up runs batches of 8). Returns ``root``.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    directory = root / name / version
    directory.mkdir(parents=True, exist_ok=True)
    inits = [
        numpy_helper.from_array(np.array(QUOTE_ID, dtype=np.int64), "quote"),
        numpy_helper.from_array(np.array([w_quote], dtype=np.float32), "w_quote"),
        numpy_helper.from_array(np.array([4.0, 0.0, 0.0, -6.0], dtype=np.float32), "b_class"),
        numpy_helper.from_array(np.zeros((feat.NUM_FEATURES, 4), dtype=np.float32), "w_numeric"),
        numpy_helper.from_array(np.zeros((feat.NUM_FEATURES, 6), dtype=np.float32), "w_kind"),
        numpy_helper.from_array(np.array(b_kind, dtype=np.float32), "b_kind"),
    ]
    nodes = [
        helper.make_node("Equal", ["ids", "quote"], ["is_quote"]),
        helper.make_node("Cast", ["is_quote"], ["quote_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMax", ["quote_f"], ["has_quote"], axes=[1], keepdims=1),
        helper.make_node("MatMul", ["has_quote", "w_quote"], ["from_quote"]),
        helper.make_node("MatMul", ["numeric", "w_numeric"], ["from_numeric"]),
        helper.make_node("Add", ["from_quote", "from_numeric"], ["class_sum"]),
        helper.make_node("Add", ["class_sum", "b_class"], ["class_rows" if single_row else "class_logits"]),
        helper.make_node("MatMul", ["numeric", "w_kind"], ["kind_sum"]),
        helper.make_node("Add", ["kind_sum", "b_kind"], ["attack_kind_logits"]),
    ]
    if single_row:
        inits.append(numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "one_row"))
        nodes.append(helper.make_node("Reshape", ["class_rows", "one_row"], ["class_logits"]))
    graph = helper.make_graph(
        nodes, "toy",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("numeric", TensorProto.FLOAT, ["batch", feat.NUM_FEATURES])],
        [helper.make_tensor_value_info("class_logits", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("attack_kind_logits", TensorProto.FLOAT, ["batch", 6])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, directory / "model.onnx")
    write_flash_manifest(directory, name, version)
    return root
