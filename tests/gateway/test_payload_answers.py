"""The payload half's kept answers (``OnnxScorer.payload_answers``): a flood's identical payloads run the payload half once.

A kept answer must be the very answer the payload half computed for that input (questions and familiarity), keyed
by exactly what the half reads, so that no decision changes; the decider keeps them only with its decision cache on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from gateway import features as feat
from gateway.decider.onnx import PAYLOAD_CACHE, OnnxOptions, OnnxScorer, _KeptAnswers, payload_key
from gateway.features import ClientStats
from gateway.verdict import FAMILIARITY
from tests.conftest import make_features
from tests.gateway.test_features import CHROME_HEAD

# a browser's head without the headers whose values the payload half reads (Referer, Cookie)
BROWSER_HEAD = [(n, v) for n, v in CHROME_HEAD if n.lower() not in ("referer", "cookie")]
BOT_HEAD = [("Host", "shop.example.com"), ("User-Agent", "python-requests/2.32"), ("Accept", "*/*")]


@pytest.fixture(scope="module")
def kept() -> OnnxScorer:
    """A scorer keeping payload answers (and, as shipped, client answers)."""
    return OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1, payload_cache_ttl_s=600.0))


@pytest.fixture(scope="module")
def plain() -> OnnxScorer:
    """A scorer that runs both halves for every row (nothing kept)."""
    return OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1, client_cache_ttl_s=0.0))


def _flood(ip: str, target: str = "/shop", head: list[tuple[str, str]] = BOT_HEAD, **client: Any) -> feat.ModelInput:
    """One flood request from its own address and window: the payload is the target's alone."""
    features = make_features("GET", target, headers=head, client_ip=ip)
    return feat.split_input(dataclasses.replace(features, client=ClientStats(**client)))


def test_kept_answers_expire_and_are_bounded() -> None:
    answers = _KeptAnswers(ttl_s=10.0, maxsize=2)
    one = (np.array([0.9, 0.1]), None)
    answers.put(b"a", one, now=100.0)
    assert answers.get(b"a", now=109.0) is one  # a hit
    assert answers.get(b"b", now=109.0) is None  # a miss
    assert answers.get(b"a", now=110.5) is None and len(answers) == 0  # expired, and dropped
    for key in (b"a", b"b", b"c"):
        answers.put(key, one, now=200.0)
    assert len(answers) == 2 and answers.get(b"a", now=200.0) is None  # the oldest went first
    assert answers.get(b"c", now=200.0) is one


def test_the_key_is_what_the_payload_half_reads_and_never_the_client() -> None:
    base = _flood("198.51.100.1")
    other_client = _flood("203.0.113.9", head=BROWSER_HEAD, requests=40, rate_per_min=300.0)
    assert base.client_text != other_client.client_text and base.client_numeric != other_client.client_numeric
    assert payload_key(base) == payload_key(other_client)
    one_byte = _flood("198.51.100.1", "/shoq")
    assert not np.array_equal(one_byte.ids, base.ids)
    assert payload_key(one_byte) != payload_key(base)
    # the numeric vector at full precision: a value the model reads differently is another key, however close
    nudged = dataclasses.replace(base, numeric=(base.numeric[0] + 1e-12, *base.numeric[1:]))
    assert payload_key(nudged) != payload_key(base)


def test_a_kept_answer_is_the_one_an_uncached_run_gives(kept: OnnxScorer, plain: OnnxScorer) -> None:
    targets = ("/", "/search?q=lamp", "/shop", "/forum?id=1%27%20OR%201=1--")
    for n, target in enumerate(targets):
        first = _flood(f"198.51.100.{n}", target)
        again = _flood(f"192.0.2.{n}", target, requests=3, rate_per_min=9.0)  # the same payload from another client
        assert payload_key(first) == payload_key(again)
        (fresh,) = plain.run_inputs([first])
        assert kept.run_inputs([first]) == [fresh]  # computed (or kept from a run of this very input alone)
        (from_kept,) = kept.run_inputs([again])
        (expected,) = plain.run_inputs([again])
        assert from_kept == expected  # the payload answer kept, the client's computed: both as an uncached run
        assert set(from_kept) == {"payload", "attack_kind", "client", FAMILIARITY}
    assert kept.payload_answers is not None and len(kept.payload_answers) >= len(targets)


