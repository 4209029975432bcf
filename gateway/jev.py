"""The Jev-compatible decision API: ``POST /v1/decision``, ``/v1/health``, ``/v1/openapi.json``.

Jev clients send one of three request shapes (or a JSON array of them, answered in
order and scored together):

* **questions** — ``{"model", "state", "questions": [{"id", "type", "options", "criteria"}]}``
  → ``{"answers": [{"id", "top_option", "confidence", "probabilities"}], "model", "latency_ms"}``;
* **input** — ``{"input", "max_tokens"}`` → ``{"decision": {"label", "confidence", "feature"}}``
  over the configured label set, ``feature`` listing the sentences that drove it;
* **candidates** — ``{"task", "features", "candidates"}`` → ``{"decision", "confidence", "latency_ms"}``.

Routing: a question that clef-flash knows (``payload``/``client``/``attack_kind``, or ``class``
with its options: answered directly by a 1.x model, derived from ``payload`` and ``client`` for a 2.x one)
about a state that is an HTTP request (a request record, or raw request text) is
answered by clef-flash through the gateway's own decider — the same cache, breaker
and metrics as the proxied path; every other question goes to ``clef``, the zero-shot
model, which runs in a worker thread behind its own deadline and circuit breaker.

Errors have stable codes and statuses: 400 ``invalid_request`` (with the field path),
413 ``too_large``, 401 ``missing_api_key``, 403 ``invalid_api_key``, 429
``rate_limited`` (Retry-After), 503 ``model_unavailable`` (Retry-After), each with the
request id that is also in the log.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from gateway import __version__, metrics
from gateway.clef import (
    Answer,
    Question,
    QuestionError,
    QuestionSet,
    StateTooLarge,
    StateTooLongError,
    ZeroShotModel,
    candidate_question_set,
    label_question_set,
    render_state,
)
from gateway.clients import RateLimit, RateLimiter
from gateway.config import ClefConfig, Config, JevConfig, resolve_secret
from gateway.decider import Decider
from gateway.decider import manifest as mf
from gateway.decider.breaker import CircuitBreaker, guarded
from gateway.decider.scoring import BreakerOpen, ModelError, ModelOverloaded, ModelTimeout
from gateway.features import from_record
from gateway.rules.patterns import parse_rate
from gateway.verdict import CLASS_OPTIONS, class_probabilities

log = logging.getLogger("clefgate.jev")

REQUESTS = metrics.counter("clefgate_jev_requests_total", "Decision API requests by shape (questions, input, candidates, batch) and status.",
                           ("shape", "status"))
ANSWERS = metrics.counter("clefgate_jev_answers_total", "Questions answered by the decision API, by the model that answered.", ("model",))
LATENCY = metrics.histogram("clefgate_jev_latency_seconds", "Decision API latency from request to response, by shape.", ("shape",))

SHIPPED_REPOSITORY = Path(__file__).resolve().parent.parent / "models" / "repository"
_ID = iter(range(1, 1 << 62))
_PREFIX = os.urandom(4).hex()


class ApiError(Exception):
    """An error answer: HTTP status, stable code, message, optional field path and headers."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, dict(headers or {})


# limits of single fields (the OpenAPI document publishes the same numbers)
MAX_ID = 200
MAX_OPTIONS = 32
MAX_CRITERIA = 2000
MAX_TOKENS = 4096


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(400, "invalid_request", f"{field}: {message}" if field else message, field or None)


# ---------------------------------------------------------------------------- clef runtime

class ClefRuntime:
    """The loaded clef model, its worker thread, deadline and circuit breaker."""

    def __init__(self, model: ZeroShotModel, settings: ClefConfig) -> None:
        self.model = model
        self.settings = settings
        self.label = f"{model.name}@{model.version}"
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clefgate-clef")
        self.breaker = CircuitBreaker(self.label, failure_threshold=5, window_s=30.0, cooldown_s=10.0, half_open_probes=1)

    @staticmethod
    def directory(settings: ClefConfig) -> Path:
        """The version folder ``settings`` name (``'latest'``: the highest stable version); raises ``ManifestError``."""
        repo = Path(settings.repository) if settings.repository else SHIPPED_REPOSITORY
        return mf.resolve(repo, settings.name, settings.version)

    @classmethod
    def load(cls, settings: ClefConfig) -> ClefRuntime:
        """Load and warm clef (blocking: call it in a thread)."""
        directory = cls.directory(settings)
        model = ZeroShotModel.load(directory, device=settings.device, threads=settings.threads,  # type: ignore[arg-type]
                                   max_windows=settings.max_windows)
        return cls(model, settings)

    async def answer(self, items: list[QuestionSet]) -> list[list[Answer]]:
        """Answer question sets in one model pass (a worker thread), behind the deadline and the breaker."""
        loop = asyncio.get_running_loop()
        return await guarded(self.breaker, self.settings.timeout_ms / 1000.0,
                             lambda: loop.run_in_executor(self.executor, self.model.answer, items))

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    def describe(self) -> dict[str, Any]:
        return {**self.model.describe(), "breaker": self.breaker.state}


