"""The serving runtime of ``clef``, the zero-shot member of the model family.

``clef`` answers questions whose options and criteria arrive with the request. A state
(text, or a JSON object rendered to text) is cut into sentence-aligned windows that fit
the encoder; every window is embedded once by the ONNX encoder; every question option
becomes a hypothesis text ("criteria: option") embedded once per distinct question and
kept in a bounded TTL cache. The routing head (a few numpy matrices) scores each
(window, hypothesis) pair; a question's option logit is the maximum over windows, so
evidence at the start, middle or end of a long state counts alike. Temperature-scaled
softmax turns the logits into probabilities that sum to 1 per question.

The API is synchronous and batch-first: the decider calls it from a worker thread.
Nothing here imports torch or transformers; training (``models/clef``) imports the
text helpers of this module so that serving and training render text identically.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnxruntime as ort
from cachetools import TTLCache
from tokenizers import Tokenizer

from gateway import metrics
from gateway.decider import int8probe
from gateway.decider.manifest import CHANNELS, file_sha256

log = logging.getLogger("clefgate.clef")

# Version of everything that turns a request into encoder input: hypothesis wording,
# label humanising, feature-dict rendering and windowing. A model whose manifest names
# another version is refused.
TEXT_VERSION = "clef-text-1"
FAMILY = "clef"
DEFAULT_LABELS: tuple[str, ...] = ("forward", "challenge", "block")
DEFAULT_LABEL_CRITERIA = "how the gateway should treat this client or request: let it through, challenge it, or refuse it"
QuestionType = Literal["choice", "bool"]

LOOKUPS = metrics.counter("clefgate_clef_question_cache_lookups_total",
                          "Lookups of cached option/criteria embeddings per distinct question, by result (hit, miss).",
                          ("result",))
CACHE_ENTRIES = metrics.gauge("clefgate_clef_question_cache_entries", "Distinct questions whose option embeddings are cached.")
WINDOWS = metrics.counter("clefgate_clef_windows_total", "State windows encoded by clef (a long state is several windows).")
INFERENCE = metrics.histogram("clefgate_clef_inference_seconds", "Time of one clef answer() call: tokenize, encode, score.",
                              ("provider",))
MODEL_INFO = metrics.gauge("clefgate_clef_model_info", "Loaded clef models (value 1), by version, provider and precision.",
                           ("version", "provider", "precision"))


class ZeroShotError(Exception):
    """Base of the errors this runtime raises; the API layer maps each to a status."""


class ModelLoadError(ZeroShotError):
    """The model directory, its manifest or its files are missing or do not match this runtime."""


class QuestionError(ZeroShotError, ValueError):
    """A question is malformed (no options, duplicate options, no criteria for a bool)."""


class StateTooLongError(ZeroShotError, ValueError):
    """The state needs more windows than the model is configured to read (maps to 413)."""

    def __init__(self, windows: int, limit: int) -> None:
        self.windows, self.limit = windows, limit
        super().__init__(f"state needs {windows} windows; at most {limit} are read")


# ---------------------------------------------------------------------------- request values

@dataclass(frozen=True, slots=True)
class Question:
    """One question: ``choice`` picks one of ``options``; ``bool`` answers true/false.

    ``criteria`` says what the options judge (for ``bool``: the statement to check);
    when empty, the humanised ``id`` stands in for it.
    """

    id: str
    options: tuple[str, ...] = ()
    criteria: str = ""
    type: QuestionType = "choice"

    def __post_init__(self) -> None:
        if self.type not in ("choice", "bool"):
            raise QuestionError(f"question {self.id!r}: type must be 'choice' or 'bool' (got {self.type!r})")
        if self.type == "choice":
            if len(self.options) < 2:
                raise QuestionError(f"question {self.id!r}: a choice question needs at least 2 options")
            if len(set(self.options)) != len(self.options):
                raise QuestionError(f"question {self.id!r}: options must be distinct")
            if any(not str(o).strip() for o in self.options):
                raise QuestionError(f"question {self.id!r}: options must be non-empty strings")
        elif not (self.criteria.strip() or self.id.strip()):
            raise QuestionError("a bool question needs criteria (or a descriptive id)")

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        """What the cached option embeddings depend on (the id does not, unless it stands in for criteria)."""
        return (self.type, self.effective_criteria, self.options)

    @property
    def effective_criteria(self) -> str:
        return self.criteria.strip() or humanize(self.id)


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """A state and the questions to answer about it, all scored in one pass.

    ``max_tokens`` caps how many state tokens are read (None: up to the model's window
    limit). ``sentence_evidence`` additionally scores each sentence alone so that the
    evidence names sentences rather than whole windows; the decision is unchanged.
    """

    state: str
    questions: tuple[Question, ...]
    max_tokens: int | None = None
    sentence_evidence: bool = False


@dataclass(frozen=True, slots=True)
class Evidence:
    """A span of the state that supported the answer; ``weight`` is its own probability of it."""

    text: str
    start: int
    end: int
    weight: float


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer to one question. For ``bool``, ``top_option`` is a bool and the keys are "true"/"false"."""

    id: str
    top_option: str | bool
    confidence: float
    probabilities: Mapping[str, float]
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True, slots=True)
class Window:
    """A slice of the state's tokens (without [CLS]/[SEP]) and the characters it covers."""

    ids: tuple[int, ...]
    start: int
    end: int


