"""The Clef-flash runtime: one model version in one onnxruntime session.

``OnnxScorer`` is the synchronous bottom layer of the decider (a ``BatchModel``):
the batching, cache and breaker layers wrap it, and it runs in their worker thread.

- **Load**: the version directory is resolved in the model repository, its manifest
  validated (a model trained on another feature version is refused, naming both),
  the file's SHA-256 checked.
- **Providers**: in the configured order. CUDA runs the fp16 file with I/O binding;
  CPU runs int8 (``variant: auto``) or the configured file. onnxruntime silently
  falls back to CPU when the CUDA libraries or device are missing, so the provider
  *actually* used is read back from the session, logged once and exported as the
  ``clefgate_model_loaded_info`` metric.
- **CPU speed, same results**: onnxruntime runs with denormals flushed to zero
  (``gateway.decider.fpenv``: bit-identical outputs, 10-13% faster) and without its
  SkipLayerNormalization fusion, whose CPU kernel is slower than the Add and
  LayerNormalization it replaces (the two differ by float rounding: at most 0.0035 in
  a logit of a shipped version, below the 0.047 an int8 score moves with its batch).
- **Exact int8 products**: onnxruntime's default uint8 x int8 kernel saturates on CPUs
  without VNNI; a probe run once per process (``gateway.decider.int8probe``) finds out,
  and only there is the exact (slower) kernel asked for.
- **Warm-up**: fixed inputs at every bucket length, so the first real requests do
  not pay for kernel selection and memory-arena growth.
- **run_batch**: Features → ``gateway.features.featurize`` (for the manifest's feature
  version) → tensors → logits → temperature from the manifest → softmax per question.
  Rows are grouped by padded length so one long request does not make a whole batch pay
  for its padding.
- **Two inputs (feature version 2)**: the payload half and the client half are two
  graphs (``files`` and ``client_files`` in the manifest), each in its own session. The
  payload half runs for every row; the client half's calibrated answer is kept per client
  key (``ModelInput.client_key``: the client input and its rounded history) for
  ``client_cache_ttl_s``, so a person's page assets share one client run. With
  ``payload_cache_ttl_s`` set (the decider sets it when its decision cache is on), the payload
  half's calibrated answer (its questions and familiarity) is kept too, by a digest of exactly
  what that half reads (the token ids and the numeric vector, which never depend on the client):
  a flood's identical requests from ever new clients then run the client half alone.
- **Familiarity**: a manifest with ``familiarity`` statistics names a payload-graph output, the Mahalanobis
  distance of the payload head's input to the training rows'; it is asked for with the payload questions and
  answered beside them as ``familiarity`` {familiar, unfamiliar} (``gateway.verdict.distance_ratio`` reads it;
  the policy abstains from a model-only block on an unfamiliar payload). Without the field, nothing is asked.
- **explain**: the numeric features that pushed the predicted class most, from the
  linear numeric path of the class head (see :meth:`OnnxScorer.explain`).
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from gateway import features as feat
from gateway import metrics
from gateway.decider import fpenv, int8probe
from gateway.decider import manifest as mf
from gateway.decider.scoring import InvalidOutput, ModelError
from gateway.features import Features, ModelInput
from gateway.verdict import FAMILIARITY, Probabilities

log = logging.getLogger("clefgate.decider.onnx")

DEFAULT_REPOSITORY = Path(__file__).resolve().parents[2] / "models" / "repository"
_GRAPH_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
_ORT_PROVIDER = {"cuda": "CUDAExecutionProvider", "cpu": "CPUExecutionProvider"}
# onnxruntime writes its own warnings to stderr as coloured text (a telemetry id it cannot persist on a read-only
# image, graph notes): the gateway logs what matters itself, as JSON. Its errors still show.
ort.set_default_logger_severity(3)


@functools.cache
def cuda_usable() -> str | None:
    """None when a CUDA session can start here; else why not (asked before any session requests CUDA).

    ``get_available_providers`` lists what this onnxruntime build has, not what the machine can
    run: onnxruntime-gpu on a host without an NVIDIA driver or CUDA libraries prints error lines
    and falls back when a session asks for CUDA. So: the provider must be built in, a driver
    present, and the provider's library (with its CUDA and cuDNN dependencies) loadable.
    """
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return "this onnxruntime has no CUDA provider"
    if not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")):
        return "no NVIDIA driver on this host"
    capi = Path(ort.__file__).parent / "capi"
    try:
        shared = capi / "libonnxruntime_providers_shared.so"
        if shared.exists():
            ctypes.CDLL(str(shared), mode=ctypes.RTLD_GLOBAL)
        cuda = capi / "libonnxruntime_providers_cuda.so"
        if cuda.exists():
            ctypes.CDLL(str(cuda))
    except OSError as exc:
        return f"the CUDA provider cannot load ({exc})"
    return None
_REQUIRED_INPUTS = ("ids", "numeric")
FAMILIARITY_OPTIONS = ("familiar", "unfamiliar")
CLIENT_CACHE = metrics.counter("clefgate_client_answer_cache_total",
                               "Client-question answers of a two-input model, by result: hit (the client's answer was kept), "
                               "miss (the client half ran).", ("result",))
PAYLOAD_CACHE = metrics.counter("clefgate_payload_answer_cache_total",
                                "Payload-half answers of a two-input model (its questions and familiarity), by result: hit "
                                "(an identical payload input's answer was kept), miss (the payload half ran for it).", ("result",))

LOADED = metrics.gauge("clefgate_model_loaded_info", "Loaded Clef-flash model versions (value 1), with the provider and precision in use.",
                       ("model", "provider", "precision"), merge="max")
# Live scorers per LOADED series. Two scorers can share one (a reload that loads the serving version anew for other
# session options; a reload's candidate, kept or rejected; the supervisor's check of a config): closing one must not
# take the series from the other, which still serves. Loads run in worker threads, closes on the event loop.
_LOADED_HOLDERS: dict[tuple[str, str, str], int] = {}
_LOADED_LOCK = threading.Lock()
LOAD_SECONDS = metrics.gauge("clefgate_model_load_seconds", "Seconds the last load of a model took, warm-up included.", ("model",),
                             merge="max")


def _featurizer_entries() -> list[tuple[tuple[str, ...], float]]:
    return [((name,), float(entries)) for name, (entries, _, _, _) in feat.cache_stats().items()]


def _featurizer_lookups() -> list[tuple[tuple[str, ...], float]]:
    return [((name, result), float(n)) for name, (_, _, hits, misses) in feat.cache_stats().items()
            for result, n in (("hit", hits), ("miss", misses))]


FEATURIZER_ENTRIES = metrics.gauge("clefgate_featurizer_cache_entries",
                                   "Entries in the featurizer's bounded caches (header_lines 8192, header_names and user_agents "
                                   "4096 each): what repeats from request to request is coded once.", ("cache",),
                                   callback=_featurizer_entries)
FEATURIZER_LOOKUPS = metrics.gauge("clefgate_featurizer_cache_lookups",
                                   "Featurizer cache lookups since each worker started, by cache and result (hit, miss); "
                                   "a low hit share means many user agents and header sets never seen before.",
                                   ("cache", "result"), callback=_featurizer_lookups)


class ModelLoadError(Exception):
    """A model could not be loaded on any configured provider; ``problems`` says why, per provider."""

    def __init__(self, problems: list[str], source: str) -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"{source}: " + "; ".join(problems))


@dataclass(frozen=True)
class OnnxOptions:
    """How to load and run one model version (the ``model:`` section of the config)."""

    repository: Path = DEFAULT_REPOSITORY
    name: str = "clef-flash"
    version: str = "latest"
    # auto: fp16 on CUDA, int8 on CPU (fp32 when no int8 file is shipped)
    variant: str = "auto"
    providers: tuple[str, ...] = ("cuda", "cpu")
    intra_op_threads: int = 1
    graph_optimization: str = "all"
    warmup_runs: int = 2
    verify_files: bool = True
    # group a batch's rows by padded length and run each group on its own
    group_by_length: bool = True
    # CPU only: flush denormals to zero while a session runs (same outputs, faster softmax; see fpenv)
    flush_denormals: bool = True
    # CPU only: onnxruntime fusions left out because their CPU kernels are slower here (measured with clefgate bench model --runtimes tuned,plain)
    cpu_disabled_optimizers: tuple[str, ...] = ("SkipLayerNormFusion",)
    # CPU only: exact uint8 x int8 products in the int8 model's MatMulInteger on every x86 CPU. Without VNNI, onnxruntime's
    # default kernel saturates at 16 bits and serves other answers than the ones measured (AVX2 AMD EPYC: 1.7.0
    # blocked 14.30% of the REST-writes set, 14.47% measured). The fix (session.x64quantprecision) is asked for only where
    # a probe finds the default kernel wrong (gateway.decider.int8probe): on a VNNI CPU it cost 18-26% and changed nothing.
    exact_int8: bool = True
    # a warm-up run that fails: "refuse" raises ModelLoadError, "fallback" keeps the model with ``warmup_error`` set
    on_warmup_failure: str = "refuse"
    # two-input models: how long a client's answer is kept (seconds; 0 runs the client half for every request) and how
    # many clients are kept at most
    client_cache_ttl_s: float = 60.0
    client_cache_size: int = 65_536
    # two-input models: how long the payload half's answer for one payload input is kept (seconds; 0, the default, runs
    # the payload half for every row, as ``clefgate eval`` and the model benchmarks measure it; the decider turns it on
    # with its decision cache) and how many are kept at most
    payload_cache_ttl_s: float = 0.0
    payload_cache_size: int = 65_536

    @classmethod
    def from_config(cls, model_cfg: Any, base_dir: Path | None = None) -> OnnxOptions:
        """Options from a ``gateway.config.ModelConfig``; a relative repository is resolved against ``base_dir``."""
        repo = Path(model_cfg.repository) if model_cfg.repository else DEFAULT_REPOSITORY
        if not repo.is_absolute():
            repo = (base_dir or Path.cwd()) / repo
        return cls(repository=repo, name=model_cfg.name, version=model_cfg.version, variant=model_cfg.variant,
                   providers=tuple(model_cfg.providers), intra_op_threads=model_cfg.intra_op_threads,
                   graph_optimization=model_cfg.graph_optimization,
                   on_warmup_failure=getattr(model_cfg, "on_warmup_failure", "refuse"))


_ROW_MAX = np.maximum.reduce
_ROW_SUM = np.add.reduce


def _softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    # the ufuncs' reduce, not ndarray.max / .sum: the same C reductions without their Python wrappers (a request
    # pays three of these; the values are bit-identical)
    z = logits.astype(np.float64)
    z /= temperature
    z -= _ROW_MAX(z, axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= _ROW_SUM(z, axis=1, keepdims=True)
    return z


def _session_run(session: ort.InferenceSession, outputs: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``session.run(outputs, feeds)``, less the checks InferenceSession.run makes in Python on every call (input names,
    OrtValue ownership, graph capture): the feeds here are always the session's own inputs as numpy arrays, so an
    InferenceSession's C++ run is called directly (its ``_sess``). Anything else (a wrapped session, an onnxruntime
    without that attribute) is run through its public ``run``."""
    inner = getattr(session, "_sess", None) if type(session) is ort.InferenceSession else None
    return (inner if inner is not None else session).run(outputs, feeds, None)


