"""The feature contract: version, fingerprint, and one request's model input.

Everything the model reads is produced by :func:`model_input` — the serialization
(``serialization``), its token ids (``encoding``) and the numeric vector
(``numeric``) — and serving and training both call it. Any change to those three
modules' tables or logic must bump ``FEATURE_VERSION``: a model trained on version N is
refused by a runtime at version M. ``FEATURE_FINGERPRINT`` hashes the tables, so a table
edited without a version bump is caught too (the manifest records both).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gateway.features.encoding import (
    BUCKET,
    MAX_TOKENS,
    PATCH,
    PHRASE_OFFSET,
    PHRASES,
    VOCAB_SIZE,
    _coded_header_line,
    bucket_length,
    encode,
)
from gateway.features.numeric import NUM_FEATURES, NUMERIC_NAMES, ORDER_TEMPLATES, _name_facts, _ua_facts, numeric_vector
from gateway.features.request import Features
from gateway.features.serialization import INFRA_HEADERS, OWN_LINE_HEADERS, serialize

FEATURE_VERSION = "1"

FEATURE_FINGERPRINT = hashlib.sha256(json.dumps(
    [FEATURE_VERSION, MAX_TOKENS, PATCH, BUCKET, VOCAB_SIZE, PHRASE_OFFSET, list(PHRASES), NUMERIC_NAMES,
     ORDER_TEMPLATES, sorted(INFRA_HEADERS), sorted(OWN_LINE_HEADERS)]).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ModelInput:
    """What the model reads about one request: the text, its token ids and the numeric vector.

    ``text`` and ``numeric`` are what the decision log records (the training feed);
    ``ids`` is ``encode(text)``.
    """

    text: str
    ids: np.ndarray
    numeric: tuple[float, ...]

    def cache_key(self) -> str:
        """A stable digest of the model-relevant input.

        Numeric values are rounded to two decimals so that per-client statistics
        that drift a little do not defeat a decision cache.
        """
        h = hashlib.blake2b(self.text.encode("utf-8", "surrogatepass"), digest_size=16)
        h.update(",".join(f"{v:.2f}" for v in self.numeric).encode())
        return h.hexdigest()

    def to_json(self) -> dict[str, Any]:
        """The decision-log form: feature version, text and numeric vector (ids are re-derived)."""
        return {"feature_version": FEATURE_VERSION, "text": self.text, "numeric": [round(v, 5) for v in self.numeric]}

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> ModelInput | None:
        """The inverse of ``to_json``; None when it was written by another feature version."""
        if obj.get("feature_version") != FEATURE_VERSION:
            return None
        text, numeric = obj.get("text"), obj.get("numeric")
        if not isinstance(text, str) or not isinstance(numeric, list) or len(numeric) != NUM_FEATURES:
            return None
        return ModelInput(text, encode(text), tuple(float(v) for v in numeric))


def cache_stats() -> dict[str, tuple[int, int, int, int]]:
    """The featurizer's bounded caches: name -> (entries, capacity, hits, misses) since the process started."""
    out = {}
    for name, cached in (("header_lines", _coded_header_line), ("header_names", _name_facts), ("user_agents", _ua_facts)):
        info = cached.cache_info()
        out[name] = (info.currsize, info.maxsize or 0, info.hits, info.misses)
    return out


def model_input(features: Features) -> ModelInput:
    """Serialize, encode and vectorize one request (the only path from Features to the model)."""
    text = serialize(features)
    return ModelInput(text, encode(text), tuple(numeric_vector(features)))


def model_inputs(batch: Sequence[Features]) -> list[ModelInput]:
    """``model_input`` for a batch: the same inputs, each step run over the whole batch in turn.

    Serializing, encoding and vectorizing request by request interleaves three code paths
    (regex scans and LRU caches on one side, the numeric vector's on the other) that evict
    each other from the CPU's caches and branch predictors; one step at a time over 64
    requests costs about a fifth less per request (1.08-1.20x at batch 64). For
    batch callers (``OnnxScorer.run_batch``, ``clefgate eval``); the proxy featurizes each
    request as it arrives, where this does not apply.
    """
    if len(batch) == 1:
        return [model_input(batch[0])]
    texts = [serialize(f) for f in batch]
    ids = [encode(t) for t in texts]
    numeric = [tuple(numeric_vector(f)) for f in batch]
    return [ModelInput(t, i, n) for t, i, n in zip(texts, ids, numeric, strict=True)]


def pad_batch(inputs: Sequence[ModelInput]) -> tuple[np.ndarray, np.ndarray]:
    """Stack inputs into the model's tensors: ``ids`` int64 [B, L] and ``numeric`` float32 [B, N].

    ``L`` is the batch's longest sequence rounded up to the bucket; shorter rows are
    padded with ``PAD_ID`` (the model masks padding).
    """
    if not inputs:
        return np.zeros((0, BUCKET), dtype=np.int64), np.zeros((0, NUM_FEATURES), dtype=np.float32)
    length = bucket_length(max(len(i.ids) for i in inputs))
    ids = np.zeros((len(inputs), length), dtype=np.int64)
    for row, item in enumerate(inputs):
        ids[row, : len(item.ids)] = item.ids
    numeric = np.array([i.numeric for i in inputs], dtype=np.float32)
    return ids, numeric
