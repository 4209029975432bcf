"""models.data: the generator is reproducible, holds out by source, and its records read like traffic."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from gateway.features import from_record, model_input
from models.data import attacks, formats, site
from models.data.automation import library_agents
from models.data.generate import CLASSES, generate, write_jsonl
from models.data.sources import SPLITS, Split, browsers_for, crawlers_for, held_out, side_of


def test_generation_is_reproducible(tmp_path: Path) -> None:
    a = write_jsonl(generate("train", 300, seed=5), tmp_path / "a.jsonl")
    b = write_jsonl(generate("train", 300, seed=5), tmp_path / "b.jsonl")
    c = write_jsonl(generate("train", 300, seed=6), tmp_path / "c.jsonl")
    assert a == b and a[1] != c[1]
    # row i depends only on (seed, split, i): a longer run starts with the shorter one
    assert list(generate("eval", 20, seed=5)) == list(generate("eval", 40, seed=5))[:20]


def test_records_have_the_eval_shape_and_valid_labels() -> None:
    rows = list(generate("eval", 600, seed=2))
    labels = Counter(r["label"] for r in rows)
    assert set(labels) == set(CLASSES) and min(labels.values()) > 40
    for r in rows:
        assert {"method", "path", "http_version", "headers", "body", "client_ip", "label", "source"} <= set(r)
        assert all(isinstance(h, list) and len(h) == 2 for h in r["headers"])
        assert (r["label"] == "attack") == ("attack_kind" in r)
        assert r.get("attack_kind", "sqli") in attacks.ATTACK_KINDS
        assert "\r" not in r["path"] and " " not in r["path"]
        for name, value in r["headers"]:
            assert "\n" not in value and "\r" not in value and name.strip() == name
        f = from_record(r)
        assert f.method == r["method"]
        model_input(f)
    for r in rows:
        if r["body"] is not None:
            length = [v for n, v in r["headers"] if n.lower() == "content-length"]
            assert not length or int(length[0]) == len(r["body"].encode())


def test_sources_are_held_out() -> None:
    seen = _agents("train") | _agents("calib")
    assert seen.isdisjoint(_agents("eval")) and len(_agents("eval")) > 300
    assert _agents("train").isdisjoint(_agents("calib"))
    # payload productions: eval's are new, and every family has some on every side
    seen_p = {p.id for p in attacks.productions("train")} | {p.id for p in attacks.productions("calib")}
    assert seen_p.isdisjoint({p.id for p in attacks.productions("eval")})
    families = {attacks.family(p) for p in attacks.PRODUCTIONS}
    for split in SPLITS:
        assert {attacks.family(p) for p in attacks.productions(split)} == families
    assert (set(attacks.probe_paths("train")) | set(attacks.probe_paths("calib"))).isdisjoint(attacks.probe_paths("eval"))
    # path templates: a (site, group) with several templates has some only in eval
    seen_t = {t.id for t in site.templates("train")} | {t.id for t in site.templates("calib")}
    assert len({t.id for t in site.templates("eval")} - seen_t) >= 20
    assert side_of("x", "y") == side_of("x", "y") and held_out("x", "y") == (side_of("x", "y") == "eval")


def _agents(split: Split) -> set[str]:
    return ({a.ua for a in browsers_for(split)} | {a.ua for role in ("good", "bad", "library") for a in crawlers_for(split, role)}
            | {ua for _, ua in library_agents(split)})


def _unseen_sources(split: str) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], tuple[str, ...]], ...], tuple[str, ...], tuple[str, ...]]:
    """(ids of its own productions, (side pool, its pool) text pairs, its scanners, the scanners before it) of a measurement split."""
    from models.data import generate as gen
    from models.data import unseen_injections, unseen_protocols

    if split == "unseen-releases":
        return (tuple(p.id for p in attacks.RELEASES_PRODUCTIONS),
                ((site.QUERIES, site.RELEASES_QUERIES), (site.HARD_QUERIES, site.RELEASES_HARD_QUERIES), (site.REVIEW_TEXT, site.RELEASES_REVIEW_TEXT),
                 (site.FORUM_TEXT, site.RELEASES_FORUM_TEXT)), gen._RELEASES_SCANNER_UAS, gen._SCANNER_UAS)
    if split == "unseen-injections":
        return (tuple(p.id for p in unseen_injections.PRODUCTIONS),
                ((site.QUERIES + site.RELEASES_QUERIES, unseen_injections.QUERIES), (site.HARD_QUERIES + site.RELEASES_HARD_QUERIES, unseen_injections.HARD_QUERIES),
                 (site.REVIEW_TEXT + site.RELEASES_REVIEW_TEXT, unseen_injections.REVIEW_TEXT), (site.FORUM_TEXT + site.RELEASES_FORUM_TEXT, unseen_injections.FORUM_TEXT),
                 (site.COMMENT_MARKDOWN + site.RELEASES_COMMENT_MARKDOWN, unseen_injections.COMMENT_MARKDOWN)),
                unseen_injections.SCANNER_UAS, gen._SCANNER_UAS + gen._RELEASES_SCANNER_UAS)
    return (tuple(p.id for p in unseen_protocols.PRODUCTIONS),
            ((site.QUERIES + site.RELEASES_QUERIES + unseen_injections.QUERIES, unseen_protocols.QUERIES),
             (site.HARD_QUERIES + site.RELEASES_HARD_QUERIES + unseen_injections.HARD_QUERIES, unseen_protocols.HARD_QUERIES),
             (site.REVIEW_TEXT + site.RELEASES_REVIEW_TEXT + unseen_injections.REVIEW_TEXT, unseen_protocols.REVIEW_TEXT),
             (site.FORUM_TEXT + site.RELEASES_FORUM_TEXT + unseen_injections.FORUM_TEXT, unseen_protocols.FORUM_TEXT),
             (site.COMMENT_MARKDOWN + site.RELEASES_COMMENT_MARKDOWN + unseen_injections.COMMENT_MARKDOWN, unseen_protocols.COMMENT_MARKDOWN)),
            unseen_protocols.SCANNER_UAS, gen._SCANNER_UAS + gen._RELEASES_SCANNER_UAS + unseen_injections.SCANNER_UAS)


# the measurement splits listed before each: each is built from sources none of these has
_BUILT_BEFORE: dict[str, tuple[Split, ...]] = {"unseen-releases": (), "unseen-injections": ("unseen-releases",), "unseen-protocols": ("unseen-releases", "unseen-injections")}


@pytest.mark.parametrize("split", ["unseen-releases", "unseen-injections", "unseen-protocols"])
def test_a_measurement_split_draws_from_sources_no_side_has(split: Split) -> None:
    """The unseen-releases split has user agents, page shapes, texts, payload productions, probe paths and scanners of
    its own: it measures a model on traffic that none of its training, calibration or evaluation sources made. The
    unseen-injections split has none of unseen-releases' either, and unseen-protocols none of either's."""
    from models.data import unseen_injections
    from models.data.sources import browser_agents, crawler_agents

    built_before = _BUILT_BEFORE[split]
    before = _agents("train") | _agents("calib") | _agents("eval") | set().union(*(_agents(e) for e in built_before))
    own_agents = _agents(split)
    assert len(own_agents) > 250
    assert own_agents.isdisjoint(before)
    assert own_agents.isdisjoint({a.ua for a in browser_agents()} | {a.ua for a in crawler_agents()})
    assert {a.engine for a in browsers_for(split)} == {"chromium", "firefox", "webkit"}
    assert any("googlebot" in a.ua.lower() for a in crawlers_for(split, "good"))  # verified crawlers' new releases
    productions, texts, scanners, old_scanners = _unseen_sources(split)
    assert set(scanners).isdisjoint(old_scanners) and len(scanners) >= 10
    # pages: the split's own shapes for every kind of request, plus the one-member groups every side shares
    own = {t for t in site.templates(split) if t.id.startswith(f"{split}.")}
    shared = set(site.templates(split)) - own
    assert len(own) >= 50 and {t.group for t in shared} <= {"home", "robots", "health"}
    assert {t.group for t in own} >= {"page", "search", "asset", "xhr", "xhr_post", "form", "login", "download", "feed", "api", "git"}
    earlier = {t.id for s in (*SPLITS, *built_before) for t in site.templates(s, routes=True, rest_writes=True)}
    assert not {t.id for t in own} & earlier
    for pool, own_pool in texts:
        assert own_pool and not set(pool) & set(own_pool)
    # attacks: new productions in every kind the sides have, new probe families, no probe that is one of its pages
    assert not set(productions) & {p.id for e in (*SPLITS, *built_before) for p in attacks.productions(e)}
    assert {p.kind for p in attacks.productions(split)} == {p.kind for p in attacks.PRODUCTIONS}
    probes = set(attacks.probe_paths(split))
    known = ({p for _, paths in attacks.PROBE_PATHS + (attacks.RELEASES_PROBE_PATHS if built_before else ()) for p in paths}
             | {p for _, paths in (unseen_injections.PROBE_PATHS if "unseen-injections" in built_before else ()) for p in paths})
    assert len(probes) > 90 and not probes & known
    import random

    rng = random.Random(6)
    pages = {t.make(rng).target.split("?")[0] for t in own for _ in range(40)}
    assert not {p.split("?")[0] for p in probes} & pages


def test_unseen_protocols_attacks_with_families_no_other_split_has() -> None:
    """Besides new ways of writing the sides' families, unseen-protocols has attack families none of the sides and
    neither other measurement split has (JWT, SAML, open redirects, log injection, Cypher, search-engine queries, CSS
    injection), and its people write with PUT, PATCH and DELETE about as often as unseen-injections' people do."""
    from models.data import unseen_injections, unseen_protocols

    def families(prods: tuple[attacks.Production, ...]) -> set[str]:
        return {p.id.split(".")[1] if p.id.startswith("unseen-") else attacks.family(p) for p in prods}

    earlier = families(attacks.PRODUCTIONS + attacks.RELEASES_PRODUCTIONS + unseen_injections.PRODUCTIONS)
    assert families(unseen_protocols.PRODUCTIONS) - earlier == {"jwt", "saml", "redirect", "logi", "cypher", "searchq", "css"}
    rows = [r for r in generate("unseen-protocols", 4000, seed=5) if r["label"] == "human"]
    writes = [r for r in rows if r["method"] in ("PUT", "PATCH", "DELETE")]
    assert 0.005 < len(writes) / len(rows) < 0.03
    for r in writes:
        names = {n.lower() for n, _ in r["headers"]}
        assert "origin" in names and r["source"].split("/")[2].startswith("unseen-protocols.")


