"""One worker: an event loop's gateway (runtime, data plane, reloads, drain), and what every serving process sets up.

``Worker`` owns the data plane (``gateway.proxy``), the backend pools and the compiled decision
pipeline, all in one ``Runtime``. It serves in the ``clefgate serve`` process itself (``workers: 1``,
``gateway.server``) or in a worker process of the supervisor (``gateway.supervisor``).

A reload (SIGHUP, ``POST /admin/reload``) builds a complete new ``Runtime`` beside the running one and
swaps the reference in one assignment; requests already in flight finish on the runtime they started
with. If anything fails to load, the running runtime stays in force and every problem is logged and
returned.

Every serving process (the single one, the supervisor, each worker process) logs JSON lines on stderr
(``configure_logging``), keeps its background tasks referenced (``_spawn``) and reloads or stops on
signals (``_install_signals``); readiness, the config generation and the build are gauges here.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway import __version__, metrics
from gateway import config as configmod
from gateway.arming import DISARMS, Arming, arming, disarms
from gateway.config import Config, ConfigError
from gateway.runtime import ConfigSource, Runtime, RuntimeRef, build_runtime, close_runtime, start_runtime

log = logging.getLogger("clefgate.server")

READY = metrics.gauge("clefgate_ready", "1 when this gateway is ready for traffic (started, warmed, not draining).", merge="min")
CONFIG_GENERATION = metrics.gauge("clefgate_config_generation", "Generation of the running config (increments on each successful reload).",
                                  merge="max")
BUILD_INFO = metrics.gauge("clefgate_build_info", "Version of the running gateway (value is always 1).", ("version",), merge="max")
BUILD_INFO.set(1.0, __version__)


def configure_logging(level: str) -> None:
    """Process logs as JSON lines on stderr (the access log has its own writer)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            out.update(extra)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def runtime_arming(runtime: Runtime) -> Arming:
    """What a runtime arms (``gateway.arming.Arming``)."""
    return arming(runtime.pipeline, runtime.decider.label if runtime.decider is not None else "")


# young and middle generations as CPython sets them; the oldest is collected after 10x as many middle collections
GC_THRESHOLDS = (700, 10, 100)


