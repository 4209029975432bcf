"""Decider layers with fault-injecting models: batching, deadline + breaker, cache, stage, no leaks."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import math
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gateway.decider.batching import BatchingScorer
from gateway.decider.breaker import CLOSED, HALF_OPEN, OPEN, BreakerScorer, CircuitBreaker
from gateway.decider.cache import CachedScorer
from gateway.decider.scoring import BreakerOpen, InvalidOutput, ModelError, ModelOverloaded, ModelTimeout, Scored
from gateway.decider.stage import ModelStage
from gateway.features import Features, ModelInput, model_input
from gateway.verdict import Action, Probabilities, ScoreRequest, Source, Verdict
from tests.conftest import make_features

QUESTIONS = {"class": ("human", "good_bot", "bad_bot", "attack")}


def probs_for(item: ModelInput) -> Probabilities:
    bad = 0.9 if "attack" in item.text else 0.05
    rest = (1.0 - bad) / 3
    return {"class": {"human": rest, "good_bot": rest, "bad_bot": rest, "attack": bad}}


class FakeModel:
    """A BatchModel whose behaviour per call is scripted: ok, raise, hang, nan, short, slow."""

    label = "fake@1"

    def __init__(self, behaviour: str = "ok", delay: float = 0.0) -> None:
        self.behaviour = behaviour
        self.delay = delay
        self.batches: list[int] = []
        self.release = threading.Event()
        self.calls = 0
        self.threads: list[str] = []  # the thread each run ran in
        self.busy_s = 0.0  # CPU seconds each run computes (a slower model)

    def run_inputs(self, batch: list[ModelInput]) -> list[Probabilities]:
        self.calls += 1
        self.batches.append(len(batch))
        self.threads.append(threading.current_thread().name)
        began = time.thread_time()
        while time.thread_time() - began < self.busy_s:
            pass
        behaviour = self.behaviour
        if behaviour == "sometimes_slow":
            behaviour = "hang" if self.calls % 3 == 0 else "ok"
        if any("poison" in item.text for item in batch):
            raise RuntimeError("poisoned batch")
        if behaviour == "raise":
            raise RuntimeError("model exploded")
        if behaviour == "hang":
            self.release.wait(30)
        if self.delay:
            self.release.wait(self.delay)
        out = [probs_for(f) for f in batch]
        if behaviour == "nan":
            out[0] = {"class": {"human": math.nan, "good_bot": 0.0, "bad_bot": 0.0, "attack": 1.0}}
        if behaviour == "short":
            out = out[:-1]
        if behaviour == "wrong_options":
            out = [{"class": {"yes": 1.0}} for _ in batch]
        if behaviour == "not_a_mapping":
            out = [[0.25, 0.25, 0.25, 0.25] for _ in batch]
        return out


@pytest.fixture
def executor():
    ex = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-model")
    yield ex
    ex.shutdown(wait=False, cancel_futures=True)


def batching(model: FakeModel, executor: ThreadPoolExecutor, **kw: Any) -> BatchingScorer:
    return BatchingScorer(model, executor, questions=QUESTIONS, **{"max_batch": 8, "max_wait_us": 2000, **kw})


async def test_concurrent_calls_share_one_run(executor) -> None:
    model = FakeModel()
    scorer = batching(model, executor)
    results = await asyncio.gather(*(scorer.score(mi(target=f"/p{i}")) for i in range(8)))
    assert model.batches == [8]
    assert all(r.source is Source.MODEL and r.model == "fake@1" for r in results)
    assert scorer.queued == 0


async def test_a_batcher_whose_threads_are_shut_down_fails_its_callers_and_counts_them_out() -> None:
    """A replaced runtime's threads are shut down; a call that still reaches its batcher gets a model error
    (its fallback applies) at once, and the queue count does not creep up towards max_queue."""
    dead = ThreadPoolExecutor(max_workers=1)
    dead.shutdown()
    scorer = batching(FakeModel(), dead)
    for _ in range(3):
        with pytest.raises(ModelError, match="shut down"):
            await asyncio.wait_for(scorer.score(mi(target="/p")), 1.0)
    assert scorer.queued == 0


async def test_a_fast_models_tiny_batches_run_on_the_event_loop_once_measured(executor) -> None:
    """Nothing runs on the event loop before a run was measured; then lone calls do, with the same answers, while a
    batch larger than inline_rows still goes to the thread."""
    model = FakeModel()
    scorer = batching(model, executor, max_wait_us=0, inline_rows=2, inline_budget_us=50_000)
    loop_thread = threading.current_thread().name
    first = await scorer.score(mi(target="/a"))
    assert model.threads == ["test-model_0"]
    second = await scorer.score(mi(target="/a"))
    assert model.threads[-1] == loop_thread
    assert second == first and second.probabilities == probs_for(mi(target="/a"))
    results = await asyncio.gather(*(scorer.score(mi(target=f"/p{i}")) for i in range(8)))
    assert model.batches[-1] == 8 and model.threads[-1] == "test-model_0"
    assert [r.probabilities for r in results] == [probs_for(mi(target=f"/p{i}")) for i in range(8)]
    assert scorer.queued == 0


async def test_a_run_over_the_inline_budget_sends_the_next_batches_to_the_thread(executor) -> None:
    model = FakeModel()
    scorer = batching(model, executor, max_wait_us=0, inline_rows=4, inline_budget_us=2000)
    loop_thread = threading.current_thread().name
    await scorer.score(mi(target="/a"))  # measured in the thread: fast
    await scorer.score(mi(target="/b"))
    assert model.threads == ["test-model_0", loop_thread]
    model.busy_s = 0.02  # ten times the budget: this inline run is the last one
    await scorer.score(mi(target="/c"))
    await scorer.score(mi(target="/d"))
    assert model.threads[2:] == [loop_thread, "test-model_0"]
    assert not scorer.runs_inline(1)


async def test_inline_runs_fail_like_thread_runs(executor) -> None:
    """A failing or invalid inline run fails only its callers, with the errors a thread's run gives."""
    model = FakeModel()
    scorer = batching(model, executor, max_wait_us=0, inline_rows=4, inline_budget_us=50_000)
    await scorer.score(mi(target="/warm"))
    with pytest.raises(ModelError, match="poisoned batch"):
        await scorer.score(mi(target="/poison"))
    model.behaviour = "nan"
    with pytest.raises(InvalidOutput):
        await scorer.score(mi(target="/x"))
    model.behaviour = "ok"
    assert (await scorer.score(mi(target="/y"))).probabilities == probs_for(mi(target="/y"))
    assert model.threads[1:] == [threading.current_thread().name] * 3
    assert scorer.queued == 0