@pytest.mark.parametrize("split", ["unseen-releases", "unseen-injections", "unseen-protocols"])
def test_measurement_rows_are_reproducible_and_drawn_from_the_split_alone(split: Split) -> None:
    rows = list(generate(split, 900, seed=3))
    assert rows == list(generate(split, 900, seed=3)) and rows != list(generate(split, 900, seed=4))
    assert set(Counter(r["label"] for r in rows)) == set(CLASSES)
    assert {r["attack_kind"] for r in rows if r["label"] == "attack"} == set(attacks.ATTACK_KINDS)
    own_browsers = {a.ua for a in browsers_for(split)}
    for r in rows:
        model_input(from_record(r))
        if r["label"] == "human":
            ua = next(v for n, v in r["headers"] if n.lower() == "user-agent")
            assert ua in own_browsers
            template = r["source"].split("/", 2)[2]
            assert template.startswith(f"{split}.") or template == "generic.home", template
    assert any(r.get("verified") and r["label"] == "good_bot" for r in rows)


def test_rest_writes_and_evasions_change_the_training_side_only(tmp_path: Path) -> None:
    """``rest_writes`` adds people's PUT/PATCH/DELETE XHR and ``evasions`` writes a share of injections in an evasion
    encoding, both on the training side only: with them off, or on another side, the rows are what they were."""
    plain = list(generate("train", 1500, seed=8))
    both = list(generate("train", 1500, seed=8, rest_writes=True, evasions=0.3))
    assert plain != both
    writes = [r for r in both if r["label"] == "human" and r["method"] in ("PUT", "PATCH", "DELETE")]
    assert writes and all(r["source"].split("/")[2].startswith("rest.") for r in writes)
    assert not [r for r in plain if r["label"] == "human" and r["method"] in ("PUT", "PATCH", "DELETE")]
    evaded = Counter(r["source"].rsplit("/", 1)[1] for r in both if r["label"] == "attack" and r["source"].count("/") == 3)
    assert set(evaded) <= {name for name, _ in attacks.EVASIONS} and sum(evaded.values()) > 20
    for split in ("calib", "eval", "unseen-releases", "unseen-injections", "unseen-protocols"):
        assert list(generate(split, 300, seed=8, rest_writes=True, evasions=0.3)) == list(generate(split, 300, seed=8)), split
    # the people's writes are shapes of their own: no held-out template and no probe has them
    rest = {t.id for t in site.REST_WRITES}
    assert not rest & {t.id for split in ("calib", "eval", "unseen-releases", "unseen-injections", "unseen-protocols") for t in site.templates(split)}
    name, payload = attacks.evade(__import__("random").Random(3), "../../etc/passwd")
    assert payload != "../../etc/passwd" and name in {n for n, _ in attacks.EVASIONS}
    from models.data.generate import main

    for wrong in (["--split", "calib", "--rest-writes"], ["--split", "eval", "--evasions", "0.1"], ["--evasions", "1.5"]):
        with pytest.raises(SystemExit) as err:
            main([*wrong, "--out", str(tmp_path / "x.jsonl")])
        assert err.value.code == 2, wrong


