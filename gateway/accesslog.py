"""The access log: one JSON line per request, cheap enough for every request.

Fields, in order: ``time`` (ISO-8601 UTC, ms), ``request_id``, ``client`` (after
trusted proxies), ``method``, ``path`` (raw target with query, at most 2 KiB),
``status`` (499: the client left first), ``bytes_in`` / ``bytes_out`` (bodies),
``route``, ``backend``, ``server``, ``action`` (forward, challenge, block; "local"
for gateway endpoints; "none" when refused before deciding), ``source``, ``rule``,
``score``, ``duration_us`` (head received to response sent), ``upstream_us``
(request sent to response head), ``added_us`` (the gateway's own share).

A line is built with one f-string; strings go through the json module's C escaper
(``encode_basestring_ascii``), numbers are formatted directly, and the ISO time
prefix is rebuilt once per second. Lines collect in memory and are handed to a
writer thread every ``logging.access_log_flush_s`` seconds, when 64 KiB have
gathered, and at shutdown, so the event loop never blocks on a slow disk or a
full stdout pipe. If the writer falls behind by more than
``logging.access_log_max_pending_bytes``, lines are dropped and counted
(``clefgate_access_log_dropped_total``) instead of growing memory.

Each write hands whole lines to the OS; to a pipe (stdout under a supervisor)
writes are cut at line boundaries into pieces of at most ``PIPE_BUF`` bytes, so
lines of several worker processes sharing the pipe never interleave. A file has no
rotation of its own: leave that to logrotate (its default create mode works): before
each write the writer checks that the file at the path is still the one it has open,
and reopens the path when it was moved or deleted. A write to a file that fails part
way (a full disk) is cut back to its last whole line, so the file stays one JSON
object per line; the lines not written are counted as dropped.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import queue
import stat
import sys
import threading
import time
from json.encoder import encode_basestring_ascii as _quote  # type: ignore[attr-defined]
from typing import TYPE_CHECKING

from gateway import metrics

if TYPE_CHECKING:
    from gateway.config import LoggingConfig

log = logging.getLogger("clefgate.accesslog")

LINES = metrics.counter("clefgate_access_log_lines_total", "Access-log lines written.")
DROPPED = metrics.counter("clefgate_access_log_dropped_total",
                          "Access-log lines dropped because the writer fell behind or a write failed (disk full, closed pipe).")
WRITE_ERRORS = metrics.counter("clefgate_access_log_write_errors_total", "Failed writes of the access log (disk full, closed pipe).")

_FLUSH_BYTES = 64 * 1024
_PIPE_BUF = 4096


_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))


class _Clock:
    """ISO-8601 UTC timestamps with milliseconds; the seconds part is cached."""

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def iso(self, ts: float) -> str:
        """``2025-11-30T16:00:00.250Z`` for a Unix time."""
        second = int(ts)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return self._prefix + _MILLIS[int((ts - second) * 1000)]


class AccessLog:
    """Writes access-log lines to stdout, a file, or nowhere.

    Build one with :meth:`from_config`; ``write`` is called once per request on
    the event loop; ``flush`` hands buffered lines to the writer; ``aclose`` (on
    the event loop) or ``close`` flushes and waits for the writer to finish.
    """

    def __init__(self, target: str, *, flush_s: float = 1.0, max_pending_bytes: int = 8 << 20) -> None:
        self.target = target
        self.enabled = target != "off"
        self._flush_s = flush_s
        self._max_pending = max_pending_bytes
        self._lines: list[str] = []
        self._size = 0
        self._pending = 0  # bytes handed to the writer and not yet written
        self._pending_lock = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._clock = _Clock()
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        if self.enabled:
            self._thread = threading.Thread(target=self._writer, name="clefgate-accesslog", daemon=True)
            self._thread.start()

    @classmethod
    def from_config(cls, cfg: LoggingConfig) -> AccessLog:
        """The access log described by ``config.logging``."""
        return cls(cfg.access_log, flush_s=cfg.access_log_flush_s, max_pending_bytes=cfg.access_log_max_pending_bytes)

    def write(self, ts: float, request_id: str, client: str, method: str, path: str, status: int,
              bytes_in: int, bytes_out: int, route: str, backend: str, server: str, action: str,
              source: str, rule: str | None, score: float | None, total_s: float,
              upstream_s: float | None, added_s: float) -> None:
        """Record one request. ``ts`` is the wall-clock time it arrived; durations in seconds.

        Durations are written as whole microseconds (``duration_us``, ``upstream_us``,
        ``added_us``): exact enough, and integers format several times faster than floats.
        """
        if not self.enabled:
            return
        line = (
            f'{{"time":"{self._clock.iso(ts)}","request_id":{_quote(request_id)},"client":{_quote(client)},'
            f'"method":{_quote(method)},"path":{_quote(path[:2048])},"status":{status},'
            f'"bytes_in":{bytes_in},"bytes_out":{bytes_out},"route":{_quote(route)},"backend":{_quote(backend)},'
            f'"server":{_quote(server)},"action":"{action}","source":"{source}",'
            f'"rule":{"null" if rule is None else _quote(rule)},"score":{"null" if score is None else round(score, 3)},'
            f'"duration_us":{int(total_s * 1e6)},"upstream_us":{"null" if upstream_s is None else int(upstream_s * 1e6)},'
            f'"added_us":{int(added_s * 1e6)}}}\n'
        )
        self._lines.append(line)
        self._size += len(line)
        if self._size >= _FLUSH_BYTES:
            self.flush()
        elif self._timer is None:
            self._schedule()

    def _schedule(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (tools, tests): lines wait for the next flush() or close()
        self._timer = loop.call_later(self._flush_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()

    def flush(self) -> None:
        """Hand every buffered line to the writer thread (never blocks on I/O)."""
        if not self._lines:
            return
        data = "".join(self._lines).encode("utf-8", "replace")
        count = len(self._lines)
        self._lines.clear()
        self._size = 0
        if self._closed:
            return
        with self._pending_lock:
            if self._pending + len(data) > self._max_pending:
                DROPPED.inc(amount=count)
                return
            self._pending += len(data)
        self._queue.put(data)

    def close(self) -> None:
        """Flush, stop the writer and wait for it (bounded); safe to call twice.

        This blocks the calling thread for as long as the disk or pipe takes: on the event loop use :meth:`aclose`.
        """
        if self._stop() and self._thread is not None:
            self._thread.join(timeout=5.0)

    async def aclose(self) -> None:
        """:meth:`close` for the event loop (a reload, shutdown): the wait for the writer runs in a thread,
        so a stalled disk or a full stdout pipe holds up only this coroutine, not every request of the worker."""
        if self._stop() and self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)

    def _stop(self) -> bool:
        """Flush and tell the writer to finish; False if already closed."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()
        if self._closed:
            return False
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
        return True

    # ------------------------------------------------------------------ writer thread

    def _open(self) -> tuple[int, bool, bool]:
        """(fd, owned, is_pipe) for the target."""
        if self.target == "-":
            fd = sys.stdout.fileno()
            owned = False
        else:
            fd = os.open(self.target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            owned = True
        try:
            is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            is_pipe = False
        return fd, owned, is_pipe

    def _moved(self, fd: int) -> bool:
        """The file at the target is no longer the one open (logrotate moved it and created a new one, or it
        was deleted): the next lines go to the target, reopened (created if need be)."""
        try:
            now, mine = os.stat(self.target), os.fstat(fd)
        except OSError:
            return True
        return (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino)

    def _writer(self) -> None:
        try:
            fd, owned, is_pipe = self._open()
        except (OSError, ValueError) as exc:
            log.error("access log %r cannot be opened: %s; access logging is off", self.target, exc)
            self.enabled = False
            fd, owned, is_pipe = -1, False, False
        failing = False
        try:
            while True:
                data = self._queue.get()
                if data is None:
                    return
                with self._pending_lock:
                    self._pending -= len(data)
                if owned and (fd < 0 or self._moved(fd)):
                    if fd >= 0:
                        os.close(fd)
                        fd = -1
                    try:
                        fd, owned, is_pipe = self._open()
                        failing = False
                    except OSError as exc:  # tried again with the next lines
                        if not failing:
                            log.error("access log %r cannot be reopened: %s", self.target, exc)
                        failing = True
                if fd >= 0:
                    self._write_all(fd, data, is_pipe)
                elif owned:
                    WRITE_ERRORS.inc()
                    self._count(data, 0)
        finally:
            if owned and fd >= 0:
                os.close(fd)

    def _write_all(self, fd: int, data: bytes, is_pipe: bool) -> None:
        """Write whole lines; if a write fails part way (a full disk), keep only the whole lines written.

        A file is written under an ``flock`` on it, which every worker writing to it takes:
        the file's size before the write is where these lines start, so a failed write can
        be cut back to its last whole line (a half line would be glued to the next line
        written once there is room again) without cutting another worker's lines.
        """
        written = 0
        before = -1  # the file's size before this write, when locked
        locked = False
        try:
            if not is_pipe:
                locked = self._lock(fd)
                if locked:
                    before = os.fstat(fd).st_size
                view = memoryview(data)
                while written < len(data):
                    written += os.write(fd, view[written:])
            else:
                start = 0
                while start < len(data):
                    end = len(data) if len(data) - start <= _PIPE_BUF else data.rfind(b"\n", start, start + _PIPE_BUF) + 1
                    if end <= start:  # one line longer than PIPE_BUF: write it whole
                        end = data.index(b"\n", start) + 1
                    view = memoryview(data)[start:end]
                    while view:
                        n = os.write(fd, view)
                        written += n
                        view = view[n:]
                    start = end
        except OSError:
            WRITE_ERRORS.inc()
            keep = data.rfind(b"\n", 0, written) + 1
            if keep < written and before >= 0:
                try:
                    os.ftruncate(fd, before + keep)
                except OSError as exc:
                    log.error("access log %r: a partly written line could not be cut off: %s", self.target, exc)
            written = keep
        finally:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)
        self._count(data, written)

    def _lock(self, fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return True
        except OSError:  # a file system without locks: write unlocked (a failed write is then not cut back)
            return False

    def _count(self, data: bytes, written: int) -> None:
        """Count the whole lines of ``data`` in its first ``written`` bytes as written, the rest as dropped."""
        whole = data.count(b"\n", 0, written)
        LINES.inc(amount=whole)
        lost = data.count(b"\n", written)
        if lost:
            with self._pending_lock:  # DROPPED is also counted on the event loop, under this lock
                DROPPED.inc(amount=lost)
