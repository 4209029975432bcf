"""Decision log: lines in the eval/train record shape, bounded queue, size rotation."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from gateway.config import DecisionLogConfig
from gateway.decisionlog import DROPS, DecisionLog
from gateway.features import Features, ModelInput, from_record, model_input
from gateway.verdict import Action, Source, Verdict
from tests.conftest import longest_pause, make_features

PROBS = {"class": {"human": 0.1, "good_bot": 0.1, "bad_bot": 0.2, "attack": 0.6}}


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lines_carry_the_record_the_input_and_the_verdict(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(DecisionLogConfig(path=str(path)))
    f = make_features(method="POST", target="/login?next=%2F", body=b"user=a&password=b", request_id="r-1")
    log.observe(f, Verdict(Action.BLOCK, Source.MODEL, "P(attack)=0.60", probabilities=PROBS, model="clef-flash@1",
                           decision_ms=0.42, model_input=model_input(f)), 403)
    log.observe(f, Verdict(Action.FORWARD, Source.RULE, "allowed", rule="robots"), 200)  # not decisive: skipped
    log.observe(f, Verdict(Action.CHALLENGE, Source.RULE, "ai crawler", rule="ai-crawlers"), 403)
    log.close()
    lines = read(path)
    assert [ln["verdict"] for ln in lines] == ["block", "challenge"]
    first = lines[0]
    assert first["request_id"] == "r-1" and first["status"] == 403 and first["source"] == "model"
    assert first["probabilities"] == PROBS and first["model"] == "clef-flash@1" and first["latency_ms"] == 0.42
    logged = ModelInput.from_json(first["input"])  # the training reader gets exactly what the model read
    assert logged is not None and logged.text == model_input(f).text and logged.numeric == model_input(f).numeric
    again = from_record(first["record"])  # the training/eval reader gets the same request back
    assert (again.method, again.path, again.query, again.body_prefix) == ("POST", "/login", "next=%2F", b"user=a&password=b")
    assert again.headers == f.headers
    assert lines[1]["rule"] == "ai-crawlers" and "input" not in lines[1]


def test_rotation_by_size(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    log = DecisionLog(DecisionLogConfig(path=str(path), max_bytes=2000, backups=2, rules="all"))
    for i in range(60):
        log.observe(make_features(target=f"/{i}", request_id=f"id{i}"), Verdict(Action.FORWARD, Source.RULE, "x", rule="r"), 200)
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [".d.jsonl.lock", "d.jsonl", "d.jsonl.1", "d.jsonl.2"]  # the lock is hidden from d.jsonl*
    assert all(p.stat().st_size <= 2000 for p in tmp_path.iterdir())


def test_full_queue_drops_lines_never_blocks(tmp_path: Path) -> None:
    stuck = threading.Event()
    log = DecisionLog(DecisionLogConfig(path=str(tmp_path / "d.jsonl"), queue_size=10, rules="all"))
    write = log._flush_chunk

    def slow_write(chunk: list[bytes]) -> None:
        stuck.wait(10)  # a disk that stalls: the writer is stuck and the queue fills up
        write(chunk)

    log._flush_chunk = slow_write  # type: ignore[method-assign]
    before = DROPS.get("queue_full")
    verdict = Verdict(Action.BLOCK, Source.MODEL, "x", probabilities=PROBS)
    for i in range(2000):
        log.observe(make_features(request_id=str(i)), verdict, 403)
    stuck.set()
    log.close()
    written = len((tmp_path / "d.jsonl").read_text().splitlines())
    dropped = DROPS.get("queue_full") - before
    assert written + dropped == 2000
    assert dropped > 0


def test_sampling_is_stable_by_request_id(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    log = DecisionLog(DecisionLogConfig(path=str(path), sample=0.25, rules="all"))
    for i in range(2000):
        log.observe(make_features(request_id=f"req-{i}"), Verdict(Action.FORWARD, Source.RULE, "x", rule="r"), 200)
    log.close()
    ids = {ln["request_id"] for ln in read(path)}
    assert 350 < len(ids) < 650


def _line_cases() -> list[tuple[Features, Verdict, Any]]:
    browser = make_features(method="POST", target="/login?next=%2F&q=\"x\"", body=b"user=a&pw=\xc3\xa9\xff", request_id="r-\u00e9\"1",
                            headers=[("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 \u00e9\t\\"), ("X-Forwarded-For", "198.51.100.7")])
    plain = make_features(target="/", request_id="")
    # ASCII throughout, with what JSON escapes (quotes, backslashes, control characters, DEL): the headers' one-call path
    escaped = make_features(target="/a\"b", request_id="r2", headers=[("Host", "shop.example"), ("User-Agent", "a\"b\\c\x00\x1f\x7f/\t"),
                                                                       ("X-Odd", ""), ("Cookie", "a=\"1\"; b=\\")])
    scored = Verdict(Action.CHALLENGE, Source.CACHE, "default policy: P(bad_bot)+P(attack)=0.99 >= 0.6", probabilities=PROBS,
                     rule="score-everything-else", difficulty=16, explanation=("P(bad_bot)+P(attack)=0.99 >= 0.6", "bad_bot: ua=1 (+0.1)"),
                     policy="default", model="clef-flash@1.0.0", decision_ms=0.031234)
    return [
        (browser, scored, 403),
        (plain, scored, 403),
        (browser, Verdict(Action.BLOCK, Source.MODEL, "P(attack)=0.60", probabilities=PROBS, model="m@1", decision_ms=2.0,
                          model_input=model_input(browser)), 403),
        (plain, Verdict(Action.FORWARD, Source.SHADOW, "shadow mode; would block", probabilities=PROBS, shadow_action=Action.BLOCK,
                        backend="api", decision_ms=0.0), 200),
        (plain, Verdict(Action.FORWARD, Source.RULE, "route", rule="to-api", backend="api"), 200),
        (plain, Verdict(Action.BLOCK, Source.RULE, "blocked", rule=None, status=429), 429),
        (plain, Verdict(Action.FORWARD, Source.FALLBACK, "model unavailable", explanation=("timeout",), model="m@1",
                        decision_ms=800.123456789), 200),
        (plain, Verdict(Action.FORWARD, Source.MODEL, "odd", probabilities={"class": {"human": 1}}, decision_ms=float("nan")), 200),
        (plain, scored, True),  # not an int status: the generic encoder's answer
        (escaped, scored, 403),
        # copies sharing the reason object: the parts kept for it must not leak into other verdicts
        (plain, dataclasses.replace(scored, decision_ms=1.5), 403),
        (plain, dataclasses.replace(scored, explanation=("other",)), 403),
        (plain, dataclasses.replace(scored, probabilities={"class": {"human": 0.5, "attack": 0.5}}), 403),
        (plain, dataclasses.replace(scored, action=Action.FORWARD, source=Source.SHADOW, shadow_action=Action.CHALLENGE), 200),
        (plain, dataclasses.replace(scored, rule=None, model=None), 403),
    ]


def test_encoded_lines_are_the_json_encoders_bytes() -> None:
    """encode_line assembles lines by hand and memoizes shared parts; the bytes must be json.dumps'."""
    import time

    from gateway.decisionlog import _encode, encode_line, line_of

    def reference(features: Features, verdict: Verdict, status: int, when: float) -> str:
        # the encoder's bytes, with a byte the client sent that is not UTF-8 (a lone surrogate) as its JSON escape
        return re.sub("[\udc80-\udcff]", lambda m: f"\\u{ord(m[0]):04x}", _encode(line_of(features, verdict, status, when)))

    for when in (1_800_000_000.0, 1_800_000_000.9996, time.time()):
        for features, verdict, status in _line_cases():
            for _ in range(2):  # the second time from the memo
                assert encode_line(features, verdict, status, when) == reference(features, verdict, status, when)


