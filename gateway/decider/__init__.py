"""The decider: everything between "ask the model" and calibrated probabilities.

Layers, each small and testable alone (see their modules)::

    CachedScorer(BreakerScorer(BatchingScorer(OnnxScorer)))

``load`` builds the stack for a config. A reload that leaves the model unchanged keeps
the loaded session, its worker threads, the decision cache (the probabilities of an
unchanged model stay valid; so do the payload answers a two-input model keeps while the cache is on) and, with the same breaker settings, the circuit breaker
(a reload must not close a breaker that a failing model opened); a changed model is
loaded and warmed beside the running one, and swapped in with the rest of the runtime.
"Unchanged" is judged by the version directory and manifest that the ``model:`` section
resolves to, not by its spelling: ``version: latest`` names a newer version once one
is added, and ``latest`` and the version number it stands for are the same model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.config import Config, DeciderConfig, PolicyConfig
from gateway.decider import manifest as mf
from gateway.decider.batching import BatchingScorer
from gateway.decider.breaker import BreakerScorer, CircuitBreaker
from gateway.decider.cache import CachedScorer
from gateway.decider.manifest import Manifest
from gateway.decider.onnx import OnnxOptions, OnnxScorer
from gateway.decider.scoring import Scorer
from gateway.decider.stage import ModelStage, PolicyLike
from gateway.features import ModelInput
from gateway.verdict import Probabilities

log = logging.getLogger("clefgate.decider")

__all__ = ["Decider", "load", "policy_notes"]


def policy_notes(manifest: Manifest, policy: PolicyConfig) -> tuple[str, ...]:
    """Where ``policy``'s top-level thresholds differ from those the model version was evaluated with (its manifest's
    ``policy``; named route policies are the operator's deliberate choice and are not compared).

    A version's held-out figures (its model card) hold at those thresholds; another value is allowed, and said.
    """
    def shown(v: float | None) -> str:
        return "null" if v is None else f"{v:g}"

    return tuple(f"policy.{key} is {shown(getattr(policy, key))}, but {manifest.id} was evaluated with {shown(value)} "
                 f"(its model card's figures hold at that value)"
                 for key, value in manifest.policy.items() if getattr(policy, key) != value)


@dataclass
class Decider:
    """The model side of one runtime: a loaded model, its threads and the scorer chain."""

    model: OnnxScorer
    options: OnnxOptions
    settings: DeciderConfig
    executor: ThreadPoolExecutor
    scorer: Scorer
    cache: CachedScorer | None
    breaker: CircuitBreaker
    batcher: BatchingScorer
    notes: tuple[str, ...] = ()  # policy_notes at load: where the config's policy is not the one the model was read with

    @property
    def label(self) -> str:
        return self.model.label

    def stage(self, policy: PolicyLike) -> ModelStage:
        """The pipeline's score stage for this model and ``policy`` (``pipeline.build`` calls it with the runtime's one Policy)."""
        return ModelStage(self.scorer, policy, fallback=self.settings.fallback, model_label=self.label, explain=self.explain,
                          cache=self.cache, featurize=self.model.model_input, ready=self.batcher.runs_at_once)

    def explain(self, item: ModelInput, probabilities: Probabilities) -> tuple[str, ...]:
        return self.model.explain(item, probabilities=probabilities)

    def describe(self) -> dict[str, Any]:
        out = {"model": self.label, "provider": self.model.provider, "precision": self.model.precision,
               "int8_kernel": getattr(self.model, "int8_kernel", None), "breaker": self.breaker.state, "queue": self.batcher.queued,
               "cache_entries": len(self.cache) if self.cache else 0}
        if self.notes:
            out["policy_notes"] = list(self.notes)
        return out

    def close(self, successor: Decider | None = None) -> None:
        """Release the threads and the session, except what ``successor`` took over on a reload.

        ``successor`` is the decider that serves from now on (the new one after a swap, the running one after a
        rejected reload): its breaker's state becomes the model's gauge again.
        """
        if successor is not None and successor.breaker is not self.breaker:
            successor.breaker.publish()
        if successor is None or successor.executor is not self.executor:
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.batcher.close()
        if successor is None or successor.model is not self.model:
            self.model.close()


# a model batch of at most this many requests runs on the event loop when the model's recent runs predict it to take
# at most INLINE_BUDGET_US of CPU (gateway.decider.batching): one Clef-flash row takes about 0.3 ms on a CPU core, and
# handing it to the inference thread and back costs about as much again
INLINE_ROWS = 4
INLINE_BUDGET_US = 2000
# the most payload answers a model keeps (each a few small arrays): a flood's payloads repeat, so few are needed
PAYLOAD_ANSWERS_MAX = 65_536
_BREAKER_SETTINGS = ("failure_threshold", "window_s", "cooldown_s", "half_open_probes")


def _chain(model: OnnxScorer, settings: DeciderConfig, executor: ThreadPoolExecutor, cache: CachedScorer | None,
           breaker: CircuitBreaker | None) -> tuple[Scorer, CachedScorer | None, CircuitBreaker, BatchingScorer]:
    # the CPU provider's runs are computations on the calling thread: a tiny batch of them runs on the event loop
    inline = getattr(model, "provider", "") == "cpu"
    batcher = BatchingScorer(model, executor, max_batch=settings.max_batch, max_wait_us=settings.max_wait_us,
                             max_queue=settings.max_queue, threads=settings.inference_threads, questions=model.questions,
                             inline_rows=INLINE_ROWS if inline else 0, inline_budget_us=INLINE_BUDGET_US if inline else 0)
    if breaker is None:
        breaker = CircuitBreaker(model.label, failure_threshold=settings.failure_threshold, window_s=settings.window_s,
                                 cooldown_s=settings.cooldown_s, half_open_probes=settings.half_open_probes)
    guarded = BreakerScorer(batcher, breaker, settings.timeout_ms / 1000.0)
    if settings.cache_size <= 0 or settings.cache_ttl_s <= 0:
        return guarded, None, breaker, batcher
    if cache is not None:
        cache = cache.sharing(guarded)  # same model: keep the cached answers; the running chain is left as it is
    else:
        cache = CachedScorer(guarded, ttl_s=settings.cache_ttl_s, maxsize=settings.cache_size)
    return cache, cache, breaker, batcher


def _serves(previous: Decider, options: OnnxOptions) -> bool:
    """Does ``options`` name the model ``previous`` has loaded (same version directory, same manifest, same session
    options)? ``previous.options == options`` is not enough: ``latest`` resolves anew at every load, and an explicit
    version may be the one ``latest`` stood for. A manifest rewritten in place is another model too.
    """
    if dataclasses.replace(options, version="") != dataclasses.replace(previous.options, version=""):
        return False
    manifest = previous.model.manifest
    try:
        directory = mf.resolve(options.repository, options.name, options.version)
        raw = json.loads((directory / mf.MANIFEST_FILE).read_text(encoding="utf-8"))
    except (mf.ManifestError, OSError, ValueError):
        return False  # not loadable as it stands: the fresh load below raises the full error
    return directory == manifest.directory and raw == manifest.raw


def load(cfg: Config, previous: Decider | None = None) -> Decider | None:
    """Build the decider for ``cfg`` (blocking: loads and warms a model; run it off the event loop).

    Returns None when the model is disabled. Raises ``ManifestError``/``ModelLoadError``
    (from ``gateway.decider``'s manifest and onnx modules) when the model cannot be used.
    """
    if not cfg.model.enabled:
        return None
    base = Path(cfg.source).parent if cfg.source and not cfg.source.startswith("<") else None
    options = OnnxOptions.from_config(cfg.model, base)
    settings = cfg.decider
    same_model = previous is not None and _serves(previous, options)
    if same_model and previous is not None and previous.settings.inference_threads == settings.inference_threads:
        model, executor = previous.model, previous.executor
    else:
        model = previous.model if same_model and previous is not None else OnnxScorer(options)
        executor = ThreadPoolExecutor(max_workers=settings.inference_threads, thread_name_prefix="clefgate-model")
    keep_cache = (previous.cache if same_model and previous is not None and previous.cache is not None
                  and previous.settings.cache_size == settings.cache_size and previous.settings.cache_ttl_s == settings.cache_ttl_s
                  else None)
    keep_breaker = (previous.breaker if previous is not None and model is previous.model
                    and all(getattr(previous.settings, k) == getattr(settings, k) for k in _BREAKER_SETTINGS) else None)
    scorer, cache, breaker, batcher = _chain(model, settings, executor, keep_cache, keep_breaker)
    # the payload half's answers are kept beside the decision cache, as long as its decisions (see OnnxScorer.probabilities)
    if cache is not None:
        model.keep_payload_answers(settings.cache_ttl_s, min(settings.cache_size, PAYLOAD_ANSWERS_MAX))
    else:
        model.keep_payload_answers(0.0, 0)
    if getattr(model, "warmup_error", "") and keep_breaker is None:
        breaker.trip()  # model.on_warmup_failure: fallback
    return Decider(model, options, dataclasses.replace(settings), executor, scorer, cache, breaker, batcher,
                   policy_notes(model.manifest, cfg.policy))