# ---------------------------------------------------------------------------- request parsing

@dataclass
class _Item:
    """One parsed request of a (possibly batched) call."""

    shape: str
    body: dict[str, Any]
    path: str
    questions: tuple[Question, ...] = ()
    state: str = ""
    record: dict[str, Any] | None = None
    model: str = "clef-flash"
    max_tokens: int | None = None


def _text(body: Mapping[str, Any], key: str, path: str, *, required: bool = True) -> str | None:
    if key not in body:
        if required:
            raise _invalid(f"{path}{key}", "is required")
        return None
    value = body[key]
    if not isinstance(value, str):
        raise _invalid(f"{path}{key}", f"must be a string, got {type(value).__name__}")
    return value


def _check_state_size(text: str, field: str, limit: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ApiError(413, "too_large", f"{field}: {size} bytes is more than the {limit} allowed (jev.max_state_bytes)", field)


def check_values(value: Any, path: str) -> None:
    """Refuse text that is not Unicode (a lone UTF-16 surrogate such as ``"\\ud800"``) and numbers JSON does not
    have (NaN, Infinity) anywhere in a decoded body, naming the field: the model must never see them (they would
    fail it, and count against its breaker, for a fault of the request)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise _invalid(where or "body", f"holds a lone UTF-16 surrogate at character {exc.start}; "
                                                    "text must be valid Unicode") from None
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _invalid(where or "body", f"{item!r} is not a JSON number (NaN and Infinity are not allowed)")
        elif isinstance(item, dict):
            for key, sub in item.items():
                child = f"{where}.{key}" if where else str(key)
                stack.append((key, child))
                stack.append((sub, child))
        elif isinstance(item, list):
            stack.extend((sub, f"{where}[{i}]") for i, sub in enumerate(item))


RECORD_KEYS = ("method", "path", "http_version", "headers", "body", "client_ip")


def _check_record(state: Mapping[str, Any], field: str) -> None:
    """A state object that describes an HTTP request (it has ``method`` or ``path``) must have the record's types:
    a wrong one is the request's error (400 with the field path), never a question for another model."""
    if "method" not in state and "path" not in state:
        return
    for key in ("method", "path"):
        if not isinstance(state.get(key), str) or not state[key]:
            raise _invalid(f"{field}.{key}", f"must be a non-empty string, got {type(state.get(key)).__name__}")
    if not state["method"].isalpha() or len(state["method"]) > 32:
        raise _invalid(f"{field}.method", "must be an HTTP method (letters only)")
    for key in ("http_version", "client_ip"):
        if state.get(key) is not None and not isinstance(state[key], str):
            raise _invalid(f"{field}.{key}", f"must be a string, got {type(state[key]).__name__}")
    if state.get("body") is not None and not isinstance(state["body"], str):
        raise _invalid(f"{field}.body", f"must be a string or null, got {type(state['body']).__name__}")
    headers = state.get("headers")
    if headers is None:
        return
    if not isinstance(headers, list):
        raise _invalid(f"{field}.headers", f"must be a list of [name, value] pairs, got {type(headers).__name__}")
    for i, pair in enumerate(headers):
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise _invalid(f"{field}.headers[{i}]", "must be a [name, value] pair of strings")


def _as_request_record(state: Any) -> dict[str, Any] | None:
    """A state that describes an HTTP request, as a record (or None when it does not)."""
    if isinstance(state, str):
        stripped = state.lstrip()
        if stripped.startswith("{"):
            try:
                state = json.loads(stripped)
            except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
                return None
        else:
            return _parse_raw_request(state)
    if isinstance(state, Mapping) and isinstance(state.get("method"), str) and isinstance(state.get("path"), str):
        headers = state.get("headers") or []
        if isinstance(headers, Mapping):
            headers = [[k, v] for k, v in headers.items()]
        if not all(isinstance(h, (list, tuple)) and len(h) == 2 for h in headers):
            return None
        return {**state, "headers": [[str(k), str(v)] for k, v in headers]}
    return None


def _parse_raw_request(text: str) -> dict[str, Any] | None:
    head, _, body = text.replace("\r\n", "\n").partition("\n\n")
    lines = head.split("\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/") or not parts[0].isalpha() or not parts[1].startswith(("/", "http")):
        return None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers.append([name, value.strip()])
    return {"method": parts[0], "path": parts[1], "http_version": parts[2][5:], "headers": headers, "body": body or None}


def _questions(raw: Any, path: str, cfg: JevConfig) -> tuple[Question, ...]:
    if not isinstance(raw, list) or not raw:
        raise _invalid(f"{path}questions", "must be a non-empty list")
    if len(raw) > cfg.max_questions:
        raise _invalid(f"{path}questions", f"{len(raw)} questions; at most {cfg.max_questions} (jev.max_questions)")
    out = []
    seen: set[str] = set()
    for i, q in enumerate(raw):
        where = f"{path}questions[{i}]"
        if not isinstance(q, Mapping):
            raise _invalid(where, "must be an object")
        qid = _text(q, "id", where + ".")
        assert qid is not None
        if not qid.strip() or len(qid) > MAX_ID:
            raise _invalid(f"{where}.id", f"must be 1 to {MAX_ID} characters, not only spaces")
        if qid in seen:
            raise _invalid(f"{where}.id", f"{qid!r} is used twice")
        seen.add(qid)
        qtype = q.get("type", "choice")
        if qtype not in ("choice", "bool"):
            raise _invalid(f"{where}.type", f"must be 'choice' or 'bool', got {qtype!r}")
        criteria = _text(q, "criteria", where + ".", required=False) or ""
        if len(criteria) > MAX_CRITERIA:
            raise _invalid(f"{where}.criteria", f"is longer than {MAX_CRITERIA} characters")
        options_raw = q.get("options")
        if qtype == "choice":
            if not isinstance(options_raw, list) or not all(isinstance(o, str) for o in options_raw):
                raise _invalid(f"{where}.options", "must be a list of strings for a choice question")
            if not 2 <= len(options_raw) <= MAX_OPTIONS or any(not o.strip() or len(o) > MAX_ID for o in options_raw):
                raise _invalid(f"{where}.options", f"must hold 2 to {MAX_OPTIONS} options of 1 to {MAX_ID} characters, not only spaces")
            options = tuple(options_raw)
        else:
            if options_raw not in (None, [], ["true", "false"], [True, False]):
                raise _invalid(f"{where}.options", "a bool question has no options (it answers true or false)")
            options = ()
        try:
            out.append(Question(id=qid, options=options, criteria=criteria, type=qtype))
        except QuestionError as exc:
            raise _invalid(where, str(exc)) from None
    return tuple(out)


def parse_item(body: Any, path: str, cfg: JevConfig) -> _Item:
    """Validate one request object of any of the three shapes (field paths in errors)."""
    if not isinstance(body, Mapping):
        raise _invalid(path.rstrip(".") or "body", "must be a JSON object")
    body = dict(body)
    if "questions" in body:
        model = body.get("model", "clef-flash")
        if model not in ("clef-flash", "clef"):
            raise _invalid(f"{path}model", f"must be 'clef-flash' or 'clef', got {model!r}")
        if "state" not in body:
            raise _invalid(f"{path}state", "is required")
        state = body["state"]
        if not isinstance(state, (str, Mapping)):
            raise _invalid(f"{path}state", "must be a string or a JSON object")
        try:
            text = render_state(state, cfg.max_state_bytes)
        except RecursionError:
            raise ApiError(400, "invalid_json", f"{path}state: nested deeper than is read here", f"{path}state") from None
        except StateTooLarge:
            raise ApiError(413, "too_large", f"{path}state: renders to more than the {cfg.max_state_bytes} bytes allowed "
                           "(jev.max_state_bytes)", f"{path}state") from None
        _check_state_size(text, f"{path}state", cfg.max_state_bytes)
        if model == "clef-flash":
            record: Any = state
            if isinstance(state, str) and state.lstrip().startswith("{"):
                try:
                    record = json.loads(state)
                except (ValueError, RecursionError):
                    record = None
                else:
                    check_values(record, f"{path}state")
            if isinstance(record, Mapping):
                _check_record(record, f"{path}state")
        return _Item("questions", body, path, _questions(body["questions"], path, cfg), text,
                     _as_request_record(state) if model == "clef-flash" else None, model)
    if "input" in body:
        given = _text(body, "input", path)
        assert given is not None
        _check_state_size(given, f"{path}input", cfg.max_state_bytes)
        max_tokens = body.get("max_tokens")
        if "max_tokens" in body and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= MAX_TOKENS):
            raise _invalid(f"{path}max_tokens", f"must be an integer from 1 to {MAX_TOKENS}")
        return _Item("input", body, path, state=given, max_tokens=max_tokens)
    if "candidates" in body:
        task = _text(body, "task", path)
        assert task is not None
        if not task.strip() or len(task) > MAX_ID:
            raise _invalid(f"{path}task", f"must be 1 to {MAX_ID} characters, not only spaces")
        feats = body.get("features", {})
        if not isinstance(feats, Mapping):
            raise _invalid(f"{path}features", "must be an object")
        cands = body["candidates"]
        if (not isinstance(cands, list) or not 2 <= len(cands) <= MAX_OPTIONS
                or not all(isinstance(c, str) and c.strip() and len(c) <= MAX_ID for c in cands)):
            raise _invalid(f"{path}candidates", f"must be a list of 2 to {MAX_OPTIONS} strings of 1 to {MAX_ID} characters")
        if len(set(cands)) != len(cands):
            raise _invalid(f"{path}candidates", "must be distinct")
        try:
            qs = candidate_question_set(task, feats, cands, cfg.max_state_bytes)
        except RecursionError:
            raise ApiError(400, "invalid_json", f"{path}features: nested deeper than is read here", f"{path}features") from None
        except StateTooLarge:
            raise ApiError(413, "too_large", f"{path}features: renders to more than the {cfg.max_state_bytes} bytes allowed "
                           "(jev.max_state_bytes)", f"{path}features") from None
        _check_state_size(qs.state, f"{path}features", cfg.max_state_bytes)
        return _Item("candidates", body, path, qs.questions, qs.state)
    raise _invalid(path.rstrip(".") or "body", "expected one of the request shapes: questions (with state), input, or candidates")