def test_runs_of_kept_payloads_count_hits_and_run_no_payload_half(kept: OnnxScorer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    warm = _flood("198.51.100.200", "/shop/lamp-3")
    kept.run_inputs([warm])
    grouped: list[int] = []
    real = kept._payload_groups

    def spy(inputs: Any) -> Any:
        grouped.append(len(inputs))
        return real(inputs)
    monkeypatch.setattr(kept, "_payload_groups", spy)
    flood = [_flood(f"203.0.113.{i}", "/shop/lamp-3", requests=i) for i in range(1, 9)]
    answers = kept.run_inputs(flood)
    assert grouped == []  # every row's payload was kept: only the client half ran
    assert all(a["payload"] == answers[0]["payload"] and a[FAMILIARITY] == answers[0][FAMILIARITY] for a in answers)
    monkeypatch.undo()
    assert kept.payload_answers is not None and kept.payload_answers.get(payload_key(warm), 0.0) is not None


def test_a_batch_of_kept_new_and_repeated_payloads(kept: OnnxScorer, plain: OnnxScorer) -> None:
    kept.run_inputs([_flood("198.51.100.77", "/c/men?page=2")])
    long_target = "/search?q=" + "linen+shirt+" * 30
    rows = [_flood("198.51.100.78", "/c/men?page=2"), _flood("198.51.100.79", long_target),
            _flood("198.51.100.80", "/a.css"), _flood("198.51.100.81", long_target), _flood("198.51.100.82", "/c/men?page=2")]
    got = kept.probabilities(rows)
    expected = plain.probabilities(rows)  # every row run, in one batch
    for question in expected:
        assert got[question].shape == expected[question].shape and got[question].dtype == np.float64
        assert np.allclose(got[question], expected[question], atol=1e-6), question
    assert np.array_equal(got["payload"][1], got["payload"][3]) and np.array_equal(got["payload"][0], got["payload"][4])
    first = {q: got[q].copy() for q in got}
    got["payload"][:] = 0.0  # a caller's edit does not reach the kept answers
    again = kept.probabilities(rows[::-1])  # every payload kept now, each row's own
    for question in ("payload", "attack_kind", FAMILIARITY):
        assert np.array_equal(again[question], first[question][::-1]), question


def test_the_counts(kept: OnnxScorer) -> None:
    before = {r: PAYLOAD_CACHE.values.get((r,), 0.0) for r in ("hit", "miss")}
    new = _flood("198.51.100.90", "/counted-once")
    kept.run_inputs([new, _flood("198.51.100.91", "/counted-once")])  # one payload: one miss, run once
    kept.run_inputs([_flood("198.51.100.92", "/counted-once")])
    assert PAYLOAD_CACHE.values.get(("miss",), 0.0) - before["miss"] == 1.0
    assert PAYLOAD_CACHE.values.get(("hit",), 0.0) - before["hit"] == 1.0


def test_off_by_default_and_turned_on_with_the_decision_cache(plain: OnnxScorer) -> None:
    from gateway import config as configmod
    from gateway.decider import PAYLOAD_ANSWERS_MAX, load

    assert plain.payload_answers is None  # eval and the benchmarks run every row

    def cfg(decider: dict[str, Any]) -> Any:
        return configmod.validate({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}},
                                   "model": {"enabled": True, "providers": ["cpu"]}, "decider": decider})

    on = load(cfg({"cache_ttl_s": 30.0}))
    assert on is not None and on.model.payload_answers is not None
    assert (on.model.payload_answers.ttl_s, on.model.payload_answers.maxsize) == (30.0, min(100_000, PAYLOAD_ANSWERS_MAX))
    off = load(cfg({"cache_size": 0}), on)  # the same model, reloaded without the decision cache
    assert off is not None and off.model is on.model and on.model.payload_answers is None
    on.close(successor=off)
    off.close()
