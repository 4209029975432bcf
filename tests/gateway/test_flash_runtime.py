"""The shipped Clef-flash model under the runtime: loads, answers sensibly, stays within budget."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from gateway import features as feat
from gateway.config import PolicyConfig
from gateway.decider import int8probe, policy_notes
from gateway.decider import manifest as mf
from gateway.decider.int8probe import EXACT_INT8_ENTRY
from gateway.decider.onnx import DEFAULT_REPOSITORY, OnnxOptions, OnnxScorer, describe
from gateway.tools import evaluate
from models.data.generate import generate, write_jsonl
from tests.conftest import make_features
from tests.gateway.test_features import CHROME_HEAD

# The earlier version kept beside the default for rollback: one question (class), feature version 1. The default
# (two questions, feature version 2) is tested in tests/models/test_flash_split.py and tests/models/test_invariance.py.
ROLLBACK = "1.7.0"


@pytest.fixture(scope="module")
def scorer() -> OnnxScorer:
    return OnnxScorer(OnnxOptions(providers=("cpu",), version=ROLLBACK))


def risk(p: dict[str, dict[str, float]]) -> float:
    return p["class"]["bad_bot"] + p["class"]["attack"]


def test_the_rollback_version_is_complete() -> None:
    directory = mf.resolve(DEFAULT_REPOSITORY, "clef-flash", ROLLBACK)
    m = mf.load(directory, feature_version=feat.V1_VERSION, feature_fingerprint=feat.V1_FINGERPRINT,
                require=("fp32", "int8", "fp16"), name="clef-flash")
    for precision in ("fp32", "int8", "fp16"):
        m.verify_file(precision)
        assert m.path(precision).stat().st_size <= 10 * 1024 * 1024
    assert (directory / "reliability.png").is_file()
    assert m.metrics["eval"]["class"]["n"] >= 10000
    assert m.raw["parity"]["fp32"]["max_abs_prob_diff"] <= 1e-4
    assert m.raw["parity"]["int8"]["class_agreement"] >= 0.98


def test_the_rollback_version_is_two_narrow_members_read_at_the_default_policy() -> None:
    """1.7.0: 'latest', stable, two one-layer members of width 96, each file under 10 MB, and the policy it was read with
    held out is the gateway's default (no note)."""
    directory = mf.resolve(DEFAULT_REPOSITORY, "clef-flash", ROLLBACK)
    m = mf.load(directory, feature_version=feat.V1_VERSION, feature_fingerprint=feat.V1_FINGERPRINT,
                require=("fp32", "int8", "fp16"), name="clef-flash")
    assert (m.version, m.channel, m.raw["architecture"]["members"]) == ("1.7.0", "stable", 2)
    assert (m.raw["architecture"]["width"], m.raw["architecture"]["layers"]) == (96, 1)
    for precision in ("fp32", "int8", "fp16"):
        m.verify_file(precision)
        assert m.path(precision).stat().st_size <= 10 * 1024 * 1024
    assert m.raw["parity"]["int8"]["class_agreement"] >= 0.98 and m.raw["parity"]["fp32"]["max_abs_prob_diff"] <= 1e-4
    assert m.policy == {"challenge_risk": 0.5} and policy_notes(m, PolicyConfig()) == ()
    # another policy is allowed, and said
    assert policy_notes(m, PolicyConfig(challenge_risk=0.6)) == ("policy.challenge_risk is 0.6, but clef-flash@1.7.0 was evaluated "
                                                                 "with 0.5 (its model card's figures hold at that value)",)


def test_loads_on_cpu_with_int8_by_default(scorer: OnnxScorer) -> None:
    info = describe(scorer)
    assert (info["provider"], info["precision"], info["onnxruntime_provider"]) == ("cpu", "int8", "CPUExecutionProvider")
    assert info["questions"]["class"] == ["human", "good_bot", "bad_bot", "attack"]


def test_cuda_first_falls_back_to_cpu_without_a_gpu() -> None:
    s = OnnxScorer(OnnxOptions())  # providers cuda, cpu
    if "CUDAExecutionProvider" in s.session.get_providers():
        assert (s.provider, s.precision) == ("cuda", "fp16")
    else:  # the file the default version prefers on the CPU (2.1.0: fp32), int8 without a preference
        assert (s.provider, s.precision) == ("cpu", s.manifest.raw.get("prefer", {}).get("cpu", "int8"))


