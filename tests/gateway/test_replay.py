"""gateway/tools/replay.py: access logs and decision logs through the compiled rules, a real ONNX model and the policy, offline."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway import features as feat
from gateway.tools import replay
from tests.model_support import write_quote_model

ROOT = Path(__file__).resolve().parents[2]
CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
GPTBOT = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"


def write_toy_model(root: Path, name: str = "clef-flash-toy", version: str = "1") -> Path:
    """A real ONNX model with the Clef-flash contract: "attack" when the request text holds a single quote, else "human"."""
    return write_quote_model(root, name, version)


def combined(ip: str, target: str, *, agent: str = CHROME, referer: str = "-", method: str = "GET", status: int = 200,
             when: str = "23/Nov/2026:10:00:01 +0000") -> str:
    return f'{ip} - - [{when}] "{method} {target} HTTP/1.1" {status} 512 "{referer}" "{agent}"'


def write_config(tmp_path: Path, **extra: Any) -> Path:
    cfg: dict[str, Any] = {"rules": {"files": [str(ROOT / "rules" / "default.yaml")]}, "trusted_proxies": ["127.0.0.1/32"]}
    cfg.update(extra)
    path = tmp_path / "clefgate.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def run_replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = replay.main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def rule_row(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in result["by_rule"] if r["name"] == name)


# ------------------------------------------------------------------------------------------ reading logs

def test_combined_lines_become_requests_with_their_time_status_and_headers() -> None:
    line = r'203.0.113.9 - bob [23/Nov/2026:10:00:05 +0100] "GET /search?q=%22oak%22 HTTP/1.1" 200 460 "http://www.example.com/shop" "Mozilla/5.0 \x22quoted\x22 Firefox/128.0"'
    item = replay.parse_combined(line, "shop.example", "none")
    assert item is not None
    assert item.status == 200
    assert item.when == 1795424405.0  # 09:00:05 UTC
    rec = item.record
    assert (rec["method"], rec["path"], rec["http_version"], rec["client_ip"]) == ("GET", "/search?q=%22oak%22", "1.1", "203.0.113.9")
    assert rec["headers"] == [["Host", "shop.example"], ["User-Agent", 'Mozilla/5.0 "quoted" Firefox/128.0'],
                              ["Referer", "http://www.example.com/shop"]]


def test_escaped_bytes_in_a_combined_line_replay_as_the_bytes_sent() -> None:
    # nginx and Apache log bytes >= 0x80 as \xHH: "café" sent as raw UTF-8, a user agent with "ü", and one byte that is not UTF-8
    line = r'203.0.113.9 - - [23/Nov/2026:10:00:05 +0000] "GET /search?q=caf\xC3\xA9&x=\xFF HTTP/1.1" 200 5 "-" "Bot/\xC3\xBC"'
    item = replay.parse_combined(line, "h", "none")
    assert item is not None
    f = feat.from_record(item.record)
    # what the live proxy holds for the same request: the wire bytes read as latin-1
    assert f.query.encode("latin-1") == b"q=caf\xc3\xa9&x=\xff"
    assert f.user_agent.encode("latin-1") == b"Bot/\xc3\xbc"


def test_common_format_and_unreadable_lines() -> None:
    item = replay.parse_combined('198.51.100.2 - - [23/Nov/2026:10:00:05 +0000] "GET /robots.txt HTTP/1.0" 200 20', "h", "browser")
    assert item is not None and item.record["http_version"] == "1.0"
    assert item.record["headers"] == [["Host", "h"], ["Accept", "*/*"]]
    for bad in ("garbage", '1.2.3.4 - - [not a time] "GET / HTTP/1.1" 200 1', '1.2.3.4 - - [23/Nov/2026:10:00:05 +0000] "\\x16\\x03" 400 0'):
        assert replay.parse_combined(bad, "h", "browser") is None


@pytest.mark.parametrize(("agent", "target", "expect", "absent"), [
    (CHROME, "/shop", {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "same-origin"}, ()),
    (CHROME, "/static/site.css", {"Accept": "text/css,*/*;q=0.1", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "style"}, ()),
    (FIREFOX, "/", {"Accept-Language": "en-US,en;q=0.5", "Sec-Fetch-Dest": "document"}, ()),
    (GOOGLEBOT, "/", {"Accept": "*/*", "User-Agent": GOOGLEBOT}, ("Sec-Fetch-Mode", "Accept-Language")),
    ("curl/8.5.0", "/", {"Accept": "*/*"}, ("Sec-Fetch-Mode",)),
])
def test_browser_headers_are_reconstructed_by_family(agent: str, target: str, expect: dict[str, str], absent: tuple[str, ...]) -> None:
    headers = dict(replay.reconstruct_headers("GET", target, "www.example.com", agent, "http://www.example.com/", "browser"))
    for name, value in expect.items():
        assert headers[name] == value
    for name in absent:
        assert name not in headers
    assert headers["Host"] == "www.example.com"


def test_decision_log_lines_and_records_are_read(tmp_path: Path) -> None:
    lines = [
        json.dumps({"request_id": "r-1", "time": "2026-11-23T10:00:01.250Z", "status": 200, "verdict": "forward",
                    "record": {"method": "GET", "path": "/shop", "http_version": "1.1", "client_ip": "203.0.113.5",
                               "headers": [["Host", "shop.example"], ["User-Agent", CHROME]], "body": None}}),
        json.dumps({"method": "POST", "path": "/login", "headers": [["Host", "shop.example"]], "body": "user=a", "client_ip": "1.2.3.4"}),
        json.dumps({"neither": True}),
    ]
    skipped: Any = replay.Counter()
    examples: list[str] = []
    path = tmp_path / "decisions.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    items = list(replay.read_log([str(path)], "h", "browser", skipped, examples))
    assert [i.source for i in items] == ["decision_log", "record"]
    assert items[0].record["request_id"] == "r-1" and items[0].status == 200
    assert items[0].when == pytest.approx(1795428001.25)
    assert skipped["unreadable"] == 1 and examples[0].endswith(':3: {"neither": true}')


def test_lines_no_request_can_be_built_from_are_counted_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "odd.jsonl"
    ok = {"method": "GET", "path": "/", "headers": [["Host", "shop.example"]], "client_ip": "203.0.113.5"}
    log.write_text("\n".join([
        json.dumps(ok),
        '{"method": "GET", "path": "/", "n": ' + "[" * 100_000 + "}",             # nested past the parser's depth
        '{"method": "GET", "path": "/", "n": ' + "1" * 5000 + "}",               # a number past Python's digit limit
        json.dumps({**ok, "headers": [["Host"]]}),                                # a header without a value
        json.dumps({**ok, "path": "/\ud800"}),                                   # a lone surrogate
    ]) + "\n")
    code, result = run_replay(capsys, "--config", str(write_config(tmp_path)), "--no-model", str(log))
    assert code == 0 and result["requests"] == 1
    assert result["skipped_lines"] == {"unreadable": 4}
    assert any("not enough values to unpack" in e for e in result["skipped_examples"])


# ------------------------------------------------------------------------------------------ deciding

def test_shipped_rules_decide_like_the_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "access.log"
    log.write_text("\n".join([
        combined("203.0.113.7", "/shop"),
        combined("198.51.100.9", "/.env", agent="Mozilla/5.0 zgrab/0.x", status=404),
        combined("198.51.100.10", "/forum", agent=GPTBOT),
        combined("66.249.64.5", "/", agent=GOOGLEBOT),   # inside the shipped googlebot list
        combined("45.1.2.3", "/", agent=GOOGLEBOT),      # the same user agent from elsewhere (offline: answered with no name)
        "not a log line",
    ]) + "\n")
    code, result = run_replay(capsys, "--config", str(write_config(tmp_path)), "--no-model", str(log))
    assert code == 0
    assert result["requests"] == 5 and result["skipped_lines"] == {"unreadable": 1}
    assert result["decided"] == {"forward": 2, "challenge": 1, "block": 2}
    assert rule_row(result, "block-secret-files")["block"] == 1
    assert rule_row(result, "block-crawler-spoofers")["block"] == 1
    assert rule_row(result, "allow-verified-googlebot")["forward"] == 1
    assert rule_row(result, "ai-training-crawlers")["challenge"] == 1
    assert result["model"]["model"] is None and result["model"]["reason"] == "--no-model"
    assert {r["name"] for r in result["refused_paths"]} == {"/.env", "/forum", "/"}
    assert result["compared_with_log"] == {"same": 2, "newly_refused": 3}
    notes = " ".join(result["input"]["notes"])
    assert "Host reconstructed as 'www.example.com'" in notes and "cookies" in notes


def test_rate_limits_run_on_the_logs_clock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(write_config(tmp_path))
    burst = tmp_path / "burst.log"
    burst.write_text("\n".join(combined("203.0.113.50", f"/shop?page={i}", when=f"23/Nov/2026:10:00:{i // 40:02d} +0000")
                               for i in range(200)) + "\n")
    spread = tmp_path / "spread.log"
    spread.write_text("\n".join(combined("203.0.113.50", f"/shop?page={i}", when=f"23/Nov/2026:{10 + i // 60:02d}:{i % 60:02d}:00 +0000")
                                for i in range(200)) + "\n")
    _, fast = run_replay(capsys, "--config", config, "--no-model", str(burst))
    _, slow = run_replay(capsys, "--config", config, "--no-model", str(spread))
    # 200 pages within five seconds of log time: the 120/min bucket (burst 120, refilled at 2/s) refuses the excess
    assert 60 <= rule_row(fast, "rate-limit-per-client")["block"] <= 80
    # the same 200 pages over three hours of log time: never limited
    assert all(r["name"] != "rate-limit-per-client" for r in slow["by_rule"])
    assert slow["decided"]["block"] == 0


def test_the_model_scores_what_the_rules_leave_open(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_toy_model(tmp_path / "repo")
    # the model's batches: the payload detectors, which would decide the injections before it, are off here
    config = write_config(tmp_path, model={"enabled": True, "repository": str(repo), "name": "clef-flash-toy", "providers": ["cpu"]},
                          payload={"enabled": False})
    log = tmp_path / "access.log"
    rows = [combined(f"203.0.113.{i}", "/shop") for i in range(1, 9)]
    rows += [combined(f"198.51.100.{i}", "/search?q=%27%20OR%20%271%27%3D%271", agent="curl/8.5.0")
             for i in range(1, 4)]
    rows.append(combined("198.51.100.9", "/.env"))
    log.write_text("\n".join(rows) + "\n")
    code, result = run_replay(capsys, "--config", str(config), "--batch", "4", str(log))
    assert code == 0
    assert result["model"]["model"] == "clef-flash-toy@1" and result["model"]["provider"] == "cpu"
    assert result["model"]["runs"] == 3  # 11 scored requests in batches of 4
    scored = rule_row(result, "model (via score-everything-else)")
    assert (scored["forward"], scored["block"]) == (8, 3)
    assert rule_row(result, "block-secret-files")["block"] == 1
    assert result["sources"] == {"model": 11, "rule": 1}
    assert result["model"]["precision"] == "fp32" and replay.INT8_BATCH_NOTE not in result["notes"]


def test_an_int8_model_is_noted_as_moving_slightly_with_its_batch_mates(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A reason a replayed decision can differ from the log with nothing changed (models/README.md, *Limits*): the
    rollback version runs int8 on the CPU; the default (2.1.0) runs fp32 there, and is not noted."""
    log = tmp_path / "access.log"
    log.write_text(combined("203.0.113.7", "/shop") + "\n" + combined("198.51.100.1", "/search?q=%27x", agent="curl/8.5.0") + "\n")
    config = write_config(tmp_path, model={"enabled": True, "providers": ["cpu"], "version": "1.7.0"})
    code, result = run_replay(capsys, "--config", str(config), str(log))
    assert code == 0 and result["model"]["precision"] == "int8"
    assert replay.INT8_BATCH_NOTE in result["notes"]
    config = write_config(tmp_path, model={"enabled": True, "providers": ["cpu"]})
    code, result = run_replay(capsys, "--config", str(config), str(log))
    assert code == 0 and result["model"]["precision"] == "fp32"
    assert replay.INT8_BATCH_NOTE not in result["notes"]


