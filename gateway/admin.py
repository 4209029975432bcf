"""The admin app and its access control.

``admin_app`` serves health, readiness, metrics, the redacted config, reloads and model swaps (and the
console, and the decision API when it runs) on the admin listener. It asks a ``Control``: the worker
of this process (``LocalControl``, with ``workers: 1``) or the supervisor of the worker processes.

Every state change needs ``admin.token`` (a bearer token, read again on each request), a JSON body
and, from a browser, the admin listener's own origin (``_refused``); refusals are counted by reason.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web

from gateway import __version__, console, metrics
from gateway import config as configmod
from gateway.config import Config, ConfigError
from gateway.jev import DecisionApi
from gateway.runtime import MODEL_SWAP_KEYS
from gateway.worker import Worker

log = logging.getLogger("clefgate.server")


def _swap_problem(body: dict[str, Any]) -> str | None:
    """Why a POST /admin/model body is refused before anything loads (names are repository names, never paths)."""
    for key in ("name", "version", "variant"):
        if key in body and not isinstance(body[key], str):
            return f"{key}: expected a string, got {type(body[key]).__name__}"
    for key in ("name", "version"):
        if key in body and (why := configmod.repository_name(body[key])):
            return f"{key}: {why}"
    if "enabled" in body and not isinstance(body["enabled"], bool):
        return f"enabled: expected true or false, got {body['enabled']!r}"
    return None


class Control(Protocol):
    """What the admin app asks of the gateway: one worker in-process, or a supervisor."""

    async def statuses(self) -> list[dict[str, Any]]: ...

    async def reload(self) -> list[str]: ...

    async def swap_model(self, swap: dict[str, Any]) -> list[str]: ...

    def config(self) -> Config: ...

    def model_override(self) -> dict[str, Any] | None:
        """The POST /admin/model swap in force over the file's model settings (None: the file's)."""
        ...


class LocalControl:
    """Admin control of the single worker running in this process (and its decision API)."""

    def __init__(self, worker: Worker, api: DecisionApi | None = None) -> None:
        self.worker = worker
        self.api = api

    async def statuses(self) -> list[dict[str, Any]]:
        return [self.worker.status()]

    async def reload(self) -> list[str]:
        if self.api is None:
            return await self.worker.reload()
        # clef is loaded first, beside the running one: if it cannot load, the reload is rejected before anything
        # changed (a worker reload that then failed on it would have left the new config serving). One reload at a
        # time, and the worker swaps to the very config clef was prepared for.
        worker = self.worker
        async with worker._reload_lock:
            try:
                cfg, source = worker.source.resolve()
            except ConfigError:
                return await worker._reload(worker.source)  # it reports the problems, as any reload does
            problems, change = await self.api.prepare(cfg)
            if problems:
                metrics.CONFIG_RELOADS.inc("error")
                return problems
            try:
                problems = await worker._reload(source, cfg)
            except BaseException:
                self.api.discard(change)
                raise
            if problems:
                self.api.discard(change)
            else:
                self.api.commit(change)
            return problems

    async def swap_model(self, swap: dict[str, Any]) -> list[str]:
        return await self.worker.swap_model(swap)

    def config(self) -> Config:
        return self.worker.runtime.config

    def model_override(self) -> dict[str, Any] | None:
        return self.worker.source.model_swap


ADMIN_REFUSED = metrics.counter("clefgate_admin_refused_total",
                                "Admin state changes refused, by reason (no_token, origin, unauthorized, content_type).", ("reason",))
NO_ADMIN_TOKEN = ("admin.token is not set: state changes (POST /admin/reload, POST /admin/model) need a secret. "
                  "Set admin.token in the config (a long random string, or env:NAME / file:PATH), reload or restart, "
                  "and send 'Authorization: Bearer <token>' with 'Content-Type: application/json'")


def _admin_origins(request: web.Request, cfg: Config) -> set[str]:
    """The origins a browser sends for a page served by the admin listener itself (its host, its port)."""
    host, port = configmod.split_host_port(cfg.admin.listen) if cfg.admin.listen else ("127.0.0.1", 0)
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    names = {host}
    if sockname:
        port = int(sockname[1])
        names.add(str(sockname[0]))
    if host in ("0.0.0.0", "::", "::1", "localhost") or host.startswith("127."):
        names |= {"localhost", "127.0.0.1", "::1"}
    return {f"{scheme}://{f'[{n}]' if ':' in n else n}:{port}" for n in names for scheme in ("http", "https")}


def _refused(request: web.Request, cfg: Config, *, changes_state: bool = False) -> web.Response | None:
    """The answer refusing an /admin/* request, or None when it may go on.

    A request that changes state always needs the token: with none configured it is refused (403, saying how to
    set one). It must also come as ``application/json`` (415 otherwise: a form or text/plain body is what a
    cross-site page can send without asking) and, when it carries ``Origin``, from the admin listener's own
    origin (403 otherwise). Read-only requests need the token only when one is set.

    The token is read again on every request so a rotated ``file:``/``env:`` secret takes effect without a
    restart. A token that is configured but reads empty (the file removed or truncated mid-rotation, the
    variable unset) refuses everyone with 503: it must never mean "no token". The comparison takes the
    same time wherever the strings differ.
    """
    if not cfg.admin.token:
        if changes_state:
            ADMIN_REFUSED.inc("no_token")
            return web.json_response({"error": "forbidden: no admin token configured", "how": NO_ADMIN_TOKEN}, status=403)
        return None
    token = configmod.resolve_secret(cfg.admin.token)
    if not token:
        log.error("admin.token cannot be read (missing, unreadable or empty); refusing admin requests",
                  extra={"fields": {"token": cfg.admin.token if cfg.admin.token.startswith(("env:", "file:")) else "***"}})
        return web.json_response({"error": "admin token unavailable"}, status=503)
    if changes_state:
        origin = request.headers.get("Origin")
        if origin is not None and origin.rstrip("/").lower() not in _admin_origins(request, cfg):
            ADMIN_REFUSED.inc("origin")
            log.warning("admin state change refused: foreign Origin", extra={"fields": {"origin": origin[:200], "path": request.path}})
            return web.json_response({"error": f"forbidden: Origin {origin[:200]!r} is not the admin listener's own"}, status=403)
    given = request.headers.get("Authorization", "").encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(given, f"Bearer {token}".encode("utf-8", "surrogatepass")):
        if changes_state:
            ADMIN_REFUSED.inc("unauthorized")
        return web.json_response({"error": "unauthorized"}, status=401)
    if changes_state and request.content_type != "application/json":
        ADMIN_REFUSED.inc("content_type")
        return web.json_response({"error": f"state changes take Content-Type: application/json (got {request.content_type!r})"}, status=415)
    return None


def admin_app(control: Control, extra: Callable[[web.Application], None] | None = None) -> web.Application:
    """The admin/API aiohttp app: health, readiness, metrics, redacted config, reload."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "version": __version__})

    async def readyz(_: web.Request) -> web.Response:
        statuses = await control.statuses()
        ready = bool(statuses) and all(s["ready"] for s in statuses)
        return web.json_response({"ready": ready, "workers": statuses}, status=200 if ready else 503)

    async def metrics_view(_: web.Request) -> web.Response:
        body = metrics.REGISTRY.render()
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def config_view(request: web.Request) -> web.Response:
        cfg = control.config()
        if (refused := _refused(request, cfg)) is not None:
            return refused
        return web.json_response({"source": cfg.source, "config": configmod.redacted(cfg), "model_override": control.model_override()})

    async def reload_view(request: web.Request) -> web.Response:
        cfg = control.config()
        if (refused := _refused(request, cfg, changes_state=True)) is not None:
            return refused
        problems = await control.reload()
        if problems:
            return web.json_response({"reloaded": False, "problems": problems}, status=422)
        status = (await control.statuses())[0]
        return web.json_response({"reloaded": True, "generation": status["generation"], "armed": status.get("armed"),
                                  "disarmed": status.get("disarmed", [])})

    async def model_view(request: web.Request) -> web.Response:
        cfg = control.config()
        if (refused := _refused(request, cfg, changes_state=True)) is not None:
            return refused
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "body must be a JSON object such as {\"version\": \"2\"}"}, status=400)
        if not isinstance(body, dict) or not body or set(body) - set(MODEL_SWAP_KEYS):
            return web.json_response({"error": f"body must be a JSON object with keys among {', '.join(MODEL_SWAP_KEYS)}"}, status=400)
        if (wrong := _swap_problem(body)) is not None:
            return web.json_response({"error": wrong}, status=400)
        problems = await control.swap_model(body)
        if problems:
            return web.json_response({"swapped": False, "problems": problems}, status=422)
        statuses = await control.statuses()
        return web.json_response({"swapped": True, "model": statuses[0].get("model"), "generation": statuses[0]["generation"]})

    app = web.Application(client_max_size=4 << 20)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/admin/config", config_view)
    app.router.add_post("/admin/reload", reload_view)
    app.router.add_post("/admin/model", model_view)
    if extra is not None:
        extra(app)
    console.register(app, control)
    return app


async def start_admin(app: web.Application, listen: str) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    host, port = configmod.split_host_port(listen)
    await web.TCPSite(runner, host, port, reuse_address=True).start()
    log.info("admin listening", extra={"fields": {"listen": listen}})
    return runner