async def test_a_closed_batcher_fails_its_callers_even_inline(executor) -> None:
    """A replaced runtime's batcher (Decider.close) runs nothing more, on the event loop either."""
    model = FakeModel()
    scorer = batching(model, executor, max_wait_us=0, inline_rows=4, inline_budget_us=50_000)
    await scorer.score(mi(target="/a"))
    assert scorer.runs_inline(1)
    scorer.close()
    with pytest.raises(ModelError, match="shut down"):
        await scorer.score(mi(target="/b"))
    assert model.calls == 1 and scorer.queued == 0


async def test_batches_grow_under_load_but_respect_max_batch(executor) -> None:
    model = FakeModel(delay=0.05)
    scorer = batching(model, executor, max_batch=16, max_wait_us=0)
    results = await asyncio.gather(*(scorer.score(mi(target=f"/p{i}")) for i in range(40)))
    assert len(results) == 40
    assert max(model.batches) <= 16
    assert sum(model.batches) == 40
    assert len(model.batches) < 40  # calls piled up while a run was busy went together


async def test_failed_batch_fails_only_its_callers(executor) -> None:
    model = FakeModel()
    scorer = batching(model, executor, max_batch=2)
    calls = [scorer.score(mi(target=p)) for p in ("/poison", "/a", "/b", "/c")]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(results[0], ModelError) and isinstance(results[1], ModelError)
    assert isinstance(results[2], Scored) and isinstance(results[3], Scored)


@pytest.mark.parametrize("behaviour", ["nan", "short", "wrong_options", "not_a_mapping"])
async def test_invalid_outputs_are_refused(executor, behaviour: str) -> None:
    scorer = batching(FakeModel(behaviour), executor, max_batch=1)
    with pytest.raises(InvalidOutput):
        await scorer.score(mi())
    # every caller of a batch gets its answer (an error here), none waits for its deadline
    scorer = batching(FakeModel(behaviour), executor, max_batch=4)
    results = await asyncio.wait_for(asyncio.gather(*(scorer.score(mi(target=f"/{i}")) for i in range(4)), return_exceptions=True), 5)
    assert all(isinstance(r, Scored | ModelError) for r in results) and any(isinstance(r, ModelError) for r in results)
    assert scorer.queued == 0


async def test_queue_bound_sheds_load(executor) -> None:
    model = FakeModel("hang")
    scorer = batching(model, executor, max_batch=1, max_queue=3)
    waiting = [asyncio.ensure_future(scorer.score(mi(target=f"/{i}"))) for i in range(3)]
    await asyncio.sleep(0.01)
    with pytest.raises(ModelOverloaded):
        await scorer.score(mi())
    model.release.set()
    await asyncio.gather(*waiting)


def test_breaker_state_machine() -> None:
    now = [0.0]
    b = CircuitBreaker("m", failure_threshold=3, window_s=10, cooldown_s=5, half_open_probes=2, clock=lambda: now[0])
    for _ in range(2):
        assert b.allow()
        b.failure()
    assert b.state == CLOSED
    now[0] = 11.0  # the first two failures leave the window
    b.failure()
    assert b.state == CLOSED
    b.failure()
    b.failure()
    assert b.state == OPEN
    assert not b.allow()
    now[0] = 16.5
    assert b.allow() and b.state == HALF_OPEN
    assert not b.allow()  # one trial at a time
    b.success()
    assert b.allow()
    b.success()
    assert b.state == CLOSED
    # a failed trial opens it again
    for _ in range(3):
        b.failure()
    now[0] = 30.0
    assert b.allow() and b.state == HALF_OPEN
    b.failure()
    assert b.state == OPEN and not b.allow()


async def test_hanging_model_gets_a_deadline_and_opens_the_breaker(executor) -> None:
    model = FakeModel("hang")
    breaker = CircuitBreaker("hang@1", failure_threshold=2, cooldown_s=60)
    scorer = BreakerScorer(batching(model, executor, max_batch=1), breaker, timeout_s=0.05)
    loop = asyncio.get_running_loop()
    for _ in range(2):
        began = loop.time()
        with pytest.raises(ModelTimeout):
            await scorer.score(mi())
        # correctness bound, not a speed check: without the deadline this call never returns
        assert loop.time() - began < 5.0
    assert breaker.state == OPEN
    calls_before = model.calls
    with pytest.raises(BreakerOpen):
        await scorer.score(mi())
    assert model.calls == calls_before  # open: the model is not called at all
    model.release.set()


