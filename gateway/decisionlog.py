"""The decision log: one JSONL line per scored or ruled request, written off the hot path.

Each line holds the request as a record in the shape ``clefgate eval`` and
``clefgate train`` read (method, path, http_version, headers in wire order, body
prefix, client_ip), the model input exactly as the model read it (feature version,
canonical text, numeric vector — present when the model ran; a cached answer's line
refers to the same input through its record), the probabilities, the verdict, its
source and rule, the decision latency, the model version and the payload detectors' hits
(detector, kind, location, fragment, decoding) when they decided. Add a ``"label"`` to
lines and the file is training data.

A line is encoded where the decision is observed and handed as bytes to a bounded
queue; a writer thread only does the I/O, so the event loop never waits for a disk and
never fights a second Python thread for the interpreter over JSON work. Encoding is
:func:`encode_line`: the JSON encoder's own bytes, assembled from the C string encoder
with the probabilities of a cached answer (one shared object) encoded once. The queue
is a deque the writer drains in batches, woken at most once per batch (a lock and a
thread wake-up per line cost the event loop more than the line itself). When the queue
is full the line is dropped and counted: the log never slows or drops a request.

Files rotate by size (path -> path.1 ... path.N). The worker processes of a gateway
share one path: each batch is written under an ``flock`` every worker takes, to the file
now at the path (reopened when another worker rotated it, or logrotate or an operator
moved or deleted it), sized by the file itself, so no line goes to a file renamed away
and no file grows past ``max_bytes`` by what the other workers wrote. A write that fails
part way (a full disk) is cut back to its last whole line: the file stays valid JSONL,
and exactly the lines not in it are counted as dropped.
"""

from __future__ import annotations

import asyncio
import fcntl
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
from gateway.features import V1_VERSION, Features
from gateway.verdict import Action, PayloadHit, Source, Verdict

log = logging.getLogger("clefgate.decisionlog")

LINES = metrics.counter("clefgate_decision_log_lines_total", "Decision-log lines written.")
DROPS = metrics.counter("clefgate_decision_log_drops_total", "Decision-log lines dropped, by reason (queue_full, encode_error, write_error).",
                        ("reason",))
ROTATIONS = metrics.counter("clefgate_decision_log_rotations_total", "Decision-log file rotations.")

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_str = json.encoder.encode_basestring  # the encoder's own (C) string escaping for ensure_ascii=False
# the writer waits this long after a wake-up so that one write() carries many lines
_BATCH_S = 0.02
# the longest header (name and value) whose JSON the line encoder keeps: a bound on what its memo holds
_PAIR_KEPT_CHARS = 256


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
        out["input"] = {"feature_version": item.version, "text": item.text, "numeric": item.numeric}
        if item.version != V1_VERSION:
            out["input"] |= {"client_text": item.client_text, "client_numeric": item.client_numeric}
    if verdict.payload:
        out["payload"] = [payload_of(hit) for hit in verdict.payload]
    return out