def test_a_logged_request_reads_back_as_the_request_the_gateway_saw() -> None:
    """Non-ASCII header values, target and body, valid UTF-8 or not, come back byte for byte through replay and eval."""
    from gateway.decisionlog import encode_line
    from gateway.features import from_record

    def wire(raw: bytes) -> str:
        return raw.decode("latin-1")  # how the proxy reads bytes off the wire

    headers = (("Host", "shop.example"), ("User-Agent", wire("Mozilla/5.0 caf\xc3\xa9".encode("latin-1"))),
               ("X-Note", wire(b"a\xff\xfeb")))
    live = make_features(method="POST", target=wire(b"/caf\xc3\xa9?q=\xe9"), headers=list(headers), body=b"pw=\xc3\xa9\xff",
                         request_id="r1")
    line = encode_line(live, Verdict(Action.BLOCK, Source.RULE, "x", rule="r"), 403, 1_800_000_000.0)
    line.encode("utf-8")  # the line itself is valid UTF-8
    record = json.loads(line)["record"]
    assert record["headers"][1] == ["User-Agent", "Mozilla/5.0 caf\u00e9"]  # readable as the client sent it
    back = from_record(record)
    assert back.headers == live.headers and back.target == live.target and back.body_prefix == live.body_prefix
    # the generic encoder (for values of unexpected types) writes the same escapes: the line stays UTF-8
    fallback = encode_line(live, Verdict(Action.BLOCK, Source.RULE, "x", rule="r"), True, 1_800_000_000.0)  # type: ignore[arg-type]
    fallback.encode("utf-8")
    assert from_record(json.loads(fallback)["record"]).body_prefix == live.body_prefix


