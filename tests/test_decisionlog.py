"""Decision log: lines in the eval/train record shape, bounded queue, size rotation."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from gateway.config import DecisionLogConfig
from gateway.decisionlog import DROPS, DecisionLog
from gateway.features import ModelInput, from_record, model_input
from gateway.verdict import Action, Source, Verdict
from tests.conftest import make_features

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
    assert files == ["d.jsonl", "d.jsonl.1", "d.jsonl.2"]
    assert all(p.stat().st_size <= 2000 + 1000 for p in tmp_path.iterdir())


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