def test_shadow_mode_counts_what_would_happen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_toy_model(tmp_path / "repo")
    config = write_config(tmp_path, model={"enabled": True, "repository": str(repo), "name": "clef-flash-toy", "providers": ["cpu"]},
                          policy={"shadow": True})
    log = tmp_path / "access.log"
    log.write_text(combined("198.51.100.1", "/search?q=%27%29%3Bx", agent="curl/8.5.0") + "\n" + combined("203.0.113.1", "/") + "\n")
    _, result = run_replay(capsys, "--config", str(config), str(log))
    assert result["decided"] == {"forward": 1, "challenge": 0, "block": 1}
    assert result["shadow_only"] == {"block": 1}
    assert result["sources"] == {"shadow": 1, "model": 1}


def test_a_missing_model_is_reported_and_rules_still_decide(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, model={"enabled": True, "repository": str(tmp_path / "empty"), "providers": ["cpu"]})
    log = tmp_path / "access.log"
    log.write_text(combined("198.51.100.9", "/.env") + "\n" + combined("203.0.113.1", "/") + "\n")
    code, result = run_replay(capsys, "--config", str(config), str(log))
    assert code == 0
    assert result["model"]["model"] is None and "no version of model 'clef-flash'" in result["model"]["reason"]
    assert replay.INT8_BATCH_NOTE not in result["notes"]
    assert result["decided"] == {"forward": 1, "challenge": 0, "block": 1}