def test_answers_on_typical_requests(scorer: OnnxScorer) -> None:
    browser = make_features("GET", "/products/linen-shirt-123?color=blue", headers=CHROME_HEAD)
    sqli = make_features("GET", "/products?id=1%27%20UNION%20SELECT%20username,password%20FROM%20users--",
                         headers=[("Host", "shop.example.com"), ("User-Agent", "sqlmap/1.8.3#stable (https://sqlmap.org)"),
                                  ("Accept", "*/*"), ("Connection", "close")])
    scraper = make_features("GET", "/c/men?page=17&sort=price_asc",
                            headers=[("Host", "shop.example.com"), ("User-Agent", "python-requests/2.31.0"),
                                     ("Accept-Encoding", "gzip, deflate"), ("Accept", "*/*"), ("Connection", "keep-alive")])
    git = make_features("GET", "/alice/clefgate.git/info/refs?service=git-upload-pack",
                        headers=[("Host", "git.example.org"), ("User-Agent", "git/2.43.0"), ("Accept", "*/*"),
                                 ("Accept-Encoding", "deflate, gzip, br, zstd"), ("Pragma", "no-cache"), ("Git-Protocol", "version=2")])
    p_browser, p_sqli, p_scraper, p_git = scorer.run_batch([browser, sqli, scraper, git])
    top = [max(p["class"], key=lambda k, p=p: p["class"][k]) for p in (p_browser, p_sqli, p_scraper, p_git)]
    assert top == ["human", "attack", "bad_bot", "good_bot"]
    assert risk(p_browser) < 0.6 and risk(p_scraper) >= 0.6 and risk(p_git) < 0.6
    assert max(p_sqli["attack_kind"], key=lambda k: p_sqli["attack_kind"][k]) == "sqli"
    for p in (p_browser, p_sqli, p_scraper, p_git):
        for options in p.values():
            assert abs(sum(options.values()) - 1.0) < 1e-6
    assert scorer.explain(scraper)  # the scraper's missing browser headers are named
    assert scorer.explain(scraper, probabilities=p_scraper) == scorer.explain(scraper)


def test_precisions_agree_on_held_out_requests(scorer: OnnxScorer) -> None:
    inputs = [feat.model_input(feat.from_record(r)) for r in generate("eval", 300, seed=31)]
    fp32 = OnnxScorer(OnnxOptions(providers=("cpu",), variant="fp32", version=ROLLBACK)).probabilities(inputs)["class"]
    int8 = scorer.probabilities(inputs)["class"]
    assert np.abs(fp32 - int8).mean() < 0.01
    assert np.mean(fp32.argmax(1) == int8.argmax(1)) >= 0.98
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        fp16 = OnnxScorer(OnnxOptions(providers=("cpu",), variant="fp16", version=ROLLBACK)).probabilities(inputs)["class"]
        assert np.mean(fp16.argmax(1) == fp32.argmax(1)) >= 0.99


def test_a_requests_scores_barely_depend_on_the_requests_batched_with_it(scorer: OnnxScorer) -> None:
    """fp32: the same alone and among 63 others, so padding and batch-mates are masked out. int8: onnxruntime
    quantizes each MatMul's input with one scale for the whole run, so batch-mates move a request's probabilities
    a little (models/README.md, *Limits*: up to 0.016-0.025 on samples this size, 5-6 decisions in 16,000)."""
    inputs = [feat.model_input(feat.from_record(r)) for r in generate("calib", 192, seed=53)]
    fp32 = OnnxScorer(OnnxOptions(providers=("cpu",), variant="fp32", version=ROLLBACK))
    for model, most in ((fp32, 1e-5), (scorer, 0.06)):
        alone = np.concatenate([model.probabilities([x])["class"] for x in inputs])
        batched = np.concatenate([model.probabilities(inputs[k:k + 64])["class"] for k in range(0, len(inputs), 64)])
        assert np.abs(alone - batched).max() <= most, model.precision
    assert np.abs(alone - batched).max() > 0  # int8: the effect the model card describes is still there


