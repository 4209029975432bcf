"""The decision log: one JSONL line per scored or ruled request, written off the hot path.

Each line holds the request as a record in the shape ``clefgate eval`` and
``clefgate train`` read (method, path, http_version, headers in wire order, body
prefix, client_ip), the model input exactly as the model read it (feature version,
canonical text, numeric vector — present when the model ran; a cached answer's line
refers to the same input through its record), the probabilities, the verdict, its
source and rule, the decision latency and the model version. Add a ``"label"`` to
lines and the file is training data.

A line is encoded where the decision is observed and handed as bytes to a bounded
queue; a writer thread only does the I/O, so the event loop never waits for a disk and
never fights a second Python thread for the interpreter over JSON work. Encoding is
:func:`encode_line`: the JSON encoder's own bytes, assembled from the C string encoder
with the probabilities of a cached answer (one shared object) encoded once. The queue
is a deque the writer drains in batches, woken at most once per batch (a lock and a
thread wake-up per line cost the event loop more than the line itself). When the queue
is full the line is dropped and counted: the log never slows or drops a request. Files
rotate by size.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
import zlib
from collections import deque
from typing import Any

from gateway import metrics
from gateway.config import DecisionLogConfig
from gateway.features import FEATURE_VERSION, Features
from gateway.verdict import Action, Source, Verdict

log = logging.getLogger("clefgate.decisionlog")

LINES = metrics.counter("clefgate_decision_log_lines_total", "Decision-log lines written.")
DROPS = metrics.counter("clefgate_decision_log_drops_total", "Decision-log lines dropped, by reason (queue_full, encode_error, write_error).",
                        ("reason",))
ROTATIONS = metrics.counter("clefgate_decision_log_rotations_total", "Decision-log file rotations.")

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_str = json.encoder.encode_basestring  # the encoder's own (C) string escaping for ensure_ascii=False
# the writer waits this long after a wake-up so that one write() carries many lines
_BATCH_S = 0.02


_LONE = re.compile("[\udc80-\udcff]")  # a byte the client sent that is not UTF-8, as ``as_sent`` holds it


def _escape_lone(m: re.Match[str]) -> str:
    return f"\\u{ord(m[0]):04x}"


def as_sent(wire: str) -> str:
    """A value as the client sent it: the proxy reads bytes as latin-1, a record holds text (UTF-8 read as such,
    a byte that is not UTF-8 as a lone surrogate), and ``from_record`` turns it back into the same wire value."""
    if wire.isascii():
        return wire
    try:
        return wire.encode("latin-1").decode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # not a wire value (a hand-made request): as it is
        return wire


def _sent_json(wire: str) -> str:
    """The JSON string of ``as_sent(wire)``; lone surrogates as \\udcXX escapes, so the line stays UTF-8."""
    if wire.isascii():
        return _str(wire)
    out = _str(as_sent(wire))
    return _LONE.sub(_escape_lone, out) if _LONE.search(out) else out


def record_of(features: Features) -> dict[str, Any]:
    """The request in the record shape read by ``gateway.features.from_record`` (values as the client sent them)."""
    body = as_sent(features.body_prefix.decode("latin-1")) if features.body_prefix else None
    return {
        "method": features.method,
        "path": as_sent(features.target),
        "http_version": features.http_version,
        "headers": [[as_sent(n), as_sent(v)] for n, v in features.headers],
        "body": body,
        "client_ip": features.client_ip,
    }


def line_of(features: Features, verdict: Verdict, status: int, when: float) -> dict[str, Any]:
    """The JSON object written for one decision."""
    out: dict[str, Any] = {
        "request_id": features.request_id,
        "time": _time_text(when),
        "client": features.client_ip,
        "record": record_of(features),
        "verdict": verdict.action.value,
        "source": verdict.source.value,
        "rule": verdict.rule,
        "reason": verdict.reason,
        "status": status,
    }
    if verdict.shadow_action is not None:
        out["shadow_action"] = verdict.shadow_action.value
    if verdict.probabilities is not None:
        out["probabilities"] = verdict.probabilities
    if verdict.explanation:
        out["explanation"] = verdict.explanation
    if verdict.model:
        out["model"] = verdict.model
    if verdict.decision_ms is not None:
        out["latency_ms"] = round(verdict.decision_ms, 3)
    if verdict.backend:
        out["backend"] = verdict.backend
    item = verdict.model_input
    if item is not None:
        # exactly what the model read; gateway.features.ModelInput.from_json reads it back
        out["input"] = {"feature_version": FEATURE_VERSION, "text": item.text, "numeric": item.numeric}
    return out


def _seconds_text(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when))


def _millis_text(when: float) -> str:
    return f".{int((when % 1) * 1000):03d}Z"


def _time_text(when: float) -> str:
    return _seconds_text(when) + _millis_text(when)


class _LineEncoder:
    """``encode_line``: ``_encode(line_of(...))`` without building the dict, and with shared parts encoded once.

    A cached answer hands every request the same probabilities object (and, through the
    policy, the same reason and explanation), so their JSON is kept by identity (an entry
    holds the objects, so their ids cannot be reused while kept). Anything of an
    unexpected type falls back to the generic encoder, so the bytes are always the
    encoder's.
    """

    def __init__(self, memo_size: int = 4096) -> None:
        self._memo: dict[int, tuple[Any, str]] = {}
        self._verdicts: dict[int, tuple[Any, ...]] = {}
        self._memo_size = memo_size
        self._second = -1
        self._second_text = ""

    def _probabilities(self, probs: Any) -> str:
        hit = self._memo.get(id(probs))
        if hit is not None and hit[0] is probs:
            return hit[1]
        text = _encode(probs)
        if len(self._memo) >= self._memo_size:
            self._memo.clear()
        self._memo[id(probs)] = (probs, text)
        return text

    def _verdict_parts(self, verdict: Verdict) -> tuple[str, str]:
        """The JSON of the verdict's fields before ``status`` and from ``shadow_action`` to ``model``.

        Requests answered from one cached answer share its verdict's reason, explanation and
        probabilities objects (see ``Policy.verdict``), so these parts are kept by identity.
        """
        reason, explanation, probs = verdict.reason, verdict.explanation, verdict.probabilities
        rule, model, shadow = verdict.rule, verdict.model, verdict.shadow_action
        hit = self._verdicts.get(id(reason))
        if (hit is not None and hit[0] is reason and hit[1] is explanation and hit[2] is probs and hit[3] is rule and hit[4] is model
                and hit[5] is verdict.action and hit[6] is verdict.source and hit[7] is shadow):
            return hit[8], hit[9]
        s = _str
        decided = (f'"verdict":{s(verdict.action.value)},"source":{s(verdict.source.value)},"rule":{"null" if rule is None else s(rule)},'
                   f'"reason":{s(reason)}')
        described = []
        if shadow is not None:
            described.append(f',"shadow_action":{s(shadow.value)}')
        if probs is not None:
            described.append(',"probabilities":' + self._probabilities(probs))
        if explanation:
            described.append(',"explanation":[' + ",".join([s(e) for e in explanation]) + "]")
        if model:
            described.append(',"model":' + s(model))
        parts = (decided, "".join(described))
        if len(self._verdicts) >= self._memo_size:
            self._verdicts.clear()
        self._verdicts[id(reason)] = (reason, explanation, probs, rule, model, verdict.action, verdict.source, shadow, *parts)
        return parts

    def _time(self, when: float) -> str:
        second = int(when)
        if second != self._second or when < 0:
            self._second, self._second_text = second, _seconds_text(when)
        return self._second_text + _millis_text(when)

    def __call__(self, features: Features, verdict: Verdict, status: int, when: float) -> str:
        try:
            return self._fast(features, verdict, status, when)
        except (TypeError, ValueError, AttributeError):
            out = _encode(line_of(features, verdict, status, when))
            return _LONE.sub(_escape_lone, out) if _LONE.search(out) else out  # as the fast path: the line stays UTF-8

    def _fast(self, features: Features, verdict: Verdict, status: int, when: float) -> str:
        if type(status) is not int:
            raise TypeError("status is not an int")
        s = _str
        client_ip = s(features.client_ip)
        body = features.body_prefix
        sent = _sent_json
        headers = ",".join([f"[{sent(n)},{sent(v)}]" for n, v in features.headers])
        decided, described = self._verdict_parts(verdict)
        parts = [
            f'{{"request_id":{s(features.request_id)},"time":{s(self._time(when))},"client":{client_ip},'
            f'"record":{{"method":{s(features.method)},"path":{sent(features.target)},"http_version":{s(features.http_version)},'
            f'"headers":[{headers}],"body":{sent(body.decode("latin-1")) if body else "null"},"client_ip":{client_ip}}},',
            decided, f',"status":{status}', described,
        ]
        if verdict.decision_ms is not None:
            ms = round(verdict.decision_ms, 3)
            parts.append(',"latency_ms":' + (float.__repr__(ms) if type(ms) is float and math.isfinite(ms) else _encode(ms)))
        if verdict.backend:
            parts.append(',"backend":' + s(verdict.backend))
        item = verdict.model_input
        if item is not None:
            parts.append(f',"input":{{"feature_version":{s(FEATURE_VERSION)},"text":{s(item.text)},"numeric":{_encode(item.numeric)}}}')
        parts.append("}")
        return "".join(parts)


def encode_line(features: Features, verdict: Verdict, status: int, when: float) -> str:
    """The JSON text of one decision: exactly ``json.dumps(line_of(...))`` in the log's compact, non-ASCII form."""
    return _encode_line(features, verdict, status, when)


