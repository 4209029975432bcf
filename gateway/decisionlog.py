"""The decision log: one JSONL line per scored or ruled request, written off the hot path.

Each line holds the request as a record in the shape ``clefgate eval`` and
``clefgate train`` read (method, path, http_version, headers in wire order, body
prefix, client_ip), the model input exactly as the model read it (feature version,
canonical text, numeric vector — present when the model ran; a cached answer's line
refers to the same input through its record), the probabilities, the verdict, its
source and rule, the decision latency and the model version. Add a ``"label"`` to
lines and the file is training data.

A line is encoded where the decision is observed (the C JSON encoder, a few tens of
microseconds) and handed as bytes to a bounded queue; a writer thread only does the
I/O, so the event loop never waits for a disk and never fights a second Python thread
for the interpreter over JSON work. When the queue is full the line is dropped and
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

_STOP = object()
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode


def record_of(features: Features) -> dict[str, Any]:
    """The request in the record shape read by ``gateway.features.from_record``."""
    body = features.body_prefix.decode("utf-8", "replace") if features.body_prefix else None
    return {
        "method": features.method,
        "path": features.target,
        "http_version": features.http_version,
        "headers": features.headers,
        "body": body,
        "client_ip": features.client_ip,
    }


def line_of(features: Features, verdict: Verdict, status: int, when: float) -> dict[str, Any]:
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


class DecisionLog:
    """Encode on observe, bounded byte queue, writer thread, size rotation. ``observe`` is a pipeline observer."""

    def __init__(self, cfg: DecisionLogConfig) -> None:
        self.cfg = cfg
        self.path = cfg.path
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
        """Encode and queue one decision (called after each response; never blocks)."""
        if self._closed or not self.wants(verdict):
            return
        if self._sample_cut < 0xFFFFFFFF and zlib.crc32(features.request_id.encode()) > self._sample_cut:
            return
        if self._queue.full():
            DROPS.inc("queue_full")
            return
        try:
            line = (_encode(line_of(features, verdict, status, time.time())) + "\n").encode("utf-8", "surrogateescape")
        except (TypeError, ValueError):
            DROPS.inc("encode_error")
            return
        try:
            self._queue.put_nowait(line)
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

    # ---- writer thread: I/O only
    def _writer(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            batch = [item]
            stop = False
            # drain what is already queued so one write() carries many lines
            while len(batch) < 1024:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            self._write(batch)
            if stop:
                break
        self._close_file()

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
