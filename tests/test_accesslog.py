"""The access log: one valid JSON line per request, buffered, off-loop writes, bounded backlog."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gateway import accesslog
from gateway.accesslog import AccessLog


def write(log: AccessLog, **over: Any) -> None:
    fields: dict[str, Any] = dict(
        ts=1764518400.25, request_id="abc-1", client="203.0.113.9", method="GET", path="/x?y=1", status=200,
        bytes_in=12, bytes_out=3456, route="default", backend="app", server="http://127.0.0.1:8000",
        action="forward", source="rule", rule="allow-feeds", score=None, total_s=0.0012345, upstream_s=0.001,
        added_s=0.0001234)
    fields.update(over)
    log.write(**fields)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_line_has_every_field(tmp_path: Path) -> None:
    log = AccessLog(str(tmp_path / "a.log"))
    write(log)
    log.close()
    (line,) = lines(tmp_path / "a.log")
    assert line == {
        "time": "2025-11-30T16:00:00.250Z", "request_id": "abc-1", "client": "203.0.113.9", "method": "GET",
        "path": "/x?y=1", "status": 200, "bytes_in": 12, "bytes_out": 3456, "route": "default", "backend": "app",
        "server": "http://127.0.0.1:8000", "action": "forward", "source": "rule", "rule": "allow-feeds", "score": None,
        "duration_us": 1234, "upstream_us": 1000, "added_us": 123,
    }


@pytest.mark.parametrize("path", ['/"quoted"\\back', "/new\nline\ttab", "/\x00\x1f\x7f", "/é/日本", "/\udcff"])
def test_any_path_stays_valid_json(tmp_path: Path, path: str) -> None:
    log = AccessLog(str(tmp_path / "a.log"))
    write(log, path=path, rule=None, score=0.98765, upstream_s=None)
    log.close()
    (line,) = lines(tmp_path / "a.log")
    assert line["path"] == path
    assert (line["rule"], line["score"], line["upstream_us"]) == (None, 0.988, None)


def test_off_writes_nothing(tmp_path: Path) -> None:
    log = AccessLog("off")
    assert not log.enabled
    write(log)
    log.close()
    assert list(tmp_path.iterdir()) == []


def test_lines_are_buffered_then_flushed_by_size_and_at_close(tmp_path: Path) -> None:
    target = tmp_path / "a.log"
    log = AccessLog(str(target), flush_s=3600)
    write(log)
    assert not target.exists() or target.read_text() == ""
    for i in range(2000):  # well over 64 KiB
        write(log, request_id=f"r{i}")
    log.flush()
    log.close()
    assert len(lines(target)) == 2001


def test_periodic_flush_on_the_event_loop(tmp_path: Path) -> None:
    target = tmp_path / "a.log"

    async def scenario() -> int:
        log = AccessLog(str(target), flush_s=0.05)
        write(log)
        for _ in range(100):
            await asyncio.sleep(0.02)
            if target.exists() and target.read_text():
                break
        count = len(lines(target))
        log.close()
        return count

    assert asyncio.run(scenario()) == 1


def test_appends_to_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "a.log"
    target.write_text('{"old": true}\n')
    log = AccessLog(str(target))
    write(log)
    log.close()
    assert len(lines(target)) == 2


def test_slow_writer_backlog_is_bounded_and_counted(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    before = accesslog.DROPPED.get()
    # nobody reads the FIFO yet: the writer thread blocks opening it, lines pile up
    log = AccessLog(str(fifo), max_pending_bytes=5000)  # room for one flush of 10 lines
    for i in range(5):
        for j in range(10):
            write(log, request_id=f"r{i}-{j}")
        log.flush()
    assert accesslog.DROPPED.get() > before
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    log.close()
    reader.join(5)
    kept = [json.loads(line) for line in got[0].splitlines()]
    assert 0 < len(kept) < 50
    assert len(kept) + accesslog.DROPPED.get() - before == 50


def test_pipe_writes_never_split_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    read_fd, write_fd = os.pipe()
    sizes: list[bytes] = []
    real_write = os.write

    def recording_write(fd: int, data: Any) -> int:
        sizes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(accesslog.os, "write", recording_write)
    data = b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * (i % 300)) for i in range(200))
    log = AccessLog("off")
    reader_out: list[bytes] = []
    reader = threading.Thread(target=lambda: reader_out.append(b"".join(iter(lambda: os.read(read_fd, 65536), b""))))
    reader.start()
    log._write_all(write_fd, data, True)
    os.close(write_fd)
    reader.join(5)
    os.close(read_fd)
    assert reader_out[0] == data
    assert all(len(piece) <= 4096 and piece.endswith(b"\n") for piece in sizes)