def test_text_output_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "access.log"
    log.write_text(combined("198.51.100.9", "/.env") + "\n")
    assert replay.main(["--no-model", str(log)]) == 0
    text = capsys.readouterr().out
    assert "would block           1 (100.0%)" in text
    assert "block-secret-files" in text and "Host reconstructed" in text and "the embedded default" in text
    empty = tmp_path / "empty.log"
    empty.write_text("nothing to see\n")
    assert replay.main(["--no-model", str(empty)]) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: {files: [nope.yaml]}\n")
    assert replay.main(["--config", str(bad), str(log)]) == 2
    assert "nope.yaml" in capsys.readouterr().err



def test_rotated_files_given_newest_first_are_replayed_oldest_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # one client at a steady 1 request/s for 6 minutes, rotated every 2 minutes: half the shipped 120/min limit
    files = []
    for n, start in enumerate((240, 120, 0)):  # access.log, access.log.1, access.log.2: the shell's order for access.log*
        path = tmp_path / ("access.log" + (f".{n}" if n else ""))
        path.write_text("\n".join(combined("203.0.113.50", f"/shop?page={t}", when=f"23/Nov/2026:10:{t // 60:02d}:{t % 60:02d} +0000")
                                   for t in range(start, start + 120)) + "\n")
        files.append(str(path))
    code, result = run_replay(capsys, "--config", str(write_config(tmp_path)), "--no-model", *files)
    assert code == 0 and result["requests"] == 360
    assert result["decided"]["block"] == 0
    assert any(n.startswith("files replayed oldest first") and n.endswith(", ".join(reversed(files))) for n in result["notes"])
    assert not any("logged more than" in n for n in result["notes"])
    # from standard input the order cannot be fixed: the late lines are counted and the report says so
    lines = "".join(Path(f).read_text() for f in files)
    import io
    import sys
    old, sys.stdin = sys.stdin, io.StringIO(lines)
    try:
        code, result = run_replay(capsys, "--config", str(write_config(tmp_path)), "--no-model", "-")
    finally:
        sys.stdin = old
    assert any(n.startswith("240 request(s) were logged more than 60 s before") for n in result["notes"])