def test_cached_decision_lines_feed_training(tmp_path: Path) -> None:
    """Lines of cached answers (no model input) and of model runs (with it) both read back as labelled training records."""
    from models.data.formats import read_jsonl

    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(DecisionLogConfig(path=str(path), rules="all"))
    for features, verdict, status in _line_cases():
        log.observe(features, verdict, status)
    log.close()
    text = path.read_text(encoding="utf-8")
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(line[:-1] + ',"label":"bad_bot"}\n' for line in text.splitlines()), encoding="utf-8")
    records = list(read_jsonl(labelled))
    assert len(records) == len(_line_cases()) and all(r["label"] == "bad_bot" for r in records)
    assert sum("model_input" in r for r in records) == 1
    logged = next(r for r in records if "model_input" in r)
    again = ModelInput.from_json(logged["model_input"])
    ran = next(v.model_input for _, v, _ in _line_cases() if v.model_input is not None)
    assert again is not None and again.text == ran.text and again.numeric == ran.numeric


def test_the_writer_is_woken_once_per_batch_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    log = DecisionLog(DecisionLogConfig(path=str(path), rules="all"))
    verdict = Verdict(Action.BLOCK, Source.MODEL, "x", probabilities=PROBS)
    sets = 0
    wake = log._wake.set

    def counting_set() -> None:
        nonlocal sets
        sets += 1
        wake()

    log._wake.set = counting_set  # type: ignore[method-assign]
    for i in range(3000):
        log.observe(make_features(request_id=str(i)), verdict, 403)
    log.close()
    ids = [ln["request_id"] for ln in read(path)]
    assert ids == [str(i) for i in range(3000)]
    assert sets < 100  # not one wake-up (lock, notify) per line


# ---- several writers on one path, files moved away, failed writes, closing on the event loop

def _numbered(worker: str, seq: int) -> bytes:
    return (json.dumps({"request_id": f"{worker}{seq:05d}", "pad": "x" * 60}) + "\n").encode()