async def test_breaker_recovers_through_half_open(executor) -> None:
    now = [0.0]
    model = FakeModel("raise")
    breaker = CircuitBreaker("r@1", failure_threshold=2, cooldown_s=5, half_open_probes=2, clock=lambda: now[0])
    scorer = BreakerScorer(batching(model, executor, max_batch=1), breaker, timeout_s=1.0)
    for _ in range(2):
        with pytest.raises(ModelError):
            await scorer.score(mi())
    assert breaker.state == OPEN
    model.behaviour = "ok"
    now[0] = 6.0
    await scorer.score(mi())
    assert breaker.state == HALF_OPEN
    await scorer.score(mi())
    assert breaker.state == CLOSED


async def test_sometimes_slow_model_only_costs_the_slow_calls(executor) -> None:
    model = FakeModel("sometimes_slow")
    breaker = CircuitBreaker("s@1", failure_threshold=100)
    scorer = BreakerScorer(batching(model, executor, max_batch=1, max_wait_us=0), breaker, timeout_s=0.05)
    outcomes = []
    for i in range(6):
        try:
            await scorer.score(mi(target=f"/{i}"))
            outcomes.append("ok")
        except ModelTimeout:
            outcomes.append("timeout")
            model.release.set()  # let the stuck thread go so the next call runs
            await asyncio.sleep(0.01)
            model.release.clear()
    assert outcomes.count("timeout") >= 1 and outcomes.count("ok") >= 3


class CountingScorer:
    """A scorer that answers after ``delay_s`` (30 s: a stuck model run); counts its calls."""

    def __init__(self, delay_s: float = 0.01) -> None:
        self.calls = 0
        self.delay_s = delay_s

    async def score(self, item: ModelInput) -> Scored:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return Scored(probs_for(item), model="count@1")


class FailingScorer:
    async def score(self, item: ModelInput) -> Scored:
        await asyncio.sleep(0.01)
        raise ModelError("model exploded")


def mi(**kw: object) -> ModelInput:
    """The model input of a request built by make_features."""
    return model_input(make_features(**kw))  # type: ignore[arg-type]


def key(item: ModelInput) -> str:
    return item.text


async def test_cache_hits_misses_and_single_flight() -> None:
    inner = CountingScorer()
    cache = CachedScorer(inner, key, ttl_s=60, maxsize=10)
    first = await asyncio.gather(*(cache.score(mi(target="/same")) for _ in range(5)))
    assert inner.calls == 1
    assert first[0].source is Source.MODEL and all(r.source is Source.CACHE for r in first[1:])
    again = await cache.score(mi(target="/same", request_id="other-id"))
    assert again.source is Source.CACHE and inner.calls == 1
    await cache.score(mi(target="/different"))
    assert inner.calls == 2


async def test_a_caller_who_goes_away_leaves_the_shared_model_call_to_those_waiting_on_it() -> None:
    """The proxy cancels a decision whose client hung up. Identical requests coalesced onto it must still get the
    model's answer: a fallback there (forward, by default) would let the second of two identical attacks through."""
    inner = CountingScorer()
    cache = CachedScorer(inner, key, ttl_s=60, maxsize=10)
    first = asyncio.ensure_future(cache.score(mi(target="/?id=1%20UNION%20SELECT%20password")))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(cache.score(mi(target="/?id=1%20UNION%20SELECT%20password")))
    await asyncio.sleep(0)
    first.cancel()
    answer = await second
    assert first.cancelled() and answer.probabilities == probs_for(mi(target="/?id=1%20UNION%20SELECT%20password"))
    assert inner.calls == 2  # the cancelled call, and the one the cache made for the caller left waiting
    # and the answer is cached for the next one
    assert (await cache.score(mi(target="/?id=1%20UNION%20SELECT%20password"))).source is Source.CACHE and inner.calls == 2
    # a first caller that goes away with nobody waiting costs no second call
    alone = asyncio.ensure_future(cache.score(mi(target="/only-me")))
    await asyncio.sleep(0)
    alone.cancel()
    await asyncio.sleep(0.05)
    assert inner.calls == 3 and len(cache) == 1
    # a failing shared call still fails every caller, and nothing is cached
    failing = CachedScorer(FailingScorer(), key, ttl_s=60, maxsize=10)
    calls = [asyncio.ensure_future(failing.score(mi(target="/x"))) for _ in range(2)]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ModelError) for r in results) and len(failing) == 0


async def test_cache_is_bounded_and_expires() -> None:
    now = [0.0]
    inner = CountingScorer()
    cache = CachedScorer(inner, key, ttl_s=10, maxsize=3, timer=lambda: now[0])
    for i in range(5):
        await cache.score(mi(target=f"/{i}"))
    assert len(cache) == 3
    now[0] = 11.0
    await cache.score(mi(target="/4"))
    assert inner.calls == 6  # expired entry scored again