# ---------------------------------------------------------------------------- the service

@dataclass(frozen=True)
class ClefChange:
    """A clef runtime loaded for a config, not yet serving (``DecisionApi.prepare``); None: clef off."""

    clef: ClefRuntime | None
    settings: ClefConfig | None


class DecisionApi:
    """Answers decision requests with clef-flash (via the gateway's decider) and clef."""

    def __init__(self, cfg: Callable[[], Config], flash: Callable[[], Decider | None], clef: ClefRuntime | None = None) -> None:
        self._cfg = cfg
        self._flash = flash
        self.clef = clef
        self._clef_settings: ClefConfig | None = clef.settings if clef is not None else None
        self.limiter = RateLimiter(max_buckets=10_000)

    async def prepare(self, cfg: Config) -> tuple[list[str], ClefChange | None]:
        """Load clef for ``cfg`` beside the running one; nothing changes until ``commit`` (``discard`` drops it).

        A reload prepares this before the gateway swaps its config, so a clef that cannot load rejects the
        reload while everything still runs as before.
        """
        want = cfg.clef if cfg.jev.enabled and cfg.clef.enabled else None
        if want == self._clef_settings:
            return [], None
        if want is None:
            return [], ClefChange(None, None)
        try:
            new = await asyncio.get_running_loop().run_in_executor(None, ClefRuntime.load, want)
        except Exception as exc:  # a model that cannot load must not take the gateway down
            log.error("clef could not be loaded", extra={"fields": {"error": str(exc)}})
            return [f"clef: {exc}"], None
        return [], ClefChange(new, want)

    def commit(self, change: ClefChange | None) -> None:
        """Serve with what ``prepare`` loaded (None: clef stays as it is)."""
        if change is None:
            return
        old = self.clef
        self.clef, self._clef_settings = change.clef, change.settings
        if old is not None and old is not change.clef:
            old.close()

    @staticmethod
    def discard(change: ClefChange | None) -> None:
        """Drop what ``prepare`` loaded (the reload it was for did not happen)."""
        if change is not None and change.clef is not None:
            change.clef.close()

    async def configure(self, cfg: Config) -> list[str]:
        """Load, keep or drop clef for ``cfg``. On failure the running clef stays and the problem is returned."""
        problems, change = await self.prepare(cfg)
        if not problems:
            self.commit(change)
        return problems

    def close(self) -> None:
        if self.clef is not None:
            self.clef.close()

    # ---- HTTP
    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/decision", self.decision_view)
        app.router.add_get("/v1/health", self.health_view)
        app.router.add_get("/health", self.health_view)
        app.router.add_get("/v1/openapi.json", self.openapi_view)

    async def health_view(self, _: web.Request) -> web.Response:
        flash = self._flash()
        models = []
        if flash is not None:
            models.append({"name": "clef-flash", **flash.describe()})
        if self.clef is not None:
            models.append({"name": "clef", **self.clef.describe()})
        ready = bool(models) and all(m.get("breaker") != "open" for m in models)
        return web.json_response({"status": "ok" if ready else "degraded", "ready": ready, "version": __version__, "models": models},
                                 status=200 if ready else 503)

    async def openapi_view(self, _: web.Request) -> web.Response:
        return web.json_response(openapi_document(self._cfg().jev))

    async def decision_view(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        request_id = request.headers.get("X-Request-Id") or f"{_PREFIX}-{next(_ID):x}"
        shape = "invalid"
        try:
            cfg = self._cfg().jev
            key_id = self._authorize(request, cfg)
            self._limit(request, cfg, key_id)
            if request.content_length is not None and request.content_length > cfg.max_body_bytes:
                raise ApiError(413, "too_large", f"body of {request.content_length} bytes is more than the {cfg.max_body_bytes} allowed")
            chunks: list[bytes] = []
            size = 0
            while chunk := await request.content.read(65536):
                size += len(chunk)
                if size > cfg.max_body_bytes:
                    raise ApiError(413, "too_large", f"body is more than the {cfg.max_body_bytes} bytes allowed (jev.max_body_bytes)")
                chunks.append(chunk)
            raw = b"".join(chunks)
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise ApiError(400, "invalid_json", f"body is not JSON: {exc}") from None
            except RecursionError:
                raise ApiError(400, "invalid_json", "body is nested deeper than JSON is read here") from None
            check_values(body, "")
            if isinstance(body, list):
                shape = "batch"
                if not body:
                    raise _invalid("body", "a batch must hold at least one request")
                if len(body) > cfg.max_batch:
                    raise _invalid("body", f"a batch of {len(body)}; at most {cfg.max_batch} (jev.max_batch)")
                items = [parse_item(b, f"[{i}].", cfg) for i, b in enumerate(body)]
                answers: Any = await self.answer(items, cfg)
            else:
                item = parse_item(body, "", cfg)
                shape = item.shape
                answers = (await self.answer([item], cfg))[0]
            elapsed = time.perf_counter() - started
            if isinstance(answers, list):
                for a in answers:
                    a["latency_ms"] = round(elapsed * 1000, 3)
            else:
                answers["latency_ms"] = round(elapsed * 1000, 3)
            REQUESTS.inc(shape, "200")
            LATENCY.observe(elapsed, shape)
            return web.json_response(answers, headers={"X-Request-Id": request_id}, dumps=_dumps)
        except ApiError as err:
            REQUESTS.inc(shape, str(err.status))
            LATENCY.observe(time.perf_counter() - started, shape)
            if err.status >= 500:
                log.warning("decision API: %s", err.message, extra={"fields": {"request_id": request_id, "code": err.code}})
            error = {"code": err.code, "message": err.message, "request_id": request_id}
            if err.field:
                error["field"] = err.field
            return web.json_response({"error": error}, status=err.status, headers={"X-Request-Id": request_id, **err.headers})

    def _authorize(self, request: web.Request, cfg: JevConfig) -> str:
        if not cfg.api_keys:
            return ""
        auth = request.headers.get("Authorization", "")
        presented = auth[7:].strip() if auth.lower().startswith("bearer ") else request.headers.get("X-API-Key", "")
        if not presented:
            raise ApiError(401, "missing_api_key", "an API key is required: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                           headers={"WWW-Authenticate": 'Bearer realm="clefgate"'})
        found = ""
        for key in cfg.api_keys:
            # compare against every key so the time taken does not tell which one was close
            # a header is read as latin-1 with undecodable bytes escaped: encode it back the same way
            if hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), resolve_secret(key.key).encode()):
                found = key.id
        if not found:
            raise ApiError(403, "invalid_api_key", "the API key is not valid")
        return found

    def _limit(self, request: web.Request, cfg: JevConfig, key_id: str) -> None:
        spec = cfg.rate
        if key_id:
            spec = next((k.rate for k in cfg.api_keys if k.id == key_id and k.rate), spec)
        if spec in ("", "0", "off"):
            return
        limit, period = parse_rate(spec)
        who = key_id or (request.remote or "")
        if not self.limiter.take("jev", who, RateLimit(limit, period)):
            retry = max(1, math.ceil(period / limit))
            raise ApiError(429, "rate_limited", f"more than {spec} for this {'key' if key_id else 'client'}",
                           headers={"Retry-After": str(retry)})

    # ---- answering
    async def answer(self, items: list[_Item], cfg: JevConfig) -> list[dict[str, Any]]:
        """Answer parsed items; flash questions go through the decider, the rest in one clef pass."""
        flash = self._flash()
        results: list[dict[str, Any] | None] = [None] * len(items)
        clef_sets: list[QuestionSet] = []
        clef_slots: list[tuple[int, tuple[int, ...]]] = []  # (item index, question positions answered by clef)
        flash_jobs: list[Awaitable[None]] = []
        per_item_answers: list[list[dict[str, Any] | None]] = [[None] * max(1, len(it.questions)) for it in items]
        for i, item in enumerate(items):
            if item.shape == "questions":
                known = self._flash_questions(item, flash)
                if known:
                    flash_jobs.append(self._answer_flash(item, known, flash, per_item_answers[i]))  # type: ignore[arg-type]
                rest = tuple(j for j in range(len(item.questions)) if j not in known)
                if rest:
                    clef_sets.append(QuestionSet(item.state, tuple(item.questions[j] for j in rest)))
                    clef_slots.append((i, rest))
            elif item.shape == "input":
                clef_sets.append(label_question_set(item.state, cfg.labels, max_tokens=item.max_tokens))
                clef_slots.append((i, (0,)))
            else:
                clef_sets.append(QuestionSet(item.state, item.questions))
                clef_slots.append((i, (0,)))
        clef_answers: list[list[Answer]] = []
        if clef_sets:
            if self.clef is None:
                raise ApiError(503, "model_unavailable", "clef is not loaded (clef.enabled is off); only clef-flash's own questions "
                                                         "(payload, client, attack_kind, class) about an HTTP request can be answered",
                               headers={"Retry-After": "60"})
            clef_answers = await self._call(self.clef.answer(clef_sets), self.clef.label, self.clef.breaker.cooldown_s)
        if flash_jobs:
            await asyncio.gather(*flash_jobs)
        for (i, positions), answers in zip(clef_slots, clef_answers, strict=True):
            for pos, ans in zip(positions, answers, strict=True):
                per_item_answers[i][pos] = _answer_json(ans, self.clef.label if self.clef else "clef")
        for i, item in enumerate(items):
            results[i] = _shape_response(item, per_item_answers[i])
        return [r for r in results if r is not None]

    def _flash_questions(self, item: _Item, flash: Decider | None) -> tuple[int, ...]:
        if flash is None or item.model != "clef-flash" or item.record is None:
            return ()
        known = dict(flash.model.questions)
        if "class" not in known and "payload" in known and "client" in known:
            known["class"] = CLASS_OPTIONS  # derived from the two questions (gateway.verdict.class_probabilities)
        out = []
        for j, q in enumerate(item.questions):
            options = known.get(q.id)
            if q.type == "choice" and options is not None and set(q.options) == set(options):
                out.append(j)
        return tuple(out)

    async def _answer_flash(self, item: _Item, positions: tuple[int, ...], flash: Decider, slots: list[dict[str, Any] | None]) -> None:
        assert item.record is not None
        try:
            features = from_record(item.record)
        except (ValueError, TypeError) as exc:
            raise _invalid(f"{item.path}state", f"is not a usable HTTP request record: {exc}") from None
        scored = await self._call(flash.scorer.score(flash.model.model_input(features)), flash.label, flash.breaker.cooldown_s)
        for j in positions:
            q = item.questions[j]
            probs = scored.probabilities.get(q.id) or class_probabilities(scored.probabilities)
            ordered = {o: float(probs[o]) for o in q.options}
            top = max(ordered, key=ordered.__getitem__)
            ANSWERS.inc("clef-flash")
            slots[j] = {"id": q.id, "top_option": top, "confidence": ordered[top], "probabilities": ordered,
                        "model": flash.label, "source": scored.source.value}

    async def _call(self, awaitable: Awaitable[Any], label: str, cooldown_s: float) -> Any:
        try:
            return await awaitable
        except StateTooLongError as exc:
            raise ApiError(413, "too_large", f"state: {exc}") from None
        except QuestionError as exc:
            raise _invalid("questions", str(exc)) from None
        except BreakerOpen:
            raise ApiError(503, "model_unavailable", f"{label} is failing; its circuit breaker is open",
                           headers={"Retry-After": str(max(1, math.ceil(cooldown_s)))}) from None
        except (ModelTimeout, ModelOverloaded, ModelError) as exc:
            raise ApiError(503, "model_unavailable", f"{label}: {exc}", headers={"Retry-After": "1"}) from None