def settle_heap() -> None:
    """Keep the cyclic collector's full collections off the request path as far as they can be.

    What the gateway keeps for good (modules, the model, the compiled rules, the runtime's
    tables) is some hundred thousand objects that never become garbage, yet every collection
    of the oldest generation walks them: a full collection, then ``gc.freeze``, leaves them
    out (they are still freed by their reference counts). A flood from many addresses adds
    per-client state (windows, history) that lives until it is evicted, and every few
    thousand requests that growth set off another full collection of tens of milliseconds:
    ``GC_THRESHOLDS`` makes those ten times rarer. Cyclic garbage is little here (the
    proxy's objects are freed by their counts), so what waits longer for collection is
    small. Called once the worker serves and again once a reload's retired runtime is
    closed: everything is thawed first, so a cycle of the retired runtime is collected
    rather than kept frozen.
    """
    gc.set_threshold(*GC_THRESHOLDS)
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class Worker:
    """One event loop's gateway: runtime, data plane, reloads and drain."""

    def __init__(self, source: ConfigSource, cfg: Config, *, reuse_port: bool, index: int = 0) -> None:
        self.source = source
        self.initial = cfg
        self.reuse_port = reuse_port
        self.index = index
        self.ref: RuntimeRef | None = None
        self.plane: Any = None
        self.ready = False
        self.draining = False
        self._reload_lock = asyncio.Lock()
        self.disarmed: list[str] = []  # how the last reload protects less than the config before it

    @property
    def runtime(self) -> Runtime:
        assert self.ref is not None, "worker not started"
        return self.ref.current

    async def start(self) -> None:
        from gateway import proxy

        runtime = await build_runtime(self.initial)
        await start_runtime(runtime)
        self.ref = RuntimeRef(runtime)
        host, port = configmod.split_host_port(runtime.config.listen)
        self.plane = await proxy.serve(self.ref, host, port, reuse_port=self.reuse_port)
        CONFIG_GENERATION.set(runtime.generation)
        settle_heap()
        self.ready = True
        READY.set(1.0)
        log.info("data plane listening", extra={"fields": {"listen": f"{host}:{self.plane.port}", "worker": self.index,
                                                           "pipeline": runtime.pipeline.description}})

    async def swap_model(self, swap: dict[str, Any]) -> list[str]:
        """Load another model version beside the running one, warm it, then swap (a reload with a model override).

        Under the reload lock, and the override becomes the worker's source only once it is serving: a swap
        that fails cannot put back an older source over one that a concurrent swap or reload made current.
        """
        async with self._reload_lock:
            return await self._reload(self.source, swap=swap)

    async def reload(self) -> list[str]:
        """Load the config again and swap it in; on any problem keep the running one."""
        async with self._reload_lock:
            return await self._reload(self.source)

    async def restore(self, source: ConfigSource, cfg: Config) -> list[str]:
        """Go back to the config still in force elsewhere (``cfg``, resolved from ``source``): a supervised reload that
        this worker took and another worker refused."""
        async with self._reload_lock:
            return await self._reload(source, cfg)

    async def _reload(self, source: ConfigSource, cfg: Config | None = None, *, swap: dict[str, Any] | None = None) -> list[str]:
        """Build and start a runtime from ``source`` (with the model ``swap`` on top; or ``cfg``, already resolved from
        it) and swap it in. The source becomes the worker's only once its config serves (the caller holds the lock)."""
        old = self.runtime
        try:
            if cfg is None:
                cfg, source = (source.with_model(swap) if swap else source).resolve()
            if cfg.listen != old.config.listen:
                raise ConfigError([f"listen: changing the data listener ({old.config.listen} -> {cfg.listen}) needs a restart"],
                                  cfg.source)
            new = await build_runtime(cfg, old)
            try:
                await start_runtime(new)
            except BaseException:
                # what the new runtime took over from the running one stays the running one's
                await close_runtime(new, successor=old)
                raise
        except ConfigError as exc:
            metrics.CONFIG_RELOADS.inc("error")
            log.error("reload rejected; the running config stays in force",
                      extra={"fields": {"source": exc.source, "problems": exc.problems}})
            return [f"{exc.source}: {p}" for p in exc.problems]
        except Exception as exc:  # a reload must never take the running gateway down
            metrics.CONFIG_RELOADS.inc("error")
            log.exception("reload failed; the running config stays in force")
            return [f"reload failed: {exc!r}"]
        assert self.ref is not None
        self.ref.current = new
        self.source = source
        CONFIG_GENERATION.set(new.generation)
        metrics.CONFIG_RELOADS.inc("ok")
        log.info("config reloaded", extra={"fields": {"generation": new.generation, "source": cfg.source}})
        before, after = runtime_arming(old), runtime_arming(new)
        self.disarmed = [why for _, why in disarms(before, after)]
        if self.disarmed:
            for what, _ in disarms(before, after):
                DISARMS.inc(what)
            log.warning("the reloaded config protects less: %s", "; ".join(self.disarmed),
                        extra={"fields": {"generation": new.generation, "before": before.summary(), "after": after.summary()}})
        # Old pools that the new set did not take over close once in-flight requests are done.
        self._retire(old, new)
        return []

    def _retire(self, old: Runtime, new: Runtime) -> None:
        async def retire() -> None:
            # requests that started on the old runtime finish on it; give them the drain deadline
            await asyncio.sleep(max(old.config.timeouts.drain_s, 1.0))
            await close_runtime(old, new)
            settle_heap()
        task = asyncio.get_running_loop().create_task(retire())
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    async def drain(self, deadline_s: float | None = None) -> int:
        """Stop accepting, finish in-flight requests up to the deadline, then close everything."""
        if self.draining:
            return 0
        self.draining = True
        self.ready = False
        READY.set(0.0)
        if self.ref is None:  # told to stop before its start finished: nothing serves yet
            return 0
        runtime = self.runtime
        deadline = runtime.config.timeouts.drain_s if deadline_s is None else deadline_s
        log.info("draining", extra={"fields": {"deadline_s": deadline, "worker": self.index}})
        cut = await self.plane.drain(deadline) if self.plane is not None else 0
        await close_runtime(runtime)
        log.info("drained", extra={"fields": {"cut_off": cut, "worker": self.index}})
        return int(cut)

    def status(self) -> dict[str, Any]:
        rt = self.ref.current if self.ref else None
        return {
            "worker": self.index,
            "pid": os.getpid(),
            "ready": self.ready and not self.draining,
            "generation": rt.generation if rt else 0,
            "backends": rt.backends.healthy if rt else {},
            "pipeline": rt.pipeline.description if rt else "",
            "model": rt.decider.describe() if rt and rt.decider else None,
            "armed": runtime_arming(rt).to_json() if rt else None,
            "disarmed": list(self.disarmed),
        }


_BACKGROUND: set[asyncio.Task[Any]] = set()


def _spawn(coro: Awaitable[Any]) -> None:
    task = asyncio.ensure_future(coro)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


def _install_signals(loop: asyncio.AbstractEventLoop, *, on_reload: Callable[[], None], on_stop: Callable[[], None]) -> None:
    loop.add_signal_handler(signal.SIGHUP, on_reload)
    loop.add_signal_handler(signal.SIGTERM, on_stop)
    loop.add_signal_handler(signal.SIGINT, on_stop)