class FakePolicy:
    def verdict(self, features: Features, probabilities: Probabilities, request: ScoreRequest, *,
                source: Source = Source.MODEL, explanation: tuple[str, ...] = ()) -> Verdict:
        p = probabilities["class"]["attack"]
        action = Action.BLOCK if p > 0.5 else Action.FORWARD
        return Verdict(action, source, f"P(attack)={p:.2f}", probabilities=probabilities, rule=request.rule, explanation=explanation)

    def fallback_verdict(self, features: Features, request: ScoreRequest, mode: str) -> Verdict:
        action = {"forward": Action.FORWARD, "challenge": Action.CHALLENGE, "rules-only": Action.FORWARD}[mode]
        return Verdict(action, Source.FALLBACK, f"fallback {mode}", rule=request.rule)


@pytest.mark.parametrize("mode,action", [("forward", Action.FORWARD), ("challenge", Action.CHALLENGE)])
async def test_stage_turns_every_failure_into_the_configured_fallback(executor, mode: str, action: Action) -> None:
    model = FakeModel("raise")
    scorer = BreakerScorer(batching(model, executor, max_batch=1), CircuitBreaker("x@1", failure_threshold=1000), 0.5)
    stage = ModelStage(scorer, FakePolicy(), fallback=mode, model_label="x@1")
    verdict = await stage.decide(make_features(), ScoreRequest(rule="score-rest"))
    assert verdict.action is action
    assert verdict.source is Source.FALLBACK
    assert "model unavailable: error" in verdict.reason
    assert verdict.rule == "score-rest"


async def test_stage_marks_cached_decisions(executor) -> None:
    scorer = CachedScorer(BatchingScorer(FakeModel(), executor, questions=QUESTIONS), key)
    stage = ModelStage(scorer, FakePolicy(), model_label="fake@1")
    first = await stage.decide(make_features(target="/attack"), ScoreRequest())
    second = await stage.decide(make_features(target="/attack"), ScoreRequest())
    assert first.action is Action.BLOCK and first.source is Source.MODEL
    assert second.action is Action.BLOCK and second.source is Source.CACHE
    assert first.model == "fake@1" and first.decision_ms is not None


async def test_ten_thousand_requests_leak_nothing(executor) -> None:
    """Every request gets a verdict under mixed faults; tasks, threads and memory stay flat."""
    model = FakeModel("ok")
    breaker = CircuitBreaker("leak@1", failure_threshold=5, cooldown_s=0.05, half_open_probes=1)
    scorer = CachedScorer(BreakerScorer(batching(model, executor, max_batch=64, max_wait_us=200), breaker, 0.2), key, maxsize=256)
    stage = ModelStage(scorer, FakePolicy(), fallback="forward", model_label="leak@1")

    async def wave(start: int, n: int) -> list[Verdict]:
        return await asyncio.gather(*(stage.decide(make_features(target=f"/{'poison' if i % 97 == 0 else 'p'}{i % 500}"),
                                                   ScoreRequest()) for i in range(start, start + n)))

    # Traced from the warm-up on: bounded caches (decision cache, encodings) replace entries allocated before
    # tracing with traced ones, which read as ~2 MB of growth until every entry has turned over once.
    tracemalloc.start()
    try:
        await wave(0, 1000)
        await wave(100_000, 1000)
        gc.collect()
        before_mem = tracemalloc.get_traced_memory()[0]
        before_tasks = len(asyncio.all_tasks())
        before_threads = threading.active_count()
        total = 0
        for w in range(9):
            verdicts = await wave(1000 + w * 1000, 1000)
            total += len(verdicts)
            assert all(isinstance(v, Verdict) for v in verdicts)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before_mem
    finally:
        tracemalloc.stop()
    assert total == 9000
    assert len(asyncio.all_tasks()) <= before_tasks
    assert threading.active_count() <= before_threads
    # measured ~9 KB; a leak of ~120 bytes or more a decision (1 MiB / 9,000) fails
    assert grown < 1024 * 1024, f"memory grew by {grown} bytes over 9000 decisions"


def test_request_key_ignores_volatile_values_and_buckets_client_statistics() -> None:
    from gateway.decider.cache import request_key
    from gateway.features import ClientStats

    base = make_features(target="/shop?x=1", request_id="a")
    assert request_key(base) == request_key(make_features(target="/shop?x=1", request_id="b", received_at=123.0))
    assert request_key(base) != request_key(make_features(target="/shop?x=2"))
    assert request_key(base) != request_key(make_features(target="/shop?x=1", method="POST"))
    calm = make_features(target="/shop?x=1", client=ClientStats(requests=10, rate_per_min=5.0))
    assert request_key(calm) == request_key(make_features(target="/shop?x=1", client=ClientStats(requests=12, rate_per_min=6.0)))
    assert request_key(calm) != request_key(make_features(target="/shop?x=1", client=ClientStats(requests=10, rate_per_min=400.0)))


async def test_stage_answers_repeats_from_the_request_level_without_serializing(executor, monkeypatch) -> None:
    import gateway.decider.stage as stage_mod

    model = FakeModel()
    cache = CachedScorer(BatchingScorer(model, executor, questions=QUESTIONS))
    stage = ModelStage(cache, FakePolicy(), model_label="fake@1", cache=cache, explain=lambda item, probs: ("why",))
    first = await stage.decide(make_features(target="/attack"), ScoreRequest())
    calls = []
    monkeypatch.setattr(stage_mod, "model_input", lambda f: calls.append(f))
    second = await stage.decide(make_features(target="/attack", request_id="again"), ScoreRequest())
    assert calls == [] and model.calls == 1
    assert first.source is Source.MODEL and second.source is Source.CACHE
    assert "why" in first.explanation and "why" in second.explanation