# ------------------------------------------------------------------------------------------ bounded tables

def test_path_and_client_tables_stay_bounded_and_keep_the_heaviest_rows() -> None:
    table = replay.TopTable(cap=64)
    for i in range(10_000):                       # a fuzzing scanner: every path new, every one forwarded
        table.add(f"/fuzz/{i}", "forward")
        if i % 10 == 0:
            table.add("/shop", "forward")         # a popular page
        if i % 25 == 0:
            table.add("/wp-login.php", "block")   # a refused one, rarer than /shop
        assert len(table.counts) <= 64
    rows = dict(table.items())
    assert rows["/shop"] == {"forward": 1_000, "challenge": 0, "block": 0}
    assert rows["/wp-login.php"]["block"] == 400
    assert table.pruned > 0 and table.dropped_requests > 9_000
    # what is kept plus what was shed is everything that was counted
    assert sum(sum(c.values()) for c in rows.values()) + table.dropped_requests == 10_000 + 1_000 + 400


def test_a_replay_that_sheds_table_rows_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "TABLE_KEYS", 16)
    log = tmp_path / "access.log"
    log.write_text("\n".join(combined(f"203.0.113.{i % 200}", f"/item/{i}") for i in range(300)) + "\n")
    code, result = run_replay(capsys, "--config", str(write_config(tmp_path)), "--no-model", str(log))
    assert code == 0 and result["requests"] == 300
    assert len(result["by_path"]) <= 20
    notes = [n for n in result["notes"] if "distinct paths" in n]
    assert notes and "undercounted" in notes[0]
    assert any("distinct clients" in n for n in result["notes"])