def test_eval_rows_use_held_out_user_agents() -> None:
    train_ua = {a.ua for a in browsers_for("train")}
    for r in generate("eval", 300, seed=9):
        ua = next((v for n, v in r["headers"] if n.lower() == "user-agent"), "")
        if r["label"] == "human":
            assert ua not in train_ua


def test_attacks_carry_their_payload_and_kind() -> None:
    kinds = Counter(r["attack_kind"] for r in generate("train", 1500, seed=3) if r["label"] == "attack")
    assert set(kinds) == set(attacks.ATTACK_KINDS)


def test_decision_log_lines_and_labels(tmp_path: Path) -> None:
    record = {"method": "GET", "path": "/?q=%27%20or%201=1--", "http_version": "1.1", "headers": [["Host", "a"]], "body": None,
              "client_ip": "198.51.100.1"}
    lines = [
        {"request_id": "1", "record": record, "verdict": "forward", "label": "attack:sqli"},
        {"request_id": "2", "record": record, "verdict": "forward", "label": "bad-bot"},
        {"request_id": "3", "record": record, "verdict": "forward"},
        {"request_id": "4", "record": record, "label": "martian"},
        {**record, "label": "human"},
    ]
    path = tmp_path / "decisions.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{broken\n")
    stats = formats.ReadStats()
    got = list(formats.read_any(path, stats))
    assert [(r["label"], r.get("attack_kind")) for r in got] == [("attack", "sqli"), ("bad_bot", None), ("human", None)]
    assert stats.read == 6 and stats.kept == 3
    assert stats.skipped == {"unlabelled": 1, "no known label": 1, "invalid JSON": 1}


