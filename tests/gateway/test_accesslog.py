"""The access log: one valid JSON line per request, buffered, off-loop writes, bounded backlog."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gateway import accesslog
from gateway.accesslog import AccessLog
from tests.conftest import longest_pause


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


def _wait_for_lines(path: Path, count: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (path.exists() and len(path.read_text().splitlines()) == count):
        time.sleep(0.01)


def test_a_file_moved_by_logrotate_or_deleted_is_reopened(tmp_path: Path) -> None:
    """logrotate's default create mode moves the file and creates an empty one: later lines go to the new file
    (a reload with the same logging settings keeps the same AccessLog, so nothing else would reopen it)."""
    target = tmp_path / "a.log"
    log = AccessLog(str(target))
    write(log, request_id="before")
    log.flush()
    _wait_for_lines(target, 1)
    target.rename(tmp_path / "a.log.1")
    target.touch()  # logrotate: create
    for i in range(5):
        write(log, request_id=f"rotated-{i}")
    log.flush()
    _wait_for_lines(target, 5)
    target.unlink()  # an operator deletes it
    write(log, request_id="deleted")
    log.close()
    assert [ln["request_id"] for ln in lines(tmp_path / "a.log.1")] == ["before"]
    assert [ln["request_id"] for ln in lines(target)] == ["deleted"]


def test_a_write_cut_short_by_a_full_disk_keeps_whole_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up during a write: the part that fit is cut back to its last whole line, so the file stays
    one JSON object per line, and exactly the lines not in it are counted as dropped."""
    target = tmp_path / "a.log"
    target.write_text('{"old": true}\n')
    data = b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * 50) for i in range(10))
    fits = data.index(b"\n", data.index(b"\n", data.index(b"\n") + 1) + 1) + 1 + 20  # three lines and part of a fourth
    real_write = os.write
    calls: list[int] = []

    def full_disk(fd: int, chunk: Any) -> int:
        calls.append(len(chunk))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(chunk)[:fits])  # the kernel writes what fits, the next write fails

    fd = os.open(target, os.O_WRONLY | os.O_APPEND)
    written, dropped, errors = accesslog.LINES.get(), accesslog.DROPPED.get(), accesslog.WRITE_ERRORS.get()
    monkeypatch.setattr(accesslog.os, "write", full_disk)
    AccessLog("off")._write_all(fd, data, False)
    monkeypatch.undo()
    os.close(fd)
    assert [ln.get("n") for ln in lines(target)] == [None, 0, 1, 2]
    assert target.read_bytes().endswith(b"\n")
    assert accesslog.LINES.get() - written == 3
    assert accesslog.DROPPED.get() - dropped == 7
    assert accesslog.WRITE_ERRORS.get() - errors == 1


def test_aclose_waits_for_the_writer_off_the_event_loop(tmp_path: Path) -> None:
    """A reload that changes the access log retires the old one on the event loop: a slow disk or a full stdout
    pipe must not stall every request with it."""
    target = tmp_path / "a.log"
    log = AccessLog(str(target))
    write_all = log._write_all

    def stalled(fd: int, data: bytes, is_pipe: bool) -> None:
        time.sleep(1.0)
        write_all(fd, data, is_pipe)

    log._write_all = stalled  # type: ignore[method-assign]

    async def scenario() -> float:
        write(log)
        log.flush()
        await asyncio.sleep(0.1)  # the writer is in its stalled write

        async def last_then_close() -> None:
            write(log, request_id="last")
            await log.aclose()

        return await longest_pause(last_then_close)

    assert asyncio.run(scenario()) < 0.5
    assert [ln["request_id"] for ln in lines(target)] == ["abc-1", "last"]  # aclose returned once all was written