def test_request_key_takes_only_the_length_of_infrastructure_headers() -> None:
    """A flood from many addresses, each request with its own id, is one repeated request to the model."""
    from gateway.decider.cache import request_key

    def flood(address: str, request_id: str, extra: tuple[tuple[str, str], ...] = ()) -> Features:
        return make_features(target="/shop", headers=[("Host", "shop.example"), ("User-Agent", "curl/8.5"),
                                                      ("X-Forwarded-For", address), ("X-Request-Id", request_id), *extra])

    a, b = flood("198.51.100.7", "sim.1"), flood("203.0.113.99", "sim.2")
    assert request_key(a) == request_key(b)
    assert model_input(a).text == model_input(b).text and model_input(a).numeric == model_input(b).numeric
    # the value's length reaches the model (header bytes), so it stays in the key
    longer = flood("198.51.100.107", "sim.1")
    assert request_key(a) != request_key(longer)
    # other headers' values are the request itself
    assert request_key(a) != request_key(flood("198.51.100.7", "sim.1", (("X-Api-Version", "1"),)))
    assert request_key(flood("198.51.100.7", "sim.1", (("X-Api-Version", "1"),))) != \
        request_key(flood("198.51.100.7", "sim.1", (("X-Api-Version", "2"),)))


async def test_a_reload_candidate_with_the_same_model_shares_the_cache_but_not_the_running_chain() -> None:
    """A reload builds the new decider before it knows the whole config is good. The running runtime's cache must
    keep asking its own chain, so that a rejected reload (whose decider is thrown away) leaves it serving."""
    from gateway import config as configmod
    from gateway.decider import load

    def cfg(threads: int, timeout_ms: int) -> Any:
        return configmod.validate({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}},
                                   "model": {"enabled": True, "providers": ["cpu"]},
                                   "decider": {"inference_threads": threads, "timeout_ms": timeout_ms}})

    running = load(cfg(1, 800))
    assert running is not None and running.cache is not None
    chain = running.cache.inner
    answer = await running.scorer.score(running.model.model_input(make_features(target="/shop")))
    candidate = load(cfg(2, 1), running)
    assert candidate is not None and candidate.cache is not None
    assert running.cache.inner is chain and candidate.cache.inner is not chain
    assert len(candidate.cache) == len(running.cache) == 1  # the same model's answers stay valid for both
    candidate.close(successor=running)  # rejected: its own threads go, the shared model stays
    again = await running.scorer.score(running.model.model_input(make_features(target="/search?q=shoes")))
    assert again.source is Source.MODEL and answer.source is Source.MODEL
    assert running.breaker.state == CLOSED
    running.close()


def test_request_key_tells_a_payload_in_a_header_from_the_same_bytes_in_a_chunked_body() -> None:
    """The model reads these two differently; one must not be answered with the other's cached decision."""
    from gateway.decider.cache import request_key
    from gateway.features import ClientStats

    def chunked(note: str, body: bytes, **kw: Any) -> Features:
        f = make_features(method="POST", target="/api/search", body=body, headers=[
            ("Host", "shop.example"), ("Transfer-Encoding", "chunked"), ("X-Note", note)], **kw)
        return dataclasses.replace(f, content_length=None, chunked=True)

    in_header, in_body = chunked("q=' OR 1=1--", b""), chunked("q=", b"' OR 1=1--")
    assert model_input(in_header).text != model_input(in_body).text
    assert request_key(in_header) != request_key(in_body)
    # nor can a body run into the client window's part of the key
    window = ClientStats(requests=3)
    assert request_key(chunked("q=", b"x|2 0 0 0 0 0")) != request_key(chunked("q=", b"x", client=window))
    assert request_key(chunked("q=", b"x", client=window)) == request_key(chunked("q=", b"x", client=window))


def test_request_key_reads_the_client_window_given_or_the_features_own() -> None:
    from gateway.decider.cache import request_key
    from gateway.features import ClientStats

    busy = ClientStats(requests=500, rate_per_min=900.0)
    plain = make_features(target="/x")
    assert request_key(plain, busy) == request_key(make_features(target="/x", client=busy))
    assert request_key(plain, None) == request_key(plain) != request_key(plain, busy)


def test_stage_answers_a_known_request_synchronously(executor) -> None:
    model = FakeModel()
    cache = CachedScorer(BatchingScorer(model, executor, questions=QUESTIONS))
    stage = ModelStage(cache, FakePolicy(), model_label="fake@1", cache=cache)
    features = make_features(target="/attack")
    assert stage.decide_cached(features, ScoreRequest(rule="r"), None) is None  # unknown: the caller awaits decide()
    first = asyncio.run(stage.decide(features, ScoreRequest(rule="r")))
    again = stage.decide_cached(make_features(target="/attack", request_id="again"), ScoreRequest(rule="r"), None)
    assert isinstance(again, Verdict) and model.calls == 1
    assert again.action is first.action is Action.BLOCK and again.source is Source.CACHE
    assert again.rule == "r" and again.model == "fake@1" and again.decision_ms is not None and again.model_input is None
    assert again.probabilities == first.probabilities
    # no cache level: nothing to answer synchronously
    assert ModelStage(cache, FakePolicy()).decide_cached(features, ScoreRequest(), None) is None