def test_eval_command_on_the_shipped_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "eval.jsonl"
    write_jsonl(generate("eval", 300, seed=41), data)
    assert evaluate.main(["--data", str(data), "--json", "--model-version", ROLLBACK]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 300 and out["model"].startswith("clef-flash@")
    for key in ("humans_blocked", "humans_challenged", "attacks_blocked", "bad_bots_stopped", "good_bots_passed", "accuracy", "ece"):
        assert 0.0 <= out[key] <= 1.0
    assert out["accuracy"] > 0.8
    ctx = out["by_client_context"]
    assert ctx["first_request"]["n"] + ctx["with_history"]["n"] == 300 and min(c["n"] for c in ctx.values()) > 30
    assert 0.0 <= ctx["with_history"]["attacks_blocked"] <= 1.0


def test_eval_notes_a_policy_other_than_the_one_the_model_was_read_with(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "eval.jsonl"
    write_jsonl(generate("eval", 40, seed=43), data)
    config = tmp_path / "c.yaml"
    for policy, noted in (("policy: {challenge_risk: 0.6}\n", True), ("", False)):
        config.write_text("model: {enabled: true, version: '1.7.0'}\n" + policy, encoding="utf-8")
        assert evaluate.main(["--data", str(data), "--config", str(config)]) == 0
        out = capsys.readouterr().out
        assert ("note: policy.challenge_risk is 0.6, but clef-flash@1.7.0 was evaluated with 0.5" in out) is noted
    # side by side too, under the setup it concerns
    assert evaluate.main(["--data", str(data), "--config", str(config), "--model-version", "2.1.0", "--model-version", "1.7.0"]) == 0
    out = capsys.readouterr().out
    assert "clef-flash@1.7.0 was evaluated" not in out  # at the default 0.5: 1.7.0 was read with it
    config.write_text("model: {enabled: true}\npolicy: {challenge_risk: 0.6}\n", encoding="utf-8")
    assert evaluate.main(["--data", str(data), "--config", str(config), "--model-version", "2.1.0", "--model-version", "1.7.0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  [2] ") and "clef-flash@1.7.0" in line)
    assert lines[at + 1].strip().startswith("note: policy.challenge_risk is 0.6, but clef-flash@1.7.0 was evaluated with 0.5")


@pytest.fixture(scope="module")
def held_out_inputs() -> list[feat.ModelInput]:
    return [feat.model_input(feat.from_record(r)) for r in generate("eval", 256, seed=37)]


@pytest.mark.parametrize("variant", ["int8", "fp32"])
@pytest.mark.parametrize("version", sorted(p.name for p in (DEFAULT_REPOSITORY / "clef-flash").iterdir() if (p / mf.MANIFEST_FILE).is_file()))
def test_flushing_denormals_changes_no_output_of_any_shipped_version(version: str, variant: str,
                                                                     held_out_inputs: list[feat.ModelInput]) -> None:
    """The CPU runtime flushes denormals to zero for speed (gateway.decider.fpenv); every logit must stay bit for bit."""
    base = {"version": version, "providers": ("cpu",), "variant": variant, "warmup_runs": 1}
    fast = OnnxScorer(OnnxOptions(**base))
    inputs = held_out_inputs if fast.feature_version == feat.V1_VERSION else fast.model_inputs(
        [feat.from_record(r) for r in generate("eval", 256, seed=37)])
    flushed = fast.logits(inputs)
    ieee = OnnxScorer(OnnxOptions(**base, flush_denormals=False)).logits(inputs)
    for question, values in ieee.items():
        assert np.array_equal(values, flushed[question]), (version, question)


def test_the_flush_is_scoped_to_runs_even_with_onnxruntime_pool_threads(held_out_inputs: list[feat.ModelInput]) -> None:
    """With two intra-op threads the caller flushes and the pool threads do not: outputs stay bit for bit, and neither
    loading nor scoring leaves flush-to-zero on in the thread that did it (onnxruntime's session.set_denormal_as_zero
    would: it is not used)."""
    from gateway.decider import fpenv

    def control() -> int | None:
        value = fpenv.mxcsr()
        return None if value is None else value & ~0x3F  # the low six bits are sticky exception flags

    before = control()
    base = {"providers": ("cpu",), "intra_op_threads": 2, "warmup_runs": 1, "version": ROLLBACK}
    flushed = OnnxScorer(OnnxOptions(**base)).logits(held_out_inputs)
    ieee = OnnxScorer(OnnxOptions(**base, flush_denormals=False)).logits(held_out_inputs)
    assert all(np.array_equal(ieee[q], flushed[q]) for q in ieee)
    assert control() == before


def _skip_layer_norms(path: Path, disabled: list[str], tmp_path: Path) -> int:
    """SkipLayerNormalization nodes in onnxruntime's optimized CPU graph of ``path`` with ``disabled`` optimizers."""
    import onnx

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
    return sum(n.op_type == "SkipLayerNormalization" for n in onnx.load(so.optimized_model_filepath).graph.node)


def test_the_tuned_cpu_runtime_leaves_out_the_slow_fusion_and_answers_the_same(scorer: OnnxScorer, tmp_path: Path,
                                                                              held_out_inputs: list[feat.ModelInput]) -> None:
    """Without onnxruntime's SkipLayerNormalization fusion the logits move by float rounding only (measured:
    0 of 148,000 calibration-side actions changed, |dP| <= 0.0011), less than an int8 score moves with its batch."""
    from gateway.decider import fpenv

    disabled = list(scorer.options.cpu_disabled_optimizers)
    path = scorer.manifest.path(scorer.precision)
    assert disabled == ["SkipLayerNormFusion"]
    assert _skip_layer_norms(path, [], tmp_path) > 0 and _skip_layer_norms(path, disabled, tmp_path) == 0
    # the scorer runs that graph: its logits are those of a session built with the same optimizers left out
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.add_session_config_entry(EXACT_INT8_ENTRY, "1")
    unfused = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
    ids, numeric = feat.pad_batch(held_out_inputs[:64])
    with fpenv.flush_denormals():
        expected = unfused.run([o.name for o in scorer.manifest.outputs], {"ids": ids, "numeric": numeric})
    got = scorer._run(ids, numeric)
    assert all(np.array_equal(e, g) for e, g in zip(expected, got, strict=True))
    fused = OnnxScorer(OnnxOptions(providers=("cpu",), cpu_disabled_optimizers=(), warmup_runs=1, version=ROLLBACK))
    tuned, plain = scorer.probabilities(held_out_inputs)["class"], fused.probabilities(held_out_inputs)["class"]
    assert np.abs(tuned - plain).max() < 0.01
    assert np.array_equal(tuned.argmax(1), plain.argmax(1))


def test_the_shipped_int8_probe_is_the_one_its_builder_writes(tmp_path: Path) -> None:
    """gateway/data/int8probe.onnx is rebuilt by ``python -m models.int8probe`` (seeded): same graph, same weights."""
    import onnx

    from models import int8probe as builder

    shipped, rebuilt = onnx.load(str(int8probe.PROBE_PATH)), onnx.load(str(builder.build(tmp_path / "probe.onnx")))
    assert shipped.SerializeToString() == rebuilt.SerializeToString()
    y, weights = ort.InferenceSession(str(int8probe.PROBE_PATH), providers=["CPUExecutionProvider"]).run(
        None, {"a": int8probe.probe_activations()})
    assert np.array_equal(weights, builder.probe_weights().astype(np.int32)) and y.shape == (64, 96)


def test_cpu_sessions_compute_int8_products_exactly(scorer: OnnxScorer) -> None:
    """onnxruntime's uint8 x int8 kernel saturates at 16 bits on AVX2-only CPUs (an AMD EPYC without VNNI
    served other answers than the measured ones) and is exact with AVX-512 VNNI. The runtime probes the default kernel
    once and asks for exact products (session.x64quantprecision, which cost 18-26% on a VNNI CPU) only where it is wrong:
    with the setting the probe's products are exact on every CPU, and the scorer's session carries it exactly when the
    probe finds the default kernel wrong. ``exact_int8=False`` (the bench's plain runtime) never sets it."""
    assert int8probe.wrong_products({EXACT_INT8_ENTRY: "1"}) == 0
    needed = not int8probe.default_kernel_exact()
    assert needed == (int8probe.wrong_products() > 0)
    assert (int8probe.session_entry(scorer.session) == "1") == needed
    assert describe(scorer)["exact_int8"] is True
    assert describe(scorer)["int8_kernel"] == ("x64quantprecision" if needed else "default")
    plain = OnnxScorer(OnnxOptions(providers=("cpu",), exact_int8=False, warmup_runs=1, version=ROLLBACK))
    assert int8probe.session_entry(plain.session) is None
    # without the entry, its products are exact only where the default kernel is
    assert describe(plain)["exact_int8"] is int8probe.default_kernel_exact() and describe(plain)["int8_kernel"] == "default"


def test_the_exact_kernel_needs_extended_graph_optimization_and_health_says_when_it_is_off(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """onnxruntime applies session.x64quantprecision in a graph rewrite that runs at level extended or all; under
    graph_optimization basic a CPU whose default kernel saturates gets no fix, and the runtime says so (a warning at load,
    ``int8_kernel: default`` and ``exact_int8: false``) instead of claiming exact products. Simulated: the probe is made
    to report a saturating kernel, whatever this CPU has."""
    monkeypatch.setattr(int8probe, "default_kernel_exact", lambda: False)
    fixed = OnnxScorer(OnnxOptions(providers=("cpu",), graph_optimization="extended", warmup_runs=1, version=ROLLBACK))
    assert describe(fixed)["int8_kernel"] == "x64quantprecision" and describe(fixed)["exact_int8"] is True
    with caplog.at_level("WARNING", logger="clefgate.decider.onnx"):
        basic = OnnxScorer(OnnxOptions(providers=("cpu",), graph_optimization="basic", warmup_runs=1, version=ROLLBACK))
    assert int8probe.session_entry(basic.session) == "1"
    assert describe(basic)["int8_kernel"] == "default" and describe(basic)["exact_int8"] is False
    assert any("graph_optimization" in r.getMessage() and "(is basic)" in r.getMessage() for r in caplog.records)


def test_the_int8_probe_asks_for_exact_products_when_the_kernel_is_wrong_or_cannot_be_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a CPU without VNNI gets (this host may have it): the entry; and the same when the probe cannot run."""
    int8probe.default_kernel_exact.cache_clear()
    try:
        monkeypatch.setattr(int8probe, "wrong_products", lambda extra=None: 6144)
        assert int8probe.exact_int8_entries() == {EXACT_INT8_ENTRY: "1"}
        int8probe.default_kernel_exact.cache_clear()

        def broken(extra: object = None) -> int:
            raise FileNotFoundError("int8probe.onnx")

        monkeypatch.setattr(int8probe, "wrong_products", broken)
        assert int8probe.exact_int8_entries() == {EXACT_INT8_ENTRY: "1"}
        int8probe.default_kernel_exact.cache_clear()
        monkeypatch.setattr(int8probe, "wrong_products", lambda extra=None: 0)
        assert int8probe.exact_int8_entries() == {}
    finally:
        int8probe.default_kernel_exact.cache_clear()


class RecordingSession:
    """An onnxruntime session that notes this thread's MXCSR each time it runs."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self.session = session
        self.states: list[int | None] = []

    def run(self, *args: object, **kwargs: object) -> object:
        from gateway.decider import fpenv

        self.states.append(fpenv.mxcsr())
        return self.session.run(*args, **kwargs)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)


def test_cpu_sessions_run_with_denormals_flushed(held_out_inputs: list[feat.ModelInput]) -> None:
    from gateway.decider import fpenv

    if not fpenv.AVAILABLE:
        pytest.skip("flush-to-zero is set only on 64-bit x86 Linux")
    for flush, expected in ((True, 0x8040), (False, 0)):
        scorer = OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1, flush_denormals=flush, version=ROLLBACK))
        recorder = RecordingSession(scorer.session)
        scorer.session = recorder  # type: ignore[assignment]
        scorer.logits(held_out_inputs[:80])
        assert len(recorder.states) == len({feat.bucket_length(len(i.ids)) for i in held_out_inputs[:80]})  # one run per length group
        assert {s & 0x8040 for s in recorder.states if s is not None} == {expected}, (flush, recorder.states)  # FTZ and DAZ bits
        assert describe(scorer)["denormals_flushed"] is flush
