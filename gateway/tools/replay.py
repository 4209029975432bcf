"""``clefgate replay``: last week's traffic through the current rules, model and policy, offline.

    clefgate replay --config clefgate.yaml access.log [more.log.gz ...]
    clefgate replay --config clefgate.yaml --json --top 20 decisions.jsonl

Reads combined-format access logs (``%h %l %u %t "%r" %>s %b "%{Referer}i"
"%{User-agent}i"``, common format too, ``.gz`` accepted) or JSONL (the gateway's
decision log, or request records as ``clefgate eval`` reads them), turns every line
into the request the gateway would have seen, and decides it exactly as the server
does: the pipeline is compiled by ``gateway.pipeline.build`` from the config, the
model is the configured Clef-flash version (``gateway.decider.onnx``) behind the same
``ModelStage`` and ``Policy``. It prints what would have been forwarded, challenged and
blocked, by rule and by path, so an operator can try a policy before enforcing it.

Differences from live serving, all stated in the output:

* a combined log carries the client address, time, request line, status, size,
  referer and user agent only. Every other header is missing: ``Host`` is
  ``--host``; for browser user agents the headers that browser family sends for such
  a request (Accept, Accept-Language, Accept-Encoding, Sec-Fetch-*, client hints) are
  reconstructed (``--reconstruct browser``, the default) or left out
  (``--reconstruct none``); cookies are unknown, so no request holds a pass cookie;
  request bodies are unknown (empty).
* per-client windows and rate limits run on the log's own clock, in log order; a
  request the model scores is counted in its client's window once its batch has run
  (batches of ``--batch`` requests), a little later than live.
* a request forwarded is told to the client state with its logged status (a record without one as a 200): its
  client's window, and the pages the site serves (``clients.served_pages``) learn from the log as they would live.
* the decision cache, the circuit breaker and the request deadline are not used: every
  scored request is scored (a batched, synchronous model run).
* with the int8 model a request's scores depend slightly on the requests batched with it
  (live and offline alike): about 1 decision in 2,000-3,000 near a threshold can come out
  otherwise than logged with nothing changed. ``model.variant: fp32`` removes this.

Shadow mode and rollout apply as configured; the tables count what each policy
*decided* (what enforcing would do) and say how many of those were shadow-only.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import functools
import gzip
import io
import json
import logging
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from gateway import config as configmod
from gateway.clients import ClientState
from gateway.config import Config, ConfigError
from gateway.decider.scoring import ModelError, Scored
from gateway.decider.stage import ModelStage
from gateway.decisionlog import as_sent
from gateway.features import Features, ModelInput, from_record
from gateway.pipeline import Pipeline
from gateway.pipeline import build as build_pipeline
from gateway.policy import Policy
from gateway.rdns import without_lookups
from gateway.verdict import Action, Probabilities, Source, Verdict

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "default.yaml"
DEFAULT_HOST = "www.example.com"

_COMBINED = re.compile(
    r'^(?P<client>\S+) \S+ \S+ \[(?P<time>[^\]]+)\] "(?P<request>(?:[^"\\]|\\.)*)" (?P<status>\d{3}|-) (?P<bytes>\S+)'
    r'(?: "(?P<referer>(?:[^"\\]|\\.)*)" "(?P<agent>(?:[^"\\]|\\.)*)")?')
_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})|\\(.)")
_REQUEST_LINE = re.compile(r"^([A-Z][A-Z0-9_-]{0,15}) (\S+)(?: HTTP/(\d(?:\.\d)?))?$")


# ------------------------------------------------------------------------------------------ reading logs

@dataclass(frozen=True)
class LogRequest:
    """One request read from a log: the record ``features.from_record`` takes, when it happened, its logged status."""

    record: dict[str, Any]
    when: float
    status: int
    source: str  # combined, decision_log, record


def _unescape(text: str) -> str:
    """A logged field as record text: nginx and Apache write bytes >= 0x80 as ``\\xHH``; those bytes are the
    wire value, so they are read back the way the decision log records a wire value (UTF-8 as text)."""
    return as_sent(_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else m.group(2), text))


def _browser_family(agent: str) -> str | None:
    if "Mozilla/" not in agent or re.search(r"(?i)bot|crawl|spider|slurp|headless", agent):
        return None
    if "Firefox/" in agent:
        return "firefox"
    if "Chrome/" in agent or "CriOS/" in agent or "Edg/" in agent:
        return "chromium"
    if "Safari/" in agent:
        return "safari"
    return None


def _dest(path: str) -> str:
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if ext == "css":
        return "style"
    if ext in ("js", "mjs"):
        return "script"
    if ext in ("png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico"):
        return "image"
    if ext in ("woff", "woff2", "ttf", "otf"):
        return "font"
    return "document"


_ACCEPT = {"style": "text/css,*/*;q=0.1", "script": "*/*", "font": "*/*",
           "image": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"}


def reconstruct_headers(method: str, target: str, host: str, agent: str, referer: str, mode: str) -> list[list[str]]:
    """The request head as far as a combined log allows: Host, User-Agent, Referer, and (``mode="browser"``) the
    headers a browser of that user agent's family sends for such a request, in its usual order."""
    family = _browser_family(agent) if mode == "browser" else None
    headers: list[list[str]] = [["Host", host]]
    if family is None:
        if agent:
            headers.append(["User-Agent", agent])
        if mode == "browser":
            headers.append(["Accept", "*/*"])
        if referer:
            headers.append(["Referer", referer])
        return headers
    dest = _dest(urlsplit(target).path)
    document = dest == "document"
    accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" if document else _ACCEPT[dest]
    ref_host = urlsplit(referer).netloc.lower() if referer else ""
    site = "none" if not referer else ("same-origin" if ref_host == host.lower() else "cross-site")
    mode_value = "navigate" if document else "no-cors"
    if family == "chromium":
        headers += [["Connection", "keep-alive"], ["User-Agent", agent], ["Accept", accept], ["Sec-Fetch-Site", site],
                    ["Sec-Fetch-Mode", mode_value], ["Sec-Fetch-Dest", dest]]
    elif family == "firefox":
        headers += [["User-Agent", agent], ["Accept", accept], ["Accept-Language", "en-US,en;q=0.5"],
                    ["Accept-Encoding", "gzip, deflate, br"]]
    else:
        headers += [["Accept", accept], ["Sec-Fetch-Site", site], ["Sec-Fetch-Dest", dest], ["Accept-Language", "en-US,en;q=0.9"],
                    ["Sec-Fetch-Mode", mode_value], ["User-Agent", agent]]
    if referer:
        headers.append(["Referer", referer])
    if family == "chromium":
        headers += [["Accept-Encoding", "gzip, deflate, br"], ["Accept-Language", "en-US,en;q=0.9"]]
    elif family == "firefox":
        headers += [["Connection", "keep-alive"], ["Sec-Fetch-Dest", dest], ["Sec-Fetch-Mode", mode_value], ["Sec-Fetch-Site", site]]
    else:
        headers += [["Accept-Encoding", "gzip, deflate, br"], ["Connection", "keep-alive"]]
    if method in ("POST", "PUT", "PATCH"):
        headers.append(["Content-Type", "application/x-www-form-urlencoded"])
    return headers