# one session run: the session, its feeds, the outputs asked for and the rows expected in each
_Run = tuple[ort.InferenceSession, dict[str, np.ndarray], list[str], int]


def _pad_one(ids: np.ndarray | None) -> np.ndarray:
    """``feat.pad_ids([ids])`` for one row, without the batch bookkeeping."""
    if ids is None:
        return np.zeros((1, feat.BUCKET), dtype=np.int64)
    n = len(ids)
    out = np.zeros((1, feat.bucket_length(n)), dtype=np.int64)
    out[0, :n] = ids
    return out


class _KeptAnswers:
    """Calibrated answers by key, each kept ``ttl_s`` seconds (oldest dropped beyond ``maxsize``): the client question's
    by client key (``client_answers``), and the payload half's by payload key (``payload_answers``).

    Shared by the worker threads that run the model: every access holds the lock.
    """

    def __init__(self, ttl_s: float, maxsize: int) -> None:
        self.ttl_s = ttl_s
        self.maxsize = maxsize
        self._entries: OrderedDict[bytes, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes, now: float) -> Any:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            if hit[0] < now:
                del self._entries[key]
                return None
            return hit[1]

    def partition(self, inputs: Sequence[Any], key_of: Callable[[Any], bytes], now: float) -> tuple[list[tuple[int, Any]], dict[bytes, list[int]]]:
        """(the rows whose answer is kept, each with it; the key of every other row with the rows that share it)."""
        kept: list[tuple[int, Any]] = []
        missing: dict[bytes, list[int]] = {}
        for i, item in enumerate(inputs):
            key = key_of(item)
            answer = self.get(key, now)
            if answer is not None:
                kept.append((i, answer))
            else:
                missing.setdefault(key, []).append(i)
        return kept, missing

    def put(self, key: bytes, value: Any, now: float) -> None:
        if self.ttl_s <= 0 or self.maxsize <= 0:
            return
        with self._lock:
            entries = self._entries
            entries.pop(key, None)
            entries[key] = (now + self.ttl_s, value)
            while len(entries) > self.maxsize:
                entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