def payload_of(hit: PayloadHit) -> dict[str, str]:
    """One payload detector hit as logged: detector, kind, location, fragment, decoding."""
    return {"detector": hit.detector, "kind": hit.kind, "location": hit.location, "fragment": hit.fragment, "decoding": hit.decoding}


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
    holds the objects, so their ids cannot be reused while kept); short headers' JSON is kept
    by value (a flood's tool sends one head from every address). Anything of an
    unexpected type falls back to the generic encoder, so the bytes are always the
    encoder's.
    """

    def __init__(self, memo_size: int = 4096) -> None:
        self._memo: dict[int, tuple[Any, str]] = {}
        self._verdicts: dict[int, tuple[Any, ...]] = {}
        self._pairs: dict[tuple[str, str], str] = {}
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

    def _pair(self, pair: tuple[str, str]) -> str:
        """A header's JSON array, kept by value for short headers: a client sends the same head again and again."""
        hit = self._pairs.get(pair)
        if hit is not None:
            return hit
        name, value = pair
        text = f"[{_sent_json(name)},{_sent_json(value)}]"
        if len(name) + len(value) <= _PAIR_KEPT_CHARS:
            if len(self._pairs) >= self._memo_size:
                self._pairs.clear()
            self._pairs[pair] = text
        return text

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
        sent = _sent_json
        client_ip = s(features.client_ip)
        body = features.body_prefix
        headers = ",".join([self._pair(pair) for pair in features.headers])
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
            client = (f',"client_text":{s(item.client_text)},"client_numeric":{_encode(item.client_numeric)}'
                      if item.version != V1_VERSION else "")
            parts.append(f',"input":{{"feature_version":{s(item.version)},"text":{s(item.text)},"numeric":{_encode(item.numeric)}{client}}}')
        if verdict.payload:
            parts.append(',"payload":' + _encode([payload_of(hit) for hit in verdict.payload]))
        parts.append("}")
        return "".join(parts)


def encode_line(features: Features, verdict: Verdict, status: int, when: float) -> str:
    """The JSON text of one decision: exactly ``json.dumps(line_of(...))`` in the log's compact, non-ASCII form."""
    return _encode_line(features, verdict, status, when)


_encode_line = _LineEncoder()


class DecisionLog:
    """Encode on observe, bounded byte queue, writer thread, size rotation. ``observe`` is a pipeline observer.

    Close it with ``await aclose()`` on the event loop (``close()`` elsewhere).
    """

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
        self._fd = -1  # the file being written (writer thread only)
        self._size = 0  # its size, taken from the file at each batch: other workers append to it too
        self._lock_fd = -1  # see _lock
        self._locked = False  # the writer holds the lock (during a batch)
        self._lock_warned = False
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

    def audit(self, line: dict[str, Any]) -> None:
        """Queue an audit line (``{"audit": {...}, "time": ...}``: a console action), never sampled or filtered.

        ``clefgate replay`` and ``clefgate train`` skip these lines (they carry no request).
        """
        if self._closed:
            return
        try:
            data = (_encode(line) + "\n").encode("utf-8", "surrogateescape")
        except (TypeError, ValueError):
            DROPS.inc("encode_error")
            return
        self._lines.append(data)
        if not self._signalled:
            self._signalled = True
            self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then stop the writer and wait for it (at most ``timeout`` s).

        This blocks the calling thread for as long as the disk takes: on the event loop use :meth:`aclose`.
        """
        if self._stop():
            self._thread.join(timeout)

    async def aclose(self, wait_s: float = 5.0) -> None:
        """:meth:`close` for the event loop (a reload, shutdown): the wait for the writer runs in a thread,
        so a stalled disk (NFS, throttled EBS) holds up only this coroutine, not every request of the worker."""
        if self._stop():
            await asyncio.to_thread(self._thread.join, wait_s)

    def _stop(self) -> bool:
        """Refuse new lines and wake the writer to write the queued ones and exit; False if already closed."""
        if self._closed:
            return False
        self._closed = True
        self._wake.set()
        return True

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
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _drain(self, lines: deque[bytes]) -> None:
        while lines:
            batch: list[bytes] = []
            while lines and len(batch) < 1024:
                batch.append(lines.popleft())
            self._write(batch)

    def _write(self, lines: list[bytes]) -> None:
        """Write one batch, holding the lock every process writing this path takes.

        The worker processes of one gateway each have a DecisionLog on the same path. Under
        the lock, the file at ``path`` is the one written (reopened when another worker's
        rotation, logrotate or an operator moved or deleted it), its size is the file's own
        (every worker's lines, not this one's count), and nobody else writes or rotates until
        the batch is done: no line goes to a file already renamed away or deleted, and a
        failed write can be cut back to whole lines without cutting another worker's.
        """
        self._locked = self._lock()
        try:
            self._follow_path()
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
        finally:
            if self._locked:
                self._locked = False
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _lock(self) -> bool:
        """Take the lock shared by every process writing ``path``: ``flock`` on a hidden file beside it.

        The lock cannot be the log file itself, which rotation renames. The file is hidden
        (``.NAME.lock``) so that ``decisions.jsonl*`` still names only the log's files. Where
        the file system refuses locks, writing goes on unlocked (and says so once).
        """
        try:
            if self._lock_fd < 0:
                folder, name = os.path.split(self.path)
                os.makedirs(folder or ".", exist_ok=True)
                self._lock_fd = os.open(os.path.join(folder, f".{name}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            return True
        except OSError as exc:
            if not self._lock_warned:
                self._lock_warned = True
                log.warning("decision log lock unavailable; workers sharing the path may lose lines at rotation",
                            extra={"fields": {"path": self.path, "error": str(exc)}})
            return False

    def _follow_path(self) -> None:
        """Keep the open file only while it is still the one at ``path``, and take its size from the file.

        Another worker's rotation, logrotate (create mode) or an operator may have renamed or
        deleted it: writing on would put lines in a file nobody reads, or in none. It is
        reopened by the next write.
        """
        if self._fd < 0:
            return
        try:
            now, mine = os.stat(self.path), os.fstat(self._fd)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                self._size = mine.st_size
                return
        except OSError:  # gone (or unreadable): open again
            pass
        self._close_file()

    def _flush_chunk(self, chunk: list[bytes]) -> None:
        data = b"".join(chunk)
        before = -1  # the file's size before this chunk, once known
        written = 0
        try:
            self._open()
            if self._size and self._size + len(data) > self.cfg.max_bytes:
                self._rotate()
            before = self._size
            view = memoryview(data)
            while written < len(data):
                written += os.write(self._fd, view[written:])
            self._size += len(data)
            LINES.inc(amount=len(chunk))
        except OSError as exc:
            kept = self._keep_whole_lines(data, before, written)
            if kept:
                LINES.inc(amount=kept)
            DROPS.inc("write_error", amount=len(chunk) - kept)
            log.error("decision log write failed", extra={"fields": {"path": self.path, "error": str(exc)}})
            self._close_file()

    def _keep_whole_lines(self, data: bytes, before: int, written: int) -> int:
        """After a write that failed part way (a full disk), cut the file back to the last whole line of ``data``.

        The file stays valid JSONL (a half line would be glued to the next one written once
        there is room again); returns how many lines of ``data`` are in the file. Only under
        the lock: otherwise another worker's lines may follow ours.
        """
        keep = data.rfind(b"\n", 0, written) + 1
        if keep < written and self._locked and before >= 0:
            try:
                os.ftruncate(self._fd, before + keep)
            except OSError as exc:
                log.error("decision log: a partly written line could not be cut off",
                          extra={"fields": {"path": self.path, "error": str(exc)}})
        return data.count(b"\n", 0, keep)

    def _open(self) -> None:
        if self._fd < 0:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            self._size = os.fstat(self._fd).st_size

    def _rotate(self) -> None:
        """path -> path.1 -> ... -> path.N (under the lock: see ``_write``)."""
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
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1
