"""The runtime: one compiled configuration (pipeline, backends, model, logs), built, started, swapped and closed here.

``build_runtime`` is the one place a config becomes everything a request needs; a reload
builds a new runtime beside the running one and swaps it whole (``RuntimeRef``), and a
failed build keeps the old one. The proxy reads the runtime; it never imports the server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from gateway import config as configmod
from gateway import console
from gateway.accesslog import AccessLog
from gateway.backends import BackendSet
from gateway.config import Config, ConfigError
from gateway.decider import Decider
from gateway.decider import load as load_decider
from gateway.decider.manifest import ManifestError
from gateway.decider.onnx import ModelLoadError
from gateway.decisionlog import DecisionLog
from gateway.jev import ClefRuntime
from gateway.pipeline import Pipeline
from gateway.pipeline import build as build_pipeline
from gateway.proxy.pools import UpstreamPools

log = logging.getLogger("clefgate.server")

@dataclass(frozen=True)
class Runtime:
    """One compiled configuration: everything a request needs, swapped whole on reload."""

    config: Config
    pipeline: Pipeline
    backends: BackendSet
    pools: UpstreamPools  # the proxy's connection pool of each server of ``backends``
    access_log: AccessLog
    generation: int
    decider: Decider | None = None
    decision_log: DecisionLog | None = None


class RuntimeRef:
    """The current runtime. Read ``current`` once per request and keep using that object."""

    __slots__ = ("current",)

    def __init__(self, runtime: Runtime) -> None:
        self.current = runtime


@dataclass
class ConfigSource:
    """Where the config comes from: a file (or none), ``clefgate serve`` flag overrides, and a model swap.

    A swap made with POST /admin/model is kept apart from the flags, together with the ``model:`` settings that
    file and flags gave when it was made (``model_base``). It stays in force across reloads only while those
    settings do not change: an operator who edits the model section and reloads gets what the file says (the
    swap was a stop-gap, and a silent override of the file would make the edit look applied when it was not).
    """

    path: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    model_swap: dict[str, Any] | None = None
    model_base: Any = None

    def load(self) -> Config:
        return self.resolve()[0]

    def resolve(self) -> tuple[Config, ConfigSource]:
        """The config, and the source to keep once that config serves (the swap dropped, if the file's model
        settings changed since it was made)."""
        plain = configmod.load(self.path, **self.overrides)
        if self.model_swap is None:
            return plain, self
        if plain.model != self.model_base:
            log.info("the model settings in the config changed; they replace the model swapped in with POST /admin/model",
                     extra={"fields": {"swap": self.model_swap}})
            return plain, ConfigSource(self.path, self.overrides)
        merged = {**(self.overrides.get("model") or {}), **self.model_swap}
        return configmod.load(self.path, **{**self.overrides, "model": merged}), self

    def with_model(self, swap: dict[str, Any]) -> ConfigSource:
        """The same source with ``model:`` settings replaced (a hot swap via POST /admin/model).

        Reads the file (raises ConfigError) to record the model settings the swap is made over.
        """
        base = configmod.load(self.path, **self.overrides).model
        kept = self.model_swap if self.model_swap is not None and base == self.model_base else {}
        return ConfigSource(self.path, self.overrides, {**kept, **swap}, base)


MODEL_SWAP_KEYS = ("name", "version", "variant", "enabled")


def check_config(cfg: Config) -> tuple[Pipeline, tuple[str, ...]]:
    """Everything a start would compile, without serving: rules, policy, challenge keys, the model.

    Returns the pipeline and the warnings (a policy other than the one the model version was
    evaluated with). Raises ConfigError with every problem. Used by ``clefgate check`` and by
    the supervisor before it asks workers to reload.
    """
    try:
        decider = load_decider(cfg)
    except (ManifestError, ModelLoadError) as exc:
        raise ConfigError([f"model: {p}" for p in exc.problems], cfg.source) from exc
    if cfg.jev.enabled and cfg.clef.enabled:
        try:
            ClefRuntime.directory(cfg.clef)  # the version named exists (loading it is the decision API's, at start)
        except ManifestError as exc:
            if decider is not None:
                decider.close()
            raise ConfigError([f"clef: {p}" for p in exc.problems], cfg.source) from exc
    try:
        pipeline = build_pipeline(cfg, decider.stage if decider is not None else None)
        return pipeline, decider.notes if decider is not None else ()
    finally:
        if decider is not None:
            decider.close()


async def build_runtime(cfg: Config, previous: Runtime | None = None) -> Runtime:
    """Compile a config into a runtime; raises ConfigError with every problem.

    The model (when enabled) is loaded and warmed in a thread, so the event loop keeps
    serving the running runtime meanwhile. Parts whose settings did not change are
    taken over from ``previous``: the loaded model and its cache, per-client state,
    connection pools, and the log writers.
    """
    loop = asyncio.get_running_loop()
    try:
        decider = await loop.run_in_executor(None, load_decider, cfg, previous.decider if previous else None)
    except (ManifestError, ModelLoadError) as exc:
        raise ConfigError([f"model: {p}" for p in exc.problems], cfg.source) from exc
    if decider is not None:
        for note in decider.notes:
            log.warning(note, extra={"fields": {"model": decider.label}})
    try:
        # one Policy per runtime: the pipeline compiles it and hands it to the decider's stage
        pipeline = build_pipeline(cfg, decider.stage if decider is not None else None, previous=previous.pipeline if previous else None)
    except ConfigError:
        if decider is not None and (previous is None or previous.decider is None):
            decider.close()
        elif decider is not None and previous is not None:
            decider.close(successor=previous.decider)
        raise
    decision_log = None
    if cfg.decision_log.path:
        if previous is not None and previous.decision_log is not None and previous.config.decision_log == cfg.decision_log:
            decision_log = previous.decision_log
        else:
            decision_log = DecisionLog(cfg.decision_log)
        pipeline = dataclasses.replace(pipeline, observers=(*pipeline.observers, decision_log.observe))
    if cfg.admin.console:  # the console's recent decisions and per-minute counts, and its temporary allows and blocks
        console.RECORDER.resize(cfg.admin.console_decisions)
        console.RECORDER.state = pipeline.state
        pipeline = dataclasses.replace(pipeline, observers=(*pipeline.observers, console.RECORDER.observe), overrides=console.OVERRIDES)
    backends = BackendSet.build(cfg, previous.backends if previous else None)
    if previous is not None and _same_access_log(previous.config, cfg):
        access_log = previous.access_log
    else:
        access_log = AccessLog.from_config(cfg.logging)
    # built last: nothing in here fails after the pools of the previous runtime are taken over (and held)
    pools = UpstreamPools(backends, previous.pools if previous else None)
    return Runtime(cfg, pipeline, backends, pools, access_log, (previous.generation + 1) if previous else 1, decider,
                   decision_log)


def _same_access_log(a: Config, b: Config) -> bool:
    keys = ("access_log", "access_log_flush_s", "access_log_max_pending_bytes")
    return all(getattr(a.logging, k, None) == getattr(b.logging, k, None) for k in keys)


async def start_runtime(runtime: Runtime) -> None:
    """Start a runtime's background work (health checks, shared-state sync)."""
    await runtime.pipeline.start()
    await runtime.backends.start()


async def close_runtime(old: Runtime, successor: Runtime | None = None) -> None:
    """Release what ``old`` holds and ``successor`` (if any) did not take over."""
    await old.backends.close()
    old.pools.close()  # the pools the successor took over stay open: it holds them too
    await old.pipeline.close(successor=successor.pipeline if successor else None)
    if old.decider is not None:
        old.decider.close(successor=successor.decider if successor else None)
    if old.decision_log is not None and (successor is None or successor.decision_log is not old.decision_log):
        await old.decision_log.aclose()
    if successor is None or successor.access_log is not old.access_log:
        await old.access_log.aclose()