# the payload half's kept answers: per payload key, one calibrated row per payload question (in the model's payload
# output order), then the familiarity row (None when the manifest asks for none)
PayloadAnswer = tuple[np.ndarray | None, ...]


def payload_key(item: ModelInput) -> bytes:
    """The payload half's cache key: a digest of exactly what that half reads, the token ids and the numeric vector
    (at full precision: two inputs the model could answer differently never share a key). Neither depends on the
    client, so identical payloads from many clients share one answer."""
    h = hashlib.blake2b(np.ascontiguousarray(item.ids, dtype=np.int64).tobytes(), digest_size=16)
    h.update(b"\0")
    h.update(array.array("d", item.numeric).tobytes())
    return h.digest()


class OnnxScorer:
    """A loaded, warmed Clef-flash version: ``run_batch(features) -> probabilities``.

    Thread-safety: onnxruntime sessions may be run from several threads at once;
    after construction the only mutable state is the kept client answers, behind a lock.
    """

    def __init__(self, options: OnnxOptions | None = None) -> None:
        self.options = opts = options or OnnxOptions()
        started = time.perf_counter()
        directory = mf.resolve(opts.repository, opts.name, opts.version)
        version = _declared_feature_version(directory)
        self.feature_version = version if version in feat.SUPPORTED_VERSIONS else feat.FEATURE_VERSION
        self.manifest = mf.load(directory, feature_version=self.feature_version,
                                feature_fingerprint=feat.SUPPORTED_VERSIONS[self.feature_version], name=opts.name)
        self.two_inputs = self.feature_version != feat.V1_VERSION
        self.client_answers = _KeptAnswers(opts.client_cache_ttl_s, opts.client_cache_size)
        # the payload half's kept answers (None: off, every row runs the payload half)
        self.payload_answers: _KeptAnswers | None = None
        self.keep_payload_answers(opts.payload_cache_ttl_s, opts.payload_cache_size)
        self._check_contract()
        # a two-input model's client half (its own graph, opened beside the payload half by _open)
        self.client_session: ort.InferenceSession | None = None
        self.session, self.provider, self.precision = self._open()
        self._outputs = [o.name for o in self.manifest.outputs]
        self._questions = [(q.id, q.options, self.manifest.temperature.get(q.id, 1.0)) for q in self.manifest.questions]
        self._by_output = {o.name: o.question for o in self.manifest.outputs}
        # two-input models: the outputs of each half (the client question's and the rest)
        self._half_outputs = {"client": [o for o in self._outputs if self._by_output[o] == "client"],
                              "payload": [o for o in self._outputs if self._by_output[o] != "client"]}
        # per output: its question and its number of options (what each run's outputs are checked against)
        self._output_width = {o.name: len(self.questions[o.question]) for o in self.manifest.outputs}
        self._payload_questions = [self._by_output[o] for o in self._half_outputs["payload"]]
        # each payload question's number of options (a kept answer's familiarity row has its two)
        self._payload_widths = {self._by_output[o]: self._output_width[o] for o in self._half_outputs["payload"]}
        # the payload graph's familiarity distance, asked for after the payload questions' outputs (width 0: one value a row)
        self._familiarity = self._familiarity_output()
        if self._familiarity is not None:
            self._half_outputs["payload"].append(self._familiarity.output)
            self._output_width[self._familiarity.output] = 0
        self._temperature = {q: t for q, _, t in self._questions}
        self._io_binding = self.provider == "cuda"
        flush = self.provider == "cpu" and self.options.flush_denormals
        self._flush_denormals = flush and fpenv.AVAILABLE
        if flush and not fpenv.AVAILABLE:
            log.info("model %s: denormals cannot be flushed to zero here (not 64-bit x86 Linux or no C math library); "
                     "masked attention runs at IEEE speed", self.manifest.id)
        self._explain = self._explain_weights()
        self.warmup_error = ""
        try:
            self.warm_up()
        except Exception as exc:  # a model that loads but cannot run is unusable: a load problem, not a crash
            problem = f"warm-up run failed on {self.provider}: {str(exc)[:500]}"
            if opts.on_warmup_failure != "fallback":
                del self.session
                raise ModelLoadError([problem], self.manifest.id) from exc
            self.warmup_error = problem
            log.error("model %s: %s; serving with its circuit breaker open (model.on_warmup_failure: fallback)",
                      self.manifest.id, problem)
        self.load_seconds = time.perf_counter() - started
        self._loaded_key: tuple[str, str, str] | None = (self.label, self.provider, self.precision)
        with _LOADED_LOCK:
            _LOADED_HOLDERS[self._loaded_key] = _LOADED_HOLDERS.get(self._loaded_key, 0) + 1
            LOADED.set(1.0, *self._loaded_key)
        LOAD_SECONDS.set(self.load_seconds, self.label)
        log.info("model %s loaded on %s (%s, %s) in %.2fs from %s", self.label, self.provider, self.precision,
                 self.session.get_providers()[0], self.load_seconds, directory)

    # ------------------------------------------------------------------ loading

    @property
    def label(self) -> str:
        """``name@version`` of the loaded model."""
        return self.manifest.id

    @property
    def int8_kernel(self) -> str | None:
        """int8 on the CPU: ``default`` or ``x64quantprecision`` (see ``gateway.decider.int8probe``); else None."""
        return int8probe.kernel(self.session) if self.precision == "int8" else None

    @property
    def questions(self) -> dict[str, tuple[str, ...]]:
        """Question id -> option names, in output order (for output validation)."""
        return {q.id: q.options for q in self.manifest.questions}

    def keep_payload_answers(self, ttl_s: float, maxsize: int) -> None:
        """Keep the payload half's answers ``ttl_s`` seconds, at most ``maxsize`` of them (either 0: off); a two-input
        model only. The answers already kept stay when the settings are unchanged (they hold for this model)."""
        answers = self.payload_answers
        if not self.two_inputs or ttl_s <= 0 or maxsize <= 0:
            self.payload_answers = None
        elif answers is None or (answers.ttl_s, answers.maxsize) != (ttl_s, maxsize):
            self.payload_answers = _KeptAnswers(ttl_s, maxsize)

    def model_input(self, features: Features) -> ModelInput:
        """What this model reads about one request (featurized for its feature version)."""
        return feat.featurize(features, self.feature_version)

    def model_inputs(self, batch: Sequence[Features]) -> list[ModelInput]:
        """``model_input`` for a batch."""
        return feat.featurize_batch(batch, self.feature_version)

    def _check_contract(self) -> None:
        m = self.manifest
        names = {i.name for i in m.inputs}
        required = feat.INPUT_NAMES[self.feature_version]
        problems = [f"inputs: the model needs {name!r}, which this runtime feeds" for name in required if name not in names]
        problems += [f"inputs: {i.name!r} is not an input this runtime can feed ({', '.join(required)}) at feature version "
                     f"{self.feature_version}" for i in m.inputs if i.name not in required]
        widths = feat.NUMERIC_WIDTHS[self.feature_version]
        for spec in m.inputs:
            width = widths.get(spec.name)
            if width is not None and len(spec.shape) == 2 and isinstance(spec.shape[1], int) and spec.shape[1] != width:
                problems.append(f"inputs.{spec.name}: the model reads {spec.shape[1]} numeric features, this gateway computes {width}")
        if problems:
            raise mf.ManifestError(problems, str(m.directory / mf.MANIFEST_FILE))

    def _session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.options.intra_op_threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = _GRAPH_LEVELS[self.options.graph_optimization]
        so.log_severity_level = 3  # provider fallbacks are reported by this module, once
        return so

    def _variant_for(self, provider: str) -> str:
        variant = self.options.variant
        if variant != "auto":
            return variant
        # a version may name the file each provider runs (manifest "prefer": {"cpu": "fp32"}): Clef-flash 2 runs fp32 on
        # the CPU, within the latency budget, because int8 activations quantized per run move its scores with their
        # batch-mates (by up to 0.04 at the block threshold); int8 stays shipped and is used when the config names it
        prefer = self.manifest.raw.get("prefer")
        if isinstance(prefer, Mapping) and prefer.get(provider) in self.manifest.files:
            return str(prefer[provider])
        if provider == "cuda":
            return "fp16" if "fp16" in self.manifest.files else "fp32"
        return "int8" if "int8" in self.manifest.files else "fp32"

    def _open(self) -> tuple[ort.InferenceSession, str, str]:
        available = set(ort.get_available_providers())
        problems: list[str] = []
        for provider in self.options.providers:
            name = _ORT_PROVIDER.get(provider)
            if name is None:
                problems.append(f"{provider}: unknown provider (cuda, cpu)")
                continue
            if name not in available:
                problems.append(f"{provider}: not built into this onnxruntime")
                continue
            if provider == "cuda" and (why := cuda_usable()) is not None:
                problems.append(f"cuda: {why}")
                log.info("model %s: not using CUDA: %s", self.manifest.id, why)
                continue
            variant = self._variant_for(provider)
            if variant not in self.manifest.files:
                problems.append(f"{provider}: the model ships no {variant} file (has {', '.join(self.manifest.files)})")
                continue
            path = self.manifest.path(variant)
            if not path.is_file():
                problems.append(f"{provider}: {path} is missing")
                continue
            if self.options.verify_files:
                self.manifest.verify_file(variant)
            cpu = name == "CPUExecutionProvider"
            chain = [name] if cpu else [name, "CPUExecutionProvider"]
            disabled = list(self.options.cpu_disabled_optimizers) if cpu else []
            so = self._session_options()
            if cpu and self.options.exact_int8:
                entries = int8probe.exact_int8_entries()
                for key, value in entries.items():
                    so.add_session_config_entry(key, value)
                if entries and variant == "int8" and not int8probe.applies(so):
                    log.warning("model %s: this CPU's default int8 kernel saturates, and its fix needs model.graph_optimization "
                                "extended or all (is %s): int8 scores differ from the measured ones",
                                self.manifest.id, self.options.graph_optimization)
            client_path = None
            if self.two_inputs:
                if variant not in self.manifest.client_files:
                    problems.append(f"{provider}: the model ships no client {variant} file (client_files has "
                                    f"{', '.join(self.manifest.client_files) or 'none'})")
                    continue
                client_path = self.manifest.path(variant, "client_files")
                if not client_path.is_file():
                    problems.append(f"{provider}: {client_path} is missing")
                    continue
                if self.options.verify_files:
                    self.manifest.verify_file(variant, "client_files")
            try:
                session = ort.InferenceSession(str(path), so, providers=chain, disabled_optimizers=disabled)
                if client_path is not None:
                    self.client_session = ort.InferenceSession(str(client_path), so, providers=chain, disabled_optimizers=disabled)
            except Exception as exc:  # a broken file or a provider that cannot start
                problems.append(f"{provider}: {type(exc).__name__}: {exc}")
                continue
            active = session.get_providers()[0]
            if active != name:
                # onnxruntime fell back (e.g. no CUDA device or libraries): try the next provider properly
                problems.append(f"{provider}: onnxruntime fell back to {active}")
                log.warning("model %s: %s provider unavailable (onnxruntime fell back to %s); trying the next provider",
                            self.manifest.id, provider, active)
                continue
            return session, provider, variant
        raise ModelLoadError(problems or ["no providers configured"], str(self.manifest.directory))

    def _familiarity_output(self) -> mf.FamiliarityStats | None:
        """The manifest's familiarity statistics when this runtime can read them (a two-input model whose payload graph
        has the named output); a manifest that names an output its graph lacks is refused."""
        stats = self.manifest.familiarity
        if stats is None:
            return None
        if not self.two_inputs:
            log.warning("model %s: familiarity statistics are read from two-input models only; ignored", self.manifest.id)
            return None
        names = [o.name for o in self.session.get_outputs()]
        if stats.output not in names:
            problem = (f"familiarity.output: the payload graph has no output {stats.output!r} (its outputs: {', '.join(names)}); "
                       "re-export the model")
            del self.session
            raise mf.ManifestError([problem], str(self.manifest.directory / mf.MANIFEST_FILE))
        return stats

    def _explain_weights(self) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...]] | None:
        block = self.manifest.explain
        if not block:
            return None
        names = tuple(block.get("numeric_names") or ())
        weights = np.asarray(block.get("weights") or [], dtype=np.float64)
        options = self.questions.get(str(block.get("question", "class")), ())
        if names != feat.NUMERIC_NAMES or weights.shape != (len(options), len(names)):
            log.warning("model %s: explain weights do not match this gateway's numeric features; explanations disabled",
                        self.manifest.id)
            return None
        return weights, names, options

    def warm_up(self) -> None:
        """Run fixed inputs at every bucket length (and batch sizes 1 and 8), each half alone for two-input models."""
        widths = feat.NUMERIC_WIDTHS[self.feature_version]
        numeric = np.zeros((8, widths["numeric"]), dtype=np.float32)
        for _ in range(max(1, self.options.warmup_runs)):
            for length in range(feat.BUCKET, feat.MAX_TOKENS + 1, feat.BUCKET):
                ids = np.full((8, length), ord("a") + feat.BYTE_OFFSET, dtype=np.int64)
                if not self.two_inputs:
                    self._run(ids[:1], numeric[:1])
                    self._run(ids, numeric)
                    continue
                cnum = np.zeros((8, widths["client_numeric"]), dtype=np.float32)
                for rows in (1, 8):
                    self._run_half("payload", ids[:rows], numeric[:rows])
                    self._run_half("client", ids[:rows], cnum[:rows])

    # ------------------------------------------------------------------ inference

    def _run(self, ids: np.ndarray, numeric: np.ndarray) -> list[np.ndarray]:
        return self._run_feeds(self.session, {"ids": ids, "numeric": numeric}, self._outputs, len(ids))

    def _run_feeds(self, session: ort.InferenceSession, feeds: dict[str, np.ndarray], outputs: list[str], rows: int) -> list[np.ndarray]:
        return self._run_all([(session, feeds, outputs, rows)])[0]

    def _run_all(self, runs: Sequence[_Run]) -> list[list[np.ndarray]]:
        """Run sessions one after the other (``(session, feeds, outputs, rows)`` each) and check their outputs' shapes.

        On the CPU they share one denormal-flushing block: the two halves of a request pay for entering it once. The
        block holds onnxruntime's runs alone (numpy's softmax after it keeps IEEE denormals, as before).
        """
        try:
            if self._io_binding:
                results = []
                for session, feeds, outputs, _ in runs:
                    binding = session.io_binding()
                    for name, value in feeds.items():
                        binding.bind_cpu_input(name, value)
                    for name in outputs:
                        binding.bind_output(name, "cpu")
                    session.run_with_iobinding(binding)
                    results.append(binding.copy_outputs_to_cpu())
            else:
                with fpenv.flush_denormals() if self._flush_denormals else contextlib.nullcontext():
                    results = [_session_run(session, outputs, feeds) for session, feeds, outputs, _ in runs]
        except Exception as exc:
            raise ModelError(f"onnxruntime run failed ({self.provider}): {exc}") from exc
        width = self._output_width
        for (_, _, outputs, rows), result in zip(runs, results, strict=True):
            for name, out in zip(outputs, result, strict=True):
                expected = (rows, width[name]) if width[name] else (rows,)
                if out.shape != expected:
                    raise InvalidOutput(f"output {name} has shape {out.shape}, expected {expected}")
        return [[np.asarray(o) for o in result] for result in results]

    def _half_run(self, half: str, ids: np.ndarray, numeric: np.ndarray) -> _Run:
        """One half of a two-input model, in its own session, as ``_run_all`` takes it."""
        if half == "payload":
            return self.session, {"ids": ids, "numeric": numeric}, self._half_outputs[half], len(ids)
        assert self.client_session is not None
        return self.client_session, {"client_ids": ids, "client_numeric": numeric}, self._half_outputs[half], len(ids)

    def _run_half(self, half: str, ids: np.ndarray, numeric: np.ndarray) -> list[np.ndarray]:
        """One half of a two-input model, in its own session."""
        return self._run_all([self._half_run(half, ids, numeric)])[0]

    def logits(self, inputs: Sequence[ModelInput]) -> dict[str, np.ndarray]:
        """Raw logits per question (rows in input order), before temperature."""
        n = len(inputs)
        out = {q: np.zeros((n, len(opts)), dtype=np.float32) for q, opts, _ in self._questions}
        if n == 0:
            return out
        if self.two_inputs:
            payload_runs = self._payload_groups(inputs)
            client_rows = [i.client_ids if i.client_ids is not None else np.zeros(0, dtype=np.int64) for i in inputs]
            client_run = self._half_run("client", feat.pad_ids(client_rows),
                                        np.array([i.client_numeric for i in inputs], dtype=np.float32))
            *payload, (client,) = self._run_all([run for _, run in payload_runs] + [client_run])
            self._scatter_payload(payload_runs, payload, out)
            out["client"][:] = client
            return out
        groups: dict[int, list[int]] = {}
        if self.options.group_by_length:
            for i, item in enumerate(inputs):
                groups.setdefault(feat.bucket_length(len(item.ids)), []).append(i)
        else:
            groups[0] = list(range(n))
        for rows in groups.values():
            ids, numeric = feat.pad_batch([inputs[i] for i in rows])
            results = self._run(ids, numeric)
            for name, values in zip(self._outputs, results, strict=True):
                out[self._by_output[name]][rows] = values
        return out

    def _payload_groups(self, inputs: Sequence[ModelInput]) -> list[tuple[list[int] | None, _Run]]:
        """The payload half's runs: one per padded length (one in all without grouping); rows None: every row, in order."""
        if len(inputs) == 1:
            item = inputs[0]
            return [(None, self._half_run("payload", _pad_one(item.ids), np.array([item.numeric], dtype=np.float32)))]
        groups: dict[int, list[int]] = {}
        if self.options.group_by_length:
            for i, item in enumerate(inputs):
                groups.setdefault(feat.bucket_length(len(item.ids)), []).append(i)
        else:
            groups[0] = list(range(len(inputs)))
        if len(groups) == 1:
            return [(None, self._half_run("payload", feat.pad_ids([i.ids for i in inputs]),
                                          np.array([i.numeric for i in inputs], dtype=np.float32)))]
        return [(rows, self._half_run("payload", feat.pad_ids([inputs[i].ids for i in rows]),
                                      np.array([inputs[i].numeric for i in rows], dtype=np.float32)))
                for rows in groups.values()]

    def _scatter_payload(self, groups: Sequence[tuple[list[int] | None, _Run]], results: Sequence[list[np.ndarray]],
                         out: dict[str, np.ndarray]) -> None:
        for (rows, _), result in zip(groups, results, strict=True):
            # the familiarity distance, when asked for, follows the questions' outputs: see _familiarities
            for q, values in zip(self._payload_questions, result[:len(self._payload_questions)], strict=True):
                if rows is None:
                    out[q][:] = values
                else:
                    out[q][rows] = values

    def probabilities(self, inputs: Sequence[ModelInput]) -> dict[str, np.ndarray]:
        """Calibrated probabilities per question (temperature applied, rows sum to 1).

        Two-input models answer the client question from the kept answers where they can (``client_answers``),
        running the client half once per distinct client key among the rest, in the same flushing block as the
        payload half; with ``payload_answers`` on, the payload questions and familiarity likewise (the payload half
        runs once per distinct payload key among the rows it has no kept answer for, and not at all when it has one
        for every row).
        """
        if not self.two_inputs:
            raw = self.logits(inputs)
            return {q: _softmax(raw[q], t) for q, _, t in self._questions}
        n = len(inputs)
        if n == 0:
            return {q: np.zeros((0, len(opts)), dtype=np.float64) for q, opts, _ in self._questions}
        now = time.monotonic()
        cache = self.client_answers
        kept, missing = cache.partition(inputs, ModelInput.client_key, now)
        if kept:
            CLIENT_CACHE.inc("hit", amount=len(kept))
        # the rows the payload half runs for: every row, or (payload answers kept) the first of each payload not kept
        payload_kept: list[tuple[int, PayloadAnswer]] = []
        payload_missing: dict[bytes, list[int]] = {}
        to_run: Sequence[ModelInput] = inputs
        if self.payload_answers is not None:
            payload_kept, payload_missing = self.payload_answers.partition(inputs, payload_key, now)
            if payload_kept:
                PAYLOAD_CACHE.inc("hit", amount=len(payload_kept))
            if payload_missing:
                PAYLOAD_CACHE.inc("miss", amount=len(payload_missing))
            to_run = inputs if len(payload_missing) == n else [inputs[rows[0]] for rows in payload_missing.values()]
        ran = len(to_run)
        groups = self._payload_groups(to_run) if ran else []
        runs = [run for _, run in groups]
        if missing:
            CLIENT_CACHE.inc("miss", amount=len(missing))
            if n == 1:
                item = inputs[0]
                ids = _pad_one(item.client_ids)
                numeric = np.array([item.client_numeric], dtype=np.float32)
            else:
                first = [inputs[rows[0]] for rows in missing.values()]
                ids = feat.pad_ids([i.client_ids if i.client_ids is not None else np.zeros(0, dtype=np.int64) for i in first])
                numeric = np.array([i.client_numeric for i in first], dtype=np.float32)
            runs.append(self._half_run("client", ids, numeric))
        results = self._run_all(runs) if runs else []
        temperature = self._temperature
        if not groups:
            probs: dict[str, np.ndarray] = {}
        elif len(groups) == 1:
            questions = self._payload_questions   # the familiarity distance, when asked for, follows their outputs
            probs = {q: _softmax(values, temperature[q]) for q, values in zip(questions, results[0][:len(questions)], strict=True)}
        else:
            out = {q: np.zeros((ran, width), dtype=np.float32) for q, width in self._payload_widths.items()}
            self._scatter_payload(groups, results[:len(groups)], out)
            probs = {q: _softmax(values, temperature[q]) for q, values in out.items()}
        if self._familiarity is not None and groups:
            probs[FAMILIARITY] = self._familiarities(groups, results, ran, self._familiarity.threshold)
        if self.payload_answers is not None and ran < n:
            probs = self._with_kept_payloads(probs, n, payload_kept, payload_missing, now)
        elif self.payload_answers is not None:
            self._keep_payloads(probs, payload_missing, now)
        if missing and not kept and len(missing) == n:
            # every row a client of its own, in row order: the answers are the client column as they are
            answers = _softmax(results[-1][0], temperature.get("client", 1.0))
            for key, answer in zip(missing, answers, strict=True):
                cache.put(key, answer, now)
            client = answers.copy()  # the kept rows are views of ``answers``: a caller's edit must not reach them
        else:
            client = np.zeros((n, self._output_width[self._half_outputs["client"][0]]), dtype=np.float64)
            for i, answer in kept:
                client[i] = answer
            if missing:
                answers = _softmax(results[-1][0], temperature.get("client", 1.0))
                for (key, rows), answer in zip(missing.items(), answers, strict=True):
                    client[rows] = answer
                    cache.put(key, answer, now)
        probs["client"] = client
        return probs

    def _payload_names(self) -> list[str]:
        """The keys of the payload half's answers, in the order a kept answer holds them."""
        return [*self._payload_questions, *([FAMILIARITY] if self._familiarity is not None else [])]

    def _keep_payloads(self, computed: dict[str, np.ndarray], missing: dict[bytes, list[int]], now: float) -> None:
        """Keep the answer of each payload the half just ran for (``computed``'s rows, one per key of ``missing``)."""
        names = self._payload_names()
        for j, key in enumerate(missing):
            # copies: a caller's edit of the probabilities it was given must not reach the kept answers
            self.payload_answers.put(key, tuple(computed[q][j].copy() for q in names), now)  # type: ignore[union-attr]

    def _with_kept_payloads(self, computed: dict[str, np.ndarray], n: int, kept: list[tuple[int, PayloadAnswer]],
                            missing: dict[bytes, list[int]], now: float) -> dict[str, np.ndarray]:
        """The payload answers of all ``n`` rows: the kept ones and those just computed (one row per key of ``missing``,
        in its order, now kept too)."""
        names = self._payload_names()
        self._keep_payloads(computed, missing, now)
        widths = {**self._payload_widths, FAMILIARITY: len(FAMILIARITY_OPTIONS)}
        out = {q: np.zeros((n, widths[q]), dtype=np.float64) for q in names}
        for i, answer in kept:
            for q, row in zip(names, answer, strict=True):
                out[q][i] = row
        for j, rows in enumerate(missing.values()):
            for q in names:
                out[q][rows] = computed[q][j]
        return out

    @staticmethod
    def _familiarities(groups: Sequence[tuple[list[int] | None, _Run]], results: Sequence[list[np.ndarray]], n: int,
                       threshold: float) -> np.ndarray:
        """[n, 2]: (familiar, unfamiliar) = (1 - u, u) with u = d / (d + threshold) per row (``gateway.verdict.FAMILIARITY``);
        a distance that is not a finite number is unfamiliar (u = 1)."""
        distance = np.zeros(n, dtype=np.float64)
        for (rows, _), result in zip(groups, results, strict=False):
            if rows is None:
                distance[:] = result[-1]
            else:
                distance[rows] = result[-1]
        finite = np.isfinite(distance)
        u = np.where(finite, np.maximum(distance, 0.0) / (np.maximum(distance, 0.0) + threshold), 1.0)
        return np.stack([1.0 - u, u], axis=1)

    def run_inputs(self, inputs: Sequence[ModelInput]) -> list[Probabilities]:
        """Probabilities for already-encoded inputs, one mapping per row."""
        wrong = next((i.version for i in inputs if i.version != self.feature_version), None)
        if wrong is not None:
            raise ModelError(f"{self.label} reads feature version {self.feature_version}; an input of version {wrong} was "
                             f"given (featurize with OnnxScorer.model_input)")
        probs = self.probabilities(inputs)
        # one tolist() per question, not per row (indexing numpy row by row cost ~0.4 µs a request)
        columns = [(q, opts, probs[q].tolist()) for q, opts, _ in self._questions]
        if FAMILIARITY in probs:
            columns.append((FAMILIARITY, FAMILIARITY_OPTIONS, probs[FAMILIARITY].tolist()))
        return [{q: dict(zip(opts, values[i], strict=True)) for q, opts, values in columns} for i in range(len(inputs))]

    def run_batch(self, batch: list[Features]) -> list[Probabilities]:
        """Score requests: probabilities per question and option (``{"payload": {"benign": p, …}, "attack_kind": {…},
        "client": {…}}`` at feature version 2; ``{"class": …, "attack_kind": …}`` at 1) per request, in order."""
        return self.run_inputs(self.model_inputs(batch))

    def explain(self, features: Features | ModelInput, top: int = 5,
                probabilities: Mapping[str, Mapping[str, float]] | None = None) -> tuple[str, ...]:
        """The numeric features that pushed the predicted class most, strongest first.

        The class head has a linear path from the numeric vector to the logits; a
        feature's contribution to option *c* is ``W[c, j] · x_j``. Reported is the
        contribution to the predicted option minus its mean over the other options,
        i.e. how much that feature moved the decision towards what was predicted, as
        ``name=value (+contribution)``. It covers that linear path only: evidence the
        encoder finds in the text (a payload, a user agent) is not itemised here.
        Pass the request's ``probabilities`` when known to skip a model run.
        """
        if self._explain is None:
            return ()
        mi = features if isinstance(features, ModelInput) else self.model_input(features)
        weights, names, options = self._explain
        cls = probabilities.get("class") if probabilities is not None else None
        if cls is not None and all(o in cls for o in options):
            predicted = max(range(len(options)), key=lambda i: cls[options[i]])
        else:
            predicted = int(np.argmax(self.probabilities([mi])["class"][0]))
        x = np.asarray(mi.numeric, dtype=np.float64)
        contrib = weights * x
        others = np.delete(contrib, predicted, axis=0).mean(axis=0)
        push = contrib[predicted] - others
        order = np.argsort(-push)[:top]
        return tuple(f"{options[predicted]}: {names[j]}={x[j]:.3g} ({push[j]:+.2f})" for j in order if push[j] > 0)

    def close(self) -> None:
        """Drop the session, and its metric series unless another live scorer holds the same one (a hot swap calls
        this on the old model; a second call does nothing)."""
        key, self._loaded_key = self._loaded_key, None
        if key is None:
            return
        with _LOADED_LOCK:
            left = _LOADED_HOLDERS.pop(key, 1) - 1
            if left > 0:
                _LOADED_HOLDERS[key] = left
            else:
                LOADED.values.pop(key, None)
        del self.session
        self.client_session = None


def load(options: OnnxOptions | None = None) -> OnnxScorer:
    """Load, check and warm a model version (raises ManifestError or ModelLoadError)."""
    return OnnxScorer(options)


def _declared_feature_version(directory: Path) -> str:
    """The feature version a version directory's manifest declares ("" when it cannot be read: loading reports why)."""
    try:
        raw = json.loads((directory / mf.MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    value = raw.get("feature_version") if isinstance(raw, Mapping) else None
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""


def describe(scorer: OnnxScorer) -> Mapping[str, Any]:
    """What ``/health`` and ``clefgate bench`` report about a loaded model."""
    return {"model": scorer.label, "channel": scorer.manifest.channel, "provider": scorer.provider, "precision": scorer.precision,
            "onnxruntime_provider": scorer.session.get_providers()[0], "feature_version": scorer.manifest.feature_version,
            "denormals_flushed": scorer._flush_denormals,
            "exact_int8": scorer.provider == "cpu" and (scorer.precision != "int8" or int8probe.products_exact(scorer.session)),
            "int8_kernel": scorer.int8_kernel,
            "questions": {q: list(o) for q, o in scorer.questions.items()}, "temperature": dict(scorer.manifest.temperature),
            "load_seconds": round(scorer.load_seconds, 3)}