def _log_files(folder: Path) -> dict[str, list[str]]:
    """request ids by file, for the log's own files (not its hidden lock)."""
    return {p.name: [json.loads(line)["request_id"] for line in p.read_text().splitlines()]
            for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


@pytest.mark.parametrize("backups", [2, 1000])
def test_workers_sharing_a_path_rotate_without_losing_lines(tmp_path: Path, backups: int) -> None:
    """Two workers' logs on one path, writing in turn: each rotates by the file's size, not by its own count,
    and never writes into a file the other rotated away (or deleted, with few backups)."""
    path = tmp_path / "d.jsonl"
    cfg = DecisionLogConfig(path=str(path), max_bytes=10_000, backups=backups, rules="all")
    a, b = DecisionLog(cfg), DecisionLog(cfg)
    order = []
    for seq in range(1200):
        worker, log = ("a", a) if seq % 2 == 0 else ("b", b)
        log._write([_numbered(worker, seq)])  # as the two workers' writer threads would, deterministically
        order.append(f"{worker}{seq:05d}")
    a.close()
    b.close()
    files = _log_files(tmp_path)
    assert all((tmp_path / name).stat().st_size <= cfg.max_bytes for name in files)
    newest_first = [rid for name in sorted(files, key=lambda n: int(n.rpartition(".")[2]) if n[-1].isdigit() else 0)
                    for rid in reversed(files[name])]
    kept = newest_first[::-1]
    assert kept == order[-len(kept):]  # the newest lines, in order: none lost, none in the wrong file
    if backups == 2:
        assert len(kept) > 2 * cfg.max_bytes // len(_numbered("a", 0))
        assert len(files) == 3
    else:
        assert kept == order


def _worker_process(path: str, worker: str, count: int, start: Any) -> None:
    import time

    log = DecisionLog(DecisionLogConfig(path=path, max_bytes=20_000, backups=1000, rules="all"))
    verdict = Verdict(Action.BLOCK, Source.MODEL, "x", probabilities=PROBS)
    start.wait(30)
    for i in range(count):
        log.observe(make_features(request_id=f"{worker}-{i}"), verdict, 403)
        if i % 50 == 49:
            time.sleep(0.005)  # many batches, rotations interleaved with the other workers'
    log.close()


def test_worker_processes_share_one_path(tmp_path: Path) -> None:
    """Worker processes (as ``workers: N`` runs them) on one decision_log.path: every line in exactly one file,
    no file past max_bytes."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    path = str(tmp_path / "d.jsonl")
    procs = [ctx.Process(target=_worker_process, args=(path, f"w{n}", 1500, start)) for n in range(3)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    files = _log_files(tmp_path)
    ids = [rid for names in files.values() for rid in names]
    assert len(files) > 10  # it rotated, many times
    assert sorted(ids) == sorted(f"w{n}-{i}" for n in range(3) for i in range(1500))
    assert all((tmp_path / name).stat().st_size <= 20_000 for name in files)


def test_a_moved_or_deleted_file_is_reopened(tmp_path: Path) -> None:
    """logrotate (create mode), a log shipper or an operator moves or deletes the file: the next lines go to path."""
    import time

    path = tmp_path / "d.jsonl"
    log = DecisionLog(DecisionLogConfig(path=str(path), rules="all"))
    verdict = Verdict(Action.BLOCK, Source.MODEL, "x", probabilities=PROBS)

    def burst(tag: str, at: Path) -> None:
        for i in range(50):
            log.observe(make_features(request_id=f"{tag}{i}"), verdict, 403)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (at.exists() and len(at.read_text().splitlines()) == 50):
            time.sleep(0.01)

    burst("before-", path)
    path.rename(tmp_path / "d.jsonl.shipped")
    burst("moved-", path)
    path.unlink()
    burst("deleted-", path)
    log.close()
    assert [ln["request_id"] for ln in read(tmp_path / "d.jsonl.shipped")] == [f"before-{i}" for i in range(50)]
    assert [ln["request_id"] for ln in read(path)] == [f"deleted-{i}" for i in range(50)]


_FULL_DISK = """
import json, resource, signal, sys, time
from gateway.config import DecisionLogConfig
from gateway.decisionlog import DROPS, LINES, DecisionLog
from gateway.verdict import Action, Source, Verdict
from tests.conftest import make_features

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as ENOSPC: the kernel writes what fits, then fails
log = DecisionLog(DecisionLogConfig(path=sys.argv[1], rules="all"))
verdict = Verdict(Action.BLOCK, Source.MODEL, "x", probabilities={"class": {"attack": 1.0}})
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, hard))  # room for 3000 bytes
for i in range(10):
    log.observe(make_features(request_id=f"full-{i}"), verdict, 403)
time.sleep(0.3)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # room again
for i in range(3):
    log.observe(make_features(request_id=f"later-{i}"), verdict, 403)
log.close()
print(json.dumps({"written": LINES.get(), "dropped": DROPS.get("write_error")}))
"""


def test_a_write_cut_short_by_a_full_disk_keeps_whole_lines(tmp_path: Path) -> None:
    """A write that fails part way is cut back to its last whole line: the file stays JSONL, and the lines
    counted as dropped are exactly those not in it."""
    import subprocess
    import sys

    path = tmp_path / "d.jsonl"
    out = subprocess.run([sys.executable, "-c", _FULL_DISK, str(path)], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2], check=True)
    counts = json.loads(out.stdout.splitlines()[-1])
    lines = read(path)  # every line is JSON (a half line would not be)
    ids = [ln["request_id"] for ln in lines]
    assert path.read_bytes().endswith(b"\n")
    full = [i for i in ids if i.startswith("full-")]
    assert 0 < len(full) < 10 and path.stat().st_size > 0
    assert ids == [*full, "later-0", "later-1", "later-2"]
    assert counts == {"written": len(ids), "dropped": 10 - len(full)}


def test_aclose_waits_for_the_writer_off_the_event_loop(tmp_path: Path) -> None:
    """A reload retires a decision log on the event loop: a stalled disk must not stall every request with it."""
    import asyncio
    import time

    path = tmp_path / "d.jsonl"
    log = DecisionLog(DecisionLogConfig(path=str(path), rules="all"))
    write = log._flush_chunk

    def stalled_write(chunk: list[bytes]) -> None:
        time.sleep(1.0)  # NFS, a throttled volume
        write(chunk)

    log._flush_chunk = stalled_write  # type: ignore[method-assign]

    async def scenario() -> float:
        log.observe(make_features(request_id="r"), Verdict(Action.BLOCK, Source.MODEL, "x"), 403)
        await asyncio.sleep(0.1)  # the writer is in its stalled write
        return await longest_pause(log.aclose)

    assert asyncio.run(scenario()) < 0.5
    assert [ln["request_id"] for ln in read(path)] == ["r"]  # aclose returned once the queued line was written
