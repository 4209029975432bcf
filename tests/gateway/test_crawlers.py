"""Verified-crawler ranges: parsing an operator's published JSON and `clefgate crawlers import`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.clients import ClientState
from gateway.rules import RuleOptions, load
from gateway.tools import crawlers
from gateway.verdict import Action, Verdict
from tests.conftest import make_features

PUBLISHED = {"creationTime": "2026-09-30T23:00:00.000000", "prefixes": [
    {"ipv6Prefix": "2001:4860:4801:10::/64"},
    {"ipv4Prefix": "66.249.66.0/27"},
    {"ipv4Prefix": "66.249.64.0/27"},
    {"ipv4Prefix": "66.249.64.0/27"},            # duplicate
    {"ipv4Prefix": "66.249.64.5/27"},            # host bits set: normalised, then a duplicate
    {"ipv4Prefix": "not-a-cidr"},
    {"ipv4Prefix": "8.0.0.0/7"},                 # far too broad to be a crawler's range
    {"ipv4Prefix": "10.1.2.0/24"},               # private
    {"ipv6Prefix": "2001:db8::/48"},             # documentation range
    {"somethingElse": "x"},
]}


def test_parse_published_normalises_and_reports() -> None:
    r = crawlers.parse_published(PUBLISHED)
    assert r.created == "2026-09-30T23:00:00.000000"
    assert r.prefixes == ["66.249.64.0/27", "66.249.66.0/27", "2001:4860:4801:10::/64"]
    assert r.problems == [
        "prefixes[5]: 'not-a-cidr' is not a CIDR",
        "prefixes[6]: '8.0.0.0/7' is too broad to be a crawler's range (refused)",
        "prefixes[7]: '10.1.2.0/24' is not a public address range (refused)",
        "prefixes[8]: '2001:db8::/48' is not a public address range (refused)",
        "prefixes[9]: no ipv4Prefix or ipv6Prefix",
    ]


@pytest.mark.parametrize("data,problem", [
    ({"creationTime": "x"}, "no 'prefixes' list in the file"),
    ("text", "expected a JSON object with 'prefixes', got str"),
])
def test_parse_published_rejects_other_shapes(data: object, problem: str) -> None:
    assert crawlers.parse_published(data).problems == [problem]


def test_a_bare_list_of_cidrs_is_accepted() -> None:
    assert crawlers.parse_published(["157.55.39.0/24", "40.77.167.0/24"]).prefixes == ["40.77.167.0/24", "157.55.39.0/24"]


def test_import_writes_a_named_list_rules_can_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "googlebot.json"
    src.write_text(json.dumps({"creationTime": "2026-09-30T23:00:00", "prefixes": [{"ipv4Prefix": "66.249.66.0/27"}]}))
    lists = tmp_path / "lists"
    assert crawlers.main(["import", str(src), "--lists-dir", str(lists), "--source", "https://example.test/googlebot.json"]) == 0
    text = (lists / "googlebot.txt").read_text()
    assert "# source: https://example.test/googlebot.json" in text and "# published: 2026-09-30T23:00:00" in text
    assert text.splitlines()[-1] == "66.249.66.0/27"
    assert "googlebot.txt: 1 prefixes" in capsys.readouterr().out
    assert not list(lists.glob(".*.tmp"))  # the atomic write left nothing behind

    rules = tmp_path / "r.yaml"
    rules.write_text("rules:\n  - name: g\n    user_agent: '(?i)googlebot'\n    ip: list:googlebot\n    action: allow\n")
    table = load([str(rules)], RuleOptions(lists_dir=str(lists)), ClientState())
    hdrs = [("Host", "h"), ("User-Agent", "Googlebot/2.1")]
    allowed = table.evaluate(make_features("GET", "/", hdrs, client_ip="66.249.66.9"))
    assert isinstance(allowed, Verdict) and allowed.action is Action.FORWARD
    assert table.evaluate(make_features("GET", "/", hdrs, client_ip="66.249.67.9")) is None


def test_import_with_a_name_and_skipped_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "feed.json"
    src.write_text(json.dumps(PUBLISHED))
    assert crawlers.main(["import", str(src), "--name", "google-test", "--lists-dir", str(tmp_path)]) == 1  # written, with warnings
    assert (tmp_path / "google-test.txt").read_text().count("\n") == 4 + 3
    err = capsys.readouterr().err
    assert "'not-a-cidr' is not a CIDR" in err


@pytest.mark.parametrize("content,name,code,message", [
    ("{not json", None, 1, "not JSON (line 1, column 2"),
    (json.dumps({"prefixes": [{"ipv4Prefix": "10.0.0.0/8"}]}), None, 1, "no usable prefixes; the list was not written"),
    (json.dumps({"prefixes": []}), "Bad Name", 2, "is not a list name"),
])
def test_import_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, name: str | None, code: int,
                         message: str) -> None:
    src = tmp_path / "x.json"
    src.write_text(content)
    argv = ["import", str(src), "--lists-dir", str(tmp_path / "lists")] + (["--name", name] if name else [])
    assert crawlers.main(argv) == code
    assert message in capsys.readouterr().err
    assert not (tmp_path / "lists" / "x.txt").exists()


def test_import_of_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert crawlers.main(["import", str(tmp_path / "nope.json"), "--lists-dir", str(tmp_path)]) == 1
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["googlebot", "bingbot", "applebot", "duckduckbot"])
def test_shipped_snapshots_are_dated_and_valid(name: str) -> None:
    path = crawlers.DEFAULT_LISTS_DIR / f"{name}.txt"
    lines = path.read_text().splitlines()
    assert lines[1].startswith("# source: https://") and lines[2].startswith("# published: 20")
    prefixes = [line for line in lines if line and not line.startswith("#")]
    assert crawlers.parse_published(prefixes).problems == []
    assert len(crawlers.parse_published(prefixes).prefixes) == len(prefixes)