def test_combined_access_log_with_label_column(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    path.write_text(
        '203.0.113.9 - - [10/Oct/2024:13:55:36 +0000] "GET /search?q=shoes HTTP/1.1" 200 2326 "https://shop.example/" '
        '"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0" human\n'
        '198.51.100.7 - - [10/Oct/2024:13:55:37 +0000] "GET /.env HTTP/1.1" 404 0 "-" "curl/8.5.0" attack:probe\n'
        '198.51.100.7 - - [10/Oct/2024:13:55:38 +0000] "GET / HTTP/1.1" 200 1 "-" "curl/8.5.0"\n'
        "garbage line\n")
    stats = formats.ReadStats()
    got = list(formats.read_any(path, stats))
    assert [r["label"] for r in got] == ["human", "attack"] and got[1]["attack_kind"] == "probe"
    assert got[0]["headers"] == [["Host", "-"], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"],
                                 ["Referer", "https://shop.example/"]]
    assert got[0]["source"] == "access-log"
    assert stats.skipped == {"unlabelled": 1, "not combined log format": 1}
    from_record(got[0])


@pytest.mark.parametrize(("raw", "expected"), [
    ("attack", ("attack", None)), ("ATTACK:XSS", ("attack", "xss")), ("sqli", ("attack", "sqli")), ("attack:ldap", ("attack", "other")),
    ("good-bot", ("good_bot", None)), ("human", ("human", None)), ("", None), ("robot", None), (3, None),
])
def test_label_normalisation(raw: object, expected: tuple[str, str | None] | None) -> None:
    assert formats.normalise_label(raw) == expected


def test_no_probe_path_is_also_a_page_people_visit() -> None:
    """A path both a scanner's probe and a page of the generated sites would teach the model to block people."""
    import random

    probes = {p for _, paths in attacks.PROBE_PATHS for p in paths}
    rng = random.Random(4)
    seen: set[str] = set()
    for split in SPLITS:
        for t in site.templates(split):
            for _ in range(40):
                seen.add(t.make(rng).target.split("?")[0])
    assert len(seen) > 2000
    assert not probes & seen, sorted(probes & seen)[:10]


def test_no_probe_path_has_the_shape_of_a_static_asset() -> None:
    """Scripts, styles and images are what browsers fetch on every page: a probe path ending like one taught a
    run to block people's /static/js/vendor.<hash>.js (dotfiles such as /.env.js are no asset anyone loads)."""
    assets = (".js", ".css", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".woff", ".woff2", ".webp", ".map")
    shaped = [p for _, paths in attacks.PROBE_PATHS for p in paths
              if (last := p.split("?")[0].rstrip("/").rsplit("/", 1)[-1]).lower().endswith(assets) and not last.startswith(".")]
    assert not shaped, shaped


def test_every_side_sees_people_fetch_root_level_files() -> None:
    """Favicons, touch icons, manifests and workers at the root are what browsers fetch, not probes:
    training and calibration both see some (a model that never saw one blocked people's favicons)."""
    import random

    rng = random.Random(5)
    for split in ("train", "calib"):
        roots = {t.make(rng).target for t in site.templates(split, groups=("asset",)) for _ in range(10)}
        assert any(p.count("/") == 1 and "." in p for p in roots), split


def _text_values(record: dict) -> list[str]:
    """The decoded values of a record's query string and form or JSON body (line breaks as LF)."""
    from urllib.parse import parse_qsl, urlsplit

    values = [v for _, v in parse_qsl(urlsplit(record["path"]).query)]
    body = record["body"]
    if body and body.startswith("{"):
        values += [v for v in json.loads(body).values() if isinstance(v, str)]
    elif body:
        values += [v for _, v in parse_qsl(body)]
    return [v.replace("\r\n", "\n") for v in values]


def test_real_text_on_the_training_side_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """People's text is sometimes real text (stdtext) in training, never in attack rows, and never on the other sides:
    calibration and evaluation rows are the same whatever the real-text share (they draw no extra random numbers)."""
    from models.data import stdtext

    lines, paragraphs = stdtext.snippets()
    real = set(lines) | set(paragraphs)
    train = list(generate("train", 2500, seed=4))
    hits = Counter(r["label"] for r in train if any(v in real for v in _text_values(r)))
    assert hits["human"] >= 40 and hits["attack"] == 0, hits
    searches = [r for r in train if r["label"] == "human" and r["source"].endswith("search")]
    assert any(set(_text_values(r)) & set(lines) for r in searches)
    for r in train:  # the callers encode: no raw space or line break in a request target
        assert " " not in r["path"] and "\n" not in r["path"] and "\r" not in r["path"]
    for split in ("calib", "eval"):
        rows = list(generate(split, 800, seed=3))
        assert not any(set(_text_values(r)) & real for r in rows), split
        monkeypatch.setattr(site, "REAL_TEXT_SHARE", 1.0)
        assert list(generate(split, 800, seed=3)) == rows, split
        monkeypatch.undo()
    monkeypatch.setattr(site, "REAL_TEXT_SHARE", 1.0)
    for r in generate("train", 1500, seed=6):
        if r["label"] == "attack":
            assert not set(_text_values(r)) & real, r["source"]


def test_developer_questions_on_the_training_and_calibration_sides_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """People's hard-negative searches are sometimes developer questions (devqueries): fragments split between the
    training and calibration sides, never in attack rows, and never drawn for the held-out side, whose rows are the
    same whatever the share. No question contains a held-out hard negative."""
    from models.data import devqueries

    train, calib = set(devqueries.fragments("train")), set(devqueries.fragments("calib"))
    assert devqueries.fragments("eval") == () and train.isdisjoint(calib) and train | calib == set(devqueries.FRAGMENTS)
    assert len(calib) >= 15 and len(train) >= 5 * len(calib) // 2
    held_out = [q.lower() for q in site._side(site.HARD_QUERIES, "eval")]
    question, text = devqueries.query, site.Draw.text
    drawn: Counter[str] = Counter()

    def counted(rng: site.Draw, pool: tuple[str, ...]) -> str:
        out = text(rng, pool)
        if pool is site.HARD_QUERIES and rng.dev_questions:  # people's and bots' hard-negative searches
            drawn["question" if out.startswith("\x01") else "pool" if out in pool else "real text"] += 1
        return out

    monkeypatch.setattr(devqueries, "query", lambda rng, split: "\x01" + question(rng, split))  # marks each question drawn
    monkeypatch.setattr(site.Draw, "text", counted)
    for split in ("train", "calib"):
        drawn.clear()
        asked = Counter(r["label"] for r in generate(split, 3000, seed=8, dev_questions=0.5)
                        if any(v.startswith("\x01") for v in _text_values(r)))
        assert asked["human"] >= 10 and asked["attack"] == 0, (split, asked)
        # the share is of the hard-negative searches drawn from the pools (on the training side, after real text)
        assert 0.35 <= drawn["question"] / (drawn["question"] + drawn["pool"]) <= 0.65, (split, drawn)
        assert not any(v.startswith("\x01") for r in generate(split, 3000, seed=8) for v in _text_values(r))
    monkeypatch.undo()
    for split, own in (("train", train), ("calib", calib)):
        rng = site.Draw(5, split)
        for _ in range(3000):
            q = devqueries.query(rng, split)
            assert not any(h in q.lower() for h in held_out) and any(f in q for f in own), q
    with pytest.raises(ValueError):
        devqueries.query(site.Draw(5, "eval"), "eval")
    assert list(generate("eval", 800, seed=3)) == list(generate("eval", 800, seed=3, dev_questions=1.0))


def test_settings_leave_the_shipped_models_data_as_it_was(tmp_path: Path) -> None:
    """With both settings on, the held-out file is still the one the 1.7.0 rollback's manifest records (so its
    evaluation reads the same rows), and settings that do not apply to a split are refused."""
    from models.data.generate import main

    manifest = json.loads((Path(__file__).resolve().parents[2] / "models/repository/clef-flash/1.7.0/manifest.json").read_text())
    data = manifest["training_data"]
    assert data["eval"]["generator"].endswith("--split eval --rows 16000 --seed 7")
    assert write_jsonl(generate("eval", 16000, seed=7, dev_questions=1.0, routes=True), tmp_path / "e.jsonl")[1] == data["eval"]["sha256"]
    for wrong in (["--split", "eval", "--dev-questions", "0.5"], ["--split", "calib", "--routes"], ["--dev-questions", "1.5"],
                  ["--split", "unseen-releases", "--dev-questions", "0.5"], ["--split", "unseen-releases", "--routes"], ["--split", "unseen-protocols", "--dev-questions", "0.5"],
                  ["--split", "unseen-protocols", "--rest-writes"]):
        with pytest.raises(SystemExit) as err:
            main([*wrong, "--out", str(tmp_path / "x.jsonl")])
        assert err.value.code == 2, wrong


def test_real_text_source_is_deterministic() -> None:
    """The snippets are the same in every interpreter (sorted names, no set or hash order): same count, same first ones."""
    import subprocess
    import sys

    from models.data import stdtext

    code = ("import hashlib, json; from models.data import stdtext; l, p = stdtext.snippets(); "
            "print(json.dumps([len(l), len(p), l[:20], p[:5], hashlib.sha256(repr((l, p)).encode()).hexdigest()]))")
    root = Path(__file__).resolve().parents[2]
    # hash seeds, and what the process imported first (the training run imports torch, which patches inspect.getfile)
    preludes = [("1", ""), ("2", ""), ("1", "import torch, pytest, onnxruntime, aiohttp, gateway.pipeline; ")]
    runs = [json.loads(subprocess.run([sys.executable, "-c", prelude + code], cwd=root, env={"PYTHONHASHSEED": seed, "PATH": ""},
                                      capture_output=True, text=True, check=True).stdout) for seed, prelude in preludes]
    assert runs[0] == runs[1] == runs[2]
    lines, paragraphs = stdtext.snippets()
    assert runs[0][:4] == [len(lines), len(paragraphs), list(lines[:20]), list(paragraphs[:5])]
    assert len(lines) > 5000 and len(paragraphs) > 1000
    assert all(8 <= len(x) <= 300 and " " in x and "\n" not in x for x in lines)
    assert all(40 <= len(x) <= 1500 and "\n" in x for x in paragraphs)


def _path_words(target: str) -> set[str]:
    import re

    # hex runs (ids, hashes) are random letters, not words a template has
    return {w for w in re.split(r"[^a-z]+", target.lower()) if len(w) > 2 and not re.fullmatch(r"[a-f]+", w)}


def test_mounts_put_training_pages_under_the_directories_scanners_guess(tmp_path: Path) -> None:
    """``mounts`` draws a share of the training side's site pages (everyone's, attacks' too) under a directory sites
    mount apps at, so that a directory scanners also guess is no evidence alone; every other side, and the training
    side without it, draws as before, and no mount is a word only held-out templates have."""
    import random

    plain = list(generate("train", 2000, seed=4))
    mounted = list(generate("train", 2000, seed=4, mounts=0.3))
    for split in ("calib", "eval", "unseen-releases", "unseen-injections", "unseen-protocols"):
        assert list(generate(split, 300, seed=4, mounts=0.3)) == list(generate(split, 300, seed=4)), split
    first = {label: Counter(r["path"].split("/")[1].split("?")[0] for r in mounted if r["label"] == label) for label in CLASSES}
    under = {label: sum(c[m] for m in site.MOUNTS) for label, c in first.items()}
    assert under["human"] > 100 and under["good_bot"] > 10 and under["bad_bot"] > 40 and under["attack"] > 100, under
    assert not [r for r in plain if r["label"] == "human" and r["path"].split("/")[1] in ("blog", "admin", "wp", "cms", "public")]
    guessed = {p.strip("/") for p in attacks._PROBE_PREFIXES if p}
    assert len(guessed & set(site.MOUNTS)) >= 10, guessed & set(site.MOUNTS)
    assert not [r for r in mounted if r["path"] in {f"/{m}/robots.txt" for m in site.MOUNTS}]  # robots.txt stays at the root
    held_out: set[str] = set()
    trained: set[str] = set()
    for split, out, n in (("calib", held_out, 60), ("eval", held_out, 60), ("train", trained, 60)):
        for t in site.templates(split):
            rng = random.Random(1)
            for _ in range(n):
                out |= _path_words(t.make(rng).target)
    assert not (set(site.MOUNTS) - trained) & held_out, sorted((set(site.MOUNTS) - trained) & held_out)
    from models.data.generate import main

    for wrong in (["--split", "calib", "--mounts", "0.1"], ["--mounts", "1.0"]):
        with pytest.raises(SystemExit) as err:
            main([*wrong, "--out", str(tmp_path / "x.jsonl")])
        assert err.value.code == 2, wrong


def test_xhr_attacks_send_injections_the_way_people_send_their_writes(tmp_path: Path) -> None:
    """``xhr_attacks`` sends a share of the training side's JSON-body injections the way a page's script sends a write
    (Origin and fetch metadata, as people's ``REST_WRITES`` are), with the attack's own document and target, so that
    how a write is sent is no evidence alone; every other side, and the training side without it, is as before."""
    from models.data.generate import main

    for split in ("calib", "eval", "unseen-releases", "unseen-injections", "unseen-protocols"):
        assert list(generate(split, 300, seed=4, xhr_attacks=0.5)) == list(generate(split, 300, seed=4)), split
    rows = list(generate("train", 8000, seed=4, rest_writes=True, xhr_attacks=1.0))
    sent = [r for r in rows if "/xhr_json" in r["source"]]
    assert len(sent) > 80 and {r["label"] for r in sent} == {"attack"}
    for r in sent:
        names = {n.lower(): v for n, v in r["headers"]}
        assert r["method"] in ("POST", "PUT", "PATCH") and "origin" in names and names.get("sec-fetch-mode", "cors") == "cors", r
        assert names["content-type"] == "application/json" and isinstance(json.loads(r["body"]), dict)
    production = {p.id: p for p in attacks.productions("train")}
    assert {r["source"].split("/")[1] for r in sent} <= set(production)
    assert not [r for r in generate("train", 8000, seed=4, rest_writes=True) if "/xhr_json" in r["source"]]
    for wrong in (["--split", "calib", "--xhr-attacks", "0.1"], ["--xhr-attacks", "1.5"]):
        with pytest.raises(SystemExit) as err:
            main([*wrong, "--out", str(tmp_path / "x.jsonl")])
        assert err.value.code == 2, wrong


def test_routes_are_training_pages_that_add_no_held_out_word() -> None:
    """The URL conventions of ``site.ROUTES`` widen the training side's pages when asked for (``routes``) without
    copying a held-out shape: on the training side only, the other sides' rows the same with or without them, and
    no word of theirs new to the training side and also in a calibration or evaluation template."""
    import random

    ids = {t.id for t in site.ROUTES}
    assert ids <= {t.id for t in site.templates("train", routes=True)} and len(ids) == len(site.ROUTES)
    assert not ids & {t.id for t in site.templates("train")}
    for split in ("calib", "eval"):
        assert not ids & {t.id for t in site.templates(split, routes=True)}, split
        assert list(generate(split, 400, seed=2)) == list(generate(split, 400, seed=2, routes=True)), split
    assert not ids & {t.id for t in site.TEMPLATES + site.ACTIONS}

    def words(templates: tuple[site.Template, ...], n: int) -> set[str]:
        out: set[str] = set()
        for t in templates:
            rng = random.Random(1)
            for _ in range(n):
                out |= _path_words(t.make(rng).target)
        return out

    routes = words(site.ROUTES, 200)
    trained = words(site.templates("train"), 60)
    held_out = words(site.templates("calib") + site.templates("eval"), 60)
    assert len(routes) > 60
    assert not (routes - trained) & held_out, sorted((routes - trained) & held_out)
    rng = random.Random(3)
    for t in site.ROUTES:
        for _ in range(50):
            ep = t.make(rng)
            assert ep.method == "GET" and ep.target.startswith("/") and "#" not in ep.target and " " not in ep.target, ep
    probes = {p for _, paths in attacks.PROBE_PATHS for p in paths}
    seen = {t.make(rng).target.split("?")[0] for t in site.ROUTES for _ in range(100)}
    assert not probes & seen
    people = Counter(r["source"].split("/", 2)[2] for r in generate("train", 6000, seed=5, routes=True) if r["label"] == "human")
    assert sum(people[i] for i in ids) >= 100, people.most_common(5)
    assert not any(i in r["source"] for r in generate("train", 3000, seed=5) for i in ids)
