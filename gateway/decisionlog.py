"""The decision log: one JSONL line per scored or ruled request, written off the hot path.

Each line holds the request as a record in the shape ``clefgate eval`` and
``clefgate train`` read (method, path, http_version, headers in wire order, body
prefix, client_ip), the model input exactly as ``gateway.features`` produces it,
the probabilities, the verdict, its source and rule, the decision latency and the
model version. Add a ``"label"`` to lines and the file is training data.

The request path only appends a reference to a bounded queue; a writer thread does
the serialization and the I/O. When the queue is full the line is dropped and
counted: the log never slows or drops a request. Files rotate by size.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

from gateway import metrics
from gateway.config import DecisionLogConfig
from gateway.features import Features
from gateway.verdict import Action, Source, Verdict

log = logging.getLogger("clefgate.decisionlog")

LINES = metrics.counter("clefgate_decision_log_lines_total", "Decision-log lines written.")
DROPS = metrics.counter("clefgate_decision_log_drops_total", "Decision-log lines dropped, by reason (queue_full, write_error).", ("reason",))
ROTATIONS = metrics.counter("clefgate_decision_log_rotations_total", "Decision-log file rotations.")

# (features, verdict) -> the model input as logged; the verdict may carry the input the model read
ModelInput = Callable[[Features, Verdict], dict[str, Any]]

_STOP = object()


def record_of(features: Features) -> dict[str, Any]:
    """The request in the record shape read by ``gateway.features.from_record``."""
    body = features.body_prefix.decode("utf-8", "replace") if features.body_prefix else None
    return {
        "method": features.method,
        "path": features.target,
        "http_version": features.http_version,
        "headers": [list(h) for h in features.headers],
        "body": body,
        "client_ip": features.client_ip,
    }


def line_of(features: Features, verdict: Verdict, status: int, when: float, model_input: ModelInput | None) -> dict[str, Any]:
    """The JSON object written for one decision."""
    out: dict[str, Any] = {
        "request_id": features.request_id,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int((when % 1) * 1000):03d}Z",
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
        out["probabilities"] = {q: dict(o) for q, o in verdict.probabilities.items()}
    if verdict.explanation:
        out["explanation"] = list(verdict.explanation)
    if verdict.model:
        out["model"] = verdict.model
    if verdict.decision_ms is not None:
        out["latency_ms"] = round(verdict.decision_ms, 3)
    if verdict.backend:
        out["backend"] = verdict.backend
    if model_input is not None and verdict.source in (Source.MODEL, Source.CACHE, Source.SHADOW, Source.FALLBACK):
        try:
            out["input"] = model_input(features, verdict)
        except Exception as exc:  # the log must never fail a request, nor stop the writer
            out["input_error"] = repr(exc)
    return out


class DecisionLog:
    """Bounded queue + writer thread + size rotation. ``observe`` is a pipeline observer."""

    def __init__(self, cfg: DecisionLogConfig, model_input: ModelInput | None = None) -> None:
        self.cfg = cfg
        self.path = cfg.path
        self.model_input = model_input
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=cfg.queue_size)
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
        """Queue one decision (called after each response; never blocks)."""
        if self._closed or not self.wants(verdict):
            return
        if self._sample_cut < 0xFFFFFFFF and zlib.crc32(features.request_id.encode()) > self._sample_cut:
            return
        try:
            self._queue.put_nowait((features, verdict, status, time.time()))
        except queue.Full:
            DROPS.inc("queue_full")

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the writer."""
        if self._closed:
            return
        self._closed = True
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            DROPS.inc("queue_full")
        self._thread.join(timeout)

    # ---- writer thread
    def _writer(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            batch = [item]
            # drain what is already queued so one write() carries many lines
            while len(batch) < 512:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    self._write(batch)
                    self._close_file()
                    return
                batch.append(nxt)
            self._write(batch)
        self._close_file()

    def _write(self, batch: list[tuple[Features, Verdict, int, float]]) -> None:
        chunk: list[bytes] = []
        chunk_bytes = 0
        for features, verdict, status, when in batch:
            try:
                line = (json.dumps(line_of(features, verdict, status, when, self.model_input), ensure_ascii=False,
                                   separators=(",", ":")) + "\n").encode("utf-8")
            except (TypeError, ValueError):
                DROPS.inc("encode_error")
                continue
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
