"""The clef serving runtime (gateway/clef.py) with the real shipped model and real onnxruntime sessions."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from gateway import clef, metrics
from gateway.clef import (
    Answer,
    ModelLoadError,
    Question,
    QuestionError,
    QuestionSet,
    StateTooLongError,
    ZeroShotModel,
    candidate_question_set,
    humanize,
    hypothesis_text,
    label_question_set,
    render_features,
)
from gateway.decider import int8probe

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "repository" / "clef" / "1"

ANOMALY = Question("anomaly", criteria="the log shows an error, a crash or a failure", type="bool")
SEVERITY = Question("severity", ("normal_operation", "system_failure"), "state of the service")
DECISIVE = "FATAL: the database crashed and every request now fails with a connection refused error."


@pytest.fixture(scope="module")
def model() -> ZeroShotModel:
    return ZeroShotModel.load(SHIPPED, device="cpu", threads=1)


def _long_log(decisive_at: int, lines: int = 36) -> str:
    rows = [f"12:{i // 60:02d}:{i % 60:02d} INFO request {1000 + i} served in {10 + i % 7} ms" for i in range(lines)]
    rows.insert(decisive_at, DECISIVE)
    return "\n".join(rows)


def test_loads_the_shipped_model_on_the_cpu_with_int8(model: ZeroShotModel) -> None:
    info = model.describe()
    assert info["provider"] == "CPUExecutionProvider"
    assert info["precision"] == "int8"
    assert info["family"] == "clef"
    assert model.manifest["feature_version"] == clef.TEXT_VERSION
    assert metrics.REGISTRY.instruments["clefgate_clef_model_info"].get(model.version, "CPUExecutionProvider", "int8") == 1.0
    # int8 products are exact on CPUs without VNNI too: the setting is there exactly where the probe finds the default
    # kernel wrong (tests/gateway/test_flash_runtime.py)
    assert (int8probe.session_entry(model.session) == "1") == (not int8probe.default_kernel_exact())


def test_choice_probabilities_sum_to_one_and_name_every_option(model: ZeroShotModel) -> None:
    q = Question("weather", ("sunny", "rainy", "snowy"), "what the weather is like")
    (answers,) = model.answer([QuestionSet("It is pouring and everyone carries an umbrella.", (q,))])
    (a,) = answers
    assert set(a.probabilities) == {"sunny", "rainy", "snowy"}
    assert math.isclose(sum(a.probabilities.values()), 1.0, abs_tol=1e-5)
    assert a.top_option == "rainy"
    assert a.confidence == pytest.approx(max(a.probabilities.values()))


def test_bool_questions_answer_true_or_false(model: ZeroShotModel) -> None:
    items = [QuestionSet(DECISIVE, (ANOMALY,)), QuestionSet("12:00:01 INFO request 7 served in 12 ms", (ANOMALY,))]
    (bad,), (good,) = model.answer(items)
    for a in (bad, good):
        assert isinstance(a.top_option, bool)
        assert set(a.probabilities) == {"true", "false"}
        assert math.isclose(a.probabilities["true"] + a.probabilities["false"], 1.0, abs_tol=1e-6)
    assert bad.top_option is True
    assert good.top_option is False


@pytest.mark.parametrize("question", [ANOMALY, SEVERITY], ids=["bool", "choice"])
def test_decisive_sentence_counts_alike_at_start_middle_and_end_of_a_long_state(model: ZeroShotModel, question: Question) -> None:
    states = [_long_log(0), _long_log(18), _long_log(36)]
    assert all(len(model.segmenter.windows(s)) >= 4 for s in states)  # really longer than one window
    answers = [a[0] for a in model.answer([QuestionSet(s, (question,)) for s in states])]
    expected = True if question.type == "bool" else "system_failure"
    assert [a.top_option for a in answers] == [expected] * 3
    confidences = [a.confidence for a in answers]
    assert max(confidences) - min(confidences) < 0.1
    for a in answers:
        assert DECISIVE in a.evidence[0].text  # the window that drove it is the one with the sentence


def test_without_the_decisive_sentence_the_long_log_is_normal(model: ZeroShotModel) -> None:
    plain = "\n".join(_long_log(0).split("\n")[1:])
    ((a,),) = model.answer([QuestionSet(plain, (ANOMALY,))])
    assert a.top_option is False


def test_option_embeddings_are_cached_per_distinct_question() -> None:
    m = ZeroShotModel.load(SHIPPED, device="cpu", cache_size=2, warmup=False)
    lookups = metrics.REGISTRY.instruments["clefgate_clef_question_cache_lookups_total"]
    hits, misses = lookups.get("hit"), lookups.get("miss")
    q1 = Question("a", ("yes", "no"), "is it cold")
    item = QuestionSet("It is freezing outside.", (q1,))
    first = m.answer([item])
    assert (lookups.get("hit") - hits, lookups.get("miss") - misses) == (0, 1)
    again = m.answer([item, QuestionSet("Another state entirely.", (Question("b", ("yes", "no"), "is it cold"),))])
    # the same options and criteria under another id share the cached embeddings
    assert (lookups.get("hit") - hits, lookups.get("miss") - misses) == (2, 1)
    assert again[0][0].probabilities == pytest.approx(first[0][0].probabilities, abs=1e-6)
    m.answer([QuestionSet("x", (Question("c", ("yes", "no"), "is it warm"), Question("d", ("up", "down"), "direction")))])
    assert m.cache_info()["entries"] == 2  # bounded: the oldest question was evicted
    assert metrics.REGISTRY.instruments["clefgate_clef_question_cache_entries"].get() == 2


def test_batching_does_not_change_answers(model: ZeroShotModel) -> None:
    a = QuestionSet("The kettle is boiling and the toast is burning.", (SEVERITY, ANOMALY))
    b = QuestionSet(_long_log(5), (ANOMALY,))
    together = model.answer([a, b])
    alone = model.answer([a]) + model.answer([b])
    for x, y in zip(together, alone, strict=True):
        for ax, ay in zip(x, y, strict=True):
            assert ax.top_option == ay.top_option
            assert ax.probabilities == pytest.approx(ay.probabilities, abs=1e-4)


def test_input_shape_reports_the_sentences_that_drove_the_label(model: ZeroShotModel) -> None:
    text = "The client sent a normal request. It then tried five passwords in ten seconds from a known botnet range. The weather is nice."
    (decision,) = model.classify([text], ["forward", "challenge", "block"])
    assert decision.top_option in ("forward", "challenge", "block")
    assert math.isclose(sum(decision.probabilities.values()), 1.0, abs_tol=1e-5)
    assert 1 <= len(decision.evidence) <= 3
    sentences = {"The client sent a normal request.", "It then tried five passwords in ten seconds from a known botnet range.",
                 "The weather is nice."}
    assert all(e.text in sentences for e in decision.evidence)
    assert all(text[e.start:e.end] == e.text for e in decision.evidence)
    weights = [e.weight for e in decision.evidence]
    assert weights == sorted(weights, reverse=True)


def test_candidates_shape_renders_features_and_answers_one_of_the_candidates(model: ZeroShotModel) -> None:
    feats = {"text_length": 128, "has_url": True, "sender_reputation": 0.82}
    (a,) = model.decide([("content_moderation", feats, ["allow", "review", "block"])])
    assert a.id == "content_moderation"
    assert a.top_option in ("allow", "review", "block")
    # the rendering is order-independent, so the same dict in another order answers identically
    (b,) = model.decide([("content_moderation", dict(reversed(list(feats.items()))), ["allow", "review", "block"])])
    assert b.probabilities == pytest.approx(a.probabilities, abs=1e-6)


def test_a_state_longer_than_the_window_limit_is_refused() -> None:
    m = ZeroShotModel.load(SHIPPED, device="cpu", max_windows=2, warmup=False)
    with pytest.raises(StateTooLongError) as err:
        m.answer([QuestionSet(_long_log(3), (ANOMALY,))])
    assert err.value.limit == 2 and err.value.windows > 2
    # max_tokens caps what is read instead
    ((a,),) = m.answer([QuestionSet(_long_log(3), (ANOMALY,), max_tokens=100)])
    assert isinstance(a, Answer)


@pytest.mark.parametrize("kwargs,message", [
    ({"id": "q", "options": ("only",)}, "at least 2 options"),
    ({"id": "q", "options": ("a", "a")}, "distinct"),
    ({"id": "q", "options": ("a", " ")}, "non-empty"),
    ({"id": "", "type": "bool"}, "needs criteria"),
    ({"id": "q", "type": "multi"}, "type must be"),
])
def test_malformed_questions_are_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(QuestionError, match=message):
        Question(**kwargs)  # type: ignore[arg-type]


def test_a_manifest_for_another_text_version_is_refused(tmp_path: Path) -> None:
    for f in SHIPPED.iterdir():
        if f.name != "manifest.json":
            (tmp_path / f.name).symlink_to(f)
    manifest = json.loads((SHIPPED / "manifest.json").read_text())
    manifest["feature_version"] = "clef-text-0"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelLoadError, match=r"clef-text-0.*clef-text-1"):
        ZeroShotModel.load(tmp_path, device="cpu")


def test_missing_encoder_file_names_the_export_command(tmp_path: Path) -> None:
    for name in ("manifest.json", "tokenizer.json", "head.npz"):
        shutil.copyfile(SHIPPED / name, tmp_path / name)
    with pytest.raises(ModelLoadError, match="no encoder file"):
        ZeroShotModel.load(tmp_path, device="cpu", precision="fp32")


def test_a_corrupted_encoder_file_is_refused(tmp_path: Path) -> None:
    for name in ("manifest.json", "tokenizer.json", "head.npz"):
        shutil.copyfile(SHIPPED / name, tmp_path / name)
    data = (SHIPPED / "encoder.int8.onnx").read_bytes()
    (tmp_path / "encoder.int8.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="does not match the manifest"):
        ZeroShotModel.load(tmp_path, device="cpu")


# ---- text forms (no model needed)

@pytest.mark.parametrize("label,words", [("P0_Critical", "P0 critical"), ("cancelSubscription", "cancel subscription"),
                                         ("re-inspect", "re inspect"), ("BLOCK", "block"), ("hip hop", "hip hop")])
def test_humanize(label: str, words: str) -> None:
    assert humanize(label) == words


def test_hypothesis_text() -> None:
    assert hypothesis_text("how urgent", "P1_High") == "how urgent: P1 high"
    assert hypothesis_text("", "P1_High") == "P1 high"
    assert hypothesis_text("  is it   raining ", None) == "is it raining"


def test_render_features_is_sorted_and_typed() -> None:
    text = render_features({"sender_reputation": 0.8249, "has_url": True, "text_length": 128, "tags": ["a", "b"],
                            "meta": {"lang": "en", "score": None}})
    assert text.split("\n") == ["has url: yes", "meta lang: en", "meta score: none", "sender reputation: 0.8249", "tags: a, b",
                                "text length: 128"]


def test_shape_helpers_build_question_sets() -> None:
    qs = label_question_set("five failed logins", max_tokens=64)
    assert qs.questions[0].options == clef.DEFAULT_LABELS and qs.sentence_evidence and qs.max_tokens == 64
    cs = candidate_question_set("content_moderation", {"b": 1, "a": False}, ["allow", "block"])
    assert cs.state == "a: no\nb: 1"
    assert cs.questions[0].criteria == "content moderation"


def test_segmenter_keeps_sentences_whole_and_windows_bounded(model: ZeroShotModel) -> None:
    seg = model.segmenter
    text = " ".join(f"Sentence number {i} talks about item {i} in some detail." for i in range(40))
    windows = seg.windows(text)
    assert len(windows) > 1
    assert all(len(w.ids) <= model.window_tokens - 2 for w in windows)
    for w in windows:
        piece = text[w.start:w.end]
        assert piece.startswith("Sentence number") and piece.endswith("detail.")
    one_long = "word " * 400
    chunks = seg.windows(one_long)
    assert len(chunks) >= 4 and all(len(c.ids) <= model.window_tokens - 2 for c in chunks)
    assert seg.windows("") and seg.windows("")[0].ids == ()


def test_clef_versions_resolve_as_clef_flash_does(tmp_path: Path) -> None:
    """The decision API's model is found by the same rule: an unknown version names those present, opt-in ones need a name."""
    from gateway.config import ClefConfig
    from gateway.decider import manifest as mf
    from gateway.jev import ClefRuntime

    with pytest.raises(mf.ManifestError, match=r"model 'clef' version '9\.9' not found .*available: 1\)"):
        ClefRuntime.load(ClefConfig(enabled=True, version="9.9"))
    shipped = mf.resolve(Path(__file__).resolve().parents[2] / "models" / "repository", "clef")
    repo = tmp_path / "repo"
    (repo / "clef").mkdir(parents=True)
    manifest = json.loads((shipped / mf.MANIFEST_FILE).read_text())
    (repo / "clef" / "2").mkdir()
    (repo / "clef" / "2" / mf.MANIFEST_FILE).write_text(json.dumps({**manifest, "version": "2", "channel": "opt-in"}))
    with pytest.raises(mf.ManifestError, match="2 is opt-in; name its version in the config"):
        ClefRuntime.load(ClefConfig(enabled=True, repository=str(repo)))
    (repo / "clef" / "2" / mf.MANIFEST_FILE).write_text(json.dumps({**manifest, "version": "2", "channel": "beta"}))
    with pytest.raises(clef.ModelLoadError, match="channel 'beta' is not one of stable, opt-in"):
        ClefRuntime.load(ClefConfig(enabled=True, repository=str(repo)))  # an unknown channel counts as stable, then is refused