def sync_chain(model: FakeModel, executor: ThreadPoolExecutor, *, cached: bool = True,
               breaker: CircuitBreaker | None = None) -> tuple[ModelStage, BatchingScorer]:
    """The decider's chain with a batcher that runs lone calls on the event loop, and the stage reading it."""
    batcher = batching(model, executor, max_wait_us=0, inline_rows=4, inline_budget_us=50_000)
    guarded = BreakerScorer(batcher, breaker or CircuitBreaker("fake@1", failure_threshold=1000), 0.5)
    scorer = CachedScorer(guarded) if cached else guarded
    stage = ModelStage(scorer, FakePolicy(), fallback="challenge", model_label="fake@1",
                       cache=scorer if isinstance(scorer, CachedScorer) else None, ready=batcher.runs_at_once)
    return stage, batcher


@pytest.mark.parametrize("cached", [True, False])
async def test_stage_scores_an_unseen_request_synchronously_once_the_model_runs_inline(executor, cached: bool) -> None:
    """Before a run was measured an unseen request waits for decide(); then one is scored within decide_cached, with the
    verdict decide() gives, the model input kept for the decision log, and its repeat answered from the cache."""
    model = FakeModel()
    stage, batcher = sync_chain(model, executor, cached=cached)
    features = make_features(target="/attack/1")
    assert stage.decide_cached(features, ScoreRequest(rule="r"), None) is None  # nothing measured: await decide()
    reference = await stage.decide(features, ScoreRequest(rule="r"))
    assert batcher.runs_at_once()
    fresh = make_features(target="/attack/2")
    sync = stage.decide_cached(fresh, ScoreRequest(rule="r"), None)
    assert isinstance(sync, Verdict) and model.threads[-1] == threading.current_thread().name
    assert sync.action is reference.action is Action.BLOCK and sync.source is Source.MODEL and sync.rule == "r"
    expected = model_input(fresh)
    assert sync.model == "fake@1" and sync.probabilities == probs_for(expected)
    assert sync.model_input is not None and (sync.model_input.text, tuple(sync.model_input.numeric)) == (expected.text, tuple(expected.numeric))
    again = stage.decide_cached(make_features(target="/attack/2", request_id="again"), ScoreRequest(rule="r"), None)
    assert isinstance(again, Verdict)
    if cached:
        assert again.source is Source.CACHE and model.calls == 2
    else:
        assert again.source is Source.MODEL and model.calls == 3


async def test_stage_scores_synchronously_with_the_clients_window() -> None:
    from gateway.features import ClientStats

    seen: list[ModelInput] = []
    model = FakeModel()
    real = model.run_inputs
    model.run_inputs = lambda batch: (seen.extend(batch), real(batch))[1]  # type: ignore[method-assign]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-model") as ex:
        stage, _ = sync_chain(model, ex)
        await stage.decide(make_features(target="/warm"), ScoreRequest())
        busy = ClientStats(requests=500, rate_per_min=900.0)
        assert stage.decide_cached(make_features(target="/x"), ScoreRequest(), busy) is not None
    expected = model_input(make_features(target="/x", client=busy))
    assert (seen[-1].text, tuple(seen[-1].numeric)) == (expected.text, tuple(expected.numeric))
    assert tuple(seen[-1].numeric) != tuple(model_input(make_features(target="/x")).numeric)


async def test_a_failure_in_the_synchronous_path_is_the_fallback_and_counts_for_the_breaker(executor) -> None:
    model = FakeModel()
    breaker = CircuitBreaker("fake@1", failure_threshold=2, cooldown_s=60)
    stage, batcher = sync_chain(model, executor, breaker=breaker)
    await stage.decide(make_features(target="/warm"), ScoreRequest())
    model.behaviour = "raise"
    verdict = stage.decide_cached(make_features(target="/a"), ScoreRequest(rule="r"), None)
    assert isinstance(verdict, Verdict) and verdict.source is Source.FALLBACK and verdict.action is Action.CHALLENGE
    assert "model unavailable: error" in verdict.reason and verdict.rule == "r"
    model.behaviour = "nan"
    verdict = stage.decide_cached(make_features(target="/b"), ScoreRequest(), None)
    assert isinstance(verdict, Verdict) and "model unavailable: invalid" in verdict.reason
    assert breaker.state == OPEN
    # an open breaker is decide()'s to handle: nothing is answered synchronously, and decide() falls back at once
    assert stage.decide_cached(make_features(target="/c"), ScoreRequest(), None) is None
    calls = model.calls
    assert (await stage.decide(make_features(target="/c"), ScoreRequest())).source is Source.FALLBACK
    assert model.calls == calls and batcher.queued == 0


async def test_a_busy_batcher_leaves_new_requests_to_decide(executor) -> None:
    """While a call waits or a run is under way, another request joins the batching (decide), never jumps the queue."""
    model = FakeModel()
    stage, batcher = sync_chain(model, executor)
    await stage.decide(make_features(target="/warm"), ScoreRequest())
    model.delay = 5.0
    batcher.inline_rows = 0  # the next run goes to the thread and stays there until released
    waiting = asyncio.ensure_future(stage.decide(make_features(target="/slow"), ScoreRequest()))
    await asyncio.sleep(0.01)
    batcher.inline_rows = 4
    assert not batcher.runs_at_once()
    assert stage.decide_cached(make_features(target="/other"), ScoreRequest(), None) is None
    model.release.set()
    assert (await waiting).source is Source.MODEL


