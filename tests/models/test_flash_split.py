"""The shipped default Clef-flash (two questions, two inputs, feature version 2) under the runtime, and rollback to 1.7.0."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gateway import features as feat
from gateway.decider import manifest as mf
from gateway.decider.onnx import CLIENT_CACHE, DEFAULT_REPOSITORY, OnnxOptions, OnnxScorer, _KeptAnswers, describe
from gateway.tools import evaluate
from gateway.verdict import attack_probability, bot_probability, class_probabilities
from tests.conftest import make_features
from tests.gateway.test_features import CHROME_HEAD

DEFAULT = "2.1.0"
ROLLBACK = "1.7.0"
PEOPLE_CASES = Path(__file__).resolve().parents[1] / "data" / "people_cases.jsonl"
SQLI = "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--"
SQLMAP_HEAD = [("Host", "shop.example.com"), ("User-Agent", "sqlmap/1.8.3#stable (https://sqlmap.org)"), ("Accept", "*/*"),
               ("Connection", "close")]


@pytest.fixture(scope="module")
def scorer() -> OnnxScorer:
    return OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1))


def test_the_default_is_the_two_question_version_with_every_file() -> None:
    directory = mf.resolve(DEFAULT_REPOSITORY, "clef-flash")
    m = mf.load(directory, feature_version=feat.FEATURE_VERSION, feature_fingerprint=feat.FEATURE_FINGERPRINT,
                require=("fp32", "int8", "fp16"), name="clef-flash")
    assert (m.version, m.channel, m.feature_version) == (DEFAULT, "stable", "2")
    assert [q.id for q in m.questions] == ["payload", "attack_kind", "client"]
    assert {i.name for i in m.inputs} == set(feat.INPUT_NAMES[feat.FEATURE_VERSION])
    for precision in ("fp32", "int8", "fp16"):
        m.verify_file(precision)
        m.verify_file(precision, "client_files")
        assert m.path(precision).stat().st_size + m.path(precision, "client_files").stat().st_size <= 10 * 1024 * 1024
    assert m.metrics["parity"]["fp32"] <= 1e-4 and m.metrics["parity"]["int8"] <= 0.05
    for question in ("payload", "client"):
        assert m.metrics["eval"][question]["rows"] >= 1000 and m.metrics["eval"][question]["ece"] <= 0.05
    assert m.training_data["train"]["sha256"] and m.training_data["generator"]


def test_exactly_one_earlier_version_stays_loadable_for_rollback() -> None:
    old = OnnxScorer(OnnxOptions(providers=("cpu",), version=ROLLBACK, warmup_runs=1))
    assert (old.feature_version, list(old.questions)) == (feat.V1_VERSION, ["class", "attack_kind"])
    sqli = make_features("GET", SQLI, headers=SQLMAP_HEAD)
    (p,) = old.run_batch([sqli])
    assert p["class"]["attack"] > 0.95 and attack_probability(p) == p["class"]["attack"]
    assert describe(old)["feature_version"] == "1"


def test_each_half_is_a_graph_of_its_own(scorer: OnnxScorer) -> None:
    assert scorer.two_inputs and scorer.client_session is not None
    assert [i.name for i in scorer.session.get_inputs()] == ["ids", "numeric"]
    assert [i.name for i in scorer.client_session.get_inputs()] == ["client_ids", "client_numeric"]
    assert [o.name for o in scorer.client_session.get_outputs()] == ["client_logits"]
    assert describe(scorer)["questions"] == {"payload": ["benign", "attack"],
                                             "attack_kind": ["sqli", "xss", "traversal", "cmdi", "probe", "other"],
                                             "client": ["human", "good_bot", "bad_bot"]}


def test_what_is_asked_does_not_depend_on_who_asks(scorer: OnnxScorer) -> None:
    # the browser's own headers (its Referer and Cookie carry data: the payload half reads those)
    browser = [(n, v) for n, v in CHROME_HEAD if n.lower() not in ("referer", "cookie")]
    from_browser = make_features("GET", SQLI, headers=browser)
    from_sqlmap = make_features("GET", SQLI, headers=SQLMAP_HEAD)
    page = make_features("GET", "/products/linen-shirt-123?color=blue", headers=browser)
    (p_browser,), (p_sqlmap,), (p_page,) = (scorer.run_batch([f]) for f in (from_browser, from_sqlmap, page))
    assert p_browser["payload"] == pytest.approx(p_sqlmap["payload"], abs=1e-9)
    assert p_browser["payload"]["attack"] > 0.9  # 0.950 as shipped: with the injection rule it corroborates a block
    assert p_page["payload"]["benign"] > 0.9 and p_page["client"]["human"] > 0.5
    assert p_browser["client"] == pytest.approx(p_page["client"], abs=1e-9)  # one client, one answer
    assert bot_probability(p_sqlmap) > bot_probability(p_page)
    for p in (p_browser, p_sqlmap, p_page):
        derived = class_probabilities(p)
        assert sum(derived.values()) == pytest.approx(1.0) and derived["attack"] == p["payload"]["attack"]


def test_a_clients_answer_is_kept_and_its_page_assets_share_it(scorer: OnnxScorer) -> None:
    assets = [make_features("GET", f"/static/{name}", headers=[*CHROME_HEAD, ("Referer", "https://shop.example.com/")])
              for name in ("app.css", "app.js", "logo.svg", "font.woff2", "hero.webp")]
    before = {r: CLIENT_CACHE.values.get((r,), 0.0) for r in ("hit", "miss")}
    first = scorer.run_batch(assets[:1])
    rest = scorer.run_batch(assets[1:])
    hits = CLIENT_CACHE.values.get(("hit",), 0.0) - before["hit"]
    misses = CLIENT_CACHE.values.get(("miss",), 0.0) - before["miss"]
    assert (hits, misses) in ((4.0, 1.0), (5.0, 0.0))  # the first may be answered from an earlier test's run
    assert all(p["client"] == first[0]["client"] for p in rest)
    uncached = OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1, client_cache_ttl_s=0.0))
    again = uncached.run_batch(assets)
    assert len(uncached.client_answers) == 0
    assert np.allclose([p["client"]["human"] for p in again], first[0]["client"]["human"], atol=1e-6)


def test_kept_client_answers_expire_and_are_bounded() -> None:
    answers = _KeptAnswers(ttl_s=10.0, maxsize=2)
    one = np.array([0.9, 0.05, 0.05])
    answers.put(b"a", one, now=100.0)
    assert answers.get(b"a", now=109.0) is one
    assert answers.get(b"a", now=110.5) is None and len(answers) == 0
    for key in (b"a", b"b", b"c"):
        answers.put(key, one, now=200.0)
    assert len(answers) == 2 and answers.get(b"a", now=200.0) is None
    off = _KeptAnswers(ttl_s=0.0, maxsize=10)
    off.put(b"a", one, now=1.0)
    assert len(off) == 0


def test_precisions_agree(scorer: OnnxScorer) -> None:
    records = [json.loads(line) for line in PEOPLE_CASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    features = [feat.from_record(r) for r in records] + [make_features("GET", SQLI, headers=h) for h in (CHROME_HEAD, SQLMAP_HEAD)]
    assert scorer.precision == "fp32"  # the manifest's "prefer": the CPU runs fp32 (within budget, and batch-independent)
    int8 = OnnxScorer(OnnxOptions(providers=("cpu",), variant="int8", warmup_runs=1))
    a, b = int8.probabilities(int8.model_inputs(features)), scorer.probabilities(scorer.model_inputs(features))
    for question in ("payload", "client"):
        assert np.abs(a[question] - b[question]).max() <= 0.05, question


def test_eval_reads_the_two_questions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate.main(["--data", str(PEOPLE_CASES), "--json", "--model-version", DEFAULT]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 18 and out["model"] == f"clef-flash@{DEFAULT}"
    assert 0.0 <= out["ece"] <= 1.0 and out["labels"]["human"] == 18