def parse_combined(line: str, host: str, reconstruct: str) -> LogRequest | None:
    """One combined/common-format line as a LogRequest (None when it is not such a line)."""
    m = _COMBINED.match(line)
    if m is None:
        return None
    request = _REQUEST_LINE.match(_unescape(m.group("request")))
    if request is None:
        return None
    method, target, version = request.group(1), request.group(2), request.group(3) or "1.0"
    try:
        when = datetime.datetime.strptime(m.group("time"), "%d/%b/%Y:%H:%M:%S %z").timestamp()
    except ValueError:
        return None
    agent = _unescape(m.group("agent") or "")
    referer = _unescape(m.group("referer") or "")
    agent = "" if agent == "-" else agent
    referer = "" if referer == "-" else referer
    status = int(m.group("status")) if m.group("status").isdigit() else 0
    record = {"method": method, "path": target, "http_version": version, "client_ip": m.group("client"),
              "headers": reconstruct_headers(method, target, host, agent, referer, reconstruct), "body": None}
    return LogRequest(record, when, status, "combined")


def _iso_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    with contextlib.suppress(ValueError):
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    return None


class UnreadableRecord(ValueError):
    """A logged record that parses as JSON but describes no request (counted as an unreadable line)."""


class AccessLogLine(UnreadableRecord):
    """A line of clefgate's own access log: it names the request but records none of its headers or body."""


