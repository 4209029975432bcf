"""gateway.decider.manifest: validation of model manifests, version resolution, the feature-version refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway import features as feat
from gateway.decider import manifest as mf
from tests.model_support import write_flash_manifest


def write_version(root: Path, name: str = "clef-flash", version: str = "1.0.0", fields: dict[str, Any] | None = None,
                  **overrides: Any) -> Path:
    directory = root / name / version
    directory.mkdir(parents=True)
    (directory / "model.onnx").write_bytes(b"not really onnx")
    extra = {"temperature": {"class": 1.2, "attack_kind": 0.9}, "metrics": {"eval": {"ece": 0.01}},
             "training_data": {"sha256": "0" * 64, "rows": 10}}
    write_flash_manifest(directory, name, version, {**extra, **overrides, **(fields or {})})
    return directory


def test_a_valid_manifest_loads(tmp_path: Path) -> None:
    directory = write_version(tmp_path)
    m = mf.load(directory, feature_version=feat.V1_VERSION, feature_fingerprint=feat.V1_FINGERPRINT,
                require=("fp32",), name="clef-flash")
    assert m.id == "clef-flash@1.0.0"
    assert m.question("class").options == ("human", "good_bot", "bad_bot", "attack")
    assert m.question("attack_kind").given == ("class", "attack")
    assert m.temperature == {"class": 1.2, "attack_kind": 0.9}
    assert m.path("fp32") == directory / "model.onnx"
    m.verify_file("fp32")
    with pytest.raises(KeyError):
        m.question("nope")


def test_feature_version_mismatch_names_both_versions(tmp_path: Path) -> None:
    directory = write_version(tmp_path, feature_version="0")
    with pytest.raises(mf.FeatureVersionMismatch) as err:
        mf.load(directory, feature_version="1")
    message = str(err.value)
    assert "clef-flash@1.0.0" in message
    assert "feature version '0'" in message and "feature version '1'" in message
    assert err.value.model_feature_version == "0" and err.value.runtime_feature_version == "1"


def test_same_version_with_other_tables_is_refused(tmp_path: Path) -> None:
    directory = write_version(tmp_path, feature_fingerprint="0123456789abcdef")
    with pytest.raises(mf.FeatureVersionMismatch, match="different feature tables"):
        mf.load(directory, feature_version=feat.V1_VERSION, feature_fingerprint=feat.V1_FINGERPRINT)
    # a reader that does not check features (the zero-shot model) still loads it
    assert mf.load(directory).name == "clef-flash"


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    directory = write_version(
        tmp_path, fields={"name": None, "version": "bad version!"}, family="other",
        questions=[{"id": "class", "options": ["a", "a"]}, {"id": "kind", "options": ["x"]}],
        outputs=[{"name": "class_logits", "question": "missing"}],
        files={"fp64": "x.onnx", "int8": {"path": "../escape.onnx"}},
        temperature={"class": 0.0, "ghost": 1.0}, opset=0)
    with pytest.raises(mf.ManifestError) as err:
        mf.load(directory, require=("fp32",))
    problems = err.value.problems
    expected = ["name: required", "version: 'bad version!' is not a version", "family: 'other' is not a model of the 'clef' family",
                "questions.class.options: duplicate option names", "questions.kind.options: required, a list of at least two",
                "outputs[0].question: 'missing' is not one of the questions", "outputs: no output answers question 'class'",
                "files.fp64: unknown precision", "files.int8: '../escape.onnx' must be a plain file name",
                "files.fp32: required by this runtime but not in the manifest",
                "temperature.ghost: not a question of this model", "temperature.class: expected a number between 0.01 and 100",
                "opset: expected a positive integer"]
    for text in expected:
        assert any(p.startswith(text) for p in problems), (text, problems)


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "line 1, column 2"),
    ("[]", "<top>: expected a JSON object"),
])
def test_unreadable_manifests(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / mf.MANIFEST_FILE).write_text(content)
    with pytest.raises(mf.ManifestError, match=message):
        mf.load(tmp_path)


def test_missing_manifest_and_wrong_name(tmp_path: Path) -> None:
    with pytest.raises(mf.ManifestError, match=r"no manifest\.json"):
        mf.load(tmp_path)
    directory = write_version(tmp_path)
    with pytest.raises(mf.ManifestError, match="the manifest is for 'clef-flash', expected 'clef'"):
        mf.load(directory, name="clef")


def test_changed_file_fails_verification(tmp_path: Path) -> None:
    directory = write_version(tmp_path)
    (directory / "model.onnx").write_bytes(b"tampered")
    m = mf.load(directory)
    with pytest.raises(mf.ManifestError, match=r"files\.fp32: model\.onnx has sha256"):
        m.verify_file("fp32")


def test_resolve_latest_orders_versions_numerically(tmp_path: Path) -> None:
    for version in ("1.9.0", "1.10.0", "1.2.0"):
        write_version(tmp_path, version=version)
    (tmp_path / "clef-flash" / "2.0.0").mkdir()  # no manifest: not a version
    assert mf.versions(tmp_path, "clef-flash") == ["1.2.0", "1.9.0", "1.10.0"]
    assert mf.resolve(tmp_path, "clef-flash").name == "1.10.0"
    assert mf.resolve(tmp_path, "clef-flash", "1.9.0").name == "1.9.0"
    with pytest.raises(mf.ManifestError, match=r"version '3.0' not found .*available: 1.2.0, 1.9.0, 1.10.0"):
        mf.resolve(tmp_path, "clef-flash", "3.0")
    with pytest.raises(mf.ManifestError, match="no version of model 'clef'"):
        mf.resolve(tmp_path, "clef")


def test_latest_skips_opt_in_versions(tmp_path: Path) -> None:
    """An opt-in version loads when named; 'latest' keeps resolving to the highest stable one."""
    write_version(tmp_path, version="1.5.0")
    write_version(tmp_path, version="1.6.0", channel="opt-in")
    (tmp_path / "clef-flash" / "1.7.0").mkdir()
    (tmp_path / "clef-flash" / "1.7.0" / mf.MANIFEST_FILE).write_text("{not json")  # unreadable: latest, and load says why
    assert mf.versions(tmp_path, "clef-flash") == ["1.5.0", "1.6.0", "1.7.0"]
    assert mf.resolve(tmp_path, "clef-flash").name == "1.7.0"
    (tmp_path / "clef-flash" / "1.7.0" / mf.MANIFEST_FILE).unlink()
    assert mf.resolve(tmp_path, "clef-flash").name == "1.5.0"
    named = mf.load(mf.resolve(tmp_path, "clef-flash", "1.6.0"))
    assert (named.version, named.channel) == ("1.6.0", "opt-in")
    assert mf.load(mf.resolve(tmp_path, "clef-flash")).channel == "stable"  # no channel field: stable
    (tmp_path / "clef-flash" / "1.5.0" / mf.MANIFEST_FILE).unlink()
    with pytest.raises(mf.ManifestError, match=r"no stable version of model 'clef-flash' .*: 1.6.0 is opt-in; name its version in "
                                               r"the config"):
        mf.resolve(tmp_path, "clef-flash")


def test_an_unknown_channel_or_policy_is_listed(tmp_path: Path) -> None:
    directory = write_version(tmp_path, channel="beta", opset="x", policy={"challenge_risk": 1.5, "block_risk": None, "shadow": 1})
    with pytest.raises(mf.ManifestError) as err:
        mf.load(directory)
    assert err.value.problems == ["channel: 'beta' is not one of stable, opt-in",
                                  "policy.challenge_risk: 1.5 is not a probability (0-1)",
                                  "policy.shadow: not a policy threshold (block_attack, block_risk, block_attack_corroborated, "
                                  "challenge_risk)",
                                  "opset: expected a positive integer, got 'x'"]
    good = write_version(tmp_path, version="2.0.0", policy={"challenge_risk": 0.5, "block_risk": None})
    assert mf.load(good).policy == {"challenge_risk": 0.5, "block_risk": None}


def test_familiarity_is_optional_and_checked_when_present(tmp_path: Path) -> None:
    assert mf.load(write_version(tmp_path, version="1.0.0")).familiarity is None  # older versions: no field, no abstention
    m = mf.load(write_version(tmp_path, version="1.0.1", familiarity={"output": "payload_distance", "threshold": 7.5, "quantile": 0.995,
                                                                      "classes": ["benign", "attack"]}))
    assert m.familiarity == mf.FamiliarityStats("payload_distance", 7.5, 0.995)
    bad = write_version(tmp_path, version="1.0.2", familiarity={"output": "class_logits", "threshold": 0, "quantile": 2})
    with pytest.raises(mf.ManifestError) as err:
        mf.load(bad)
    assert err.value.problems == ["familiarity.output: 'class_logits' is a question's output, not a distance",
                                  "familiarity.threshold: expected a positive number, got 0",
                                  "familiarity.quantile: expected a number between 0 and 1, got 2"]
    with pytest.raises(mf.ManifestError, match="familiarity: expected an object"):
        mf.load(write_version(tmp_path, version="1.0.3", familiarity=7.5))