def test_with_decision_is_dataclasses_replace() -> None:
    import dataclasses

    from gateway.decider.stage import with_decision

    full = Verdict(Action.CHALLENGE, Source.SHADOW, "why", probabilities={"class": {"human": 1.0}}, backend="api", rule="r", status=403,
                   difficulty=16, explanation=("a", "b"), policy="default", shadow_action=Action.BLOCK, headers=(("X", "1"),),
                   model="old@1", decision_ms=9.0)
    item = model_input(make_features())
    made = with_decision(full, "m@1", 0.25, item)
    assert made == dataclasses.replace(full, model="m@1", decision_ms=0.25, model_input=item) and made.model_input is item
    assert full.model == "old@1" and full.decision_ms == 9.0  # the original is untouched
    assert all(getattr(made, f.name) is getattr(full, f.name) for f in dataclasses.fields(Verdict)
               if f.name not in ("model", "decision_ms", "model_input"))


def test_request_level_is_bounded_oldest_first_and_expires() -> None:
    now = [0.0]
    cache = CachedScorer(CountingScorer(), key, ttl_s=10, maxsize=3, timer=lambda: now[0])
    answer = Scored({"class": {"human": 1.0}}, source=Source.CACHE)
    for k in (b"a", b"b", b"c"):
        cache.put_request(k, answer)
    cache.put_request(b"a", answer)  # refreshed: now the newest
    cache.put_request(b"d", answer)  # full: the oldest (b) goes
    assert cache.get_request(b"b") is None and cache.get_request(b"a") is answer and len(cache.requests) == 3
    now[0] = 10.0
    assert cache.get_request(b"a") is None and len(cache.requests) == 2  # expired entries are dropped when met


# ---- reloads: what a new runtime takes over from the running one (a toy model repository, one model name per test so
# the process-wide metric series of one test are not another's)

def toy_repository(root: Path, name: str, versions: tuple[str, ...]) -> Path:
    """A model repository with a tiny Clef-flash-shaped ONNX graph per version (flags a quote in the text as an attack)."""
    from tests.model_support import write_quote_model

    for version in versions:
        write_quote_model(root, name, version, w_quote=(-4.0, 0.0, 0.0, 8.0), b_kind=(0.0,) * 6)
    return root


def toy_config(repo: Path, name: str, model: dict[str, Any] | None = None, decider: dict[str, Any] | None = None) -> Any:
    from gateway import config as configmod

    return configmod.validate({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}},
                               "model": {"enabled": True, "repository": str(repo), "name": name, "providers": ["cpu"],
                                         **(model or {})},
                               "decider": {**(decider or {})}})


def test_a_reload_with_version_latest_loads_the_newer_version_added_since(tmp_path: Path) -> None:
    from gateway.decider import load

    repo = toy_repository(tmp_path, "toy-latest", ("1.0.0",))
    first = load(toy_config(repo, "toy-latest"))
    assert first is not None and first.label == "toy-latest@1.0.0"
    toy_repository(tmp_path, "toy-latest", ("2.0.0",))
    second = load(toy_config(repo, "toy-latest"), first)  # the same words, "latest", now name another version
    assert second is not None and second.label == "toy-latest@2.0.0" and second.model is not first.model
    assert second.cache is not first.cache  # the old version's answers are not the new one's
    first.close(successor=second)
    # "latest" and the version it stands for are one model: the loaded session and its cache are kept
    third = load(toy_config(repo, "toy-latest", {"version": "2.0.0"}), second)
    assert third is not None and third.model is second.model and third.cache is not None and second.cache is not None
    assert third.cache.cache is second.cache.cache
    second.close(successor=third)
    third.close()


def test_closing_a_model_leaves_the_loaded_series_of_another_that_serves_the_same_version(tmp_path: Path) -> None:
    from gateway.decider import load
    from gateway.decider.onnx import LOADED

    repo = toy_repository(tmp_path, "toy-loaded", ("1.0.0",))
    series = ("toy-loaded@1.0.0", "cpu", "fp32")
    running = load(toy_config(repo, "toy-loaded"))
    assert running is not None and LOADED.values.get(series) == 1.0
    # the same version loaded anew for other session options, swapped in; the old one is closed after the swap
    swapped = load(toy_config(repo, "toy-loaded", {"intra_op_threads": 2}), running)
    assert swapped is not None and swapped.model is not running.model
    running.close(successor=swapped)
    assert LOADED.values.get(series) == 1.0
    # a candidate loaded the same way and rejected (closed with the running one as successor) takes nothing either
    rejected = load(toy_config(repo, "toy-loaded", {"graph_optimization": "basic"}), swapped)
    assert rejected is not None and rejected.model is not swapped.model
    rejected.close(successor=swapped)
    rejected.model.close()  # a second close is a no-op, not another release
    assert LOADED.values.get(series) == 1.0
    swapped.close()
    assert series not in LOADED.values  # the last one closed takes its series along


