"""The multi-process supervisor (``workers`` above 1) and a worker process's side of its pipe.

The supervisor process serves the admin app (``gateway.admin``) and the decision API, starts the worker
processes (each runs a ``gateway.worker.Worker`` and binds the data port with SO_REUSEPORT), restarts any
that die, and talks to them over pipes: metrics snapshots, readiness, reload, model swap, drain. A worker
process starts in ``_worker_main`` (the spawn target) and answers the pipe in ``_worker_loop``.

A reload reaches every worker or none: the config is checked here first, and when one worker refuses it,
those that took it go back to the config in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway import console, metrics
from gateway.admin import admin_app, start_admin
from gateway.config import Config, ConfigError
from gateway.decider import Decider
from gateway.decider import load as load_decider
from gateway.decider.manifest import ManifestError
from gateway.decider.onnx import ModelLoadError
from gateway.jev import ClefChange, DecisionApi
from gateway.runtime import ConfigSource, check_config
from gateway.worker import _BACKGROUND, READY, Worker, _install_signals, _spawn, configure_logging

log = logging.getLogger("clefgate.server")

WORKER_RESTARTS = metrics.counter("clefgate_worker_restarts_total", "Worker processes restarted by the supervisor after they died.")


def _worker_main(source: ConfigSource, cfg: Config, index: int, conn: multiprocessing.connection.Connection) -> None:
    """Entry point of a worker process (spawned by the supervisor).

    The worker runs ``cfg``, the config the supervisor has in force, not the file as it is now: an edit not yet
    reloaded (or a broken file) must not reach a replacement worker. A start that fails is reported on the pipe,
    so the supervisor can say why (and ``clefgate serve`` exits 2 on a config problem, as with one worker).
    """
    import uvloop

    configure_logging(cfg.logging.level)
    # The supervisor handles SIGINT from a terminal; a worker drains only when told.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        uvloop.run(_worker_loop(source, cfg, index, conn))
    except ConfigError as exc:
        _report_failure(conn, {"problems": exc.problems, "source": exc.source})
        sys.exit(2)
    except Exception as exc:
        log.exception("worker failed", extra={"fields": {"worker": index}})
        _report_failure(conn, {"error": f"{type(exc).__name__}: {exc}"})
        sys.exit(1)


def _report_failure(conn: multiprocessing.connection.Connection, failure: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.send((0, "failed", failure))


async def _worker_loop(source: ConfigSource, cfg: Config, index: int, conn: multiprocessing.connection.Connection) -> None:
    """Serve until told to drain. Requests on the pipe are ``(id, kind, *args)``, answered ``(id, kind, payload)``;
    ``(0, "started", status)`` announces the start."""
    loop = asyncio.get_running_loop()
    worker = Worker(source, cfg, reuse_port=True, index=index)
    console.RECORDER.worker = index
    done = asyncio.Event()

    async def answer(rid: int, kind: str, args: tuple[Any, ...]) -> None:
        try:
            if kind == "status":
                payload: Any = worker.status()
            elif kind == "snapshot":
                payload = metrics.REGISTRY.snapshot()
            elif kind == "reload":
                payload = await worker.reload()
            elif kind == "model":
                payload = await worker.swap_model(args[0])
            elif kind == "restore":
                payload = await worker.restore(args[0], args[1])
            elif kind == "drain":
                payload = await worker.drain(args[0])
            elif kind == "console":
                payload = console.answer(*args)
            elif kind == "console_audit":
                log_ = worker.runtime.decision_log
                if log_ is not None:
                    log_.audit(args[0])
                payload = log_ is not None
            else:
                return
            conn.send((rid, kind, payload))
        except (BrokenPipeError, EOFError, OSError):
            done.set()
        finally:
            if kind == "drain":
                done.set()

    def readable() -> None:
        try:
            rid, kind, *args = conn.recv()
        except (EOFError, OSError):
            # The supervisor is gone: drain and exit rather than serve unsupervised.
            loop.remove_reader(conn.fileno())
            _spawn(_drain_and_stop(worker, done))
            return
        _spawn(answer(rid, kind, tuple(args)))

    # SIGTERM sent straight to a worker (e.g. by an operator) drains it too.
    loop.add_signal_handler(signal.SIGTERM, lambda: _spawn(_drain_and_stop(worker, done)))
    loop.add_signal_handler(signal.SIGHUP, lambda: None)  # reloads are coordinated by the supervisor
    await worker.start()
    loop.add_reader(conn.fileno(), readable)
    conn.send((0, "started", worker.status()))
    await done.wait()


async def _drain_and_stop(worker: Worker, done: asyncio.Event) -> None:
    await worker.drain()
    done.set()


class WorkerStartError(RuntimeError):
    """A worker process did not start (it exited, failed, or took too long); ConfigError when its config is at fault."""


class _WorkerHandle:
    """The supervisor's end of one worker's pipe.

    Every request carries an id that its answer repeats. One reader, attached for the pipe's whole life, hands each
    answer to the request waiting for it and drops answers nobody waits for any more (one that came after its
    request timed out): a late answer can never be taken for the answer to a later request, and no request waits
    behind another (a readiness probe is not held up by a slow reload).
    """

    def __init__(self, index: int, process: multiprocessing.process.BaseProcess, conn: multiprocessing.connection.Connection) -> None:
        self.index = index
        self.process = process
        self.conn = conn
        self.last_status: dict[str, Any] = {"worker": index, "ready": False, "generation": 0}
        self.started_at: float | None = None  # loop time of its "started"
        self._loop = asyncio.get_running_loop()
        self.started: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._gone: str | None = None  # why the pipe is no longer read
        self._loop.add_reader(conn.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            rid, kind, payload = self.conn.recv()
        except (EOFError, OSError) as exc:
            self._shut(f"worker {self.index} closed its pipe ({exc!r})")
            return
        except Exception:  # a message that does not unpickle: drop it, keep the pipe
            log.exception("unreadable message from a worker", extra={"fields": {"worker": self.index}})
            return
        if kind == "started":
            if not self.started.done():
                self.started.set_result(payload)
        elif kind == "failed":
            failure: Exception = ConfigError(payload["problems"], payload["source"]) if "problems" in payload else \
                WorkerStartError(f"worker {self.index} failed: {payload.get('error')}")
            if not self.started.done():
                self.started.set_exception(failure)
            else:
                log.error("worker failed", extra={"fields": {"worker": self.index, "error": str(failure)}})
        else:
            fut = self._pending.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(payload)

    def _shut(self, why: str) -> None:
        if self._gone is None:
            self._gone = why
            with contextlib.suppress(OSError, ValueError):
                self._loop.remove_reader(self.conn.fileno())
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(EOFError(why))
        self._pending.clear()
        if not self.started.done():
            self.started.set_exception(WorkerStartError(f"worker {self.index} exited during start-up"))

    def close(self) -> None:
        self._shut(f"worker {self.index}: pipe closed")
        if self.started.done() and not self.started.cancelled():
            self.started.exception()  # retrieved: nobody is waiting for it any more
        self.conn.close()

    async def ask(self, *msg: Any, wait_s: float = 5.0) -> Any:
        """Send one request and wait for its answer (at most ``wait_s``; TimeoutError, or EOFError once the pipe is gone)."""
        if self._gone is not None:
            raise EOFError(self._gone)
        rid = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._pending[rid] = fut
        try:
            self.conn.send((rid, *msg))
            return await asyncio.wait_for(fut, wait_s)
        finally:
            self._pending.pop(rid, None)


RESTART_BACKOFF_S = 0.5  # the second restart of a slot in a row waits this long, each further one twice as long ...
RESTART_BACKOFF_MAX_S = 30.0  # ... up to this
RESTART_STABLE_S = 60.0  # a worker that served this long died of something new: its replacement starts at once


class Supervisor:
    """Starts N worker processes, restarts dead ones, and answers the admin app for all."""

    def __init__(self, source: ConfigSource, cfg: Config) -> None:
        self.source = source
        self.cfg = cfg
        self.ctx = multiprocessing.get_context("spawn")
        self.workers: list[_WorkerHandle] = []
        self.started = False
        self.stopping = False
        self._snapshots: list[dict[str, Any]] = []
        metrics.REGISTRY.remote = lambda: self._snapshots
        # the decision API runs here (on the admin listener), with models of its own
        self.api: DecisionApi | None = None
        self.flash: Decider | None = None
        self._reload_lock = asyncio.Lock()  # one reload or model swap at a time reaches the workers (or a replacement starts)
        self._failures = [0] * cfg.workers  # restarts in a row of each slot whose worker did not last
        self._retry_at: list[float | None] = [None] * cfg.workers
        self._watcher: asyncio.Task[None] | None = None

    def _start_worker(self, index: int) -> _WorkerHandle:
        """A new worker process, given the source and the config in force (not the file as it is now)."""
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(self.source, self.cfg, index, child), name=f"clefgate-worker-{index}",
                                daemon=False)
        proc.start()
        child.close()
        return _WorkerHandle(index, proc, parent)

    async def start(self) -> None:
        """Start the workers; raises ConfigError or WorkerStartError if one does not start (the caller drains the rest)."""
        for i in range(self.cfg.workers):
            self.workers.append(self._start_worker(i))
        for w in self.workers:
            await self._await_started(w)
        if self.cfg.jev.enabled and self.cfg.admin.listen:
            self.api = DecisionApi(lambda: self.cfg, lambda: self.flash)
            problems = await self._configure_api(self.cfg)
            if problems:
                raise ConfigError(problems, self.cfg.source)
        self.started = True
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        _BACKGROUND.add(self._watcher)
        self._watcher.add_done_callback(_BACKGROUND.discard)

    async def _configure_api(self, cfg: Config) -> list[str]:
        problems, prepared = await self._prepare_api(cfg)
        if not problems:
            self._commit_api(prepared)
        return problems

    async def _prepare_api(self, cfg: Config) -> tuple[list[str], tuple[Decider | None, ClefChange | None] | None]:
        """The decision API's models for ``cfg``, loaded beside the running ones (nothing changes yet)."""
        if self.api is None:
            return [], None
        loop = asyncio.get_running_loop()
        try:
            flash = await loop.run_in_executor(None, load_decider, cfg, self.flash)
        except (ManifestError, ModelLoadError) as exc:
            return [f"model: {p}" for p in exc.problems], None
        problems, change = await self.api.prepare(cfg)
        if problems:
            self._discard_api((flash, None))
            return problems, None
        return [], (flash, change)

    def _commit_api(self, prepared: tuple[Decider | None, ClefChange | None] | None) -> None:
        if prepared is None or self.api is None:
            return
        flash, change = prepared
        if self.flash is not None:
            self.flash.close(successor=flash)
        self.flash = flash
        self.api.commit(change)

    def _discard_api(self, prepared: tuple[Decider | None, ClefChange | None] | None) -> None:
        if prepared is None:
            return
        flash, change = prepared
        if flash is not None and flash is not self.flash:
            flash.close(successor=self.flash)
        DecisionApi.discard(change)

    async def _await_started(self, w: _WorkerHandle, wait_s: float = 120.0) -> None:
        """Wait for a new worker's "started"; ConfigError (its config cannot start) or WorkerStartError otherwise."""
        loop = asyncio.get_running_loop()
        try:
            w.last_status = await asyncio.wait_for(asyncio.shield(w.started), wait_s)
        except TimeoutError:
            w.process.kill()
            raise WorkerStartError(f"worker {w.index} did not start within {wait_s:.0f}s") from None
        except WorkerStartError as exc:
            await loop.run_in_executor(None, w.process.join, 2.0)
            raise WorkerStartError(f"{exc} (exit code {w.process.exitcode})") from None
        w.started_at = loop.time()

    async def _watch(self) -> None:
        """Restart workers that die (unless we are stopping).

        Nothing but stopping ends this loop: a restart that fails is logged and tried again. A slot whose workers
        keep dying young backs off (at once, then 0.5 s, 1 s, 2 s ... up to 30 s), so a config that cannot start
        (say, a rules file gone bad on disk) does not respawn a process every half second.
        """
        while not self.stopping:
            await asyncio.sleep(0.5)
            for i, w in enumerate(self.workers):
                if self.stopping:
                    return
                if w.process.is_alive():
                    continue
                try:
                    await self._replace(i, w)
                except Exception:
                    log.exception("restarting a worker failed; trying again", extra={"fields": {"worker": w.index}})

    async def _replace(self, i: int, w: _WorkerHandle) -> None:
        """Start a replacement for the dead worker ``w`` of slot ``i``, once its backoff has passed."""
        now = asyncio.get_running_loop().time()
        if self._retry_at[i] is None:
            if w.started_at is not None and now - w.started_at >= RESTART_STABLE_S:
                self._failures[i] = 0
            n = self._failures[i]
            delay = 0.0 if n == 0 else min(RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_S * 2 ** (n - 1))
            self._retry_at[i] = now + delay
            log.error("worker died; restarting", extra={"fields": {"worker": w.index, "exit_code": w.process.exitcode, "in_s": delay}})
        retry_at = self._retry_at[i]
        if retry_at is not None and now < retry_at:
            return
        self._retry_at[i] = None
        self._failures[i] += 1
        WORKER_RESTARTS.inc()
        w.close()
        # Under the reload lock, so a replacement starts either before a reload or model swap (which then asks it too)
        # or after it commits, with its config. A reload waiting on a dead worker gets EOFError at once: no deadlock.
        async with self._reload_lock:
            nw = self._start_worker(w.index)
            self.workers[i] = nw
        try:
            await self._await_started(nw)
        except (WorkerStartError, ConfigError) as exc:
            log.error("worker restart failed", extra={"fields": {"worker": w.index, "error": str(exc)}})

    async def statuses(self) -> list[dict[str, Any]]:
        async def one(w: _WorkerHandle) -> dict[str, Any]:
            try:
                w.last_status = await w.ask("status", wait_s=2.0)
            except (TimeoutError, EOFError, OSError):
                w.last_status = {**w.last_status, "ready": False}
            return w.last_status
        return list(await asyncio.gather(*(one(w) for w in self.workers)))

    async def refresh_snapshots(self) -> None:
        """Collect every worker's metrics for one scrape, with the supervisor's own.

        Reloads are counted here, once per reload: each worker's count of its part of it is dropped. The
        supervisor's clefgate_ready (min-merged with the workers') is 1 only while every worker answered, so the
        merged value is 1 exactly when all workers are ready.
        """
        answers = await asyncio.gather(*(w.ask("snapshot", wait_s=2.0) for w in self.workers), return_exceptions=True)
        snaps = []
        for answer in answers:
            if isinstance(answer, dict):
                snaps.append({k: v for k, v in answer.items() if k != metrics.CONFIG_RELOADS.name})
        READY.set(1.0 if self.started and not self.stopping and len(snaps) == len(self.workers) else 0.0)
        self._snapshots = [metrics.REGISTRY.snapshot(), *snaps]

    async def reload(self) -> list[str]:
        # Validate here first so a bad file never reaches any worker.
        async with self._reload_lock:
            return await self._reload_all(self.source, ("reload",))

    async def swap_model(self, swap: dict[str, Any]) -> list[str]:
        async with self._reload_lock:
            return await self._reload_all(self.source, ("model", swap), swap)

    async def _reload_all(self, source: ConfigSource, message: tuple[Any, ...], swap: dict[str, Any] | None = None) -> list[str]:
        loop = asyncio.get_running_loop()
        try:
            cfg, source = (source.with_model(swap) if swap else source).resolve()
            await loop.run_in_executor(None, check_config, cfg)
        except ConfigError as exc:
            metrics.CONFIG_RELOADS.inc("error")
            log.error("reload rejected; the running config stays in force",
                      extra={"fields": {"source": exc.source, "problems": exc.problems}})
            return [f"{exc.source}: {p}" for p in exc.problems]
        if cfg.workers != self.cfg.workers:
            log.warning("workers changed in the config; it takes effect on restart")
        # the decision API's models load first, beside the running ones: one that cannot load rejects the
        # reload before any worker swapped
        problems, prepared = await self._prepare_api(cfg)
        if problems:
            metrics.CONFIG_RELOADS.inc("error")
            return problems
        took: list[_WorkerHandle] = []  # the workers now serving the new config
        try:
            for w in self.workers:
                try:
                    refused = [f"worker {w.index}: {p}" for p in await w.ask(*message, wait_s=120.0)]
                except (TimeoutError, EOFError, OSError) as exc:
                    refused = [f"worker {w.index}: no answer to reload ({exc!r})"]
                problems += refused
                if not refused:
                    took.append(w)
        except BaseException:
            self._discard_api(prepared)
            raise
        if problems:
            self._discard_api(prepared)
            metrics.CONFIG_RELOADS.inc("error")
            # One worker refused (or died): those that took the change go back, so every worker serves the config in
            # force, which a replacement also starts with.
            problems += await self._restore(took)
        else:
            self.cfg = cfg
            self.source = source
            metrics.CONFIG_RELOADS.inc("ok")
            self._commit_api(prepared)
        return problems

    async def _restore(self, workers: list[_WorkerHandle]) -> list[str]:
        """Put ``workers`` back on the config in force; a worker that cannot go back is drained and restarted with it."""
        problems = []
        for w in workers:
            try:
                refused = await w.ask("restore", self.source, self.cfg, wait_s=120.0)
            except (TimeoutError, EOFError, OSError) as exc:
                refused = [repr(exc)]
            if refused:
                log.error("a worker could not go back to the config in force; it drains and is restarted",
                          extra={"fields": {"worker": w.index, "problems": refused}})
                problems.append(f"worker {w.index}: could not go back to the config in force; it drains and is restarted "
                                f"({'; '.join(refused)})")
                # it finishes its requests and exits; the watcher starts its replacement, with the config in force
                _spawn(self._drain_one(w, self.cfg.timeouts.drain_s))
        return problems

    def config(self) -> Config:
        return self.cfg

    def model_override(self) -> dict[str, Any] | None:
        return self.source.model_swap

    async def drain(self, deadline_s: float | None = None) -> None:
        self.stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
        deadline = self.cfg.timeouts.drain_s if deadline_s is None else deadline_s
        await asyncio.gather(*(self._drain_one(w, deadline) for w in self.workers))

    async def _drain_one(self, w: _WorkerHandle, deadline: float) -> None:
        """Drain one worker and make sure its process is gone (one that never finished starting is not reading its
        pipe: it is terminated)."""
        loop = asyncio.get_running_loop()
        if w.started.done() and not w.started.cancelled() and w.started.exception() is None:
            with contextlib.suppress(TimeoutError, EOFError, OSError):
                await w.ask("drain", deadline, wait_s=deadline + 10.0)
            await loop.run_in_executor(None, w.process.join, 5.0)
        if w.process.is_alive():
            w.process.terminate()
            await loop.run_in_executor(None, w.process.join, 5.0)
        if w.process.is_alive():
            w.process.kill()
            await loop.run_in_executor(None, w.process.join, 5.0)
        w.close()


async def _serve_supervised(source: ConfigSource, cfg: Config) -> int:
    loop = asyncio.get_running_loop()
    sup = Supervisor(source, cfg)
    stop = asyncio.Event()
    _install_signals(loop, on_reload=lambda: _spawn(sup.reload()), on_stop=stop.set)
    runner = None
    try:
        await sup.start()

        @web.middleware
        async def refresh(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
            if request.path == "/metrics":
                await sup.refresh_snapshots()
            return await handler(request)

        app = admin_app(sup, sup.api.routes if sup.api else None)
        app.middlewares.append(refresh)
        runner = await start_admin(app, cfg.admin.listen) if cfg.admin.listen else None
        await stop.wait()
        await sup.drain()
    finally:
        # Whatever failed (a worker that cannot start, the admin port taken, the decision API's clef that cannot load)
        # must neither leave workers serving unsupervised nor keep this process alive: they are stopped at once, and the
        # error goes on to serve()'s exit code.
        if not sup.stopping:
            await sup.drain(0.0)
        if runner is not None:
            await runner.cleanup()
        if sup.api is not None:
            sup.api.close()
        if sup.flash is not None:
            sup.flash.close()
    return 0