def _answer_json(ans: Answer, label: str) -> dict[str, Any]:
    ANSWERS.inc("clef")
    return {"id": ans.id, "top_option": ans.top_option, "confidence": ans.confidence, "probabilities": dict(ans.probabilities),
            "model": label, "evidence": [e.text for e in ans.evidence]}


def _shape_response(item: _Item, answers: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    done = [a for a in answers if a is not None]
    if item.shape == "questions":
        models = sorted({a["model"].split("@")[0] for a in done})
        return {"answers": [{k: v for k, v in a.items() if k != "evidence"} | ({"evidence": a["evidence"]} if a.get("evidence") else {})
                            for a in done],
                "model": item.model if len(models) != 1 else models[0]}
    first = done[0]
    if item.shape == "input":
        return {"decision": {"label": first["top_option"], "confidence": first["confidence"], "feature": first.get("evidence", [])},
                "probabilities": first["probabilities"], "model": first["model"]}
    return {"decision": first["top_option"], "confidence": first["confidence"], "probabilities": first["probabilities"],
            "model": first["model"]}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


# ---------------------------------------------------------------------------- OpenAPI

def openapi_document(cfg: JevConfig) -> dict[str, Any]:
    """The OpenAPI 3.0 description of this API (limits from the running config)."""
    question = {
        "type": "object", "required": ["id"], "additionalProperties": True,
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": MAX_ID, "pattern": r"\S"},
            "type": {"type": "string", "enum": ["choice", "bool"], "default": "choice"},
            "options": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": MAX_ID, "pattern": r"\S"},
                        "minItems": 2, "maxItems": MAX_OPTIONS, "uniqueItems": True},
            "criteria": {"type": "string", "maxLength": MAX_CRITERIA},
        },
    }
    questions_req = {
        "type": "object", "required": ["state", "questions"], "additionalProperties": True,
        "properties": {
            "model": {"type": "string", "enum": ["clef-flash", "clef"], "default": "clef-flash"},
            # the size limit is not a maxLength: an oversized state is answered 413, not 400
            "state": {"oneOf": [{"type": "string", "description": f"at most {cfg.max_state_bytes} UTF-8 bytes (else 413)"},
                                {"type": "object"}]},
            "questions": {"type": "array", "items": question, "minItems": 1, "maxItems": cfg.max_questions},
        },
    }
    input_req = {
        "type": "object", "required": ["input"], "additionalProperties": True,
        "properties": {"input": {"type": "string", "description": f"at most {cfg.max_state_bytes} UTF-8 bytes (else 413)"},
                       "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS}},
    }
    cand_req = {
        "type": "object", "required": ["task", "candidates"], "additionalProperties": True,
        "properties": {"task": {"type": "string", "minLength": 1, "maxLength": MAX_ID, "pattern": r"\S"},
                       "features": {"type": "object"},
                       "candidates": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": MAX_ID, "pattern": r"\S"},
                                      "minItems": 2, "maxItems": MAX_OPTIONS, "uniqueItems": True}},
    }
    probs = {"type": "object", "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1}}
    answer = {"type": "object", "required": ["id", "top_option", "confidence", "probabilities"],
              "properties": {"id": {"type": "string"}, "top_option": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
                             "confidence": {"type": "number", "minimum": 0, "maximum": 1}, "probabilities": probs,
                             "model": {"type": "string"}, "evidence": {"type": "array", "items": {"type": "string"}}}}
    questions_resp = {"type": "object", "required": ["answers", "model", "latency_ms"],
                      "properties": {"answers": {"type": "array", "items": answer}, "model": {"type": "string"},
                                     "latency_ms": {"type": "number", "minimum": 0}}}
    input_resp = {"type": "object", "required": ["decision", "latency_ms"],
                  "properties": {"decision": {"type": "object", "required": ["label", "confidence", "feature"],
                                              "properties": {"label": {"type": "string"},
                                                             "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                                                             "feature": {"type": "array", "items": {"type": "string"}}}},
                                 "probabilities": probs, "model": {"type": "string"}, "latency_ms": {"type": "number", "minimum": 0}}}
    cand_resp = {"type": "object", "required": ["decision", "confidence", "latency_ms"],
                 "properties": {"decision": {"type": "string"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                                "probabilities": probs, "model": {"type": "string"}, "latency_ms": {"type": "number", "minimum": 0}}}
    # anyOf, not oneOf: an object carrying keys of two shapes is answered as the first shape it has
    one_req = {"anyOf": [{"$ref": "#/components/schemas/QuestionsRequest"}, {"$ref": "#/components/schemas/InputRequest"},
                         {"$ref": "#/components/schemas/CandidatesRequest"}]}
    one_resp = {"oneOf": [{"$ref": "#/components/schemas/QuestionsResponse"}, {"$ref": "#/components/schemas/InputResponse"},
                          {"$ref": "#/components/schemas/CandidatesResponse"}]}
    error = {"type": "object", "required": ["error"],
             "properties": {"error": {"type": "object", "required": ["code", "message", "request_id"],
                                      "properties": {"code": {"type": "string", "enum": [
                                          "invalid_request", "invalid_json", "too_large", "missing_api_key", "invalid_api_key",
                                          "rate_limited", "model_unavailable"]},
                                          "message": {"type": "string"}, "field": {"type": "string"},
                                          "request_id": {"type": "string"}}}}}
    err = {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    security: list[dict[str, list[str]]] = [{"bearer": []}, {"apiKey": []}] if cfg.api_keys else []
    return {
        "openapi": "3.0.3",
        "info": {"title": "clefgate decision API (Jev-compatible)", "version": __version__},
        "paths": {
            "/v1/decision": {"post": {
                "summary": "Answer questions, classify an input, or pick among candidates (or a batch of these)",
                "operationId": "decide",
                "security": security,
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "oneOf": [one_req, {"type": "array", "items": one_req, "minItems": 1, "maxItems": cfg.max_batch}]}}}},
                "responses": {
                    "200": {"description": "the answers, in the request's shape (an array for a batch)",
                            "content": {"application/json": {"schema": {"oneOf": [one_resp, {"type": "array", "items": one_resp}]}}}},
                    "400": err, "401": err, "403": err, "413": err, "429": err, "503": err,
                }}},
            "/v1/health": {"get": {"operationId": "health", "responses": {
                "200": {"description": "ready", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                "503": {"description": "degraded", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}}}},
            "/health": {"get": {"operationId": "healthAlias", "responses": {
                "200": {"description": "ready", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                "503": {"description": "degraded", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}}}},
        },
        "components": {
            "schemas": {"QuestionsRequest": questions_req, "InputRequest": input_req, "CandidatesRequest": cand_req,
                        "QuestionsResponse": questions_resp, "InputResponse": input_resp, "CandidatesResponse": cand_resp,
                        "Error": error,
                        "Health": {"type": "object", "required": ["status", "ready", "models"],
                                   "properties": {"status": {"type": "string", "enum": ["ok", "degraded"]}, "ready": {"type": "boolean"},
                                                  "version": {"type": "string"}, "models": {"type": "array", "items": {"type": "object"}}}}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}},
        },
    }