ACCESS_LOG_NOTE = ("clefgate's own access log records no headers or body, so its lines cannot be decided again (every one "
                   "would look like a client with no user agent): replay the decision log (decision_log.path) instead")


def parse_json(line: str, fallback_time: float) -> LogRequest | None:
    """A decision-log line (``{"record": {...}, "time": ..., "status": ...}``) or a bare request record."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, a number past Python's digit limit, or nested too deep
        return None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("record"), dict):
        record = dict(obj["record"])
        record.setdefault("request_id", obj.get("request_id", ""))
        when = _iso_time(obj.get("time"))
        status = obj.get("status")
        return LogRequest(record, when if when is not None else fallback_time, int(status) if isinstance(status, int) else 0,
                          "decision_log")
    if "method" in obj and "path" in obj:
        if "headers" not in obj and "client_ip" not in obj and ("duration_us" in obj or "client" in obj):
            raise AccessLogLine(ACCESS_LOG_NOTE)
        when = _iso_time(obj.get("time"))
        status = obj.get("status")
        return LogRequest(obj, when if when is not None else fallback_time, int(status) if isinstance(status, int) else 0, "record")
    return None


def _open(path: str) -> TextIO:
    if path == "-":
        return sys.stdin
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _first_time(path: str, host: str, lines: int = 200) -> float | None:
    """When the first request in a file was logged (None when none of its first ``lines`` lines says)."""
    with _open(path) as fh:
        for _, raw in zip(range(lines), fh, strict=False):
            line = raw.strip()
            try:
                item = parse_json(line, float("nan")) if line.startswith("{") else parse_combined(line, host, "none")
            except UnreadableRecord:
                continue
            if item is not None and item.when == item.when:  # not NaN: the line carried its time
                return item.when
    return None


def in_time_order(paths: Sequence[str], host: str) -> tuple[list[str], str | None]:
    """The files oldest first, by the first request each logged, and a note when that is not the order given.

    ``clefgate replay access.log*`` gets the shell's order, newest first (access.log,
    access.log.1, ...); replayed in that order, windows and rate limits would see a
    steady client's older traffic all at once. Standard input stays where it was given.
    """
    if len(paths) < 2 or "-" in paths:
        return list(paths), None
    firsts = {p: _first_time(p, host) for p in paths}
    ordered = sorted(paths, key=lambda p: (firsts[p] is None, firsts[p] or 0.0))
    if ordered == list(paths):
        return ordered, None
    return ordered, "files replayed oldest first, by the first request each logged: " + ", ".join(ordered)


def read_log(paths: Sequence[str], host: str, reconstruct: str, skipped: Counter[str], examples: list[str]) -> Iterator[LogRequest]:
    """Every request in the files, in file order; unreadable lines are counted (and a few kept as examples)."""
    pseudo = 0.0
    for path in paths:
        with _open(path) as fh:
            for number, raw in enumerate(fh, 1):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    continue
                pseudo += 0.001
                if line.startswith('{"audit":'):  # a console action's audit line: no request in it
                    skipped["console_audit"] += 1
                    continue
                try:
                    item = parse_json(line, pseudo) if line.lstrip().startswith("{") else parse_combined(line, host, reconstruct)
                except AccessLogLine:
                    skipped["clefgate_access_log"] += 1
                    continue
                if item is None:
                    skipped["unreadable"] += 1
                    if len(examples) < 3:
                        examples.append(f"{path}:{number}: {line[:120]}")
                    continue
                yield item


# ------------------------------------------------------------------------------------------ deciding offline

class _Pending:
    """The point where a scored request waits for its batch: the replay resumes it with the batch's answer."""

    __slots__ = ("error", "item", "result")

    def __init__(self, item: ModelInput) -> None:
        self.item = item
        self.result: Probabilities | None = None
        self.error: BaseException | None = None

    def __await__(self) -> Generator[_Pending, None, Probabilities]:
        yield self
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class DeferredScorer:
    """The model side of the offline pipeline: each ``score`` suspends until the replay runs its batch."""

    def __init__(self, label: str) -> None:
        self.label = label

    async def score(self, item: ModelInput) -> Scored:
        probabilities = await _Pending(item)
        return Scored(probabilities, model=self.label)