_encode_line = _LineEncoder()


class DecisionLog:
    """Encode on observe, bounded byte queue, writer thread, size rotation. ``observe`` is a pipeline observer."""

    def __init__(self, cfg: DecisionLogConfig) -> None:
        self.cfg = cfg
        self.path = cfg.path
        # lines waiting for the writer: appended by the event loop, taken by the writer (deque ops are atomic)
        self._lines: deque[bytes] = deque()
        self._max_lines = cfg.queue_size
        self._wake = threading.Event()
        self._signalled = False  # the writer was woken and has not started draining yet
        self._sample_cut = int(cfg.sample * 0xFFFFFFFF)
        self._log_rules = cfg.rules
        self._file: Any = None
        self._size = 0
        self._thread = threading.Thread(target=self._writer, name="clefgate-decision-log", daemon=True)
        self._closed = False
        self._thread.start()

    def wants(self, verdict: Verdict) -> bool:
        if verdict.source is Source.RULE:
            if self._log_rules == "none":
                return False
            if self._log_rules == "decisive" and verdict.action is Action.FORWARD and not verdict.backend:
                return False
        elif verdict.source is Source.DEFAULT:
            return self._log_rules == "all"
        return True

    def observe(self, features: Features, verdict: Verdict, status: int) -> None:
        """Encode and queue one decision (called after each response; never blocks)."""
        if self._closed or not self.wants(verdict):
            return
        if self._sample_cut < 0xFFFFFFFF and zlib.crc32(features.request_id.encode()) > self._sample_cut:
            return
        lines = self._lines
        if len(lines) >= self._max_lines:
            DROPS.inc("queue_full")
            return
        try:
            line = (_encode_line(features, verdict, status, time.time()) + "\n").encode("utf-8", "surrogateescape")
        except (TypeError, ValueError):
            DROPS.inc("encode_error")
            return
        lines.append(line)
        if not self._signalled:
            self._signalled = True
            self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the writer."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join(timeout)

    # ---- writer thread: I/O only
    def _writer(self) -> None:
        lines = self._lines
        while True:
            if self._wake.wait(1.0) and not self._closed:
                time.sleep(_BATCH_S)  # let a batch gather: one wake-up and one write() for many lines
            # clear before re-arming: a line queued in between is drained below, and the next one wakes us again
            self._wake.clear()
            self._signalled = False
            self._drain(lines)
            if self._closed:
                break
        self._drain(lines)
        self._close_file()

    def _drain(self, lines: deque[bytes]) -> None:
        while lines:
            batch: list[bytes] = []
            while lines and len(batch) < 1024:
                batch.append(lines.popleft())
            self._write(batch)

    def _write(self, lines: list[bytes]) -> None:
        chunk: list[bytes] = []
        chunk_bytes = 0
        for line in lines:
            if chunk and self._size + chunk_bytes + len(line) > self.cfg.max_bytes:
                self._flush_chunk(chunk)
                chunk, chunk_bytes = [], 0
            chunk.append(line)
            chunk_bytes += len(line)
        if chunk:
            self._flush_chunk(chunk)

    def _flush_chunk(self, chunk: list[bytes]) -> None:
        data = b"".join(chunk)
        try:
            self._open()
            if self._size and self._size + len(data) > self.cfg.max_bytes:
                self._rotate()
            self._file.write(data)
            self._file.flush()
            self._size += len(data)
            LINES.inc(amount=len(chunk))
        except OSError as exc:
            DROPS.inc("write_error", amount=len(chunk))
            log.error("decision log write failed", extra={"fields": {"path": self.path, "error": str(exc)}})
            self._close_file()

    def _open(self) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._file = open(self.path, "ab")
            self._size = self._file.tell()

    def _rotate(self) -> None:
        self._close_file()
        for i in range(self.cfg.backups, 0, -1):
            src = self.path if i == 1 else f"{self.path}.{i - 1}"
            if os.path.exists(src):
                if i == self.cfg.backups and os.path.exists(f"{self.path}.{i}"):
                    os.remove(f"{self.path}.{i}")
                os.replace(src, f"{self.path}.{i}")
        if self.cfg.backups == 0 and os.path.exists(self.path):
            os.remove(self.path)
        ROTATIONS.inc()
        self._open()

    def _close_file(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
