"""Features: the one definition of what the gateway knows about a request, and what the model reads.

- ``request``: ``Features`` (built once per request by the proxy, or by ``from_record``
  for training, evaluation and replay), ``ClientStats``, ``make_header_map``;
- ``serialization``: the canonical text of a request the model reads;
- ``encoding``: that text as token ids (bytes and a fixed HTTP phrase vocabulary), padding;
- ``numeric``: the numeric feature vector;
- ``split``: feature version 2, the payload input and the client input, with nothing in common;
- ``contract``: ``FEATURE_VERSION``, ``FEATURE_FINGERPRINT``, ``ModelInput`` and
  ``featurize(features, version)``, the single path from a request to a model of that
  feature version, used by serving and training alike so they can never disagree
  (``model_input`` is version 1's, ``split_input`` version 2's).
"""

from gateway.features.contract import (
    FEATURE_FINGERPRINT,
    FEATURE_VERSION,
    INPUT_NAMES,
    NUMERIC_WIDTHS,
    SUPPORTED_VERSIONS,
    V1_FINGERPRINT,
    V1_VERSION,
    ModelInput,
    cache_stats,
    featurize,
    featurize_batch,
    model_input,
    model_inputs,
    pad_batch,
    pad_ids,
    split_input,
)
from gateway.features.encoding import (
    BUCKET,
    BYTE_OFFSET,
    MAX_TOKENS,
    PAD_ID,
    PATCH,
    PHRASE_OFFSET,
    PHRASES,
    UNKNOWN_ID,
    VOCAB_SIZE,
    bucket_length,
    decode_ids,
    encode,
)
from gateway.features.numeric import NUM_FEATURES, NUMERIC_NAMES, ORDER_TEMPLATES, numeric_vector
from gateway.features.request import ClientStats, Features, from_record, make_header_map
from gateway.features.serialization import INFRA_HEADERS, OWN_LINE_HEADERS, decoded_target, serialize

__all__ = [
    "BUCKET",
    "BYTE_OFFSET",
    "FEATURE_FINGERPRINT",
    "FEATURE_VERSION",
    "INFRA_HEADERS",
    "INPUT_NAMES",
    "MAX_TOKENS",
    "NUMERIC_NAMES",
    "NUMERIC_WIDTHS",
    "NUM_FEATURES",
    "ORDER_TEMPLATES",
    "OWN_LINE_HEADERS",
    "PAD_ID",
    "PATCH",
    "PHRASES",
    "PHRASE_OFFSET",
    "SUPPORTED_VERSIONS",
    "UNKNOWN_ID",
    "V1_FINGERPRINT",
    "V1_VERSION",
    "VOCAB_SIZE",
    "ClientStats",
    "Features",
    "ModelInput",
    "bucket_length",
    "cache_stats",
    "decode_ids",
    "decoded_target",
    "encode",
    "featurize",
    "featurize_batch",
    "from_record",
    "make_header_map",
    "model_input",
    "model_inputs",
    "numeric_vector",
    "pad_batch",
    "pad_ids",
    "serialize",
    "split_input",
]