class ReplayClock:
    """The log's time, for per-client windows and rate buckets."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


ACTIONS = ("forward", "challenge", "block")
LATE_S = 60.0  # a log's lines are written as requests end, so a little disorder is normal
TABLE_KEYS = 50_000  # distinct paths (or clients) a table holds before it sheds its lightest rows


class TopTable:
    """Counts of forward / challenge / block by key (a path, a client), in bounded memory.

    A month of logs can hold tens of millions of distinct paths (cache-busting segments,
    scanners' fuzzing), about 300 bytes each if all were kept. Past ``cap`` keys the
    table keeps the heaviest half -- a quarter by volume, a quarter by challenges and
    blocks -- and drops the rest, remembering how many requests it dropped. A key that
    was dropped and comes back counts from zero again, so once ``pruned`` the figures of
    rows near the bottom of a table can be low; the heaviest rows stay exact unless they
    were rare when a prune happened. The report says when this happened.
    """

    def __init__(self, cap: int | None = None) -> None:
        self.cap = max(cap or TABLE_KEYS, 8)
        self.counts: dict[str, list[int]] = {}
        self.pruned = 0            # how many times the table shed rows
        self.dropped_requests = 0  # requests counted in rows it shed

    def add(self, key: str, action: str) -> None:
        row = self.counts.get(key)
        if row is None:
            if len(self.counts) >= self.cap:
                self._prune()
            row = self.counts[key] = [0, 0, 0]
        row[ACTIONS.index(action)] += 1

    def _prune(self) -> None:
        keep = self.cap // 4
        by_volume = sorted(self.counts, key=lambda k: -sum(self.counts[k]))[:keep]
        by_refused = sorted(self.counts, key=lambda k: -(self.counts[k][1] + self.counts[k][2]))[:keep]
        kept = {k: self.counts[k] for k in (*by_volume, *by_refused)}
        self.dropped_requests += sum(sum(row) for k, row in self.counts.items() if k not in kept)
        self.counts = kept
        self.pruned += 1

    def items(self) -> list[tuple[str, Counter[str]]]:
        return [(k, Counter(dict(zip(ACTIONS, row, strict=True)))) for k, row in self.counts.items()]


@dataclass
class Tally:
    """What the replay decided, by rule, path and client."""

    total: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    shadow_only: Counter[str] = field(default_factory=Counter)
    sources: Counter[str] = field(default_factory=Counter)
    by_rule: dict[str, Counter[str]] = field(default_factory=dict)
    by_path: TopTable = field(default_factory=TopTable)
    by_client: TopTable = field(default_factory=TopTable)
    formats: Counter[str] = field(default_factory=Counter)
    changed: Counter[str] = field(default_factory=Counter)

    def add(self, item: LogRequest, features: Features, verdict: Verdict) -> None:
        decided = (verdict.shadow_action or verdict.action).value
        self.total += 1
        self.actions[decided] += 1
        self.formats[item.source] += 1
        if verdict.shadow_action is not None:
            self.shadow_only[decided] += 1
        source = verdict.source.value
        self.sources[source] += 1
        if verdict.source in (Source.MODEL, Source.CACHE, Source.FALLBACK) or (verdict.source is Source.SHADOW and verdict.probabilities):
            label = f"model (via {verdict.rule})" if verdict.rule else "model (no rule matched)"
            if verdict.source is Source.FALLBACK:
                label = "model fallback"
        elif verdict.payload:
            # one row per detector and kind: the reason names the request's own fragment
            label = f"payload detector: {verdict.payload[0].detector} {verdict.payload[0].kind}"
        elif verdict.rule:
            label = verdict.rule
        else:
            label = f"default: {verdict.reason}"
        self.by_rule.setdefault(label, Counter())[decided] += 1
        self.by_path.add(features.path, decided)
        self.by_client.add(features.client_ip, decided)
        if item.status:
            # what the origin answered then vs what the gateway would do now
            was_refused = item.status in (403, 429)
            self.changed["newly_refused" if decided != "forward" and not was_refused else
                         "newly_allowed" if decided == "forward" and was_refused else "same"] += 1


class Replayer:
    """Decides a stream of logged requests with a compiled pipeline and (optionally) a batched model."""

    def __init__(self, cfg: Config, *, use_model: bool = True, batch: int = 64, model_loader: Callable[[Config], Any] | None = None) -> None:
        cfg = without_lookups(cfg)  # the replay resolves only the model's batches: nothing waits for a DNS lookup
        self.cfg = cfg
        self.clock = ReplayClock()
        self.late = 0  # requests logged more than LATE_S before one replayed earlier
        self.state = ClientState(cfg.clients, cfg.redis, clock=self.clock)
        self.model: Any = None
        self.model_error = ""
        self.use_model = use_model
        stage: Callable[[Policy], ModelStage] | None = None
        if use_model and cfg.model.enabled:
            try:
                self.model = (model_loader or load_model)(cfg)
            except Exception as exc:  # a missing or refused model: replay rules only, and say so
                problems = getattr(exc, "problems", None)
                self.model_error = "; ".join(problems) if problems else (str(exc) or repr(exc))
        if self.model is not None:
            # the model stage as the server makes it, deciding with the pipeline's policy; only its scorer waits for the replay's batches
            stage = functools.partial(ModelStage, DeferredScorer(self.model.label), fallback=cfg.decider.fallback, model_label=self.model.label)
        # the state is handed over as if from a previous pipeline, so rules and windows run on the log's clock
        self.pipeline: Pipeline = build_pipeline(cfg, stage, previous=Pipeline(state=self.state))
        self.batch = max(1, batch)
        self.tally = Tally()
        self.model_runs = 0
        self.model_seconds = 0.0
        self._pending: list[tuple[Any, _Pending, LogRequest, Features]] = []

    def feed(self, item: LogRequest) -> None:
        """Decide one logged request (raises ``UnreadableRecord`` for a record no request can be built from)."""
        try:
            features = from_record(item.record)
        except (TypeError, ValueError) as exc:  # e.g. a header that is not a [name, value] pair
            raise UnreadableRecord(f"{type(exc).__name__}: {exc}") from None
        if item.when < self.clock.now - LATE_S:
            self.late += 1  # replayed at the later time: windows and rate limits see it late
        self.clock.now = max(self.clock.now, item.when)
        if not features.request_id:
            features = dataclasses.replace(features, request_id=f"replay-{self.tally.total + len(self._pending) + 1}")
        outcome = self.pipeline.decide(features)
        if isinstance(outcome, Verdict):
            self._done(item, features, outcome)
            return
        coro = outcome
        try:
            waiting = coro.send(None)  # type: ignore[attr-defined]
        except StopIteration as stop:  # decided without waiting for the model
            self._done(item, features, stop.value)
            return
        if not isinstance(waiting, _Pending):
            coro.close()  # type: ignore[attr-defined]
            raise RuntimeError(f"the pipeline awaited {type(waiting).__name__}, which the offline replay cannot resolve")
        self._pending.append((coro, waiting, item, features))
        if len(self._pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        """Score the pending requests in one model run and finish their decisions, in log order."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        started = time.perf_counter()
        try:
            results = self.model.run_inputs([p.item for _, p, _, _ in pending])
            if len(results) != len(pending):
                raise ModelError(f"model returned {len(results)} results for {len(pending)} requests")
            for (_, p, _, _), probs in zip(pending, results, strict=True):
                p.result = probs
        except ModelError as exc:
            for _, p, _, _ in pending:
                p.error = exc
        self.model_seconds += time.perf_counter() - started
        self.model_runs += 1
        for coro, _, item, features in pending:
            try:
                coro.send(None)
            except StopIteration as stop:
                self._done(item, features, stop.value)
            else:
                coro.close()
                raise RuntimeError("a scored request awaited the model twice")

    def _done(self, item: LogRequest, features: Features, verdict: Verdict) -> None:
        self.tally.add(item, features, verdict)
        if verdict.action is Action.FORWARD:
            self.pipeline.observe(features, verdict, item.status or 200)


def load_model(cfg: Config) -> Any:
    """The configured Clef-flash version, loaded as the server loads it (``gateway.decider.onnx``)."""
    import onnxruntime

    from gateway.decider import onnx

    # the runtime reports a provider it cannot use (CUDA on a machine without it) itself, once
    onnxruntime.set_default_logger_severity(4)
    base = Path(cfg.source).parent if cfg.source and not cfg.source.startswith("<") else None
    return onnx.load(onnx.OnnxOptions.from_config(cfg.model, base))


def load_config(path: str | None, host: str) -> tuple[Config, list[str]]:
    """The config for replay: the file (or the embedded default), with what offline replay changes, listed."""
    notes: list[str] = []
    source = path or str(DEFAULT_CONFIG)
    raw = configmod.read_yaml(source)
    if not isinstance(raw, dict):
        raise ConfigError([f"<top>: expected a map, got {type(raw).__name__}"], source)
    raw = dict(raw)
    if not raw.get("backends"):
        raw["backends"] = {"replay": {"servers": ["http://127.0.0.1:9"]}}
    # nothing is signed offline: a throwaway key replaces the configured ones (which may be env: secrets not set here)
    raw["challenge"] = {**(raw.get("challenge") or {}), "keys": [], "dev_generate_secret": True}
    if (raw.get("redis") or {}).get("url"):
        notes.append("redis: ignored offline; per-client state is local to the replay")
    raw["redis"] = {}
    raw.pop("decision_log", None)
    # the replay resolves only the model's batches: reverse DNS (rules' reverse_dns) is not looked up (Replayer)
    notes.append("reverse DNS: not looked up offline; crawlers are verified by their published ranges alone (one from a range "
                 "newer than the lists counts as a spoofer here, and is let through live when its name confirms it)")
    if path is None:
        notes.append(f"config: the embedded default ({DEFAULT_CONFIG})")
    return configmod.validate(raw, source), notes


def missing_fields_note(formats: Counter[str], host: str, reconstruct: str) -> list[str]:
    """What the input lacked and how it was filled in."""
    notes = []
    if formats.get("combined"):
        notes.append("combined log: present — client address, time, request line (method, target, HTTP version), status, "
                     "response size, Referer, User-Agent")
        notes.append(f"combined log: missing — every other header; Host reconstructed as {host!r} (--host)")
        if reconstruct == "browser":
            notes.append("combined log: for browser user agents, Accept, Accept-Language, Accept-Encoding, Sec-Fetch-* reconstructed "
                         "as that browser family sends them for the requested resource (client hints, Cookie, Origin are not); "
                         "other user agents get Accept: */* (--reconstruct none sends only what the log has)")
        else:
            notes.append("combined log: no header reconstructed (--reconstruct none): requests look header-poor, like scripts")
        notes.append("combined log: missing — cookies (no request holds a pass cookie) and request bodies (POST bodies empty)")
    if formats.get("decision_log") or formats.get("record"):
        notes.append("JSONL: requests as the gateway recorded them (headers in wire order, body prefix); cookies are in the "
                     "record only when they were logged")
    return notes


# ------------------------------------------------------------------------------------------ output

# onnxruntime quantizes each int8 MatMul's input with one scale per run, so the requests batched with one move its
# scores a little (models/README.md, *Limits*: 5-6 decisions in 16,000, 68 in 148,000)
INT8_BATCH_NOTE = ("int8 model: a request's scores move slightly with the requests batched with it, offline as live, so about "
                   "1 decision in 2,000-3,000 near a threshold can differ from the log with nothing changed; model.variant: fp32 "
                   "scores a request the same in any batch")


def summary(replayer: Replayer, *, top: int, notes: list[str], skipped: Counter[str], examples: list[str], seconds: float,
            host: str, reconstruct: str) -> dict[str, Any]:
    t = replayer.tally
    model = replayer.model
    model_info: dict[str, Any]
    if model is not None:
        model_info = {"model": model.label, "provider": getattr(model, "provider", ""), "precision": getattr(model, "precision", ""),
                      "runs": replayer.model_runs, "seconds": round(replayer.model_seconds, 3)}
    else:
        model_info = {"model": None, "reason": replayer.model_error or ("--no-model" if not replayer.use_model
                                                                          else "model.enabled is false in the config")}

    def rows(table: dict[str, Counter[str]] | TopTable, key: Callable[[tuple[str, Counter[str]]], Any]) -> list[dict[str, Any]]:
        ordered = sorted(table.items(), key=key)[:top]
        return [{"name": name, "total": sum(c.values()), "forward": c["forward"], "challenge": c["challenge"], "block": c["block"]}
                for name, c in ordered]

    def refused(kv: tuple[str, Counter[str]]) -> tuple[int, int, str]:
        return (-(kv[1]["challenge"] + kv[1]["block"]), -sum(kv[1].values()), kv[0])

    def volume(kv: tuple[str, Counter[str]]) -> tuple[int, str]:
        return (-sum(kv[1].values()), kv[0])

    shares = {a: (t.actions[a] / t.total if t.total else 0.0) for a in ("forward", "challenge", "block")}
    return {
        "requests": t.total,
        "skipped_lines": dict(skipped),
        "skipped_examples": examples,
        "seconds": round(seconds, 3),
        "pipeline": replayer.pipeline.description,
        "model": model_info,
        "decided": {a: t.actions[a] for a in ("forward", "challenge", "block")},
        "shares": shares,
        "shadow_only": dict(t.shadow_only),
        "sources": dict(t.sources),
        "compared_with_log": dict(t.changed),
        "by_rule": rows(t.by_rule, volume),
        "by_path": rows(t.by_path, volume),
        "refused_paths": [r for r in rows(t.by_path, refused) if r["challenge"] + r["block"]],
        "refused_clients": [r for r in rows(t.by_client, refused) if r["challenge"] + r["block"]],
        "input": {"formats": dict(t.formats), "host": host, "reconstruct": reconstruct,
                  "notes": missing_fields_note(t.formats, host, reconstruct)},
        "notes": [*notes, "per-client windows and rate limits use the log's timestamps, in log order",
                  "not used offline: the decision cache, the circuit breaker, the model deadline",
                  *([INT8_BATCH_NOTE] if model_info.get("precision") == "int8" else []),
                  *([f"{replayer.late:,} request(s) were logged more than {LATE_S:g} s before one replayed earlier; they were "
                     "replayed at the later time, so windows and rate limits saw them late (are the files in time order?)"]
                    if replayer.late else []),
                  *(f"more than {table.cap:,} distinct {name}: the table kept the heaviest and shed {table.dropped_requests:,} "
                    f"requests' counts in {table.pruned:,} pass(es), so its lower rows can be undercounted"
                    for name, table in (("paths", t.by_path), ("clients", t.by_client)) if table.pruned)],
    }


def render(result: dict[str, Any]) -> str:
    out = []
    n = result["requests"]
    out.append(f"replayed {n:,} requests in {result['seconds']:.1f}s — pipeline: {result['pipeline']}")
    m = result["model"]
    out.append(f"model: {m['model']} on {m['provider']} ({m['precision']}), {m['runs']:,} batched runs" if m["model"]
               else f"model: none — {m['reason']} (scored requests took the rules-only path)")
    d, s = result["decided"], result["shares"]
    out.append("")
    out.append(f"would forward {d['forward']:>9,} ({100 * s['forward']:5.1f}%)")
    out.append(f"would challenge {d['challenge']:>7,} ({100 * s['challenge']:5.1f}%)")
    out.append(f"would block {d['block']:>11,} ({100 * s['block']:5.1f}%)")
    if result["shadow_only"]:
        out.append("shadow mode / rollout: only logged, not enforced: " + ", ".join(f"{k} {v:,}" for k, v in result["shadow_only"].items()))
    if result["compared_with_log"]:
        c = result["compared_with_log"]
        out.append(f"against the logged status: {c.get('newly_refused', 0):,} answered then would now be challenged or blocked; "
                   f"{c.get('newly_allowed', 0):,} refused then (403/429) would now be forwarded")

    def table(title: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        width = max(len(title), *(len(r["name"]) for r in rows))
        width = min(width, 72)
        out.append("")
        out.append(f"{title:<{width}} {'requests':>9} {'forward':>9} {'challenge':>9} {'block':>9}")
        for r in rows:
            name = r["name"] if len(r["name"]) <= width else r["name"][: width - 1] + "…"
            out.append(f"{name:<{width}} {r['total']:>9,} {r['forward']:>9,} {r['challenge']:>9,} {r['block']:>9,}")

    table("by rule", result["by_rule"])
    table("by path (most requested)", result["by_path"])
    table("by path (most challenged or blocked)", result["refused_paths"])
    table("by client (most challenged or blocked)", result["refused_clients"])
    out.append("")
    out.append("input:")
    out += [f"  - {note}" for note in result["input"]["notes"]]
    out += [f"  - {note}" for note in result["notes"]]
    own = result["skipped_lines"].get("clefgate_access_log", 0)
    if own:
        out.append(f"  - skipped {own:,} line(s) of clefgate's access log: {ACCESS_LOG_NOTE}")
    other = sum(result["skipped_lines"].values()) - own
    if other:
        out.append(f"  - skipped {other:,} line(s) that are not combined-format or JSONL requests, e.g.:")
        out += [f"      {e}" for e in result["skipped_examples"]]
    return "\n".join(out)


def main(argv: Iterable[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="clefgate replay", description="Replay an access log (combined format) or decision log (JSONL) "
                                "through the current rules, model and policy, offline.")
    p.add_argument("logs", nargs="+", metavar="ACCESS_LOG", help="combined-format access log(s) or JSONL; .gz accepted; - for stdin")
    p.add_argument("--config", help="gateway config (default: the embedded default config with the shipped rules)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"Host header for combined-format lines, which do not log it (default {DEFAULT_HOST})")
    p.add_argument("--reconstruct", choices=("browser", "none"), default="browser",
                   help="fill in the headers a browser user agent's family sends (default) or send only what the log has")
    p.add_argument("--no-model", action="store_true", help="rules and policy only (scored requests take the rules-only path)")
    p.add_argument("--batch", type=int, default=64, help="requests per model run (default 64)")
    p.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    p.add_argument("--limit", type=int, default=0, help="stop after this many requests (0: all)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = p.parse_args(list(argv) if argv is not None else None)

    # the replay reports problems itself; the gateway's warnings (dev challenge key, model load) stay quiet
    logging.getLogger("clefgate").setLevel(logging.ERROR)
    try:
        cfg, notes = load_config(args.config, args.host)
        replayer = Replayer(cfg, use_model=not args.no_model, batch=args.batch)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    skipped: Counter[str] = Counter()
    examples: list[str] = []
    started = time.perf_counter()
    try:
        logs, order_note = in_time_order(args.logs, args.host)
        if order_note:
            notes.append(order_note)
        for i, item in enumerate(read_log(logs, args.host, args.reconstruct, skipped, examples)):
            if args.limit and i >= args.limit:
                break
            try:
                replayer.feed(item)
            except UnreadableRecord as exc:
                skipped["unreadable"] += 1
                if len(examples) < 3:
                    examples.append(f"a {item.source.replace('_', ' ')} line: {exc}")
        replayer.flush()
    except OSError as exc:
        print(f"clefgate replay: {exc}", file=sys.stderr)
        return 2
    result = summary(replayer, top=args.top, notes=notes, skipped=skipped, examples=examples, seconds=time.perf_counter() - started,
                     host=args.host, reconstruct=args.reconstruct)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(render(result))
    return 0 if result["requests"] else 1


if __name__ == "__main__":
    sys.exit(main())