def test_clefgate_access_log_lines_are_refused_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.accesslog import AccessLog
    path = tmp_path / "access.log"
    log = AccessLog(str(path))
    for i in range(5):
        log.write(1_763_000_000 + i, f"id{i}", f"198.51.100.{i}", "GET", f"/shop/item/{i}", 200, 0, 512, "app", "app",
                  "127.0.0.1:8000", "forward", "model", None, 0.01, 0.002, 0.001, 0.0005)
    log.close()
    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text(json.dumps({"method": "GET", "path": "/shop", "client_ip": "203.0.113.7",
                                     "headers": [["Host", "h"], ["User-Agent", FIREFOX]]}) + "\n")
    code, result = run_replay(capsys, "--config", str(write_config(tmp_path)), "--no-model", str(path), str(decisions))
    assert code == 0 and result["requests"] == 1  # the record with headers, not the five access-log lines
    assert result["skipped_lines"] == {"clefgate_access_log": 5}
    replay.main(["--config", str(write_config(tmp_path)), "--no-model", str(path)])
    assert "replay the decision log" in capsys.readouterr().out


def test_the_replay_drives_the_pipeline_build_makes_with_one_policy(tmp_path: Path) -> None:
    """The model stage the replay hands to ``pipeline.build`` decides with the pipeline's own Policy, as in serve."""
    from types import SimpleNamespace

    from gateway.decider.stage import ModelStage

    cfg, _ = replay.load_config(str(write_config(tmp_path, model={"enabled": True}, policy={"shadow": True})), replay.DEFAULT_HOST)
    replayer = replay.Replayer(cfg, model_loader=lambda cfg: SimpleNamespace(label="toy@1"))
    pipeline = replayer.pipeline
    assert isinstance(pipeline.scorer, ModelStage) and pipeline.scorer.policy is pipeline.policy
    assert [s.name for s in pipeline.stages] == ["rules", "payload", "default", "model"]
    assert pipeline.state is replayer.state  # the windows and rate buckets run on the log's clock
