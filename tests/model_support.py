"""Model files for tests: a Clef-flash manifest in the shape the runtime reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway import features as feat
from gateway.decider import manifest as mf


def write_flash_manifest(directory: Path, name: str, version: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``manifest.json`` for a ``model.onnx`` already in ``directory`` (fields override the defaults)."""
    raw: dict[str, Any] = {
        "name": name, "version": version, "family": "clef", "feature_version": feat.FEATURE_VERSION,
        "feature_fingerprint": feat.FEATURE_FINGERPRINT,
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