def test_a_reload_keeps_an_open_breaker_and_a_candidate_leaves_the_running_breakers_gauge(tmp_path: Path) -> None:
    from gateway.decider import load
    from gateway.decider.breaker import BREAKER_STATE

    repo = toy_repository(tmp_path, "toy-breaker", ("1.0.0",))
    label = ("toy-breaker@1.0.0",)
    running = load(toy_config(repo, "toy-breaker"))
    assert running is not None and BREAKER_STATE.values.get(label) == 0.0  # a model's first breaker shows at once
    for _ in range(running.settings.failure_threshold):
        running.breaker.failure()
    assert running.breaker.state == OPEN and BREAKER_STATE.values.get(label) == 2.0
    # a reload with the same model and breaker settings (here another deadline) keeps the breaker as it is
    kept = load(toy_config(repo, "toy-breaker", decider={"timeout_ms": 500}), running)
    assert kept is not None and kept.breaker is running.breaker and kept.breaker.state == OPEN
    running.close(successor=kept)
    # a candidate with other breaker settings gets a breaker of its own, which does not touch the gauge until it serves
    rejected = load(toy_config(repo, "toy-breaker", decider={"failure_threshold": 9}), kept)
    assert rejected is not None and rejected.breaker is not kept.breaker and rejected.breaker.state == CLOSED
    assert BREAKER_STATE.values.get(label) == 2.0
    rejected.close(successor=kept)  # rejected: the running breaker's state stays the gauge
    assert BREAKER_STATE.values.get(label) == 2.0
    swapped = load(toy_config(repo, "toy-breaker", decider={"failure_threshold": 9}), kept)
    assert swapped is not None
    kept.close(successor=swapped)  # swapped in: its (closed) state is the gauge now
    assert BREAKER_STATE.values.get(label) == 0.0
    swapped.close()


async def test_a_call_made_again_for_waiting_callers_ends_by_their_own_deadline() -> None:
    """The first caller of a shared call goes away late in its deadline: the call the cache makes again for those
    waiting gets only what is left of the earliest waiting caller's deadline, not a second full one."""
    inner = CountingScorer(delay_s=30)
    deadline = 0.5
    cache = CachedScorer(BreakerScorer(inner, CircuitBreaker("hang-fill@1", failure_threshold=100), deadline), key)
    assert cache.deadline_s == deadline  # the breaker's deadline, read from the chain
    loop = asyncio.get_running_loop()
    first = asyncio.ensure_future(cache.score(mi(target="/stuck")))
    await asyncio.sleep(0.05)
    joined = loop.time()
    second = asyncio.ensure_future(cache.score(mi(target="/stuck")))
    await asyncio.sleep(0.35)
    first.cancel()  # its client hung up 0.4 s into the 0.5 s deadline
    with pytest.raises(ModelTimeout):
        await second
    waited = loop.time() - joined
    # its own deadline ends 0.5 s after it joined; a fresh full deadline from the cancellation would end at 0.85 s
    assert waited < deadline + 0.15, f"the waiting caller got its answer after {waited:.2f} s"
    assert inner.calls == 2 and len(cache) == 0


async def test_only_the_trial_moves_a_half_open_breaker() -> None:
    """A slow call let through while the breaker was closed answers while the half-open trial is out: its outcome is
    not the trial's, so it neither closes the breaker nor frees the trial slot for a second trial."""
    from gateway.decider.breaker import guarded

    now = [0.0]
    breaker = CircuitBreaker("trial@1", failure_threshold=1, window_s=10, cooldown_s=5, half_open_probes=1, clock=lambda: now[0])
    old_answer, trial_answer = asyncio.Event(), asyncio.Event()

    async def answer_when(event: asyncio.Event) -> int:
        await event.wait()
        return 1

    async def broken() -> int:
        raise RuntimeError("model exploded")

    slow = asyncio.ensure_future(guarded(breaker, 5.0, lambda: answer_when(old_answer)))  # admitted while closed
    await asyncio.sleep(0)
    with pytest.raises(ModelError):
        await guarded(breaker, 5.0, broken)
    assert breaker.state == OPEN
    now[0] = 6.0
    trial = asyncio.ensure_future(guarded(breaker, 5.0, lambda: answer_when(trial_answer)))
    await asyncio.sleep(0)
    assert breaker.state == HALF_OPEN
    old_answer.set()
    assert await slow == 1
    assert breaker.state == HALF_OPEN  # the trial has not answered yet
    with pytest.raises(BreakerOpen):
        await guarded(breaker, 5.0, broken)  # and it is still the only trial
    trial_answer.set()
    assert await trial == 1 and breaker.state == CLOSED
    # tickets by hand: a failure of a call admitted before the last opening is not counted in the new closed period
    stale = breaker.allow()
    with pytest.raises(ModelError):
        await guarded(breaker, 5.0, broken)
    now[0] = 12.0
    fresh = breaker.allow()
    assert breaker.state == HALF_OPEN and fresh and not breaker.allow()
    breaker.release(stale)  # not the trial's ticket: the slot stays taken
    breaker.failure(stale)
    assert breaker.state == HALF_OPEN and not breaker.allow()
    breaker.success(fresh)
    breaker.failure(stale)
    assert breaker.state == CLOSED


def test_request_key_tells_the_same_request_to_another_host_apart() -> None:
    """The model reads the host (a Referer to the same host or another); in absolute form (GET http://a.example/x)
    it comes from the target, not from the Host header."""
    from gateway.decider.cache import request_key

    same = make_features(target="/x", headers=[("Host", "shop.example"), ("User-Agent", "Mozilla/5.0"),
                                               ("Referer", "http://shop.example/cart")])
    other = dataclasses.replace(same, host="other.example")
    assert model_input(same).text != model_input(other).text
    assert request_key(same) != request_key(other)