# ---------------------------------------------------------------------------- text forms (shared with training)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[_\-./:]+")
_SPACES = re.compile(r"\s+")


def humanize(label: str) -> str:
    """``"P0_Critical"`` -> ``"P0 critical"``, ``"cancelSubscription"`` -> ``"cancel subscription"``.

    Label spelling (snake, camel, kebab, case) carries no meaning, so the encoder reads words.
    """
    text = _SEPARATORS.sub(" ", _CAMEL.sub(" ", str(label).strip()))
    words = [w if (any(c.isdigit() for c in w) and len(w) <= 3) else w.lower() for w in text.split()]
    return " ".join(words)


def hypothesis_text(criteria: str, option: str | None) -> str:
    """The text embedded for one option: the zero-shot prior is its similarity to the state."""
    crit = _SPACES.sub(" ", criteria).strip()
    if option is None:
        return crit
    opt = humanize(option)
    return f"{crit}: {opt}" if crit else opt


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else format(value, ".4g")
    return _SPACES.sub(" ", str(value)).strip()


class StateTooLarge(ValueError):
    """A state whose rendered text would pass the given size (rendering stopped there)."""


def _render_into(prefix: str, value: Any, lines: list[str], budget: list[int] | None = None) -> None:
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            _render_into(f"{prefix} {humanize(str(key))}".strip(), value[key], lines, budget)
    elif isinstance(value, (list, tuple)):
        if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
            _emit(f"{prefix}: {', '.join(_scalar(v) for v in value) or 'none'}", lines, budget)
        else:
            for i, item in enumerate(value):
                _render_into(f"{prefix} {i + 1}".strip(), item, lines, budget)
    else:
        _emit(f"{prefix}: {_scalar(value)}" if prefix else _scalar(value), lines, budget)


def _emit(line: str, lines: list[str], budget: list[int] | None) -> None:
    if budget is not None:
        # a deep object repeats its key path on every leaf's line: count as it grows, and stop past the limit
        budget[0] -= len(line) + 1
        if budget[0] < 0:
            raise StateTooLarge("the rendered state is larger than allowed")
    lines.append(line)


def render_features(features: Mapping[str, Any], limit: int | None = None) -> str:
    """Render a feature dict as text, one ``key: value`` line per leaf, keys sorted.

    Sorted keys make the text (and so the answer and any cache key) independent of the
    order a client happened to send; nested keys are joined ("sender reputation score").
    With ``limit``, raises ``StateTooLarge`` as soon as the text would pass that many characters.
    """
    lines: list[str] = []
    _render_into("", features, lines, None if limit is None else [limit + 1])
    return "\n".join(lines)


def render_state(state: str | Mapping[str, Any] | Sequence[Any], limit: int | None = None) -> str:
    """A Jev ``state`` as text: strings pass through, JSON objects/arrays are rendered (``limit`` as in ``render_features``)."""
    if isinstance(state, str):
        return state
    if isinstance(state, Mapping):
        return render_features(state, limit)
    lines: list[str] = []
    _render_into("", list(state), lines, None if limit is None else [limit + 1])
    return "\n".join(lines)


