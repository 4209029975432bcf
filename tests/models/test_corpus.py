"""The two-question corpus (models/corpus): reproducible rows, one record shape, coverage, independent halves."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from gateway.features.request import from_record
from models.corpus import apps, clients, fronts, generate, payloads, sites

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "models" / "corpus" / "data"
ROWS = 2400


def _rows(half: str, rows: int = ROWS, seed: int = 5) -> list[dict[str, Any]]:
    return list(generate.generate(rows, seed, generate.HALVES[half]))


@pytest.fixture(scope="module")
def half_a() -> list[dict[str, Any]]:
    return _rows("a")


@pytest.fixture(scope="module")
def half_b() -> list[dict[str, Any]]:
    return _rows("b")


@pytest.fixture(scope="module")
def both(half_a: list[dict[str, Any]], half_b: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {"a": half_a, "b": half_b}


def test_the_same_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    outs = []
    for name in ("one", "two"):
        out = tmp_path / f"{name}.jsonl"
        subprocess.run([sys.executable, "-m", "models.corpus.generate", "--rows", "150", "--seed", "11", "--half", "b",
                        "--out", str(out)], check=True, cwd=ROOT)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert len(outs[0].splitlines()) == 150
    in_process = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows("b", 150, 11)).encode()
    assert in_process == outs[0]
    other_seed = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows("b", 150, 12)).encode()
    assert other_seed != outs[0]


_FIELDS = {"method": str, "path": str, "http_version": str, "headers": list, "client_ip": str,
           "payload_label": str, "client_label": str, "label": str, "source": str, "payload_source": str,
           "site": str, "site_type": str, "front": str, "browser_family": str, "client_kind": str, "group": str}


def test_every_record_has_the_shape_the_model_reads(both: dict[str, list[dict[str, Any]]]) -> None:
    for rows in both.values():
        for rec in rows:
            for name, kind in _FIELDS.items():
                assert isinstance(rec[name], kind), (name, rec)
            assert rec["body"] is None or isinstance(rec["body"], str)
            assert all(isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h) for h in rec["headers"])
            assert rec["payload_label"] in ("benign", "attack")
            assert rec["client_label"] in generate.CLIENT_LABELS
            if rec["payload_label"] == "attack":
                assert rec["attack_kind"] in payloads.ATTACK_KINDS and rec["label"] == "attack"
                assert payloads.KIND[rec["attack_family"]] == rec["attack_kind"]
            else:
                assert rec["attack_kind"] is None and rec["label"] == rec["client_label"]
            assert rec["front"] in fronts.FRONTS
            assert rec["site_type"] in sites.SITE_TYPES
            assert rec["path"].startswith("/") and not re.search(r"[\s\x00-\x1f]", rec["path"]), rec["path"]
            if "client" in rec:
                assert set(rec["client"]) == {"requests", "rate_per_min", "error_ratio", "path_diversity",
                                              "mean_gap_s", "challenges_passed"}
            names = Counter(h[0].lower() for h in rec["headers"])
            assert names["host"] == 1, rec["headers"]
            assert all(n == 1 for k, n in names.items() if k != "cookie"), names
            if rec["body"] is not None:
                cl = next(v for n, v in rec["headers"] if n.lower() == "content-length")
                assert int(cl) == len(rec["body"].encode("utf-8"))
            feats = from_record(rec)
            assert feats.method == rec["method"] and feats.host


def test_every_browser_family_in_each_half(both: dict[str, list[dict[str, Any]]]) -> None:
    for half, rows in both.items():
        seen = {r["browser_family"] for r in rows if r["client_label"] == "human"}
        assert seen == set(clients.FAMILIES), (half, set(clients.FAMILIES) - seen)


def test_safari_with_and_without_fetch_metadata(both: dict[str, list[dict[str, Any]]]) -> None:
    for half, rows in both.items():
        with_md = without_md = 0
        for r in rows:
            if r["browser_family"] not in ("safari-mac", "safari-ios") or r["client_label"] != "human":
                continue
            names = {h[0].lower() for h in r["headers"]}
            if "sec-fetch-mode" in names:
                with_md += 1
            else:
                without_md += 1
        assert with_md and without_md, (half, with_md, without_md)


def test_browser_sets_follow_the_engine(both: dict[str, list[dict[str, Any]]]) -> None:
    """Every iOS browser is WebKit: no client hints; WebKit sends no Sec-Fetch-User; hints only from Chrome 89."""
    for rows in both.values():
        for r in rows:
            if r["client_kind"] != "browser":
                continue
            names = {h[0].lower() for h in r["headers"]}
            ua = next(v for n, v in r["headers"] if n.lower() == "user-agent")
            if "iPhone" in ua or "iPad" in ua or r["browser_family"] in ("safari-mac", "firefox"):
                assert not any(n.startswith("sec-ch-ua") for n in names), r["headers"]
            if "iPhone" in ua or "iPad" in ua or r["browser_family"] == "safari-mac":
                assert "sec-fetch-user" not in names, r["headers"]


def test_every_attack_kind_under_every_kind_of_client(both: dict[str, list[dict[str, Any]]]) -> None:
    for half, rows in both.items():
        seen: dict[str, set[str]] = defaultdict(set)
        for r in rows:
            if r["payload_label"] == "attack":
                seen[r["client_kind"]].add(r["attack_kind"])
        for kind in ("browser", "library", "scanner", "crawler"):
            assert seen[kind] == set(payloads.ATTACK_KINDS), (half, kind, seen[kind])


def test_the_client_look_carries_no_information_about_the_payload(both: dict[str, list[dict[str, Any]]]) -> None:
    for half, rows in both.items():
        by_kind: dict[str, list[bool]] = defaultdict(list)
        for r in rows:
            by_kind[r["client_kind"]].append(r["payload_label"] == "attack")
        shares = {k: sum(v) / len(v) for k, v in by_kind.items() if len(v) >= 100}
        assert len(shares) >= 4
        assert max(shares.values()) - min(shares.values()) < 0.12, (half, shares)
        benign_kinds = {r["client_kind"] for r in rows if r["payload_label"] == "benign"}
        assert {"browser", "library", "scanner", "crawler", "headless"} <= benign_kinds


def test_client_labels_follow_who_sends(both: dict[str, list[dict[str, Any]]]) -> None:
    for rows in both.values():
        for r in rows:
            if r["client_label"] == "human":
                assert r["client_kind"] == "browser"
            elif r["client_label"] == "good_bot":
                assert r["client_kind"] == "crawler"
            else:
                assert r["client_kind"] != "crawler"


def test_the_halves_share_no_source(both: dict[str, list[dict[str, Any]]]) -> None:
    fields = ("payload_source", "site", "site_type")
    a, b = both["a"], both["b"]
    for field in fields:
        shared = {r[field] for r in a} & {r[field] for r in b}
        shared -= {"words", "devqueries", "langtext", "tokens", "structured", "numbers", "well-known", "site", "xml", "attack-words"}
        assert not shared, (field, shared)
    browser_sources = lambda rows: {r["source"] for r in rows if r["client_kind"] == "browser"}  # noqa: E731
    assert not browser_sources(a) & browser_sources(b)
    header_sources = lambda rows: {r["header_source"] for r in rows if r["client_kind"] == "browser"}  # noqa: E731
    assert header_sources(a) == {"curl-impersonate"} and header_sources(b) == {"browserforge"}
    tools = lambda rows: {(r["source"], r["browser_family"]) for r in rows  # noqa: E731
                          if r["client_kind"] in ("library", "scanner", "crawler")}
    assert not tools(a) & tools(b)
    assert not set(sites.half_words("a")) & set(sites.half_words("b"))
    ha, hb = generate.HALVES["a"], generate.HALVES["b"]
    assert not ha.sources() & hb.sources()
    assert not set(ha.site_types) & set(hb.site_types)
    assert len(ha.site_types) + len(hb.site_types) >= 8


def test_real_application_shapes_in_each_half_carry_both_answers(both: dict[str, list[dict[str, Any]]]) -> None:
    """Requests as real applications send them are a share of each half, from that half's sources only, and
    carry attacks about as often as the rest: a shape is never evidence either way."""
    for half, rows in both.items():
        used = [r for r in rows if r["app"] is not None]
        assert {r["app"] for r in used} <= set(apps.half_sources(half)) and len(used) > len(rows) // 20
        share = lambda rs: sum(r["payload_label"] == "attack" for r in rs) / len(rs)  # noqa: E731
        same_groups = [r for r in rows if r["app"] is None and r["group"] in generate.APP_GROUPS]
        assert abs(share(used) - share(same_groups)) < 0.12, (share(used), share(same_groups))
        as_sent = [r for r in used if r["payload_source"] == f"app:{r['app']}"]
        assert as_sent and all(r["payload_label"] == "benign" for r in as_sent)


def test_every_front_and_its_rewriting(both: dict[str, list[dict[str, Any]]]) -> None:
    rows = both["a"] + both["b"]
    assert {r["front"] for r in rows} == set(fronts.FRONTS)
    for r in rows:
        names = [h[0] for h in r["headers"]]
        lower = {n.lower() for n in names}
        if r["front"] == "envoy" or r["front"] == "haproxy":
            assert all(n == n.lower() for n in names)
        if r["front"] == "nginx" and r["http_version"] == "1.0":
            assert ("Connection", "close") in {(h[0], h[1]) for h in r["headers"]}
        if r["front"] in ("caddy", "aws-alb", "gcp-lb", "cloudflare", "haproxy"):
            assert "x-forwarded-for" in lower, r["headers"]
        if r["front"] == "caddy":
            assert "connection" not in lower


def test_sources_option_restricts_and_refuses_unknown() -> None:
    half = generate.restrict(generate.HALVES["all"], ["curl-impersonate", "fake-useragent", "fuzzdb"])
    rows = list(generate.generate(300, 3, half))
    assert {r["source"] for r in rows if r["client_kind"] == "browser"} <= {"curl-impersonate", "fake-useragent"}
    assert {r["payload_source"] for r in rows if r["payload_label"] == "attack"} == {"fuzzdb"}
    with pytest.raises(ValueError):
        generate.restrict(generate.HALVES["all"], ["coreruleset"])


_RESERVED = re.compile(r"coreruleset|owasp-modsecurity-crs|modsecurity-crs|crs-regression|regression-tests|"
                       r"942100|REQUEST-9\d\d-", re.I)


def test_no_core_rule_set_data() -> None:
    for path in sorted(DATA.iterdir()):
        text = path.read_text(encoding="utf-8")
        if path.name == "SOURCES.md":
            text = text.replace("The OWASP Core Rule Set and its regression tests are not a source", "")
        assert not _RESERVED.search(text), path.name
    listed = set(re.findall(r"`([\w.-]+/[\w.-]+)`", (DATA / "SOURCES.md").read_text()))
    assert listed and not any("crs" in r.lower() or "coreruleset" in r.lower() for r in listed)


def test_payload_corpora_are_large_and_compact() -> None:
    total = sum(len(v) for fams in payloads.corpora().values() for v in fams.values())
    assert total > 10000
    # payload lists, browser and bot data about 1 MiB; real applications' request shapes (apps-*.json) about 4 MiB
    assert sum(p.stat().st_size for p in DATA.iterdir()) < 6 * 2**20
    for half in ("a", "b"):
        assert set(payloads.kinds_available(generate.HALVES[half].payload_sources)) == set(payloads.ATTACK_KINDS)


def test_variants_keep_the_request_and_change_one_thing() -> None:
    half, mix = generate.HALVES["a"], generate.Mix()
    kept = 0
    for i in range(60):
        rec = generate.row(9, i, half, mix, 24)
        for front in fronts.FRONTS:
            v = generate.row(9, i, half, mix, 24, front=front)
            assert v["front"] == front
            assert (v["method"], v["path"], v["body"], v["payload_label"], v["client_label"], v["browser_family"]) == \
                (rec["method"], rec["path"], rec["body"], rec["payload_label"], rec["client_label"], rec["browser_family"])
        for kind in ("browser", "library", "scanner", "crawler", "headless"):
            v = generate.row(9, i, half, mix, 24, client=kind)
            assert (v["method"], v["path"], v["payload_label"], v["attack_family"]) == \
                (rec["method"], rec["path"], rec["payload_label"], rec["attack_family"])
            assert v["client_kind"] == kind
            assert v["client_label"] == {"browser": "human", "crawler": "good_bot"}.get(kind, "bad_bot")
            kept += v["body"] == rec["body"]
        v = generate.row(9, i, half, mix, 24, family="safari-ios")
        assert v["browser_family"] == "safari-ios" and v["path"] == rec["path"]
        v = generate.row(9, i, half, mix, 24, site_half="b")
        assert v["site_type"] in sites.HALF_SITES["b"] and v["payload_label"] == rec["payload_label"]
    assert kept == 60 * 5


def test_a_good_crawler_naming_a_verifying_operator_comes_from_its_ranges(both: dict[str, list[dict[str, Any]]]) -> None:
    """The shipped rules let such a crawler through by address; from anywhere else it is a spoofer, so a page request
    from one is generated from the operator's published ranges, and marked verified."""
    from gateway import config as configmod
    from gateway.pipeline import build
    from gateway.verdict import Action, Verdict

    root = Path(__file__).resolve().parents[2]
    cfg = configmod.load(str(root / "gateway" / "default.yaml"), upstream="http://127.0.0.1:9")
    rules = build(cfg).rules
    assert rules is not None
    verified = [r for rows in both.values() for r in rows if r.get("verified")]
    assert verified, "no verified crawler in the sample"
    for rec in verified:
        assert rec["client_label"] == "good_bot" and rec["payload_label"] == "benign" and rec["client_kind"] == "crawler"
        outcome = rules.evaluate(from_record(rec))
        # let through by a rule: the verified-crawler rule, or one before it (robots.txt, sitemaps)
        assert isinstance(outcome, Verdict) and outcome.action is Action.FORWARD and outcome.rule, rec
    claims = re.compile(r"googlebot|bingbot|applebot|duckduckbot", re.IGNORECASE)
    spoofed = [r for rows in both.values() for r in rows if r["payload_label"] == "attack" and claims.search(str(r["headers"]))]
    assert all(not r.get("verified") for r in spoofed)


def test_the_words_of_attacks_are_benign_without_their_syntax(both: dict[str, list[dict[str, Any]]]) -> None:
    """A word seen only in attacks ("Password1" of `net user hacker Password1 /ADD`) would become evidence by
    itself; people type such words too, so the words of each half's payloads are also benign values."""
    for half, rows in both.items():
        words = payloads.attack_words(half)
        assert len(words) > 1000
        assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{2,}", w) for found in words for w in found)
        used = [r for r in rows if r["payload_source"] == "attack-words"]
        assert used and all(r["payload_label"] == "benign" for r in used)
    assert ("net", "user", "hacker", "Password1", "ADD") in payloads.attack_words(None)
    assert payloads.attack_words("a") != payloads.attack_words("b")      # each half's from its own corpora
