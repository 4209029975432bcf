"""How ``clefgate serve`` runs the gateway: ``serve()`` loads the config and picks one process or a supervisor.

With ``workers: 1`` this process runs the one ``gateway.worker.Worker`` and serves the admin app
(``gateway.admin``) beside it (``_serve_single``). With more, it becomes the supervisor of that many
worker processes (``gateway.supervisor``). SIGHUP reloads, SIGTERM and SIGINT drain and stop.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from gateway.admin import LocalControl, admin_app, start_admin
from gateway.config import Config, ConfigError
from gateway.jev import DecisionApi
from gateway.runtime import ConfigSource
from gateway.supervisor import WorkerStartError, _serve_supervised
from gateway.worker import Worker, _install_signals, _spawn, configure_logging

log = logging.getLogger("clefgate.server")


async def _serve_single(source: ConfigSource, cfg: Config) -> int:
    loop = asyncio.get_running_loop()
    worker = Worker(source, cfg, reuse_port=False)
    stop = asyncio.Event()
    # SIGHUP's default action ends the process: a `systemctl reload` during a slow start (the model loading) must
    # not. One that comes before the worker serves is queued and runs once it does.
    reload_queued = asyncio.Event()
    loop.add_signal_handler(signal.SIGHUP, reload_queued.set)
    await worker.start()
    api = None
    if cfg.jev.enabled and cfg.admin.listen:
        api = DecisionApi(lambda: worker.runtime.config, lambda: worker.runtime.decider)
        problems = await api.configure(cfg)
        if problems:
            raise ConfigError(problems, cfg.source)
    control = LocalControl(worker, api)
    _install_signals(loop, on_reload=lambda: _spawn(control.reload()), on_stop=stop.set)
    if reload_queued.is_set():
        _spawn(control.reload())
    runner = await start_admin(admin_app(control, api.routes if api else None), cfg.admin.listen) if cfg.admin.listen else None
    await stop.wait()
    await worker.drain()
    if runner is not None:
        await runner.cleanup()
    if api is not None:
        api.close()
    return 0


def serve(source: ConfigSource) -> int:
    """Run the gateway until SIGTERM/SIGINT; returns the process exit code."""
    import uvloop

    try:
        cfg = source.load()
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    configure_logging(cfg.logging.level)
    try:
        if cfg.workers > 1:
            return uvloop.run(_serve_supervised(source, cfg))
        return uvloop.run(_serve_single(source, cfg))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (OSError, WorkerStartError) as exc:
        log.error("cannot start", extra={"fields": {"error": str(exc)}})
        return 1