def label_question_set(text: str, labels: Sequence[str] = DEFAULT_LABELS, *, criteria: str = DEFAULT_LABEL_CRITERIA,
                       max_tokens: int | None = None, question_id: str = "decision") -> QuestionSet:
    """The Jev "input" shape: free text over a label set, with sentence-level evidence."""
    question = Question(id=question_id, options=tuple(labels), criteria=criteria)
    return QuestionSet(state=text, questions=(question,), max_tokens=max_tokens, sentence_evidence=True)


def candidate_question_set(task: str, features: Mapping[str, Any], candidates: Sequence[str], limit: int | None = None) -> QuestionSet:
    """The Jev "candidates" shape: a task name, a feature dict and the candidate decisions."""
    question = Question(id=task, options=tuple(candidates), criteria=humanize(task))
    return QuestionSet(state=render_features(features, limit), questions=(question,))


# ---------------------------------------------------------------------------- windows

_SENTENCE_END = re.compile(r"\n+|(?<=[.!?;])\s+")


class Segmenter:
    """Cuts a state into sentence-aligned windows of at most ``window_tokens`` (with [CLS]/[SEP]).

    Whole sentences are packed greedily so that a decisive sentence is never split; a
    sentence longer than a window is cut into overlapping chunks.
    """

    def __init__(self, tokenizer: Tokenizer, window_tokens: int) -> None:
        if window_tokens < 8:
            raise ValueError("window_tokens must be at least 8")
        self.tokenizer = tokenizer
        self.content = window_tokens - 2
        self.overlap = self.content // 4

    def sentences(self, text: str, max_tokens: int | None = None) -> list[Window]:
        """One window per sentence (long sentences chunked), in order."""
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        ids, offsets = enc.ids, enc.offsets
        if max_tokens is not None:
            ids, offsets = ids[:max_tokens], offsets[:max_tokens]
        if not ids:
            return [Window((), 0, 0)]
        # a sentence starts after each boundary; a token belongs to the sentence its first character is in
        starts = [m.end() for m in _SENTENCE_END.finditer(text)]
        owner = [bisect_right(starts, off[0]) for off in offsets]
        out: list[Window] = []
        first = 0
        for i in range(1, len(ids) + 1):
            if i == len(ids) or owner[i] != owner[first]:
                out.extend(self._chunks(ids, offsets, first, i))
                first = i
        return out

    def windows(self, text: str, max_tokens: int | None = None) -> list[Window]:
        """Sentences packed into as few windows as fit."""
        out: list[Window] = []
        cur_ids: list[int] = []
        cur_start = cur_end = 0
        for sent in self.sentences(text, max_tokens):
            if cur_ids and len(cur_ids) + len(sent.ids) > self.content:
                out.append(Window(tuple(cur_ids), cur_start, cur_end))
                cur_ids = []
            if not cur_ids:
                cur_start = sent.start
            cur_ids.extend(sent.ids)
            cur_end = sent.end
        if cur_ids or not out:
            out.append(Window(tuple(cur_ids), cur_start, cur_end))
        return out

    def _chunks(self, ids: list[int], offsets: list[tuple[int, int]], lo: int, hi: int) -> list[Window]:
        out: list[Window] = []
        step = self.content - self.overlap
        start = lo
        while True:
            end = min(start + self.content, hi)
            out.append(Window(tuple(ids[start:end]), offsets[start][0], offsets[end - 1][1]))
            if end >= hi:
                return out
            start += step


# ---------------------------------------------------------------------------- the routing head

