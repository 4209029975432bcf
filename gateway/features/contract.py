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
from typing import Any, TypeGuard

import numpy as np

from gateway.features import split
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

# Version 1: one text and one numeric vector for both questions (``serialize``, ``numeric_vector``), read by
# clef-flash 1.x. Version 2: the payload and the client as two inputs with nothing in common (``split``), read by
# clef-flash 2.x. The runtime featurizes for the version a model's manifest names (``featurize``).
V1_VERSION = "1"
V1_FINGERPRINT = hashlib.sha256(json.dumps(
    [V1_VERSION, MAX_TOKENS, PATCH, BUCKET, VOCAB_SIZE, PHRASE_OFFSET, list(PHRASES), NUMERIC_NAMES,
     ORDER_TEMPLATES, sorted(INFRA_HEADERS), sorted(OWN_LINE_HEADERS)]).encode()).hexdigest()[:16]

FEATURE_VERSION = "2"
FEATURE_FINGERPRINT = hashlib.sha256(json.dumps(
    [FEATURE_VERSION, MAX_TOKENS, PATCH, BUCKET, VOCAB_SIZE, PHRASE_OFFSET, list(PHRASES), split.TABLES]).encode()).hexdigest()[:16]

# feature version -> fingerprint of its tables: every version this runtime can featurize for
SUPPORTED_VERSIONS: dict[str, str] = {V1_VERSION: V1_FINGERPRINT, FEATURE_VERSION: FEATURE_FINGERPRINT}
# feature version -> (model input names, numeric width per numeric input)
INPUT_NAMES: dict[str, tuple[str, ...]] = {V1_VERSION: ("ids", "numeric"),
                                           FEATURE_VERSION: ("ids", "numeric", "client_ids", "client_numeric")}
NUMERIC_WIDTHS: dict[str, dict[str, int]] = {V1_VERSION: {"numeric": NUM_FEATURES},
                                             FEATURE_VERSION: {"numeric": split.NUM_PAYLOAD, "client_numeric": split.NUM_CLIENT}}


@dataclass(frozen=True, slots=True)
class ModelInput:
    """What the model reads about one request: the text, its token ids and the numeric vector.

    ``text`` and ``numeric`` are what the decision log records (the training feed);
    ``ids`` is ``encode(text)``. At feature version 2 they are the payload input, and
    ``client_text`` / ``client_ids`` / ``client_numeric`` the client input.
    """

    text: str
    ids: np.ndarray
    numeric: tuple[float, ...]
    client_text: str = ""
    client_ids: np.ndarray | None = None
    client_numeric: tuple[float, ...] = ()
    version: str = V1_VERSION

    def cache_key(self) -> str:
        """A stable digest of the model-relevant input.

        Numeric values are rounded to two decimals so that per-client statistics
        that drift a little do not defeat a decision cache.
        """
        h = hashlib.blake2b(self.text.encode("utf-8", "surrogatepass"), digest_size=16)
        h.update(",".join(f"{v:.2f}" for v in self.numeric).encode())
        if self.version != V1_VERSION:
            h.update(b"\0" + self.client_text.encode("utf-8", "surrogatepass"))
            h.update(",".join(f"{v:.2f}" for v in self.client_numeric).encode())
        return h.hexdigest()

    def client_key(self) -> bytes:
        """The client answer's cache key: the client input itself (the client's fingerprint) and its
        window statistics rounded to one decimal, so a client's next request reuses the answer."""
        h = hashlib.blake2b(self.client_text.encode("utf-8", "surrogatepass"), digest_size=16)
        raw = self.client_numeric
        values = tuple(raw.tolist() if hasattr(raw, "tolist") else raw)
        h.update((",".join(["%.1f"] * len(values)) % values).encode())  # one format call, the same bytes
        return h.digest()

    def to_json(self) -> dict[str, Any]:
        """The decision-log form: feature version, text(s) and numeric vector(s) (ids are re-derived)."""
        out: dict[str, Any] = {"feature_version": self.version, "text": self.text, "numeric": [round(v, 5) for v in self.numeric]}
        if self.version != V1_VERSION:
            out["client_text"] = self.client_text
            out["client_numeric"] = [round(v, 5) for v in self.client_numeric]
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any], version: str | None = None) -> ModelInput | None:
        """The inverse of ``to_json``; None when it was written by a feature version this runtime does not read
        (or by another one than ``version``, when given)."""
        written = obj.get("feature_version")
        if written not in SUPPORTED_VERSIONS or (version is not None and written != version):
            return None
        text, numeric = obj.get("text"), obj.get("numeric")
        widths = NUMERIC_WIDTHS[str(written)]
        if not isinstance(text, str) or not _numbers(numeric, widths["numeric"]):
            return None
        if written == V1_VERSION:
            return ModelInput(text, encode(text), tuple(float(v) for v in numeric))
        ctext, cnumeric = obj.get("client_text"), obj.get("client_numeric")
        if not isinstance(ctext, str) or not _numbers(cnumeric, widths["client_numeric"]):
            return None
        return ModelInput(text, encode(text), tuple(float(v) for v in numeric), ctext, encode(ctext),
                          tuple(float(v) for v in cnumeric), FEATURE_VERSION)


def _numbers(value: Any, width: int) -> TypeGuard[list[Any]]:
    # the values themselves are converted with float(): a broken one raises, and readers count the line as unreadable
    return isinstance(value, list) and len(value) == width


def cache_stats() -> dict[str, tuple[int, int, int, int]]:
    """The featurizer's bounded caches: name -> (entries, capacity, hits, misses) since the process started."""
    out = {}
    for name, cached in (("header_lines", _coded_header_line), ("header_names", _name_facts), ("user_agents", _ua_facts),
                         ("client_agents", split.ua_facts)):
        info = cached.cache_info()
        out[name] = (info.currsize, info.maxsize or 0, info.hits, info.misses)
    return out


def model_input(features: Features) -> ModelInput:
    """Serialize, encode and vectorize one request at feature version 1 (clef-flash 1.x)."""
    text = serialize(features)
    return ModelInput(text, encode(text), tuple(numeric_vector(features)))


def split_input(features: Features) -> ModelInput:
    """The payload and the client inputs of one request at feature version 2 (clef-flash 2.x)."""
    text, decoded, values = split.payload_parts(features)
    ctext = split.client_text(features)
    return ModelInput(text, encode(text), tuple(split.payload_vector(features, values, decoded)), ctext, encode(ctext),
                      tuple(split.client_vector(features)), FEATURE_VERSION)


def featurize(features: Features, version: str = FEATURE_VERSION) -> ModelInput:
    """The model input of one request for a model of feature ``version`` (the only path from Features to a model)."""
    return split_input(features) if version == FEATURE_VERSION else model_input(features)


def featurize_batch(batch: Sequence[Features], version: str = FEATURE_VERSION) -> list[ModelInput]:
    """``featurize`` for a batch."""
    return [split_input(f) for f in batch] if version == FEATURE_VERSION else model_inputs(batch)


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


def pad_ids(rows: Sequence[np.ndarray | None]) -> np.ndarray:
    """Stack id rows into int64 [B, L], L the longest rounded up to the bucket (padding is PAD_ID; a None row is all padding)."""
    if not rows:
        return np.zeros((0, BUCKET), dtype=np.int64)
    length = bucket_length(max(len(r) if r is not None else 0 for r in rows))
    ids = np.zeros((len(rows), length), dtype=np.int64)
    for row, item in enumerate(rows):
        if item is not None:
            ids[row, : len(item)] = item[:length]
    return ids


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