@dataclass(frozen=True, slots=True)
class RoutingHead:
    """Scores (window, hypothesis) pairs: ``scale·s·h + contrast·s·ĉ + (U s)·(V h)``.

    ``s·h`` (cosine: both are normalised) is the zero-shot prior; ``ĉ`` is an option's
    own direction (its hypothesis minus the question's mean, normalised), which keeps
    options distinguishable when a long criteria dominates every hypothesis; the
    low-rank bilinear term is what training adds. A bool question compares its
    criteria against a learned state-dependent threshold ``w·s + b`` ("nothing of the kind").
    """

    scale: float
    contrast: float
    u: np.ndarray  # (rank, dim)
    v: np.ndarray  # (rank, dim)
    null_w: np.ndarray  # (dim,)
    null_b: float

    @classmethod
    def load(cls, path: Path) -> RoutingHead:
        with np.load(path, allow_pickle=False) as data:
            return cls(scale=float(data["scale"]), contrast=float(data["contrast"]), u=data["u"].astype(np.float32),
                       v=data["v"].astype(np.float32), null_w=data["null_w"].astype(np.float32), null_b=float(data["null_b"]))

    def project_hypotheses(self, h: np.ndarray, choice: bool) -> np.ndarray:
        """(K, dim) hypothesis embeddings of one question -> (K, dim + rank) cached form."""
        direct = h * self.scale
        if choice:
            centred = h - h.mean(axis=0, keepdims=True)
            centred /= np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-9)
            direct = direct + self.contrast * centred
        return np.concatenate([direct, h @ self.v.T], axis=1).astype(np.float32)

    def project_states(self, s: np.ndarray) -> np.ndarray:
        """(W, dim) window embeddings -> (W, dim + rank), so one matmul scores every pair."""
        return np.concatenate([s, s @ self.u.T], axis=1).astype(np.float32)

    def null_logits(self, s: np.ndarray) -> np.ndarray:
        return s @ self.null_w + self.null_b


# ---------------------------------------------------------------------------- the model

@dataclass
class _Encoded:
    windows: list[Window]
    rows: slice
    sentences: list[Window] = field(default_factory=list)
    sentence_rows: slice = field(default_factory=lambda: slice(0, 0))


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class ZeroShotModel:
    """A loaded ``clef`` model: ONNX encoder session, tokenizer, routing head, question cache.

    Thread-safe: onnxruntime sessions may be run concurrently and the cache is locked.
    """

    def __init__(self, directory: Path, manifest: dict[str, Any], session: ort.InferenceSession, provider: str,
                 precision: str, tokenizer: Tokenizer, head: RoutingHead, *, cache_size: int, cache_ttl_s: float,
                 max_windows: int, max_batch_windows: int) -> None:
        self.directory = directory
        self.manifest = manifest
        self.name: str = str(manifest.get("name", FAMILY))
        self.version: str = str(manifest["version"])
        self.session = session
        self.provider = provider
        self.precision = precision
        self.tokenizer = tokenizer
        self.head = head
        tok = manifest["tokenizer"]
        self.window_tokens = int(tok.get("window_tokens", 128))
        self.segmenter = Segmenter(tokenizer, self.window_tokens)
        self.cls_id, self.sep_id = int(tok.get("cls_id", 101)), int(tok.get("sep_id", 102))
        temps = manifest.get("temperature", {})
        self.temperature = {"choice": float(temps.get("choice", 1.0)), "bool": float(temps.get("bool", 1.0))}
        self.max_windows = max_windows
        self.max_batch_windows = max_batch_windows
        self._input_names = {i.name for i in session.get_inputs()}
        self._cache: TTLCache[tuple[str, str, tuple[str, ...]], np.ndarray] = TTLCache(maxsize=cache_size, ttl=cache_ttl_s)
        self._lock = threading.Lock()
        MODEL_INFO.set(1.0, self.version, provider, precision)

    # ---- loading

    @classmethod
    def load(cls, directory: str | Path, *, device: Literal["auto", "cuda", "cpu"] = "auto", precision: str | None = None,
             threads: int = 1, cache_size: int = 4096, cache_ttl_s: float = 3600.0, max_windows: int = 32,
             max_batch_windows: int | None = None, warmup: bool = True) -> ZeroShotModel:
        """Load ``models/repository/clef/<version>/``.

        ``device="auto"`` tries CUDA with the fp16 (else fp32) encoder when both the
        provider and the file are present, and otherwise uses the CPU with ``precision``
        (default int8, else fp32). The provider in use is logged and exported.

        ``max_batch_windows`` bounds one encoder run. By default the int8 encoder runs one
        window at a time: dynamic quantization picks one activation scale per run, so
        batching would make a state's answer depend on what else (and how much padding)
        shared its batch, and on the CPU batching buys no throughput anyway. fp32/fp16
        runs batch up to 64 windows.
        """
        directory = Path(directory)
        manifest = _read_manifest(directory)
        files = _file_names(manifest["files"])
        tok_file = directory / manifest["tokenizer"]["file"]
        if not tok_file.is_file():
            raise ModelLoadError(f"{directory}: tokenizer file {tok_file.name} is missing")
        tokenizer = Tokenizer.from_file(str(tok_file))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        head_file = directory / str(_file_names({"head": manifest.get("head", "head.npz")})["head"])
        if not head_file.is_file():
            raise ModelLoadError(f"{directory}: routing head file {head_file.name} is missing")
        head = RoutingHead.load(head_file)

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        session: ort.InferenceSession | None = None
        provider = chosen = ""
        from gateway.decider.onnx import cuda_usable

        if device in ("auto", "cuda") and cuda_usable() is None:
            for prec in ([precision] if precision else ["fp16", "fp32"]):
                name = files.get(prec)
                if name and (directory / name).is_file():
                    try:
                        session = ort.InferenceSession(str(directory / name), opts,
                                                       providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
                    except Exception as exc:  # a GPU build on a machine without a usable GPU
                        log.warning("clef: CUDA session for %s failed (%s); using the CPU", name, exc)
                        session = None
                    if session is not None and session.get_providers()[0] != "CUDAExecutionProvider":
                        session = None  # onnxruntime fell back silently: prefer the CPU file
                    if session is not None:
                        provider, chosen = "CUDAExecutionProvider", prec
                    break
        if session is not None:
            _verify(directory, manifest["files"], chosen)
        if session is None:
            if device == "cuda":
                raise ModelLoadError(f"{directory}: device=cuda but no CUDA session could be started")
            for key, value in int8probe.exact_int8_entries().items():  # exact int8 products on CPUs without VNNI too
                opts.add_session_config_entry(key, value)
            for prec in ([precision] if precision else ["int8", "fp32"]):
                name = files.get(prec)
                if name and (directory / name).is_file():
                    _verify(directory, manifest["files"], prec)
                    try:
                        session = ort.InferenceSession(str(directory / name), opts, providers=["CPUExecutionProvider"])
                    except Exception as exc:
                        raise ModelLoadError(f"{directory / name}: onnxruntime could not load it: {exc}") from exc
                    provider, chosen = "CPUExecutionProvider", prec
                    break
        if session is None:
            raise ModelLoadError(f"{directory}: no encoder file for precision {precision or 'int8/fp32'} "
                                 f"(manifest files: {dict(files)}); see models/clef/README.md to export it")
        if max_batch_windows is None:
            max_batch_windows = 1 if chosen == "int8" else 64
        model = cls(directory, manifest, session, provider, chosen, tokenizer, head, cache_size=cache_size,
                    cache_ttl_s=cache_ttl_s, max_windows=max_windows, max_batch_windows=max_batch_windows)
        log.info("clef %s loaded from %s: provider=%s precision=%s threads=%d", model.version, directory, provider, chosen, threads)
        if warmup:
            model.warmup()
        return model

    def warmup(self) -> None:
        """Run fixed inputs through every path once (first runs allocate and are slow), then forget them."""
        probe = QuestionSet("warm-up: the service restarted and answers again.",
                            (Question("w", ("yes", "no"), "warm-up"), Question("b", criteria="warm-up", type="bool")))
        self.answer([probe])
        with self._lock:
            self._cache.clear()
            CACHE_ENTRIES.set(0.0)

    # ---- encoding

    def embed(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        """Encode token windows (without [CLS]/[SEP]) into L2-normalised embeddings, shape (N, dim)."""
        if not windows:
            return np.zeros((0, self.head.u.shape[1]), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        out = np.empty((len(windows), self.head.u.shape[1]), dtype=np.float32)
        for lo in range(0, len(order), self.max_batch_windows):
            chunk = order[lo:lo + self.max_batch_windows]
            width = max(len(windows[i]) for i in chunk) + 2
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                seq = [self.cls_id, *windows[i], self.sep_id]
                ids[row, :len(seq)] = seq
                mask[row, :len(seq)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feed["token_type_ids"] = np.zeros_like(ids)
            (emb,) = self.session.run(["embedding"], feed)
            out[chunk] = emb
        return out

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Encode short texts (truncated to one window) into embeddings, shape (N, dim)."""
        encs = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return self.embed([e.ids[:self.window_tokens - 2] for e in encs])

    def _hypotheses(self, questions: Sequence[Question]) -> dict[tuple[str, str, tuple[str, ...]], np.ndarray]:
        """Cached (K, dim + rank) hypothesis matrices; all misses are encoded in one run."""
        found: dict[tuple[str, str, tuple[str, ...]], np.ndarray] = {}
        missing: dict[tuple[str, str, tuple[str, ...]], Question] = {}
        with self._lock:
            for q in questions:
                key = q.key
                if key in found or key in missing:
                    LOOKUPS.inc("hit")
                    continue
                cached = self._cache.get(key)
                if cached is not None:
                    found[key] = cached
                    LOOKUPS.inc("hit")
                else:
                    missing[key] = q
                    LOOKUPS.inc("miss")
        if missing:
            texts: list[str] = []
            spans: list[tuple[tuple[str, str, tuple[str, ...]], int, int]] = []
            for key, q in missing.items():
                start = len(texts)
                if q.type == "bool":
                    texts.append(hypothesis_text(q.effective_criteria, None))
                else:
                    texts.extend(hypothesis_text(q.effective_criteria, o) for o in q.options)
                spans.append((key, start, len(texts)))
            embedded = self.embed_texts(texts)
            with self._lock:
                for key, lo, hi in spans:
                    found[key] = self._cache[key] = self.head.project_hypotheses(embedded[lo:hi], key[0] == "choice")
                CACHE_ENTRIES.set(float(len(self._cache)))
        return found

    # ---- answering

    def answer(self, items: Sequence[QuestionSet]) -> list[list[Answer]]:
        """Answer every question of every item; all states are encoded in one batched pass.

        Returns one list of answers per item, in question order. Raises
        :class:`StateTooLongError` when a state needs more than ``max_windows`` windows.
        """
        t0 = time.perf_counter()
        encoded: list[_Encoded] = []
        all_windows: list[tuple[int, ...]] = []
        for item in items:
            windows = self.segmenter.windows(item.state, item.max_tokens)
            if len(windows) > self.max_windows:
                raise StateTooLongError(len(windows), self.max_windows)
            enc = _Encoded(windows, slice(len(all_windows), len(all_windows) + len(windows)))
            all_windows.extend(w.ids for w in windows)
            if item.sentence_evidence:
                sentences = self.segmenter.sentences(item.state, item.max_tokens)[:4 * self.max_windows]
                if len(sentences) > 1:
                    enc.sentences = sentences
                    enc.sentence_rows = slice(len(all_windows), len(all_windows) + len(sentences))
                    all_windows.extend(s.ids for s in sentences)
            encoded.append(enc)
        hyps = self._hypotheses([q for item in items for q in item.questions])
        states = self.embed(all_windows)
        projected = self.head.project_states(states)
        WINDOWS.inc(amount=float(len(all_windows)))
        out: list[list[Answer]] = []
        for item, enc in zip(items, encoded, strict=True):
            answers: list[Answer] = []
            for q in item.questions:
                h = hyps[q.key]
                logits = projected[enc.rows] @ h.T  # (W, K)
                null = self.head.null_logits(states[enc.rows]) if q.type == "bool" else None
                if enc.sentences:
                    ev_logits = projected[enc.sentence_rows] @ h.T
                    ev_null = self.head.null_logits(states[enc.sentence_rows]) if q.type == "bool" else None
                    ev_windows = enc.sentences
                else:
                    ev_logits, ev_null, ev_windows = logits, null, enc.windows
                answers.append(self._score(item.state, q, logits, null, ev_logits, ev_null, ev_windows))
            out.append(answers)
        INFERENCE.observe(time.perf_counter() - t0, self.provider)
        return out

    def _score(self, state: str, q: Question, logits: np.ndarray, null: np.ndarray | None, ev_logits: np.ndarray,
               ev_null: np.ndarray | None, ev_windows: list[Window]) -> Answer:
        if q.type == "bool":
            assert null is not None and ev_null is not None
            t = self.temperature["bool"]
            # "true" when any window satisfies the criteria: pool the per-window margin by max
            margin = float((logits[:, 0] - null).max())
            p_true = _sigmoid(margin / t)
            verdict = p_true >= 0.5
            per_window = np.array([_sigmoid(float(m) / t) for m in ev_logits[:, 0] - ev_null])
            support = per_window if verdict else 1.0 - per_window
            probs: dict[str, float] = {"true": p_true, "false": 1.0 - p_true}
            top: str | bool = verdict
            confidence = p_true if verdict else 1.0 - p_true
        else:
            t = self.temperature["choice"]
            p = _softmax(logits.max(axis=0) / t)
            k = int(p.argmax())
            probs = {o: float(x) for o, x in zip(q.options, p, strict=True)}
            top, confidence = q.options[k], float(p[k])
            support = np.array([_softmax(row / t)[k] for row in ev_logits])
        order = np.argsort(-support, kind="stable")[:3]
        evidence = tuple(Evidence(state[ev_windows[i].start:ev_windows[i].end], ev_windows[i].start, ev_windows[i].end,
                                  float(support[i])) for i in order)
        return Answer(q.id, top, float(confidence), probs, evidence)

    def classify(self, texts: Sequence[str], labels: Sequence[str] = DEFAULT_LABELS, *,
                 criteria: str = DEFAULT_LABEL_CRITERIA, max_tokens: int | None = None) -> list[Answer]:
        """The "input" shape for many texts: one label each, with the sentences that drove it."""
        items = [label_question_set(t, labels, criteria=criteria, max_tokens=max_tokens) for t in texts]
        return [answers[0] for answers in self.answer(items)]

    def decide(self, requests: Sequence[tuple[str, Mapping[str, Any], Sequence[str]]]) -> list[Answer]:
        """The "candidates" shape: ``(task, features, candidates)`` triples -> one answer each."""
        items = [candidate_question_set(task, feats, cands) for task, feats, cands in requests]
        return [answers[0] for answers in self.answer(items)]

    def cache_info(self) -> dict[str, float]:
        """Entries and hit/miss counts of the question cache (process-wide counters)."""
        with self._lock:
            size = len(self._cache)
        return {"entries": float(size), "hits": LOOKUPS.get("hit"), "misses": LOOKUPS.get("miss")}

    def describe(self) -> dict[str, Any]:
        """What ``/health`` shows about this model."""
        return {"name": self.name, "version": self.version, "family": FAMILY, "provider": self.provider,
                "precision": self.precision, "int8_kernel": int8probe.kernel(self.session) if self.precision == "int8" else None,
                "window_tokens": self.window_tokens, "max_windows": self.max_windows}


def _file_names(files: Mapping[str, Any]) -> dict[str, str]:
    """``{precision: name}`` from manifest entries written as a name or as ``{path, sha256, size}``."""
    out: dict[str, str] = {}
    for key, spec in files.items():
        if isinstance(spec, str):
            out[key] = spec
        elif isinstance(spec, Mapping) and isinstance(spec.get("path"), str):
            out[key] = spec["path"]
    return out


def _verify(directory: Path, files: Mapping[str, Any], precision: str) -> None:
    """Refuse an encoder file whose sha256 differs from the manifest's (truncated copy, stray edit)."""
    spec = files.get(precision)
    if isinstance(spec, Mapping) and spec.get("sha256"):
        digest = file_sha256(directory / spec["path"])
        if digest != spec["sha256"]:
            raise ModelLoadError(f"{directory / spec['path']}: sha256 {digest[:12]}… does not match the manifest's "
                                 f"{str(spec['sha256'])[:12]}…; re-export the model")


def _read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{directory}: no manifest.json") from exc
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path}: unreadable manifest: {exc}") from exc
    problems = [f"missing field {k!r}" for k in ("version", "family", "feature_version", "tokenizer", "files") if k not in manifest]
    if manifest.get("channel", "stable") not in CHANNELS:
        problems.append(f"channel {manifest['channel']!r} is not one of {', '.join(CHANNELS)}")
    if problems:
        raise ModelLoadError(f"{path}: " + "; ".join(problems))
    if manifest["family"] != FAMILY:
        raise ModelLoadError(f"{path}: family {manifest['family']!r} is not {FAMILY!r}")
    if manifest["feature_version"] != TEXT_VERSION:
        raise ModelLoadError(f"{path}: model text version {manifest['feature_version']!r} does not match this runtime's "
                             f"{TEXT_VERSION!r}; re-export the model or upgrade the gateway")
    tok = manifest["tokenizer"]
    sha = tok.get("sha256")
    if sha and (directory / tok["file"]).is_file() and file_sha256(directory / tok["file"]) != sha:
        raise ModelLoadError(f"{path}: tokenizer {tok['file']} does not match the sha256 in the manifest")
    return dict(manifest)
